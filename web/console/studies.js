// Studies (#/studies, #/studies/ID), docs/console.md.
import {
  api, ApiError, BASE, el, errorBox, fmtBytes, fmtDuration, fmtNum, fmtTime, jobId, LOG_POLL_MS,
  PAGE_SIZE, REFRESH_MS, shortState, show, state, stateBadge, stopPage, TERMINAL,
} from "./util.js";
import { chart } from "./chart.js";
import { brushed, brushes, METRIC_AXIS, parallelCoordinates } from "./parallel.js";
import { usageCard } from "./usage.js";

// ---------- studies ----------

export function studyMetric(study) {
  const m = (study.studySpec && study.studySpec.metrics && study.studySpec.metrics[0]) || {};
  return { id: m.metricId || "", maximize: m.goal !== "MINIMIZE" };
}

export function trialValue(t, metricId) {
  const fm = t.finalMeasurement;
  const m = fm && (fm.metrics || []).find((x) => x.metricId === metricId);
  if (m) return Number(m.value);
  const last = (t.measurements || []).slice(-1)[0];
  const lm = last && (last.metrics || []).find((x) => x.metricId === metricId);
  return lm ? Number(lm.value) : NaN;
}

export function paramValue(t, pid) {
  const p = (t.parameters || []).find((x) => x.parameterId === pid);
  return p ? p.value : undefined;
}

export function paramSpec(study, pid) {
  return ((study.studySpec && study.studySpec.parameters) || []).find((x) => x.parameterId === pid) || {};
}

export function bestTrial(study) {
  const { id, maximize } = studyMetric(study);
  let best = null;
  for (const t of study.trials || []) {
    const v = trialValue(t, id);
    if (!isFinite(v)) continue;
    if (!best || (maximize ? v > best.v : v < best.v)) best = { t, v };
  }
  return best;
}

export function studiesPage(p) {
  const tbody = el("tbody", { id: "studies-body" });
  show(el("h1", {}, "Studies"),
    el("table", { class: "list", id: "studies" },
      el("thead", {}, el("tr", {}, ["ID", "Name", "State", "Trials", "Metric", "Best"].map((h) => el("th", {}, h)))),
      tbody));
  p.every(async () => {
    const data = await api("GET", BASE + "/hyperparameterTuningJobs?pageSize=100&orderBy=" + encodeURIComponent("create_time desc"));
    const rows = (data.hyperparameterTuningJobs || []).map((s) => {
      const id = jobId(s.name);
      const m = studyMetric(s);
      const best = bestTrial(s);
      return el("tr", {},
        el("td", {}, el("a", { href: "#/studies/" + id }, id)),
        el("td", {}, el("a", { href: "#/studies/" + id }, s.displayName || "")),
        el("td", {}, stateBadge(s.state)),
        el("td", {}, (s.trials || []).length + " / " + (s.maxTrialCount || "?")),
        el("td", {}, m.id + (m.maximize ? " ↑" : " ↓")),
        el("td", {}, best ? fmtNum(best.v) + " (trial " + best.t.id + ")" : ""));
    });
    tbody.replaceChildren(...rows);
    if (!rows.length) tbody.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No studies.")));
  }, REFRESH_MS);
}

export function studyPage(p, id) {
  const path = BASE + "/hyperparameterTuningJobs/" + encodeURIComponent(id);
  const sort = { key: "metric", desc: true, initial: true };
  let study = null;
  const head = el("div", {});
  const table = el("table", { class: "list", id: "trials" });
  const charts = el("section", { class: "chart-row", id: "study-charts" });
  const parallel = el("section", { id: "study-parallel" });
  const picked = new Set(); // trial job ids ticked for comparison
  const brush = brushes(); // the parallel coordinates' brushed ranges, kept across refreshes
  const brushNote = el("p", { id: "brush-note", class: "muted", hidden: true });
  const compare = el("button", { type: "button", id: "compare-trials" });
  const updateCompare = () => {
    compare.textContent = "Compare " + picked.size + " selected";
    compare.disabled = picked.size < 2;
  };
  updateCompare();
  compare.addEventListener("click", () => {
    location.hash = "#/compare?study=" + encodeURIComponent(id) + "&jobs=" + [...picked].join(",");
  });
  show(head, charts, el("h2", {}, "Parallel coordinates"), parallel,
    el("h2", {}, "Trials ", compare), brushNote, table);

  function render() {
    const { id: metricId, maximize } = studyMetric(study);
    if (sort.initial) sort.desc = maximize;
    const params = [...new Set((study.trials || []).flatMap((t) => (t.parameters || []).map((x) => x.parameterId)))];
    const best = bestTrial(study);
    head.replaceChildren(
      el("h1", {}, "Study " + id + " ", stateBadge(study.state)),
      el("table", { class: "kv" },
        el("tr", {}, el("th", {}, "Name"), el("td", {}, study.displayName || "")),
        el("tr", {}, el("th", {}, "Metric"), el("td", {}, metricId + " (" + (maximize ? "maximize" : "minimize") + ")")),
        el("tr", {}, el("th", {}, "Trials"), el("td", {}, (study.trials || []).length + " of " + (study.maxTrialCount || "?"))),
        el("tr", {}, el("th", {}, "Best"), el("td", { id: "best" }, best ? "trial " + best.t.id + ": " + fmtNum(best.v) : "none yet"))),
      usageCard(study.stoker && study.stoker.usage, "study-usage"));
    const value = (t, key) => key === "metric" ? trialValue(t, metricId) : key === "id" ? Number(t.id) :
      key === "state" ? t.state : paramValue(t, key);
    // The table shows the trials in every brushed range of the parallel coordinates.
    const axisValue = (t, key) => key === METRIC_AXIS ? trialValue(t, metricId) : paramValue(t, key);
    const all = study.trials || [];
    const shown = all.filter((t) => brushed(brush, t, axisValue));
    brushNote.hidden = !brush.size;
    brushNote.replaceChildren(...(brush.size ? [
      shown.length + " of " + all.length + " trials in the brushed ranges (" +
        [...brush.keys()].map((k) => k === METRIC_AXIS ? metricId : k).join(", ") + ") ",
      el("button", { type: "button", id: "clear-brushes", onclick: () => { brush.clear(); render(); } }, "Clear brushes"),
    ] : []));
    const trials = shown.sort((a, b) => {
      let x = value(a, sort.key), y = value(b, sort.key);
      const nx = typeof x === "number" ? isNaN(x) : x === undefined;
      const ny = typeof y === "number" ? isNaN(y) : y === undefined;
      if (nx !== ny) return nx ? 1 : -1; // trials without a value last
      const c = x < y ? -1 : x > y ? 1 : 0;
      return sort.desc ? -c : c;
    });
    const resort = (key) => {
      sort.desc = sort.key === key ? !sort.desc : key === "metric" ? maximize : false;
      sort.key = key;
      sort.initial = false;
      render();
      const again = table.querySelector(`th[data-key="${CSS.escape(key)}"]`);
      if (again) again.focus();
    };
    const header = (key, label) => el("th", {
      class: "sortable" + (sort.key === key ? " sorted" : ""), "data-key": key, tabindex: 0,
      "aria-sort": sort.key === key ? (sort.desc ? "descending" : "ascending") : "none",
      onclick: () => resort(key),
      onkeydown: (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          resort(key);
        }
      },
    }, label + (sort.key === key ? (sort.desc ? " ▼" : " ▲") : ""));
    const tick = (t) => {
      const jid = jobId(t.customJob);
      if (!jid) return "";
      const box = el("input", { type: "checkbox", class: "pick", "aria-label": "compare trial " + t.id, checked: picked.has(jid) });
      box.addEventListener("change", () => {
        if (box.checked) picked.add(jid);
        else picked.delete(jid);
        updateCompare();
      });
      return box;
    };
    table.replaceChildren(
      el("thead", {}, el("tr", {}, el("th", {}, el("span", { class: "sr" }, "Compare")), header("id", "Trial"), header("state", "State"), header("metric", metricId),
        params.map((k) => header(k, k)), el("th", {}, "Job"))),
      el("tbody", {}, trials.map((t) => el("tr", { class: best && best.t === t ? "best-row" : "", "data-trial": t.id },
        el("td", {}, tick(t)), el("td", {}, t.id), el("td", {}, t.state + (t.stoppedEarly ? " (stopped early)" : "")),
        el("td", { class: "num" }, fmtNum(trialValue(t, metricId))),
        params.map((k) => el("td", { class: "num" }, paramValue(t, k) === undefined ? "" : fmtNum(paramValue(t, k)))),
        el("td", {}, el("a", { href: "#/jobs/" + jobId(t.customJob) }, jobId(t.customJob)))))));
    // The metric over trials, with the best so far.
    const pts = (study.trials || []).map((t) => [Number(t.id), trialValue(t, metricId)]).filter((q) => isFinite(q[1]));
    pts.sort((a, b) => a[0] - b[0]);
    let run = null;
    const bestSoFar = pts.map((q) => {
      run = run === null ? q[1] : maximize ? Math.max(run, q[1]) : Math.min(run, q[1]);
      return [q[0], run];
    });
    const chartsOut = [chart([{ name: metricId, points: pts }, { name: "best so far", points: bestSoFar }],
      { title: metricId + " by trial", xLabel: "trial", highlight: best ? [Number(best.t.id), best.v] : null })];
    // Each parameter against the metric (categorical values by their order).
    for (const k of params) {
      const cats = [];
      const sp = (study.trials || []).map((t) => {
        let x = paramValue(t, k);
        if (typeof x !== "number") {
          if (!cats.includes(String(x))) cats.push(String(x));
          x = cats.indexOf(String(x));
        }
        return [x, trialValue(t, metricId), "trial " + t.id];
      }).filter((q) => isFinite(q[0]) && isFinite(q[1]));
      // In the parameter's own scale: a log-scaled parameter on a log axis.
      chartsOut.push(chart([{ name: k, points: sp }], {
        title: metricId + " against " + k + (cats.length ? " (" + cats.join(", ") + ")" : ""), xLabel: k, scatter: true,
        logX: !cats.length && paramSpec(study, k).scaleType === "UNIT_LOG_SCALE",
      }));
    }
    charts.replaceChildren(...chartsOut);
    const withValue = (study.trials || []).map((t) => Object.assign(Object.create(t), { __v: trialValue(t, metricId), id: t.id }));
    const bestWith = best && { t: withValue.find((t) => t.id === best.t.id) };
    parallel.replaceChildren(parallelCoordinates(study, params, { id: metricId, maximize }, withValue,
      paramValue, (k) => paramSpec(study, k), bestWith, brush, render));
  }

  p.every(async () => {
    try {
      study = await api("GET", path);
    } catch (e) {
      if (e.status === 404) {
        show(el("h1", {}, "Study " + id), el("p", { class: "error", id: "not-found" }, "Study " + id + " not found: " + e.message));
        return false;
      }
      throw e;
    }
    render();
    return !TERMINAL.has(study.state);
  }, REFRESH_MS);
}
