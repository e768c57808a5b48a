// Site-wide behaviour: destructive actions ask first. A button or form with data-confirm shows
// its text in a confirmation dialog; cancelling sends nothing.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    var question =
      (submitter && submitter.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
