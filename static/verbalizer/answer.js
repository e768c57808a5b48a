// Keys 1 and 2 answer with the first or second label word; the time shown is sent along.
(function () {
  "use strict";
  const form = document.getElementById("answer-form");
  const shownKey = form && form.dataset.shownKey;
  // Changing the last answer (a slip of the key) starts this prompt's time afresh on the page
  // that follows: the minutes spent on the change count towards neither prompt.
  const change = document.getElementById("change-form");
  if (change) {
    change.addEventListener("submit", function () {
      try { if (shownKey) sessionStorage.removeItem(shownKey); } catch (error) { /* off */ }
    });
  }
  if (!form) return;
  const DAY_SECONDS = 24 * 3600;  // the most the server takes (MAX_SECONDS)
  // When the prompt was first shown: a reload (or a slip back to it) keeps that time in this
  // tab, so the seconds recorded are from showing to answering, not from the last reload.
  let shown = Date.now();
  try {
    const kept = Number(shownKey && sessionStorage.getItem(shownKey));
    if (kept > 0 && kept <= shown) shown = kept;
    else if (shownKey) sessionStorage.setItem(shownKey, String(shown));
  } catch (error) { /* storage off: time from this load */ }
  function elapsed() {
    const seconds = (Date.now() - shown) / 1000;
    return seconds <= DAY_SECONDS ? seconds.toFixed(3) : "";  // "": not known
  }
  let sent = false;
  function send(key) {
    if (sent) return;
    sent = true;
    document.getElementById("seconds").value = elapsed();
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
      document.getElementById("seconds").value = elapsed();
    }
    try { if (shownKey) sessionStorage.removeItem(shownKey); } catch (error) { /* off */ }
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
