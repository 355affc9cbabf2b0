// Charts drawn as SVG, with no library (docs/decisions/0021): lines or
// scatters of a few series, linear or log axes, TensorBoard's debiased EMA
// smoothing, hover values, drag to zoom (shift-drag pans, double-click or
// the 0 key resets; arrows pan and +/- zoom from the keyboard).
//
// chart(series, opts) returns a <figure class="chart-box"> holding an
// <svg class="chart">; the svg carries data-points (the points drawn, all
// series) and data-series (how many series). series: [{name, points:
// [[x, y, label?], ...]}]. opts: {title, xTime (x in unix seconds), xLabel,
// xRelative (x in seconds from the start), logX, logY, scatter, smoothing
// (0 to <1), highlight: [x, y], view: {x, y} (the zoom, kept by the caller
// across redraws)}.
import { el, fmtNum, fmtDuration, svg } from "./util.js";

const W = 460, H = 220, L = 56, R = 12, T = 26, B = 34;

// The settings every training-metric chart of the page shares (TensorBoard's
// left panel): smoothing weight, log-scaled y, and the x axis.
export const chartSettings = { smoothing: 0, logY: false, xMode: "step" };

// The controls of chartSettings; onChange() redraws the charts.
export function chartControls(onChange) {
  const value = el("output", { id: "smoothing-value", for: "smoothing" }, chartSettings.smoothing.toFixed(2));
  const slider = el("input", {
    type: "range", id: "smoothing", min: 0, max: 0.99, step: 0.01, value: chartSettings.smoothing,
    "aria-label": "Smoothing (exponential moving average weight)",
  });
  slider.addEventListener("input", () => {
    chartSettings.smoothing = Number(slider.value);
    value.textContent = chartSettings.smoothing.toFixed(2);
    onChange();
  });
  const log = el("input", { type: "checkbox", id: "log-y", checked: chartSettings.logY });
  log.addEventListener("change", () => {
    chartSettings.logY = log.checked;
    onChange();
  });
  const xAxis = el("select", { id: "x-axis", "aria-label": "Horizontal axis" },
    [["step", "step"], ["relative", "relative time"], ["wall", "wall time"]].map(([v, label]) =>
      el("option", { value: v, selected: chartSettings.xMode === v }, label)));
  xAxis.addEventListener("change", () => {
    chartSettings.xMode = xAxis.value;
    onChange();
  });
  return el("div", { class: "toolbar chart-controls" },
    el("label", { for: "smoothing" }, "Smoothing "), slider, value,
    el("label", {}, log, " log scale"),
    el("label", { for: "x-axis" }, "x: "), xAxis,
    el("span", { class: "muted small" }, "drag to zoom · shift-drag to pan · double-click to reset"));
}

// The x of a training-metric point ({step, t, value}) under chartSettings.xMode;
// t0 is the first wall time of the chart (for "relative").
export function metricX(pt, t0) {
  if (chartSettings.xMode === "wall") return pt.t;
  if (chartSettings.xMode === "relative") return pt.t - t0;
  return pt.step !== undefined && pt.step !== null ? pt.step : pt.t;
}

// TensorBoard's smoothing: an exponential moving average, debiased so the
// first values are not pulled toward zero.
export function smooth(points, weight) {
  if (!(weight > 0)) return points;
  let last = 0, n = 0;
  return points.map((p) => {
    if (!isFinite(p[1])) return p;
    last = last * weight + (1 - weight) * p[1];
    n++;
    return [p[0], last / (1 - Math.pow(weight, n)), p[2]];
  });
}

// Multiples of a 1-2-5 step inside [lo, hi], each rounded to the step's own
// decimals: rounding to significant digits instead merged the ticks of a
// few milliseconds of unix time and pushed some off the axis.
function linearTicks(lo, hi, n) {
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const decimals = Math.min(20, Math.max(0, -Math.floor(Math.log10(step) + 1e-9)));
  const ticks = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
    ticks.push(Number((k * step).toFixed(decimals)));
  }
  return ticks;
}

function logTicks(lo, hi) {
  const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
  const mult = b - a <= 2 ? [1, 2, 5] : [1];
  const ticks = [];
  for (let e = a; e <= b; e++) for (const m of mult) ticks.push(Number((m * Math.pow(10, e)).toPrecision(12)));
  const inside = ticks.filter((v) => v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9));
  return inside.length >= 2 ? inside : [lo, hi];
}

// A unix time as the local clock time, with milliseconds when asked.
export function timeLabel(t, fraction) {
  const d = new Date(t * 1000);
  if (!fraction) return d.toLocaleTimeString();
  return d.toLocaleTimeString([], { hour: "numeric", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3 });
}

// An axis over [lo, hi] (linear or log10): to pixels in [p0, p1] and back.
export function axis(lo, hi, log, p0, p1, n, pad) {
  if (log) {
    if (!(hi > lo)) {
      lo /= 3.16;
      hi *= 3.16;
    }
  } else if (!(hi > lo)) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    lo -= pad;
    hi += pad;
  }
  const f = log ? Math.log10 : (v) => v;
  if (pad) { // a margin (a share of the span) so that points at the ends show whole
    const m = (f(hi) - f(lo)) * pad;
    [lo, hi] = log ? [lo / Math.pow(10, m), hi * Math.pow(10, m)] : [lo - m, hi + m];
  }
  const flo = f(lo), fhi = f(hi);
  const px = (v) => p0 + ((f(v) - flo) / (fhi - flo)) * (p1 - p0);
  const inv = (p) => {
    const u = flo + ((p - p0) / (p1 - p0)) * (fhi - flo);
    return log ? Math.pow(10, u) : u;
  };
  return { lo, hi, log, px, inv, ticks: log ? logTicks(lo, hi) : linearTicks(lo, hi, n) };
}

function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

// The index of the point whose x is nearest `x` in points sorted by x.
function nearest(points, x) {
  let a = 0, b = points.length - 1;
  while (b - a > 1) {
    const m = (a + b) >> 1;
    if (points[m][0] < x) a = m;
    else b = m;
  }
  return Math.abs(points[a][0] - x) <= Math.abs(points[b][0] - x) ? a : b;
}

// At most two points (the lowest and the highest) per pixel column of a
// long line, in order: the drawn line looks the same at a fraction of the
// SVG nodes.
function decimate(pixels, width) {
  if (pixels.length <= 4 * width) return pixels;
  const out = [];
  let col = null, lo = null, hi = null;
  const flush = () => {
    if (!lo) return;
    if (lo === hi) out.push(lo);
    else if (lo[2] < hi[2]) out.push(lo, hi);
    else out.push(hi, lo);
  };
  pixels.forEach((p, i) => {
    const c = Math.round(p[0]);
    if (c !== col) {
      flush();
      col = c;
      lo = hi = [p[0], p[1], i];
    } else {
      if (p[1] < lo[1]) lo = [p[0], p[1], i];
      if (p[1] > hi[1]) hi = [p[0], p[1], i];
    }
  });
  flush();
  return out;
}

export function chart(series, opts) {
  const box = el("figure", {
    class: "chart-box", tabindex: 0,
    "aria-label": (opts.title || "chart") + ": drag to zoom, arrows pan, plus and minus zoom, 0 resets",
  });
  const tip = el("div", { class: "chart-tip", role: "status", hidden: true });
  const view = opts.view || { x: null, y: null }; // the zoomed domain, null for all
  let current = null;

  // Only finite points, positive where an axis is log-scaled, sorted by x.
  const clean = series.map((s) => {
    const pts = s.points.filter((p) => isFinite(p[0]) && isFinite(p[1]) &&
      (!opts.logX || p[0] > 0) && (!opts.logY || p[1] > 0));
    if (!opts.scatter) pts.sort((a, b) => a[0] - b[0]);
    return { name: s.name, points: pts };
  });
  const all = clean.flatMap((s) => s.points);

  function draw() {
    const root = svg("svg", {
      class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
      "aria-label": opts.title || "chart", "data-points": all.length, "data-series": clean.length,
      "data-log-x": opts.logX ? "1" : "0", "data-log-y": opts.logY ? "1" : "0",
      "data-zoomed": view.x || view.y ? "1" : "0",
    });
    root.append(svg("text", { x: L, y: 16, class: "chart-title" }, opts.title || ""));
    if (!all.length) {
      root.append(svg("text", { x: W / 2, y: H / 2, class: "nodata", "text-anchor": "middle" }, "no data"));
      return root;
    }
    const [x0, x1] = view.x || extent(all.map((p) => p[0]));
    const inX = (p) => p[0] >= x0 && p[0] <= x1;
    let [y0, y1] = view.y || extent(all.filter(inX).map((p) => p[1]));
    if (!(y1 >= y0)) [y0, y1] = extent(all.map((p) => p[1])); // nothing in the zoomed x range
    const pad = opts.scatter && !view.x ? 0.05 : 0;
    const xs = axis(x0, x1, !!opts.logX, L, W - R, 5, pad);
    const ys = axis(y0, y1, !!opts.logY, H - B, T, 4, opts.scatter && !view.y ? 0.05 : 0);
    const axes = svg("g", { class: "axes" });
    axes.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B }));
    axes.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B }));
    for (const v of ys.ticks) {
      axes.append(svg("line", { class: "grid", x1: L, y1: ys.px(v), x2: W - R, y2: ys.px(v) }));
      axes.append(svg("text", { x: L - 4, y: ys.px(v) + 4, "text-anchor": "end" }, fmtNum(v)));
    }
    const xt = opts.xTime && xs.ticks.length > 4 ? xs.ticks.filter((_, i) => i % 2 === 0) : xs.ticks;
    const subSecond = opts.xTime && xt.length > 1 && xt[1] - xt[0] < 1;
    for (const v of xt) {
      axes.append(svg("text", { x: xs.px(v), y: H - B + 14, "text-anchor": "middle", class: "x-tick" },
        xLabel(v, subSecond)));
    }
    if (opts.xLabel) {
      axes.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis-label" },
        opts.xLabel + (opts.logX ? " (log)" : "")));
    }
    root.append(axes);
    const clipId = "clip" + Math.random().toString(36).slice(2);
    root.append(svg("clipPath", { id: clipId }, svg("rect", { x: L, y: T - 2, width: W - L - R, height: H - T - B + 4 })));
    const plot = svg("g", { "clip-path": `url(#${clipId})` });
    const legend = svg("g", { class: "legend" });
    const weight = opts.scatter ? 0 : opts.smoothing || 0;
    clean.forEach((s, i) => {
      const cls = "c" + (i % 8);
      const g = svg("g", { class: "series " + cls, "data-series": s.name });
      const line = (pts, extra) => {
        const px = decimate(pts.map((p) => [xs.px(p[0]), ys.px(p[1])]), W - L - R);
        return svg("polyline", { class: extra, points: px.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ") });
      };
      if (!opts.scatter && s.points.length > 1) {
        if (weight > 0) {
          g.append(line(s.points, "raw"));
          g.append(line(smooth(s.points, weight), "smoothed"));
        } else {
          g.append(line(s.points, "line"));
        }
      }
      if (opts.scatter || s.points.length <= 300) {
        for (const p of s.points) {
          if (!inX(p)) continue;
          const c = svg("circle", { class: "pt", cx: xs.px(p[0]), cy: ys.px(p[1]), r: opts.scatter ? 3.5 : 2.2 });
          c.append(svg("title", {}, (p[2] ? p[2] + ": " : "") + fmtNum(p[0]) + ", " + fmtNum(p[1])));
          g.append(c);
        }
      }
      plot.append(g);
      if (clean.length > 1) {
        // The name in the text colour (readable), its line's colour in a swatch.
        legend.append(svg("rect", { x: W - R - 8, y: 5 + i * 11, width: 8, height: 8, class: "swatch " + cls }));
        legend.append(svg("text", { x: W - R - 11, y: 12 + i * 11, "text-anchor": "end" }, s.name));
      }
    });
    root.append(plot);
    if (opts.highlight && inX(opts.highlight)) {
      root.append(svg("circle", { class: "best", cx: xs.px(opts.highlight[0]), cy: ys.px(opts.highlight[1]), r: 6 }));
    }
    root.append(legend);
    const cursor = svg("line", { class: "cursor", x1: 0, x2: 0, y1: T, y2: H - B, visibility: "hidden" });
    const brush = svg("rect", { class: "brush", x: 0, y: T, width: 0, height: H - T - B, visibility: "hidden" });
    root.append(cursor, brush);
    current = { root, xs, ys, cursor, brush, weight };
    return root;
  }

  // `fraction`: with milliseconds, for ticks less than a second apart.
  function xLabel(v, fraction) {
    if (opts.xTime) return timeLabel(v, fraction);
    if (opts.xRelative) return fmtDuration(v);
    return fmtNum(v);
  }

  function redraw() {
    const old = current && current.root;
    const root = draw();
    if (old) old.replaceWith(root);
    else box.prepend(root);
  }

  // The mouse's position in chart units (the viewBox), from a pointer event.
  function local(ev) {
    const r = current.root.getBoundingClientRect();
    return [((ev.clientX - r.left) / r.width) * W, ((ev.clientY - r.top) / r.height) * H];
  }

  function hover(px, py) {
    const { xs, ys, cursor, weight } = current;
    const x = xs.inv(px);
    const rows = [];
    if (opts.scatter) {
      let best = null;
      for (const s of clean) for (const p of s.points) {
        const d = Math.hypot(xs.px(p[0]) - px, ys.px(p[1]) - py);
        if (!best || d < best.d) best = { d, p, s };
      }
      if (!best || best.d > 20) return hideTip();
      rows.push((best.p[2] ? best.p[2] + " · " : "") + (opts.xLabel || "x") + " " + fmtNum(best.p[0]) + " → " + fmtNum(best.p[1]));
    } else {
      let at = null;
      clean.forEach((s, i) => {
        if (!s.points.length) return;
        const k = nearest(s.points, x);
        const p = s.points[k];
        if (at === null || Math.abs(p[0] - x) < Math.abs(at - x)) at = p[0];
        const sm = weight > 0 ? smooth(s.points.slice(0, k + 1), weight)[k][1] : null;
        rows.push(el("div", { class: "tip-row c" + (i % 8) }, s.name + ": " + fmtNum(p[1]) +
          (sm !== null ? " (smoothed " + fmtNum(sm) + ")" : "")));
      });
      if (at === null) return hideTip();
      rows.unshift(el("div", { class: "tip-x" }, (opts.xLabel || "x") + " " + xLabel(at)));
      cursor.setAttribute("x1", xs.px(at));
      cursor.setAttribute("x2", xs.px(at));
      cursor.setAttribute("visibility", "visible");
    }
    tip.replaceChildren(...rows);
    tip.hidden = false;
  }

  function hideTip() {
    tip.hidden = true;
    if (current) current.cursor.setAttribute("visibility", "hidden");
  }

  function zoomTo(xr, yr) {
    view.x = xr;
    view.y = yr;
    redraw();
  }

  // Shifts the x domain by `frac` of its width, or scales it by `factor` about its middle.
  function moveX(frac, factor) {
    const { xs } = current;
    const f = xs.log ? Math.log10 : (v) => v;
    const g = xs.log ? (u) => Math.pow(10, u) : (u) => u;
    const a = f(xs.lo), b = f(xs.hi), w = b - a, mid = (a + b) / 2;
    const half = (w / 2) * (factor || 1);
    zoomTo([g(mid - half + frac * w), g(mid + half + frac * w)], view.y);
  }

  let drag = null;
  box.addEventListener("pointerdown", (ev) => {
    if (!all.length || ev.button !== 0) return;
    const [px, py] = local(ev);
    if (px < L || px > W - R || py < T || py > H - B) return;
    ev.preventDefault();
    box.setPointerCapture(ev.pointerId); // the release reaches us even outside the chart
    drag = { px, py, pan: ev.shiftKey, xs: current.xs, ys: current.ys };
  });
  box.addEventListener("pointermove", (ev) => {
    if (!all.length || !current) return;
    const [px, py] = local(ev);
    if (!drag) return px >= L && px <= W - R ? hover(px, py) : hideTip();
    if (drag.pan) {
      const dx = drag.xs.inv(drag.px) - drag.xs.inv(px);
      const dy = drag.ys.inv(drag.py) - drag.ys.inv(py);
      const sx = drag.xs.log ? (v) => v * (drag.xs.inv(drag.px) / drag.xs.inv(px)) : (v) => v + dx;
      const sy = drag.ys.log ? (v) => v * (drag.ys.inv(drag.py) / drag.ys.inv(py)) : (v) => v + dy;
      zoomTo([sx(drag.xs.lo), sx(drag.xs.hi)], [sy(drag.ys.lo), sy(drag.ys.hi)]);
      return;
    }
    const b = current.brush;
    const x = Math.max(L, Math.min(W - R, px)), y = Math.max(T, Math.min(H - B, py));
    b.setAttribute("x", Math.min(drag.px, x));
    b.setAttribute("width", Math.abs(x - drag.px));
    b.setAttribute("y", Math.min(drag.py, y));
    b.setAttribute("height", Math.abs(y - drag.py));
    b.setAttribute("visibility", "visible");
  });
  box.addEventListener("pointerup", (ev) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    if (d.pan) return;
    const [px, py] = local(ev);
    const x = Math.max(L, Math.min(W - R, px)), y = Math.max(T, Math.min(H - B, py));
    if (Math.abs(x - d.px) < 4) { // a click, not a drag: nothing to zoom (and no redraw, which would lose a double-click)
      current.brush.setAttribute("visibility", "hidden");
      return;
    }
    const xr = [d.xs.inv(Math.min(x, d.px)), d.xs.inv(Math.max(x, d.px))];
    // A flat drag zooms x only; a box zooms both.
    const yr = Math.abs(y - d.py) < 8 ? view.y : [d.ys.inv(Math.max(y, d.py)), d.ys.inv(Math.min(y, d.py))];
    zoomTo(xr, yr);
  });
  box.addEventListener("pointerleave", hideTip);
  box.addEventListener("pointercancel", () => {
    drag = null;
  });
  box.addEventListener("dblclick", () => zoomTo(null, null));
  box.addEventListener("keydown", (ev) => {
    if (!all.length) return;
    const keys = {
      ArrowLeft: () => moveX(-0.1), ArrowRight: () => moveX(0.1),
      "+": () => moveX(0, 0.5), "=": () => moveX(0, 0.5), "-": () => moveX(0, 2),
      0: () => zoomTo(null, null),
    };
    if (keys[ev.key]) {
      ev.preventDefault();
      keys[ev.key]();
    }
  });

  redraw();
  box.append(tip);
  return box;
}
