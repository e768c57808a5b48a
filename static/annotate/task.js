// The task page: keyboard answering, progress counter, missing-answer list, active time, the
// deadline's minutes left.
// The page works without this script (plain radio buttons and a submit button); the server
// validates everything again.
(function () {
  "use strict";

  var form = document.getElementById("task-form");
  if (!form) {
    return;
  }
  // Opened by "submit and continue" (the project's next-task address): show and keep the
  // task's own address, so a reload or a bookmark opens this task, not the next one.
  var canonical = form.getAttribute("data-canonical-url");
  if (canonical && window.history && window.history.replaceState && location.pathname !== canonical) {
    window.history.replaceState(null, "", canonical);
  }
  var groups = Array.prototype.slice.call(form.querySelectorAll("fieldset.answer"));
  // Enter on any other button (Return this task, Log out) presses that button. A read-only task
  // (submitted, expired, returned) has no submit button: Enter sends nothing there.
  var submitButton = form.querySelector("button[type=submit]");
  var answeredOut = document.getElementById("answered-count");
  var missingBox = document.getElementById("missing");
  var missingList = document.getElementById("missing-list");
  // The sticky bar says only how many are missing, with a link to the first; the list itself
  // is below the form (in the bar it covered most of a phone's screen).
  var missingShort = document.getElementById("missing-short");
  var missingCount = document.getElementById("missing-count");
  var missingFirst = document.getElementById("missing-first");
  var firstMissing = null;
  if (missingFirst) {
    missingFirst.addEventListener("click", function (event) {
      event.preventDefault();
      focusGroup(firstMissing || missingGroups()[0]);
    });
  }
  var activeInput = document.getElementById("active-seconds");
  var LABEL_KEYS = { y: "yes", n: "no", u: "unknown" };

  function radios(group) {
    return Array.prototype.slice.call(group.querySelectorAll("input[type=radio]"));
  }

  function checked(group) {
    return group.querySelector("input[type=radio]:checked");
  }

  function groupOf(element) {
    return element && element.closest ? element.closest("fieldset.answer") : null;
  }

  function focusGroup(group, stay) {
    if (!group) {
      return;
    }
    var target = checked(group) || radios(group)[0];
    if (stay) {
      target.focus({ preventScroll: true });
      return;
    }
    target.focus();
    keepClearOfBar(group);
  }

  // The sticky submit bar covers the bottom of the window: scroll a focused question above it.
  var bar = form.querySelector(".submit-bar");
  function keepClearOfBar(group) {
    if (!bar) {
      return;
    }
    var hidden = group.getBoundingClientRect().bottom - bar.getBoundingClientRect().top;
    if (hidden > 0) {
      window.scrollBy(0, hidden + 8);
    }
  }

  var help = document.getElementById("key-help");
  function showHelp() {
    if (help && !help.open && help.showModal) {
      help.showModal();
    }
  }

  function missingGroups() {
    return groups.filter(function (group) {
      return !checked(group);
    });
  }

  function updateProgress() {
    var missing = missingGroups();
    if (answeredOut) { // a crowd worker's preview counts nothing: it takes no answers
      answeredOut.textContent = String(groups.length - missing.length);
    }
    groups.forEach(function (group) {
      group.classList.toggle("is-answered", Boolean(checked(group)));
    });
    if (missingBox && !missingBox.hidden) {
      showMissing(missing);
    }
  }

  function showMissing(missing) {
    missingList.textContent = "";
    missing.forEach(function (group) {
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = "#" + group.id;
      link.textContent = group.getAttribute("data-title");
      link.addEventListener("click", function (event) {
        event.preventDefault();
        focusGroup(group);
      });
      item.appendChild(link);
      missingList.appendChild(item);
    });
    missingBox.hidden = missing.length === 0;
    firstMissing = missing[0] || null;
    if (missingShort) {
      missingShort.hidden = missingBox.hidden;
      missingCount.textContent = String(missing.length);
      missingFirst.href = firstMissing ? "#" + firstMissing.id : "#";
    }
  }

  function move(from, step) {
    var index = groups.indexOf(from);
    var next = groups[index + step];
    if (index === -1) {
      next = step > 0 ? groups[0] : groups[groups.length - 1];
    }
    focusGroup(next);
  }

  function answer(group, value) {
    var input = group.querySelector('input[type=radio][value="' + value + '"]');
    if (!input) {
      return false;
    }
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    var index = groups.indexOf(group);
    if (index < groups.length - 1) {
      focusGroup(groups[index + 1]);
    } else {
      submitButton.focus();
    }
    return true;
  }

  function trySubmit() {
    var missing = missingGroups();
    if (missing.length) {
      showMissing(missing);
      focusGroup(missing[0]);
      return;
    }
    form.requestSubmit();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.altKey || event.metaKey) {
      return;
    }
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) {
      return;
    }
    if (document.querySelector("dialog[open]")) {
      return; // a dialog (the keys' help, the log-out question) has the keyboard; Esc closes it
    }
    if (event.key === "?") {
      showHelp();
      event.preventDefault();
      return;
    }
    var group = groupOf(document.activeElement);
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    var handled = false;
    if (group && LABEL_KEYS[key] && group.classList.contains("question")) {
      handled = answer(group, LABEL_KEYS[key]);
    } else if (group && /^[1-5]$/.test(key) && group.classList.contains("score")) {
      handled = answer(group, key);
    } else if (key === "ArrowDown" || key === "j") {
      move(group, 1);
      handled = true;
    } else if (key === "ArrowUp" || key === "k") {
      move(group, -1);
      handled = true;
    } else if (key === "Enter" && submitButton && (group || target === document.body || target === submitButton)) {
      trySubmit();
      handled = true;
    }
    if (handled) {
      event.preventDefault();
    }
  });

  form.addEventListener("change", updateProgress);
  form.addEventListener("submit", function (event) {
    var missing = missingGroups();
    if (missing.length) {
      event.preventDefault();
      showMissing(missing);
      focusGroup(missing[0]);
      return;
    }
    activeInput.value = String(Math.round(activeSeconds));
    sent = true;
    saveDraft();
  });

  // Active time: seconds while the page is visible and someone touched it in the last minute.
  var activeSeconds = 0;
  var lastInput = Date.now();
  ["keydown", "mousedown", "mousemove", "scroll", "touchstart"].forEach(function (name) {
    document.addEventListener(name, function () {
      lastInput = Date.now();
    }, { passive: true });
  });
  window.setInterval(function () {
    if (document.visibilityState === "visible" && Date.now() - lastInput < 60000) {
      activeSeconds += 1;
    }
  }, 1000);

  // Answers and active time survive a reload or a closed tab: kept in this browser under the
  // task's address and step (a "both" project's scores, then its questions, at one address) for
  // a week at most. A sent form marks its draft sent rather than dropping it, so a submit the
  // server refuses (shown again at the same address and step) keeps it; the next page, another
  // task or step, drops the drafts marked sent. Answers the page already shows come first.
  var DRAFT_PREFIX = "task-draft-";
  var DRAFT_DAYS = 7;
  var step = form.querySelector("fieldset.answer.score") ? "scores" : "questions";
  var draftKey = DRAFT_PREFIX + (form.getAttribute("action") || window.location.pathname) + "#" + step;
  var storage = window.draftStorage || null; // null: storage refused, the page works as before
  function readDraft(key) {
    try {
      return JSON.parse(storage.get(key) || "null");
    } catch (error) {
      return null;
    }
  }
  var sent = false;
  var returned = false;
  // A page that takes no answers (returned, submitted) keeps no draft and shows none: answers
  // never sent would look stored there.
  var takesAnswers = Boolean(submitButton);
  function saveDraft() {
    if (!storage || returned || !takesAnswers) {
      return;
    }
    var answers = {};
    groups.forEach(function (group) {
      var input = checked(group);
      if (input) {
        answers[input.name] = input.value;
      }
    });
    var draft = { saved: Date.now(), answers: answers, active: Math.round(activeSeconds), sent: sent };
    storage.set(draftKey, JSON.stringify(draft));
  }
  function restoreDraft() {
    if (!storage) {
      return;
    }
    var cutoff = Date.now() - DRAFT_DAYS * 24 * 3600 * 1000;
    storage.keys(DRAFT_PREFIX).forEach(function (key) {
      var old = readDraft(key);
      if (!old || !(old.saved > cutoff) || (old.sent && key !== draftKey)) {
        storage.remove(key);
      }
    });
    var draft = takesAnswers ? readDraft(draftKey) : null;
    if (!draft || !draft.answers) {
      return;
    }
    groups.forEach(function (group) {
      var inputs = radios(group);
      if (!inputs.length || checked(group)) {
        return;
      }
      var value = draft.answers[inputs[0].name];
      inputs.forEach(function (input) {
        if (input.value === value) {
          input.checked = true;
        }
      });
    });
    // The time of a step the server refused was not stored: it goes on counting from there.
    activeSeconds = Math.max(activeSeconds, Number(draft.active) || 0);
  }
  // A task handed back ("Return this task", once its question was confirmed: site.js listens
  // first) keeps no answers in this browser, and leaving the page does not save them again.
  document.addEventListener("submit", function (event) {
    if (event.defaultPrevented || !event.target.classList.contains("return-form")) {
      return;
    }
    returned = true;
    if (storage) {
      storage.remove(draftKey);
    }
  });
  form.addEventListener("change", saveDraft);
  window.setInterval(saveDraft, 15000); // the active time, while nothing is answered
  window.addEventListener("pagehide", saveDraft); // a reload or a closed tab: the time so far
  restoreDraft();

  // The deadline's minutes left, kept current while the page is open; at the deadline the
  // wording the server gives a lapsed claim. Counted from the seconds left when the page was
  // made (not the browser's clock, which may be set wrong), as Django's timeuntil words it.
  var deadline = document.getElementById("deadline");
  if (deadline && deadline.hasAttribute("data-seconds-left")) {
    var endsAt = Date.now() + Number(deadline.getAttribute("data-seconds-left")) * 1000;
    var unit = function (count, word) {
      return count + "\u00a0" + word + (count === 1 ? "" : "s"); // a no-break space, as Django
    };
    var showTimeLeft = function () {
      var minutes = Math.floor((endsAt - Date.now()) / 60000);
      if (endsAt <= Date.now()) {
        window.clearInterval(deadlineTimer);
        deadline.setAttribute("role", "status"); // said once, when the time is up
        deadline.textContent = deadline.getAttribute("data-time-up");
        return;
      }
      var hours = Math.floor(minutes / 60);
      var left = hours ? unit(hours, "hour") + (minutes % 60 ? ", " + unit(minutes % 60, "minute") : "") : unit(minutes, "minute");
      document.getElementById("deadline-left").textContent = left;
    };
    var deadlineTimer = window.setInterval(showTimeLeft, 1000);
    showTimeLeft();
  }

  updateProgress();
  if (missingBox && document.getElementById("server-missing")) {
    missingBox.hidden = false;
    updateProgress();
  }
  // The keys answer the first open question at once, but the page opens at its top: the
  // instruction and the guidelines come first. Sent back with answers missing, it goes to them.
  var firstOpen = missingGroups()[0] || groups[0];
  focusGroup(firstOpen, !document.getElementById("server-missing"));
})();
