// Drafts of the revision pages' forms: kept in this browser until the server took them.
(function () {
  "use strict";
  var storage = window.draftStorage; // annotate/storage.js: null where the browser refuses it
  if (!storage) {
    return; // the forms work as before, only without drafts
  }
  var root = document.getElementById("revision");
  // A re-rating page has no session: its form names whose drafts it keeps. The list of sessions
  // has neither: it only drops the drafts the server took (below).
  var owner = document.querySelector("form[data-draft-owner]");
  var draftOwner = root ? root.dataset.session : owner ? owner.dataset.draftOwner : null;
  var DRAFT = "revision-draft-";
  var SENT = "revision-sent-";

  var drop = function (prefix) {
    storage.keys(prefix).forEach(storage.remove);
  };

  // Drafts survive a closed tab, a reload and a refused form: each form's fields (texts and the
  // ticked choices) are kept in this browser under the step the form is for (rating turn t,
  // writing turn t, a re-rating), and restored while the page still asks for that step.
  var draftPrefix = DRAFT + draftOwner + "-";
  var liveSteps = {};
  var liveKeys = {};
  document.querySelectorAll("form[data-draft-step]").forEach(function (form) {
    liveSteps[draftOwner + "-" + form.dataset.draftStep] = true;
    var prefix = draftPrefix + form.dataset.draftStep + "-";
    form.querySelectorAll("textarea[data-draft]").forEach(function (box) {
      var key = prefix + box.dataset.draft;
      liveKeys[key] = true;
      var saved = storage.get(key);
      if (saved !== null) {
        box.value = saved;
      } else if (box.value !== box.defaultValue) {
        storage.set(key, box.value);  // typed before this script ran
      }
      box.addEventListener("input", function () { storage.set(key, box.value); });
    });
    form.querySelectorAll("input[type=radio][data-draft]").forEach(function (input) {
      var key = prefix + input.dataset.draft;
      liveKeys[key] = true;
      var chosen = storage.get(key);
      if (chosen === input.value) {
        input.checked = true;
      } else if (chosen === null && input.checked && !input.defaultChecked) {
        storage.set(key, input.value);  // chosen before this script ran
      }
      input.addEventListener("change", function () {
        if (input.checked) { storage.set(key, input.value); }
      });
    });
  });
  // The page shows the owner's one current step: the drafts of its other steps are done with.
  if (draftOwner !== null) {
    storage.keys(draftPrefix).forEach(function (key) {
      if (!liveKeys[key]) { storage.remove(key); }
    });
  }

  // A sent form marks its step sent rather than dropping its drafts: a form the server refuses
  // (a blank comment, say) comes back at the same step and keeps them. The page the browser
  // goes to next, when it no longer asks for that step (the session's next step, the next
  // re-rating, the list of sessions after the last one), drops them: the server took them.
  storage.keys(SENT).forEach(function (key) {
    var step = key.slice(SENT.length);
    storage.remove(key);
    if (!liveSteps[step]) { drop(DRAFT + step + "-"); }
  });
  // On window, after site.js's confirmations (on document): only sends nobody cancelled.
  window.addEventListener("submit", function (event) {
    var step = event.target.dataset ? event.target.dataset.draftStep : undefined;
    if (!event.defaultPrevented && step && draftOwner !== null) {
      storage.set(SENT + draftOwner + "-" + step, "1");
    }
  });
})();
