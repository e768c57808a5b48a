// The browser's localStorage for the pages that keep drafts in it (the task page, the revision
// pages), or null where the browser refuses it: reading window.localStorage throws when site
// data is blocked. Each call is guarded too, as a full or refused storage throws on setItem.
// Without it a page works as before, only without drafts.
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
  return {
    get: function (key) {
      try {
        return storage.getItem(key);
      } catch (error) {
        return null;
      }
    },
    set: function (key, value) {
      try {
        storage.setItem(key, value);
      } catch (error) {
        // full or refused: the draft is not kept, nothing else to do
      }
    },
    remove: function (key) {
      try {
        storage.removeItem(key);
      } catch (error) {
        // refused: nothing else to do
      }
    },
    // The keys starting with `prefix`, as a list of their own (safe to remove while going on).
    keys: function (prefix) {
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
    },
  };
})();
