// The re-rating page: how many of the turns left the annotators ticked may re-rate, as they
// are ticked (the server says the same once the form is sent). One annotator alone may take
// every turn but those of their own sessions; two or more, every turn (a session has one).
(function () {
  "use strict";
  var data = document.getElementById("rerate-alone");
  var form = document.getElementById("rerate-form");
  if (!data || !form) { return; }
  var alone = JSON.parse(data.textContent);
  var left = document.getElementById("rerate-left").textContent;
  var term = document.getElementById("rerate-eligible-term");
  var count = document.getElementById("rerate-eligible");
  var names = document.getElementById("rerate-chosen");
  var update = function () {
    var chosen = [];
    form.querySelectorAll("input[name=annotators]:checked").forEach(function (box) {
      if (alone[box.value]) { chosen.push(alone[box.value]); }
    });
    term.hidden = count.hidden = chosen.length === 0;
    names.textContent = chosen.map(function (one) { return one[0]; }).join(", ");
    count.textContent = chosen.length === 1 ? String(chosen[0][1]) : left;
  };
  form.addEventListener("change", update);
  update();
})();
