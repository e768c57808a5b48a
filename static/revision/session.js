// Revision session page: poll while the model writes, keep drafts, keyboard shortcuts.
(function () {
  "use strict";
  var root = document.getElementById("revision");
  var sessionId = root ? root.dataset.session : "rerating";

  // Poll the session's state while a model call runs; reload when it ends (answer or failure).
  if (root && root.dataset.waiting) {
    var delay = 500;
    var poll = function () {
      fetch(root.dataset.stateUrl, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (state) {
          if (!state.waiting) { window.location.reload(); return; }
          delay = Math.min(delay * 1.5, 4000);
          window.setTimeout(poll, delay);
        })
        .catch(function () { window.setTimeout(poll, 4000); });
    };
    window.setTimeout(poll, delay);
  }

  // Drafts survive a closed tab or a reload: kept in this browser until the form is sent.
  document.querySelectorAll("[data-draft]").forEach(function (box) {
    var key = "revision-draft-" + sessionId + "-" + box.dataset.draft;
    var saved = window.localStorage.getItem(key);
    if (saved !== null) { box.value = saved; }
    box.addEventListener("input", function () { window.localStorage.setItem(key, box.value); });
    box.form.addEventListener("submit", function () { window.localStorage.removeItem(key); });
  });

  // The edit box only matters when the revision is not good.
  var editBox = document.getElementById("edit-box");
  var syncEdit = function () {
    if (!editBox) { return; }
    var good = document.querySelector("input[name=rating][value=good]");
    editBox.hidden = Boolean(good && good.checked);
    var area = document.getElementById("edited_answer");
    if (area) { area.disabled = editBox.hidden; }
  };
  document.querySelectorAll("input[name=rating]").forEach(function (input) {
    input.addEventListener("change", syncEdit);
  });
  syncEdit();

  var typing = function (target) {
    return target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" && target.type === "text");
  };
  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      var form = event.target.form || document.querySelector("#rate-form, #turn-form");
      if (form) { event.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var choice = document.querySelector("input[name=rating][data-key='" + event.key + "']");
    if (choice) {
      choice.checked = true;
      syncEdit();
      event.preventDefault();
      return;
    }
    if (event.key === "c") {
      var comment = document.getElementById("comment");
      if (comment) { event.preventDefault(); comment.focus(); }
    }
  });
})();
