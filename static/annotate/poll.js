// What a page's progress script does when the server refuses a poll for its rate (POLL_RATE):
// the refusal comes as JSON (429, its message and Retry-After); the page says it beside what it
// follows and asks again once the wait is over, its figures left as last shown.
(function () {
  "use strict";
  // A refusal for the rate as {message, seconds}, or null for any other answer.
  window.pollRefusal = function (response) {
    if (response.status !== 429) { return null; }
    var seconds = parseInt(response.headers.get("Retry-After"), 10);
    if (!(seconds > 0)) { seconds = 60; }
    return response.json()
      .catch(function () { return {}; })
      .then(function (body) {
        var told = body.detail || "Too many progress checks.";
        return { message: told + " This page checks again by itself then.", seconds: seconds };
      });
  };

  // Show `text` just before `anchor` (an empty text hides it): one notice per anchor.
  window.pollNotice = function (anchor, text) {
    var notice = anchor.previousElementSibling;
    if (!notice || !notice.classList.contains("poll-notice")) {
      if (!text) { return; }
      notice = document.createElement("p");
      notice.className = "poll-notice";
      notice.setAttribute("role", "status");
      anchor.parentNode.insertBefore(notice, anchor);
    }
    notice.textContent = text;
    notice.hidden = !text;
  };
})();
