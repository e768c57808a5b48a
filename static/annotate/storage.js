// The browser's localStorage for the pages that keep drafts in it (the task page, the revision
// pages), or null where the browser refuses it: reading window.localStorage throws when site
// data is blocked. Each call is guarded too, as a full or refused storage throws on setItem.
// Without it a page works as before, only without drafts.
//
// Drafts are kept per user: every key is stored under the logged-in user's own prefix ("u<id>:",
// from <body data-user>; "anon:" on a page without a login), so another person using the same
// browser never sees them, and the pages' scripts read and list only their own user's keys.
// Loaded by base.html on every page (before the pages' scripts), for the log-out button
// (annotate/logout.js): `unsent()` counts the drafts nothing has sent yet, `clear()` drops them.
window.draftStorage = (function () {
  "use strict";
  var storage = null;
  try {
    storage = window.localStorage;
  } catch (error) {
    return null;
  }
  if (!storage) {
    return null;
  }
  var user = document.body ? document.body.getAttribute("data-user") : null;
  var own = user ? "u" + user + ":" : "anon:";
  // Drafts kept before they were per user: nobody can say whose they are, so nobody sees them.
  var UNOWNED = ["task-draft-", "revision-draft-", "revision-sent-"];
  var cleared = false;

  function rawKeys(prefix) {
    var keys = [];
    try {
      for (var i = 0; i < storage.length; i += 1) {
        var key = storage.key(i);
        if (key && key.indexOf(prefix) === 0) {
          keys.push(key);
        }
      }
    } catch (error) {
      return [];
    }
    return keys;
  }
  function rawRemove(key) {
    try {
      storage.removeItem(key);
    } catch (error) {
      // refused: nothing else to do
    }
  }
  UNOWNED.forEach(function (prefix) {
    rawKeys(prefix).forEach(rawRemove);
  });

  var api = {
    get: function (key) {
      try {
        return storage.getItem(own + key);
      } catch (error) {
        return null;
      }
    },
    set: function (key, value) {
      if (cleared) {
        return; // logging out: a page's last save as it unloads (pagehide) would undo clear()
      }
      try {
        storage.setItem(own + key, value);
      } catch (error) {
        // full or refused: the draft is not kept, nothing else to do
      }
    },
    remove: function (key) {
      rawRemove(own + key);
    },
    // This user's keys starting with `prefix`, as a list of their own (safe to remove while
    // going on).
    keys: function (prefix) {
      return rawKeys(own + prefix).map(function (key) {
        return key.slice(own.length);
      });
    },
    // How many of this user's drafts hold something not sent: a task's answers not marked sent
    // (task.js), a revision form's step with a text or a choice and no mark that it was sent
    // (revision/drafts.js). A task's active time alone, or an empty box, is nothing to lose.
    unsent: function () {
      var count = 0;
      api.keys("task-draft-").forEach(function (key) {
        var draft = null;
        try {
          draft = JSON.parse(api.get(key) || "null");
        } catch (error) {
          draft = null;
        }
        if (draft && !draft.sent && draft.answers && Object.keys(draft.answers).length) {
          count += 1;
        }
      });
      var steps = {};
      api.keys("revision-draft-").forEach(function (key) {
        var value = api.get(key);
        var step = key.slice("revision-draft-".length).split("-").slice(0, -1).join("-");
        if (value && value.trim() && api.get("revision-sent-" + step) === null) {
          steps[step] = true;
        }
      });
      return count + Object.keys(steps).length;
    },
    // Drop every key of this user (drafts and their marks), and keep none from now on in this
    // page (called as the user logs out).
    clear: function () {
      cleared = true;
      rawKeys(own).forEach(rawRemove);
    },
  };
  return api;
})();
