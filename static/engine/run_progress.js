// Poll the run's progress JSON and update the page in place until the run ends (no reload).
(function () {
  "use strict";
  var box = document.getElementById("run-progress");
  if (!box) { return; }
  var url = box.getAttribute("data-url");
  var fields = {
    "run-done": "units_done", "run-total": "units_total", "run-skipped": "units_skipped",
    "run-done-earlier": "units_done_earlier",
    "run-failed": "units_failed", "run-calls": "calls", "run-calls-failed": "calls_failed",
    "run-prompt-tokens": "prompt_tokens", "run-completion-tokens": "completion_tokens",
    "run-cost": "cost_shown", "run-possibly-billed": "possibly_billed_shown",
    "run-status": "status_display",
    "run-error": "error", "run-percent-processed": "percent_processed",
    "run-percent-done": "percent_done"
  };
  var delay = 1000;

  function show(data) {
    Object.keys(fields).forEach(function (id) {
      var element = document.getElementById(id);
      if (element) { element.textContent = String(data[fields[id]]); }
    });
    // One decimal, as the page renders the same figure (String(9.0) would read "9").
    document.getElementById("run-elapsed").textContent = Number(data.elapsed_seconds).toFixed(1);
    setHidden("run-error-label", !data.error);  // no empty "Message" row
    setHidden("run-error", !data.error);
    setHidden("run-earlier", !data.units_done_earlier);  // only after Run again
    var bar = document.getElementById("run-bar");
    bar.max = Math.max(1, data.units_total);
    bar.value = data.units_done;
    setHidden("run-preparing", !data.preparing);  // "Preparing units…", not "0 / 0"
    setHidden("run-counts", data.preparing);
    setHidden("run-results-partial", !data.active);  // "(complete once the run is done)"
    setHidden("run-stop-form", !data.active);  // absent for who may not stop or restart it
    setHidden("run-resume-form", data.active || !data.work_left);  // a done run may have none
    setHidden("run-nothing-left", data.work_left);
    showAgainCost(data.again_confirm);
    showReplace(data.replace_warning, data.replace_seen);
    showErrors(data.errors || []);
    box.setAttribute("data-active", data.active ? "1" : "0");
  }

  // On a paid endpoint Run again sends the cost it would have now, asked in its dialog first.
  function showAgainCost(cost) {
    var total = document.getElementById("run-again-total");
    var button = document.getElementById("run-again");
    if (!total || !button) { return; }
    total.value = cost ? cost.total : "";
    if (cost) { button.setAttribute("data-confirm", cost.question); }
    else { button.removeAttribute("data-confirm"); }
  }

  // Run again over labels another run wrote (a judge run): the warning, the box to confirm it
  // and what it said, sent back with the box. Rendered hidden while the run was active.
  function showReplace(warning, seen) {
    var text = document.getElementById("replace-warning-text");
    var said = document.querySelector('#run-resume-form input[name="replace_seen"]');
    if (!text || !said) { return; }
    text.textContent = warning || "";
    said.value = warning ? seen : "";
    setHidden("replace-warning", !warning);
    setHidden("replace-box", !warning);
  }

  function setHidden(id, hidden) {
    var element = document.getElementById(id);
    if (element) { element.hidden = hidden; }
  }

  // The failed units and their reasons, as the page lists them (text only, never markup).
  function showErrors(errors) {
    var section = document.getElementById("run-errors");
    var list = document.getElementById("run-error-list");
    if (!section || !list) { return; }
    var items = errors.map(function (item) {
      var li = document.createElement("li");
      var unit = document.createElement("span");
      unit.className = "unit";
      unit.title = item.unit;
      unit.textContent = item.label || item.unit;
      li.appendChild(unit);
      li.appendChild(document.createTextNode(": " + item.error));
      return li;
    });
    list.replaceChildren.apply(list, items);
    section.hidden = items.length === 0;
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) {
        var refusal = window.pollRefusal(response);
        if (refusal) {
          return refusal.then(function (refused) {
            window.pollNotice(box, refused.message);
            window.setTimeout(poll, refused.seconds * 1000);
          });
        }
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json().then(function (data) {
          window.pollNotice(box, "");
          show(data);
          delay = 1000;
          if (data.active) { window.setTimeout(poll, delay); }
        });
      })
      .catch(function () {
        delay = Math.min(delay * 2, 30000);  // the server is busy or down: back off, keep trying
        window.setTimeout(poll, delay);
      });
  }

  if (box.getAttribute("data-active") === "1") { window.setTimeout(poll, 500); }
})();
