// Site-wide behaviour: destructive actions ask first. A button or form with data-confirm shows
// its text in a confirmation dialog; cancelling sends nothing. A bonus button (data-bonus-*)
// asks with the amount typed in its form, the platform's fee on it and the worker instead. The
// project form's guidelines follow its mode (below).
(function () {
  "use strict";

  // A plain amount ("0.5", "12.50") in whole units and parts of 10^places, or null.
  function parseUnits(text, places) {
    var match = /^\s*(\d{0,9})(?:\.(\d*))?\s*$/.exec(text || "");
    if (!match || (match[1] + (match[2] || "")) === "" || (match[2] || "").length > places) {
      return null;
    }
    var parts = (match[2] || "") + "000".slice(0, places - (match[2] || "").length);
    return Number(match[1] || "0") * Math.pow(10, places) + Number(parts || "0");
  }

  function dollars(cents) {
    var whole = String(Math.floor(cents / 100)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return "$" + whole + "." + String(cents % 100 + 100).slice(1);
  }

  // The fee as annotate.crowd.pricing.platform_fee prices a bonus (bonus_fee_terms): amount ×
  // rate rounded to cents, halves up, at least the minimum. Whole numbers only: no float error.
  function bonusQuestion(form, button) {
    var cents = parseUnits(form.elements.amount && form.elements.amount.value, 2);
    var rate = parseUnits(button.getAttribute("data-bonus-fee-rate"), 3);
    var minimum = parseUnits(button.getAttribute("data-bonus-fee-min"), 2);
    if (!cents || rate === null || minimum === null) {
      return null;
    }
    var fee = Math.max(Math.floor((cents * rate + 500) / 1000), minimum);
    return "Pay a bonus of " + dollars(cents) + " (+ " + dollars(fee) + " " +
      button.getAttribute("data-bonus-fee-name") + ") to worker " +
      button.getAttribute("data-bonus-worker") + " now? " + button.getAttribute("data-bonus-note");
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    var question =
      (submitter && submitter.hasAttribute("data-bonus-worker") && bonusQuestion(form, submitter)) ||
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

// The publish form: the rows of HIT-only settings (approval rate, lifetime... of MTurk and the
// offline platform: .hit-only) are hidden and their inputs disabled while a self-hosted link is
// chosen, as the server renders them for the platform it was sent: a disabled input is neither
// checked by the browser (an emptied required one blocked the submit without a word) nor sent
// (a link takes each at its default). Only the inputs marked data-hit-only: the form's hidden
// inputs, which Django renders into its last row, are always sent.
(function () {
  "use strict";
  function follow(select) {
    var hidden = select.value === "selfhosted";
    var rows = select.form.querySelectorAll(".form-row.hit-only");
    for (var i = 0; i < rows.length; i++) {
      rows[i].classList.toggle("platform-hidden", hidden);
    }
    var inputs = select.form.querySelectorAll("[data-hit-only]");
    for (var j = 0; j < inputs.length; j++) {
      inputs[j].disabled = hidden;
    }
    // A link's own settings (completion code and URL), the other way round.
    var linkRows = select.form.querySelectorAll(".form-row.link-only");
    for (var k = 0; k < linkRows.length; k++) {
      linkRows[k].classList.toggle("platform-hidden", !hidden);
    }
    var linkInputs = select.form.querySelectorAll("[data-link-only]");
    for (var m = 0; m < linkInputs.length; m++) {
      linkInputs[m].disabled = !hidden;
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.name === "platform" && event.target.form) {
      follow(event.target);
    }
  });
  // A browser may restore the choice on a page shown again, with no change event.
  window.addEventListener("pageshow", function () {
    var selects = document.querySelectorAll("form select[name=platform]");
    for (var i = 0; i < selects.length; i++) {
      follow(selects[i]);
    }
  });
})();

// A select marked data-reload-on-change="<button>" (the judge run's benchmark) sends its form
// with that button's name, so the server shows the form again listing what belongs to the
// choice (that benchmark's systems) with every other field as typed; without this script the
// button, beside the select, does it. Choosing what the page was served with sends nothing.
// A checkbox group marked data-one-required needs at least one ticked: `required` on a checkbox
// would demand every one, so the first box carries the browser's message while none is ticked.
(function () {
  "use strict";
  function servedValue(select) {
    var served = Array.prototype.find.call(select.options, function (option) {
      return option.defaultSelected;
    });
    return served ? served.value : select.options.length ? select.options[0].value : "";
  }
  function reload(select) {
    var button = document.createElement("input");
    button.type = "hidden";
    button.name = select.getAttribute("data-reload-on-change");
    button.value = "1";
    select.form.appendChild(button);
    select.form.submit(); // unchecked: a choice to list, not the form's work to send
  }
  function checkGroup(box) {
    var boxes = box.form.querySelectorAll("input[type=checkbox][data-one-required]");
    var mine = Array.prototype.filter.call(boxes, function (each) { return each.name === box.name; });
    var ticked = mine.some(function (each) { return each.checked; });
    mine[0].setCustomValidity(ticked ? "" : "Choose at least one.");
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (!target.form || !target.hasAttribute) {
      return;
    }
    if (target.hasAttribute("data-reload-on-change") && target.value !== servedValue(target)) {
      reload(target);
    } else if (target.hasAttribute("data-one-required")) {
      checkGroup(target);
    }
  });
  window.addEventListener("pageshow", function () {
    var boxes = document.querySelectorAll("input[type=checkbox][data-one-required]");
    for (var i = 0; i < boxes.length; i++) {
      checkGroup(boxes[i]);
    }
  });
})();
