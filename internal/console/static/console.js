// Logist console: live updates by Server-Sent Events. Agent text is only
// ever set as textContent, never as HTML.
"use strict";
(function () {
  var page = document.body.dataset.page;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function cents(v) { return "$" + (v / 100).toFixed(2); }

  // Jobs list: the filters apply as one types; a job's change re-reads it.
  function jobsPage() {
    var form = document.getElementById("filters");
    var tbody = document.querySelector("#jobs tbody");
    var count = document.getElementById("count");
    var timer = null;
    function query() {
      var p = new URLSearchParams(new FormData(form));
      Array.from(p.keys()).forEach(function (k) { if (!p.get(k)) p.delete(k); });
      return p;
    }
    function refresh() {
      var q = query();
      history.replaceState(null, "", q.toString() ? "/?" + q : "/");
      fetch("/api/v1/jobs?" + q, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (d) {
        if (!d.ok) return;
        count.textContent = d.total + " jobs";
        tbody.replaceChildren();
        d.items.forEach(function (it) {
          var tr = el("tr"); tr.dataset.job = it.job_id;
          var a = el("a", "", it.job_id); a.href = "/jobs/" + encodeURIComponent(it.job_id);
          var td = el("td"); td.appendChild(a); tr.appendChild(td);
          var st = el("td", "status"); st.appendChild(el("span", "badge s-" + it.status, it.status)); tr.appendChild(st);
          tr.appendChild(el("td", "phase", it.current_phase || "-"));
          var cost = it.metrics ? cents(it.metrics.cumulative_cost) : "";
          if (it.cost_threshold != null) cost += " of " + cents(it.cost_threshold);
          tr.appendChild(el("td", "cost", cost));
          tr.appendChild(el("td", "time", it.metrics ? it.metrics.cumulative_time_seconds.toFixed(2) + " s" : ""));
          tr.appendChild(el("td", "note", it.error || it.reason || ""));
          tbody.appendChild(tr);
        });
      });
    }
    form.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 250); });
    form.addEventListener("submit", function (e) { e.preventDefault(); refresh(); });
    var es = new EventSource("/api/v1/events");
    es.addEventListener("job", function () { clearTimeout(timer); timer = setTimeout(refresh, 100); });
  }

  // Job page: new history records join the timeline; a transition
  // updates the status shown.
  function jobPage() {
    var state = document.getElementById("state");
    var id = state.dataset.job;
    var timeline = document.getElementById("timeline");
    var status = document.getElementById("status");
    var phase = document.getElementById("phase");
    var after = state.dataset.lastSeq;
    var es = new EventSource("/api/v1/jobs/" + encodeURIComponent(id) + "/history?follow=1&after=" + encodeURIComponent(after));
    es.addEventListener("record", function (ev) {
      var r = JSON.parse(ev.data);
      if (timeline.querySelector('[data-seq="' + r.seq + '"]')) return;
      var kind = r.type, title = r.type, detail = "";
      if (r.request) { kind = "request"; title = "Request to " + r.role; detail = r.request.prompt; }
      else if (r.response) { kind = "answer"; title = (r.response.status + " " + (r.response.action || "")).trim(); detail = r.response.summary_for_supervisor; }
      else if (r.transition) {
        kind = "transition"; title = r.transition.from + " \u2192 " + r.transition.to; detail = r.transition.reason || "";
        status.textContent = r.transition.to; status.className = "badge s-" + r.transition.to;
        document.getElementById("stale").hidden = false;
        if (r.transition.to_phase && phase) phase.textContent = r.transition.to_phase;
      }
      else if (r.steward) { kind = "steward"; title = "Steward: " + r.steward.command; detail = [r.steward.reason, r.steward.guidance].filter(Boolean).join("\n"); }
      else if (r.recovery_point) { kind = "checkpoint"; title = "Recovery point " + r.recovery_point.checkpoint_id; detail = r.recovery_point.description; }
      else if (r.error) { kind = "error"; title = "Error " + r.error.code; detail = r.error.message; }
      var li = el("li", "t-" + kind); li.dataset.seq = r.seq;
      var head = el("div", "t-head");
      head.appendChild(el("span", "seq", "#" + r.seq)); head.appendChild(document.createTextNode(" "));
      head.appendChild(el("strong", "", title));
      if (r.role) head.appendChild(document.createTextNode(" \u00b7 " + r.role));
      li.appendChild(head);
      if (detail) li.appendChild(el("pre", "agent", detail));
      timeline.appendChild(li);
    });
  }

  if (page === "jobs") jobsPage();
  if (page === "job") jobPage();
})();
