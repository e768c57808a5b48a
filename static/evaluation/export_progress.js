// The report page follows its running exports: progress bars update by themselves and the
// download link appears when the zip is ready. Without this script the page still works on reload.
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-export-status]"));
  function running(row) {
    var status = row.getAttribute("data-status");
    return status === "queued" || status === "running";
  }
  function update(row, data) {
    row.setAttribute("data-status", data.status);
    row.querySelector(".export-status").textContent = data.status_display;
    row.querySelector(".export-message").textContent = data.message;
    var bar = row.querySelector("progress");
    bar.max = Math.max(data.steps_total, 1);
    if (data.steps_total || !running(row)) {
      bar.value = data.steps_done;
    } else {
      bar.removeAttribute("value");  // no total yet: the browser shows it busy, not empty
    }
    row.querySelector(".export-steps").textContent = data.steps_display;
    if (data.downloadable) {
      var cell = row.querySelector(".export-download");
      cell.textContent = "";
      var link = document.createElement("a");
      link.href = row.getAttribute("data-export-status") + "download/";
      link.textContent = "Download zip";
      cell.appendChild(link);
    }
  }
  function poll() {
    var pending = rows.filter(running);
    if (!pending.length) {
      return;
    }
    var wait = 1500;
    var table = pending[0].closest("table");
    var headers = { "Accept": "application/json" };
    Promise.all(
      pending.map(function (row) {
        return fetch(row.getAttribute("data-export-status"), { credentials: "same-origin", headers: headers })
          .then(function (answer) {
            var refusal = window.pollRefusal(answer);
            if (refusal) {
              return refusal.then(function (refused) {
                window.pollNotice(table, refused.message);
                wait = Math.max(wait, refused.seconds * 1000);
              });
            }
            return answer.json().then(function (data) { update(row, data); });
          })
          .catch(function () {});
      })
    ).then(function () {
      if (wait === 1500) { window.pollNotice(table, ""); }
      window.setTimeout(poll, wait);
    });
  }
  window.setTimeout(poll, 500);
})();
