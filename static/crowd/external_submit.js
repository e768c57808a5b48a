// After our server has stored the answers, hand the assignment back to Mechanical Turk.
(function () {
  "use strict";
  var form = document.getElementById("external-submit");
  if (form) {
    form.submit();
  }
})();
