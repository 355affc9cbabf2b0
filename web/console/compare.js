// Comparing runs (#/compare?jobs=1,2,3[&study=ID]), docs/console.md: their
// training-metric curves overlaid (one line per run and writer), and a
// table of each run's state, parameters (a study's trials) and final
// metrics, the way one picks the best run.
import { api, BASE, el, errorBox, fmtDuration, fmtNum, show, stateBadge, TERMINAL, REFRESH_MS } from "./util.js";
import { metricsPanel } from "./metrics.js";
import { bestTrial, paramValue, studyMetric, trialValue } from "./studies.js";

// The last value of each metric series (the first writer's) of a trainingMetrics answer.
function finalValues(data) {
  const out = new Map();
  for (const s of (data && data.series) || []) {
    const pts = s.points || [];
    if (pts.length && !out.has(s.name)) out.set(s.name, pts[pts.length - 1].value);
  }
  return out;
}

export function comparePage(p, query) {
  const ids = (query.get("jobs") || "").split(",").map((x) => x.trim()).filter((x) => /^\d+$/.test(x));
  const studyId = query.get("study");
  const panel = metricsPanel("compare-metrics");
  const table = el("table", { class: "list", id: "compare-table" });
  const status = el("p", { class: "muted", id: "compare-status" });
  show(el("h1", {}, "Compare " + ids.length + " runs"),
    studyId ? el("p", {}, el("a", { href: "#/studies/" + studyId }, "← study " + studyId)) : "",
    status, el("h2", {}, "Parameters and final metrics"), table,
    el("h2", {}, "Training metrics"), panel.root);
  if (ids.length < 1) {
    status.textContent = "Pick runs to compare: tick them in the jobs list or a study's trials.";
    return;
  }

  p.every(async () => {
    const t0 = performance.now();
    let study = null;
    if (studyId) {
      try {
        study = await api("GET", BASE + "/hyperparameterTuningJobs/" + encodeURIComponent(studyId));
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    }
    const runs = await Promise.all(ids.map(async (id) => {
      const path = BASE + "/customJobs/" + encodeURIComponent(id);
      const run = { id, label: "job " + id, job: null, data: null, error: null };
      try {
        run.job = await api("GET", path);
        run.data = await api("GET", path + "/trainingMetrics");
      } catch (e) {
        run.error = e;
      }
      const trial = study && (study.trials || []).find((t) => (t.customJob || "").split("/").pop() === id);
      if (trial) {
        run.trial = trial;
        run.label = "trial " + trial.id;
      }
      return run;
    }));
    if (!p.live) return false;
    panel.set(runs.filter((r) => r.data));
    const finals = runs.map((r) => finalValues(r.data));
    const metricNames = [...new Set(finals.flatMap((f) => [...f.keys()]))].sort();
    const params = study ? [...new Set((study.trials || []).flatMap((t) => (t.parameters || []).map((x) => x.parameterId)))] : [];
    const sm = study ? studyMetric(study) : null;
    const best = study ? bestTrial(study) : null;
    table.replaceChildren(
      el("thead", {}, el("tr", {}, el("th", {}, "Run"), el("th", {}, "Name"), el("th", {}, "State"), el("th", {}, "Ran"),
        sm ? el("th", {}, sm.id + " (objective)") : "",
        params.map((k) => el("th", {}, k)), metricNames.map((m) => el("th", {}, m + " (last)")))),
      el("tbody", {}, runs.map((r, i) => {
        const j = r.job || {};
        const start = j.startTime ? Date.parse(j.startTime) : null;
        const end = j.endTime ? Date.parse(j.endTime) : Date.now();
        return el("tr", { "data-run": r.id, class: best && r.trial === best.t ? "best-row" : "" },
          el("td", {}, el("a", { href: "#/jobs/" + r.id }, r.label)),
          el("td", {}, j.displayName || (r.error ? r.error.message : "")),
          el("td", {}, j.state ? stateBadge(j.state) : ""),
          el("td", {}, start ? fmtDuration((end - start) / 1000) : ""),
          sm ? el("td", { class: "num" }, r.trial ? fmtNum(trialValue(r.trial, sm.id)) : "") : "",
          params.map((k) => el("td", { class: "num" }, r.trial && paramValue(r.trial, k) !== undefined ? fmtNum(paramValue(r.trial, k)) : "")),
          metricNames.map((m) => el("td", { class: "num", "data-metric": m }, finals[i].has(m) ? fmtNum(finals[i].get(m)) : "")));
      })));
    status.textContent = runs.length + " runs · " + Math.round(performance.now() - t0) + " ms";
    // For bench/console_charts_bench.py: the first overlay painted after this navigation.
    if (!performance.getEntriesByName("stoker-compare-painted").length) {
      requestAnimationFrame(() => setTimeout(() => performance.mark("stoker-compare-painted"), 0));
    }
    return runs.some((r) => r.job && !TERMINAL.has(r.job.state));
  }, REFRESH_MS);
}
