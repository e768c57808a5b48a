// Revision session and re-rating pages: poll while the model writes, keyboard shortcuts (the
// drafts are drafts.js's, which runs first).
(function () {
  "use strict";
  var root = document.getElementById("revision");

  // A form the server refused comes back at the address it was sent to (.../turns/,
  // .../rate/), which takes POST only: opened again from the address bar or a restored tab it
  // answered 405, a blank page. Show the session's own address, as the task page does; what
  // the form held is in its drafts.
  if (root && root.dataset.url && window.history && window.history.replaceState &&
      location.pathname !== root.dataset.url) {
    window.history.replaceState(null, "", root.dataset.url);
  }

  // A field the user types in: keys are text there (no shortcuts), and focus stays in it.
  var typing = function (target) {
    if (!target) { return false; }
    if (target.isContentEditable || target.tagName === "TEXTAREA") { return true; }
    return target.tagName === "INPUT" &&
      !/^(radio|checkbox|button|submit|reset|image|file|range|color)$/.test(target.type);
  };

  // Poll the session's state while a model call runs. The text streamed so far is shown as it
  // grows; the finished answer replaces it in place, with the next form. A failure reloads the
  // page, which shows it with a Retry button. Model output is only ever set as text.
  var showAnswer = function (state) {
    var answer = document.getElementById("answer");
    answer.textContent = state.answer;
    answer.hidden = false;
    var partial = document.getElementById("partial");
    if (partial) { partial.remove(); }
    // The waiting notice is a live region: removing it would tell a screen reader nothing, so
    // it says the answer is in (heard, not seen: the answer itself is on the page).
    var waiting = document.getElementById("waiting");
    if (waiting) {
      waiting.textContent = "The model's answer is in: it is shown under " +
        document.getElementById("answer-title").textContent + ".";
      waiting.classList.add("visually-hidden");
    }
    if (state.passages) {
      var aside = document.getElementById("passages");
      aside.querySelectorAll(".passage").forEach(function (old) { old.remove(); });
      var source = document.getElementById("passages-source");
      if (source) { source.textContent = source.dataset.shown; }
      // Numbered from 0 in retrieval order, as the prompt lists them and the answer cites them.
      state.passages.forEach(function (passage, index) {
        var box = document.createElement("div");
        box.className = "passage";
        var title = document.createElement("p");
        title.className = "tags";
        var number = document.createElement("span");
        number.className = "passage-number";
        number.textContent = "[" + index + "]";
        title.append(number, " " + passage.title);
        var text = document.createElement("p");
        text.textContent = passage.text;
        box.append(title, text);
        aside.append(box);
      });
    }
    var edit = document.getElementById("edited_answer");
    if (edit && !edit.value) { edit.value = state.answer; }
    syncEdit();  // a rating kept from a draft, with the edit kept beside it
    var next = document.getElementById("next-step");
    if (next) { next.hidden = false; }
    // Rating the answer is what comes next: the keyboard goes there (the notice above is still
    // announced), unless the user is typing somewhere else meanwhile. The view does not jump to
    // it: the answer above it is what to read first. A choice kept from a draft is the one
    // focused, as Tab into the group would (arrows move on from it).
    var rating = document.querySelector("#rate-form input[name=rating]:checked") ||
      document.querySelector("#rate-form input[name=rating]");
    var nextField = rating || document.getElementById("instruction");  // a session's first answer
    if (nextField && !typing(document.activeElement)) { nextField.focus({ preventScroll: true }); }
    delete root.dataset.waiting;
  };

  if (root && root.dataset.waiting) {
    var delay = 500;
    var partial = document.getElementById("partial");
    var poll = function () {
      fetch(root.dataset.stateUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          var refusal = window.pollRefusal(r);
          if (!refusal) { return r.json(); }
          return refusal.then(function (refused) {
            window.pollNotice(partial || root, refused.message);
            window.setTimeout(poll, refused.seconds * 1000);
            return null;
          });
        })
        .then(function (state) {
          if (state === null) { return; }
          window.pollNotice(partial || root, "");
          if (state.failed || (!state.waiting && state.answer === null)) {
            window.location.reload();
            return;
          }
          if (!state.waiting) { showAnswer(state); return; }
          if (state.partial && partial && partial.textContent !== state.partial) {
            partial.textContent = state.partial;
            partial.hidden = false;
            delay = 500;  // the model is writing: keep up with it
          } else {
            delay = Math.min(delay * 1.5, 4000);
          }
          window.setTimeout(poll, delay);
        })
        .catch(function () { window.setTimeout(poll, 4000); });
    };
    window.setTimeout(poll, delay);
  }

  // Every form of these pages is sent once: a second click while the first send is on its way
  // would reach the server after it (the turn started, the revision rated) and come back as a
  // refusal in place of the next step. Listening on window, the last in line, counts only sends
  // nobody cancelled (site.js's confirmations); a stopped load frees the forms after a while.
  var sending = false;
  window.addEventListener("submit", function (event) {
    // A dialog's form (the log-out question's) only closes its dialog: it sends nothing.
    if (event.defaultPrevented || event.target.method === "dialog") { return; }
    if (sending) { event.preventDefault(); return; }
    sending = true;
    window.setTimeout(function () { sending = false; }, 10000);
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { sending = false; }  // back to this page from the history
  });

  // The edit box only matters when the revision is not good: rated good, its text is not sent
  // (disabled). An edit typed in it stays in sight, saying so, for a rating changed back to
  // neutral or bad; the model's answer untouched is no edit, and its box is put away.
  var editBox = document.getElementById("edit-box");
  var plain = function (text) { return text.replace(/\r\n?/g, "\n").trim(); };
  var syncEdit = function () {
    if (!editBox) { return; }
    var good = document.querySelector("input[name=rating][value=good]");
    var rejected = !(good && good.checked);
    var area = document.getElementById("edited_answer");
    var answer = document.getElementById("answer");
    var edited = Boolean(area && answer && plain(area.value) !== plain(answer.textContent));
    editBox.hidden = !rejected && !edited;
    if (area) { area.disabled = !rejected; }
    var unused = document.getElementById("edit-unused");
    if (unused) { unused.hidden = rejected || !edited; }
  };
  document.querySelectorAll("input[name=rating]").forEach(function (input) {
    input.addEventListener("change", syncEdit);
  });
  syncEdit();

  var shown = function (element) { return element && !element.closest("[hidden]"); };
  document.addEventListener("keydown", function (event) {
    if (document.querySelector("dialog[open]")) { return; }  // the log-out question has the keys
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      var form = event.target.form || document.querySelector("#rate-form, #turn-form");
      if (shown(form)) { event.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (typing(event.target) || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var choice = document.querySelector("input[name=rating][data-key='" + event.key + "']");
    if (shown(choice)) {
      choice.checked = true;
      choice.dispatchEvent(new Event("change"));
      syncEdit();
      event.preventDefault();
      return;
    }
    if (event.key === "c") {
      var comment = document.getElementById("comment");
      if (shown(comment)) { event.preventDefault(); comment.focus(); }
    }
  });

  // An answer already in when the page loads (a reload after it arrived, a re-rating page) is
  // rated next as well: the keyboard goes to the rating as when it arrives, unless a rating is
  // chosen already (a draft, a form sent back) or the user is typing in a field meanwhile.
  var firstRating = document.querySelector("#rate-form input[name=rating]");
  var answerIn = root ? !root.dataset.waiting : true;  // a re-rating page has no session root
  if (answerIn && shown(firstRating) && !typing(document.activeElement) &&
      !document.querySelector("#rate-form input[name=rating]:checked")) {
    firstRating.focus({ preventScroll: true });
  }
  // The next instruction is what comes next (a new session, a turn rated): the keyboard goes
  // to its box, without scrolling past the answer it revises (as when the first answer arrives).
  var instruction = document.getElementById("instruction");
  if (root && !root.dataset.waiting && shown(instruction) && !typing(document.activeElement)) {
    instruction.focus({ preventScroll: true });
  }
})();
