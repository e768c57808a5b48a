// Log out on a shared computer: drafts kept in this browser (annotate/storage.js) are the user's
// own, but they stay on the computer. Logging out drops them when none holds anything unsent;
// when some do, a dialog says how many and lets the user discard them, keep them for their next
// log-in here, or stay to send them. Without storage, or without this script, log-out is as
// before (drafts are keyed per user, so the next person never sees them either way).
(function () {
  "use strict";
  var form = document.getElementById("logout-form");
  var dialog = document.getElementById("logout-drafts");
  var storage = window.draftStorage;
  if (!form || !storage) {
    return;
  }
  form.addEventListener("submit", function (event) {
    var unsent = storage.unsent();
    if (!unsent) {
      storage.clear(); // nothing to lose: leave nothing behind
      return;
    }
    if (!dialog || typeof dialog.showModal !== "function") {
      return; // no way to ask: keep them (only this user sees them again)
    }
    event.preventDefault();
    document.getElementById("logout-drafts-count").textContent =
      unsent === 1 ? "1 draft" : unsent + " drafts";
    dialog.returnValue = "";
    dialog.showModal();
  });
  if (dialog) {
    dialog.addEventListener("close", function () {
      if (dialog.returnValue === "discard") {
        storage.clear();
      }
      if (dialog.returnValue === "discard" || dialog.returnValue === "keep") {
        form.submit(); // no submit event: asked already
      }
    });
  }
})();
