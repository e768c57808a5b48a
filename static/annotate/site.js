// Site-wide behaviour: destructive actions ask first. A button or form with data-confirm shows
// its text in a confirmation dialog; cancelling sends nothing. The project form's guidelines
// follow its mode (below).
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

// The project form: its guidelines follow the mode chosen while they are as a mode pre-fills
// them (data-mode-guidelines); once the researcher has written their own, a mode change keeps
// them. The server does the same for a form sent without this script.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var mode = event.target;
    if (mode.name !== "mode" || !mode.form) {
      return;
    }
    var guidelines = mode.form.querySelector("textarea[data-mode-guidelines]");
    if (!guidelines) {
      return;
    }
    var prefills = JSON.parse(guidelines.getAttribute("data-mode-guidelines"));
    var text = guidelines.value.replace(/\r\n/g, "\n").trim();
    var untouched = text === "" || Object.keys(prefills).some(function (key) {
      return prefills[key] === text;
    });
    if (untouched && Object.prototype.hasOwnProperty.call(prefills, mode.value)) {
      guidelines.value = prefills[mode.value];
    }
  });
})();
