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
  // One answer per item: a second click (or key) while the first is on its way would come back
  // as "answered already" in place of the next item.
  let submitting = false;
  form.addEventListener("submit", function (event) {
    if (submitting) { event.preventDefault(); return; }
    submitting = true;
    if (!document.getElementById("seconds").value) {
      document.getElementById("seconds").value = ((performance.now() - shown) / 1000).toFixed(3);
    }
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { submitting = false; sent = false; }  // back here from the history
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "1" || event.key === "2") {
      event.preventDefault();
      send(event.key);
    }
  });
})();
