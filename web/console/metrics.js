// Training-metric charts (the trainingMetrics route, docs/training-metrics.md)
// for one job or several overlaid (compare.js): one chart per metric, one
// line per run and writer (each replica that wrote TensorBoard files is its
// own series, named by the replica), under the shared chart controls (smoothing, log scale, x axis).
import { el } from "./util.js";
import { chart, chartControls, chartSettings, metricX } from "./chart.js";

function seriesLabel(run, s, runs) {
  const parts = [];
  if (runs.length > 1) parts.push(run.label);
  // The replica whose trainer wrote it ("workerpool1-0"), else the process.
  if (s.replica || s.writer) parts.push(s.replica || s.writer);
  return parts.join(" · ") || s.name;
}

// A panel: controls, then the charts; set(runs) draws runs [{label, data}],
// data being a trainingMetrics answer. Zoom survives a refresh.
export function metricsPanel(id) {
  const grid = el("div", { class: "metric-charts" });
  const notes = el("div", {});
  const views = new Map(); // chart key -> its zoom
  let runs = null;
  const root = el("div", { class: "metrics-panel", id }, chartControls(render), grid, notes);

  function render() {
    if (!runs) return;
    const groups = new Map(); // "name (source)" -> series
    for (const run of runs) {
      for (const s of (run.data && run.data.series) || []) {
        const key = s.name + " (" + s.source + ")";
        if (!groups.has(key)) groups.set(key, []);
        const pts = s.points || [];
        const t0 = pts.length ? Math.min(...pts.map((pt) => pt.t)) : 0;
        groups.get(key).push({
          name: seriesLabel(run, s, runs),
          points: pts.map((pt) => [metricX(pt, t0), pt.value]),
        });
      }
    }
    const charts = [...groups].map(([key, series]) => {
      if (!views.has(key)) views.set(key, { x: null, y: null });
      const view = views.get(key);
      if (view.mode !== chartSettings.xMode) Object.assign(view, { x: null, mode: chartSettings.xMode });
      if (view.logY !== chartSettings.logY) Object.assign(view, { y: null, logY: chartSettings.logY });
      return chart(series, {
        title: key, view, smoothing: chartSettings.smoothing, logY: chartSettings.logY,
        xTime: chartSettings.xMode === "wall", xRelative: chartSettings.xMode === "relative",
        xLabel: chartSettings.xMode === "step" ? "step" : "time",
      });
    });
    grid.replaceChildren(...(charts.length ? charts : [el("p", { class: "muted nodata" }, "no data yet")]));
    const skipped = runs.flatMap((run) => ((run.data && run.data.skipped) || []).map((s) =>
      el("li", {}, (runs.length > 1 ? run.label + ": " : "") + s.file + ": " + s.reason)));
    notes.replaceChildren(skipped.length ? el("ul", { class: "muted small" }, skipped) : "");
  }

  return {
    root,
    set(newRuns) {
      runs = newRuns;
      render();
    },
    message(node) {
      runs = null;
      grid.replaceChildren(node);
    },
  };
}
