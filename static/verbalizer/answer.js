// Keys 1 and 2 answer with the first or second label word; the time shown is sent along.
(function () {
  "use strict";
  const form = document.getElementById("answer-form");
  if (!form) return;
  const shown = performance.now();
  let sent = false;
  function send(key) {
    if (sent) return;
    sent = true;
    document.getElementById("seconds").value = ((performance.now() - shown) / 1000).toFixed(3);
    const button = document.getElementById("key-" + key);
    form.requestSubmit(button);
  }
  form.addEventListener("submit", function () {
    if (!document.getElementById("seconds").value) {
      document.getElementById("seconds").value = ((performance.now() - shown) / 1000).toFixed(3);
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "1" || event.key === "2") {
      event.preventDefault();
      send(event.key);
    }
  });
})();
