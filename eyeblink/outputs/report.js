/* eyeblink report viewer: plain JavaScript, no libraries, inlined into <stem>.report.html.
 *
 * The data block (#report-data, written by eyeblink/outputs/report.py) holds:
 *   t        float64 seconds on the session's clock, one per frames.csv row (base64, little-endian): the
 *            exact timestamps of frames.csv, so a time the page saves is the file's own
 *   frameRuns  [row, frame] where a run of consecutive frame numbers starts (frame = its frame + rows since)
 *   series   per trace: uint16 codes (value = lo + code * step; 65535 = no value) and a pyramid of
 *            min/max envelopes over buckets of 16, 64, 256, ... samples
 *   blinks, trials, noFace, gaps, crops   the markers and tables
 * Drawing a view reads at most a few buckets per pixel column from the coarsest level that still
 * resolves the view, so a 600,000-frame session pans and zooms as fast as a short one.
 */
(function () {
  "use strict";
  var MISSING = 65535;
  var status = document.getElementById("status");
  window.addEventListener("error", function (e) {
    status.setAttribute("data-ok", "0");
    status.setAttribute("data-error", String(e.message));
  });

  // ------------------------------------------------------------------ data
  function bytes(b64) {
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out.buffer;
  }
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var TABS = new Float64Array(bytes(D.t)), t0abs = D.t0;
  var N = TABS.length;
  var T = new Float64Array(N);  // seconds from the first frame, for drawing
  for (var ti = 0; ti < N; ti++) T[ti] = TABS[ti] - t0abs;
  var RUNS = D.frameRuns && D.frameRuns.length ? D.frameRuns : [[0, 0]];
  function runAt(i) {  // the last run starting at or before row i
    var a = 0, b = RUNS.length - 1;
    while (a < b) { var m = (a + b + 1) >> 1; if (RUNS[m][0] <= i) a = m; else b = m - 1; }
    return RUNS[a];
  }
  // the frame number of row i, and the row of frame f (the first row at or after it)
  function frameOf(i) { var r = runAt(i); return r[1] + (i - r[0]); }
  function rowOfFrame(f) {
    var a = 0, b = N;
    while (a < b) { var m = (a + b) >> 1; if (frameOf(m) < f) a = m + 1; else b = m; }
    return Math.min(a, N - 1);
  }
  // the row nearest to t (seconds from the first frame)
  function nearestRow(t) {
    var i = Math.min(N - 1, lowerBound(t));
    if (i > 0 && t - T[i - 1] < T[i] - t) i--;
    return i;
  }
  var SPAN = N > 1 ? T[N - 1] : 1;
  var series = D.series.map(function (s) {
    return {
      name: s.name, label: s.label, panel: s.panel, lo: s.lo, step: s.step,
      raw: new Uint16Array(bytes(s.raw)),
      levels: s.levels.map(function (l) {
        return { bucket: l.bucket, min: new Uint16Array(bytes(l.min)), max: new Uint16Array(bytes(l.max)) };
      }),
      value: function (code) { return code === MISSING ? NaN : this.lo + code * this.step; }
    };
  });
  var COLORS = { ear_left: "#1f77b4", ear_right: "#d62728", closure: "#2b2b2b" };
  // the two eyes overlap: draw them slightly transparent so neither hides the other
  var STROKES = { ear_left: "rgba(31,119,180,0.85)", ear_right: "rgba(214,39,40,0.65)", closure: "#2b2b2b" };
  function rowsOf(cols, rows) {
    return rows.map(function (r) { var o = {}; cols.forEach(function (c, i) { o[c] = r[i]; }); return o; });
  }
  var blinks = rowsOf(D.blinkColumns, D.blinks);
  var trials = rowsOf(D.trialColumns, D.trials);
  trials.forEach(function (tr, i) { tr.cs_duration_ms = D.csDurationMs[i]; });
  // the review: a decision per automatic blink, added events, excluded spans and trials (absolute seconds)
  var R = D.review || {};
  var review = {
    decisions: (R.decisions || []).slice(0, blinks.length),
    added: (R.added || []).map(function (x) {
      return { start_s: x.start_s, end_s: x.end_s, start_frame: x.start_frame, end_frame: x.end_frame, kind: x.kind || "blink" };
    }),
    excluded: (R.excluded || []).map(function (x) { return { start_s: x.start_s, end_s: x.end_s, reason: x.reason || "" }; }),
    excludedTrials: new Set(R.excludedTrials || []),
    unmatched: R.unmatched || [],
    dirty: false
  };
  while (review.decisions.length < blinks.length) review.decisions.push(null);
  var INTERVAL = D.interval || 0.002;
  var MEASURES = ["peak_s", "amplitude", "amplitude_left", "amplitude_right", "min_ear", "baseline_ear", "partial", "cue"];
  var events = [];  // the review's events (rebuildEvents): the blink table's rows, in time order

  // first index with T[i] >= t
  function lowerBound(t) {
    var a = 0, b = N;
    while (a < b) { var m = (a + b) >> 1; if (T[m] < t) a = m + 1; else b = m; }
    return a;
  }

  // ------------------------------------------------------------------ formatting
  function niceStep(span, target) {
    var raw = span / Math.max(1, target), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
  }
  function fmtTime(sec, step) {
    var d = Math.max(0, Math.min(4, -Math.floor(Math.log10(step || 1) + 1e-9)));
    if (SPAN < 120) return sec.toFixed(d) + " s";
    var sign = sec < 0 ? "−" : "", a = Math.abs(sec), m = Math.floor(a / 60), ss = (a - 60 * m).toFixed(d);
    if (a - 60 * m < 10) ss = "0" + ss;
    return sign + m + ":" + ss;
  }
  function fmt(v, d) {
    if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return "–";
    if (typeof v !== "number") return String(v);
    return d === undefined ? String(v) : v.toFixed(d);
  }

  // an element whose content is text (a string: set as text, never parsed as markup), a node, or a list of both
  function el(tag, cls, content) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (content === undefined || content === null) return e;
    (Array.isArray(content) ? content : [content]).forEach(function (c) {
      e.appendChild(typeof c === "object" && c !== null && c.nodeType ? c : document.createTextNode(String(c)));
    });
    return e;
  }

  // ------------------------------------------------------------------ trace view
  var canvas = document.getElementById("trace");
  var ctx = canvas.getContext("2d");
  var M = { left: 58, right: 14, top: 34, bottom: 26, gap: 16 };
  var panels = [];   // {name, label, y0, y1, lo, hi}
  var view = { t0: 0, t1: SPAN, selRef: null, selTrial: null, hover: null, sel: null };
  var minSpan = Math.max(0.02, 20 * (D.interval || 0.002));

  function panelRanges() {
    var out = [];
    var hasEar = series.some(function (s) { return s.panel === "ear"; });
    var hasClosure = series.some(function (s) { return s.panel === "closure"; });
    function robust(names, lowFloor, highFloor) {
      var hi = -Infinity, lo = Infinity;
      series.forEach(function (s) {
        if (names.indexOf(s.name) < 0) return;
        var top = s.levels[s.levels.length - 1];
        for (var i = 0; i < top.max.length; i++) {
          if (top.max[i] !== MISSING) hi = Math.max(hi, s.value(top.max[i]));
          if (top.min[i] !== MISSING) lo = Math.min(lo, s.value(top.min[i]));
        }
      });
      return [Math.min(lowFloor, lo), Math.max(highFloor, hi)];
    }
    if (hasEar) {
      var r = robust(["ear_left", "ear_right"], 0, 0.05);
      out.push({ name: "ear", label: "eye openness (ear: lid distance / eye width)", lo: 0, hi: Math.min(r[1] * 1.08, 1.0), weight: 3 });
    }
    if (hasClosure) {
      var c = robust(["closure"], -0.1, 1.1);
      out.push({ name: "closure", label: "closure (FEC: 0 open, 1 closed)", lo: Math.max(c[0], -0.5),
                 hi: Math.min(c[1], 1.6), weight: 2, invert: false });
    }
    return out;
  }
  var panelDefs = panelRanges();

  function layout() {
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth, h = canvas.clientHeight;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var usable = h - M.top - M.bottom - M.gap * (panelDefs.length - 1);
    var total = panelDefs.reduce(function (a, p) { return a + p.weight; }, 0);
    var y = M.top;
    panels = panelDefs.map(function (p) {
      var hh = usable * p.weight / total;
      var out = { name: p.name, label: p.label, lo: p.lo, hi: p.hi, y0: y, y1: y + hh };
      y += hh + M.gap;
      return out;
    });
  }
  function plotW() { return canvas.clientWidth - M.left - M.right; }
  function xOf(t) { return M.left + (t - view.t0) / (view.t1 - view.t0) * plotW(); }
  function tOf(x) { return view.t0 + (x - M.left) / plotW() * (view.t1 - view.t0); }
  function yOf(p, v) { return p.y1 - (v - p.lo) / (p.hi - p.lo) * (p.y1 - p.y0); }

  // min/max per pixel column of one series over the view, from the coarsest sufficient pyramid level
  function envelope(s, i0, i1, W) {
    var n = i1 - i0, lvl = null;
    for (var k = s.levels.length - 1; k >= 0; k--) {
      if (n / s.levels[k].bucket >= 2 * W) { lvl = s.levels[k]; break; }
    }
    var mn = new Float32Array(W).fill(NaN), mx = new Float32Array(W).fill(NaN);
    var b = lvl ? lvl.bucket : 1, lo = lvl ? lvl.min : s.raw, hi = lvl ? lvl.max : s.raw;
    var scale = W / (view.t1 - view.t0);
    for (var j = Math.floor(i0 / b); j * b < i1; j++) {
      var c = Math.floor((T[j * b] - view.t0) * scale);
      if (c < 0) c = 0; else if (c >= W) c = W - 1;
      if (hi[j] === MISSING) continue;
      var a = s.value(lo[j]), z = s.value(hi[j]);
      if (!(mn[c] <= a)) mn[c] = a;
      if (!(mx[c] >= z)) mx[c] = z;
    }
    return { min: mn, max: mx, bucket: b };
  }

  function drawSeries(s, p, i0, i1) {
    var W = Math.max(1, Math.floor(plotW())), n = i1 - i0;
    ctx.strokeStyle = STROKES[s.name] || "#444";
    ctx.lineWidth = 1.25;
    ctx.beginPath();
    if (n <= 2 * W) { // few samples: a line through them, broken where a value or frames are missing
      var pen = false, gapT = 1.5 * (D.interval || 0.002), prevT = -Infinity;
      var lo = Math.max(0, i0 - 1), hi = Math.min(N, i1 + 1), dots = W / Math.max(1, n) > 6;
      for (var i = lo; i < hi; i++) {
        var v = s.value(s.raw[i]);
        if (!isFinite(v)) { pen = false; continue; }
        var x = xOf(T[i]), y = yOf(p, v);
        if (pen && T[i] - prevT <= gapT) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        if (dots) { ctx.moveTo(x + 1.6, y); ctx.arc(x, y, 1.6, 0, 2 * Math.PI); ctx.moveTo(x, y); }
        pen = true; prevT = T[i];
      }
    } else {          // many samples: the min/max envelope, one zigzag per pixel column
      var e = envelope(s, i0, i1, W), on = false;
      for (var c = 0; c < W; c++) {
        if (isNaN(e.max[c])) { on = false; continue; }
        var xc = M.left + c + 0.5;
        if (!on) ctx.moveTo(xc, yOf(p, e.max[c])); else ctx.lineTo(xc, yOf(p, e.max[c]));
        ctx.lineTo(xc, yOf(p, e.min[c]));
        on = true;
      }
    }
    ctx.stroke();
  }

  function spans(list, t0key, t1key, fill, y0, y1, minW) {
    list.forEach(function (o) {
      var a = o[t0key], b = o[t1key];
      if (b < view.t0 || a > view.t1) return;
      var xa = xOf(a), xb = Math.max(xOf(b), xa + (minW || 1));
      ctx.fillStyle = typeof fill === "function" ? fill(o) : fill;
      ctx.fillRect(xa, y0, xb - xa, y1 - y0);
    });
  }

  function drawMarkers() {
    var top = panels[0].y0, bottom = panels[panels.length - 1].y1;
    // trials: CS duration band and CS / US lines
    trials.forEach(function (tr, k) {
      var cs = tr.cs_onset_s - t0abs, us = tr.us_onset_s - t0abs;
      if (!isFinite(cs)) return;
      var csEnd = cs + (tr.cs_duration_ms ? tr.cs_duration_ms / 1000 : 0);
      if (Math.max(csEnd, isFinite(us) ? us : cs) < view.t0 || cs > view.t1) return;
      ctx.fillStyle = "rgba(30, 136, 229, 0.10)";
      if (csEnd > cs) ctx.fillRect(xOf(cs), top, xOf(csEnd) - xOf(cs), bottom - top);
      if (csEnd > cs) {
        ctx.fillStyle = k === view.selTrial ? "rgba(30,136,229,0.9)" : "rgba(30,136,229,0.6)";
        ctx.fillRect(xOf(cs), 4, xOf(csEnd) - xOf(cs), 9);
      }
      line(cs, "#1e88e5", top, bottom, []);
      label("CS" + (tr.trial !== null ? " " + tr.trial : ""), xOf(cs) + 3, 12, "#1e88e5", "left");
      if (isFinite(us)) {
        line(us, "#7b1fa2", 2, bottom, [4, 3]);
        label("US", xOf(us) + 3, 12, "#7b1fa2", "left");
      }
    });
    // events: numbered bands (the number blinks.csv gives them); what the review took away, a grey band
    events.forEach(function (e) {
      var sel = e.ref === view.selRef;
      if (e.source === "corrected" || e.source === "rejected") {  // where the detector had it
        var ra = e.autoStart - t0abs, rz = e.autoEnd - t0abs;
        if (!(rz < view.t0 || ra > view.t1)) {
          ctx.fillStyle = "rgba(120, 120, 120, 0.10)";
          ctx.fillRect(xOf(ra), top, Math.max(xOf(rz), xOf(ra) + 1.5) - xOf(ra), bottom - top);
        }
      }
      if (e.source === "rejected") {
        if (!(rz < view.t0 || ra > view.t1)) placeLabel("✕", (xOf(ra) + xOf(rz)) / 2, "#777");
        return;
      }
      var a = e.start_s - t0abs, z = e.end_s - t0abs;
      if (z < view.t0 || a > view.t1) return;
      var xa = xOf(a), xz = Math.max(xOf(z), xa + 1.5);
      var pc = e.kind === "prolonged_closure";  // a closure longer than max_blink_ms: not a blink, marked apart
      var fill, bar, text;
      if (e.source === "added") { fill = sel ? "rgba(46, 160, 67, 0.38)" : "rgba(46, 160, 67, 0.25)"; bar = text = "#2e7d32"; }
      else if (e.source === "corrected") { fill = sel ? "rgba(123, 31, 162, 0.30)" : "rgba(123, 31, 162, 0.18)"; bar = text = "#7b1fa2"; }
      else if (pc) { fill = sel ? "rgba(106, 27, 154, 0.30)" : "rgba(106, 27, 154, 0.18)"; bar = text = "#6a1b9a"; }
      else { fill = sel ? "rgba(255, 140, 0, 0.30)" : "rgba(255, 170, 0, 0.22)"; bar = sel ? "#e65100" : "#f0a000"; text = "#b26a00"; }
      ctx.fillStyle = fill;
      ctx.fillRect(xa, top, xz - xa, bottom - top);
      ctx.fillStyle = bar;
      ctx.fillRect(xa, 17, xz - xa, 3);
      if (e.source === "accepted" || e.source === "corrected") { ctx.fillStyle = "#2e7d32"; ctx.fillRect(xa, 21, xz - xa, 3); }
      var name = e.number === null ? "–" : String(e.number);
      placeLabel((pc ? "closure " : "") + (e.excluded ? "(" + name + ")" : name), (xa + xz) / 2, text);
    });
    drawReview(top, bottom);
    // frames without a face: grey bands; dropped/damaged frames: magenta lines
    spans(D.noFace.map(function (r) { return { a: r[0], b: r[1] }; }), "a", "b", "rgba(110, 110, 130, 0.20)",
          top, bottom, 1);
    D.noFace.forEach(function (r) {
      if (r[1] < view.t0 || r[0] > view.t1) return;
      var xa = Math.max(xOf(r[0]), M.left), xb = Math.min(xOf(r[1]), M.left + plotW());
      if (xb - xa > 48) label("no face", (xa + xb) / 2, bottom - 4, "#555", "center");
    });
    D.gaps.forEach(function (g) {
      if (g[1] < view.t0 || g[0] > view.t1) return;
      var xa = xOf(g[0]), xb = xOf(g[1]);
      ctx.fillStyle = "rgba(194, 24, 91, 0.16)";
      ctx.fillRect(xa, top, Math.max(1, xb - xa), bottom - top);
      line((g[0] + g[1]) / 2, "#c2185b", top, bottom, [2, 2]);
      var txt = g[2] < 0 ? "dup. time" : (g[2] > 0 ? "−" + g[2] + " fr" : "gap");
      if (visibleGaps < 40) placeLabel(txt, (xa + xb) / 2, "#c2185b");
    });
  }
  var visibleBlinks = 0, visibleGaps = 0;
  // the labels above the trace: each on the first of two rows where it overlaps none drawn, else left out
  // (never printed over another); what was drawn is listed for scripts (status data-labels)
  var LABEL_ROWS = [31, 45], placed = [];
  function placeLabel(text, x, color) {
    ctx.font = "11px system-ui, sans-serif";
    var w = ctx.measureText(text).width, x0 = x - w / 2 - 2, x1 = x + w / 2 + 2;
    if (x1 < M.left || x0 > M.left + plotW()) return false;
    for (var r = 0; r < LABEL_ROWS.length; r++) {
      var y = LABEL_ROWS[r];
      if (placed.some(function (p) { return p.y === y && x0 < p.x1 && p.x0 < x1; })) continue;
      if (r > 0) { ctx.fillStyle = "rgba(255,255,255,0.8)"; ctx.fillRect(x0, y - 10, x1 - x0, 13); }
      label(text, x, y, color, "center");
      placed.push({ x0: x0, x1: x1, y: y, text: text });
      return true;
    }
    return false;
  }

  function line(t, color, y0, y1, dash) {
    var x = Math.round(xOf(t)) + 0.5;
    ctx.save(); ctx.strokeStyle = color; ctx.setLineDash(dash); ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x, y0); ctx.lineTo(x, y1); ctx.stroke(); ctx.restore();
  }
  function label(text, x, y, color, align) {
    ctx.fillStyle = color; ctx.textAlign = align; ctx.font = "11px system-ui, sans-serif";
    ctx.fillText(text, x, y);
  }

  function drawAxes() {
    var W = plotW(), span = view.t1 - view.t0, step = niceStep(span, W / 110);
    var bottom = panels[panels.length - 1].y1;
    ctx.font = "11px system-ui, sans-serif";
    for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1 + 1e-9; t += step) {
      var x = Math.round(xOf(t)) + 0.5;
      ctx.strokeStyle = "#eceff3"; ctx.beginPath();
      panels.forEach(function (p) { ctx.moveTo(x, p.y0); ctx.lineTo(x, p.y1); });
      ctx.stroke();
      ctx.strokeStyle = "#999"; ctx.beginPath(); ctx.moveTo(x, bottom); ctx.lineTo(x, bottom + 4); ctx.stroke();
      label(fmtTime(t, step), x, bottom + 16, "#555", "center");
    }
    panels.forEach(function (p) {
      var ys = niceStep(p.hi - p.lo, (p.y1 - p.y0) / 40);
      for (var v = Math.ceil(p.lo / ys) * ys; v <= p.hi + 1e-9; v += ys) {
        var y = Math.round(yOf(p, v)) + 0.5;
        ctx.strokeStyle = Math.abs(v) < 1e-9 ? "#c9ced6" : "#eceff3";
        ctx.beginPath(); ctx.moveTo(M.left, y); ctx.lineTo(M.left + W, y); ctx.stroke();
        label(v.toFixed(ys < 0.1 ? 2 : 1), M.left - 6, y + 4, "#555", "right");
      }
      ctx.strokeStyle = "#c9ced6"; ctx.strokeRect(M.left + 0.5, p.y0 + 0.5, W - 1, p.y1 - p.y0 - 1);
    });
  }

  function drawPanelLabels() {
    panels.forEach(function (p) {
      ctx.font = "600 11px system-ui, sans-serif";
      var w = ctx.measureText(p.label).width;
      ctx.fillStyle = "rgba(255,255,255,0.85)"; ctx.fillRect(M.left + 4, p.y0 + 3, w + 8, 15);
      ctx.fillStyle = "#333"; ctx.textAlign = "left"; ctx.fillText(p.label, M.left + 8, p.y0 + 14);
    });
  }

  function draw() {
    pending = false;
    var w = canvas.clientWidth, h = canvas.clientHeight;
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    if (!panels.length) {  // no frames, or no eye measured in any: say so instead of drawing empty axes
      ctx.fillStyle = "#555"; ctx.font = "15px sans-serif"; ctx.textAlign = "center";
      ctx.fillText(N ? "No eye openness to draw: no frame of this session has a measured eye"
                     : "No frames to draw: frames.csv has no rows", w / 2, h / 2);
      document.getElementById("view-range").textContent = N.toLocaleString() + " frames";
      return;
    }
    var i0 = lowerBound(view.t0), i1 = Math.min(N, lowerBound(view.t1) + 1);
    visibleBlinks = events.filter(function (e) { return e.end_s - t0abs >= view.t0 && e.start_s - t0abs <= view.t1; }).length;
    visibleGaps = D.gaps.filter(function (g) { return g[1] >= view.t0 && g[0] <= view.t1; }).length;
    drawAxes();
    ctx.save();
    ctx.beginPath(); ctx.rect(M.left, 0, plotW(), h); ctx.clip();
    placed = [];
    drawMarkers();
    status.setAttribute("data-labels", JSON.stringify(placed.map(function (p) {
      return [Math.round(p.x0 * 10) / 10, Math.round(p.x1 * 10) / 10, p.y, p.text]; })));
    panels.forEach(function (p) {
      ctx.save();
      ctx.beginPath(); ctx.rect(M.left, p.y0, plotW(), p.y1 - p.y0); ctx.clip();
      series.forEach(function (s) { if (s.panel === p.name) drawSeries(s, p, i0, i1); });
      ctx.restore();
    });
    drawHover();
    ctx.restore();
    drawPanelLabels();
    // where the view is (seconds from the first frame; the plot's left edge and width in CSS pixels), for scripts
    status.setAttribute("data-view", [view.t0, view.t1, M.left, plotW()].join(","));
    var range = document.getElementById("view-range");
    range.textContent = fmtTime(view.t0, (view.t1 - view.t0) / 100) + " – " + fmtTime(view.t1, (view.t1 - view.t0) / 100) +
      "  (" + (i1 - i0).toLocaleString() + " frames in view, " + visibleBlinks + (visibleBlinks === 1 ? " blink)" : " blinks)");
    drawOverview();
  }
  var pending = false;
  function redraw() { if (!pending) { pending = true; window.requestAnimationFrame(draw); } }

  function drawHover() {
    if (cursor.row !== null && panels.length) {  // the cursor: the frame the eyes' video shows
      var xc = Math.round(xOf(T[cursor.row])) + 0.5;
      ctx.save(); ctx.strokeStyle = "#111"; ctx.lineWidth = 1.5; ctx.setLineDash([]); ctx.beginPath();
      ctx.moveTo(xc, panels[0].y0); ctx.lineTo(xc, panels[panels.length - 1].y1); ctx.stroke(); ctx.restore();
    }
    if (view.hover === null || !panels.length) return;
    var x = xOf(view.hover);
    ctx.strokeStyle = "rgba(0,0,0,0.35)"; ctx.setLineDash([]); ctx.beginPath();
    ctx.moveTo(Math.round(x) + 0.5, panels[0].y0); ctx.lineTo(Math.round(x) + 0.5, panels[panels.length - 1].y1);
    ctx.stroke();
  }

  function setView(a, b) {
    var span = Math.min(Math.max(b - a, minSpan), SPAN * 1.02 + minSpan);
    var mid = (a + b) / 2;
    a = mid - span / 2; b = mid + span / 2;
    var pad = SPAN * 0.01;
    if (a < -pad) { b += -pad - a; a = -pad; }
    if (b > SPAN + pad) { a -= b - SPAN - pad; b = SPAN + pad; }
    view.t0 = a; view.t1 = b;
    // at once, not at the next drawing: a script that reads the view right after a key reads this one
    status.setAttribute("data-view", [view.t0, view.t1, M.left, plotW()].join(","));
    redraw();
  }
  function zoom(factor, at) {
    var c = at === undefined ? (view.t0 + view.t1) / 2 : at;
    setView(c - (c - view.t0) * factor, c + (view.t1 - c) * factor);
  }
  function pan(frac) { var d = (view.t1 - view.t0) * frac; setView(view.t0 + d, view.t1 + d); }
  function whole() { setView(-SPAN * 0.01, SPAN * 1.01); }

  // ------------------------------------------------------------------ overview strip
  var ov = document.getElementById("overview"), octx = ov.getContext("2d");
  var ovSeries = series.filter(function (s) { return s.panel === "closure"; })[0] || series[0];
  function drawOverview() {
    var dpr = window.devicePixelRatio || 1, w = ov.clientWidth, h = ov.clientHeight;
    if (ov.width !== Math.round(w * dpr)) { ov.width = Math.round(w * dpr); ov.height = Math.round(h * dpr); }
    octx.setTransform(dpr, 0, 0, dpr, 0, 0);
    octx.fillStyle = "#fafbfc"; octx.fillRect(0, 0, w, h);
    var W = w - M.left - M.right, sx = W / SPAN;
    D.noFace.forEach(function (r) { octx.fillStyle = "rgba(110,110,130,0.35)"; octx.fillRect(M.left + r[0] * sx, 0, Math.max(1, (r[1] - r[0]) * sx), h); });
    events.forEach(function (e) {
      if (!e.kept) return;
      octx.fillStyle = e.source === "added" ? "#2e7d32" : "rgba(240,160,0,0.9)";
      octx.fillRect(M.left + (e.start_s - t0abs) * sx, 0, Math.max(1.5, (e.end_s - e.start_s) * sx), 6);
    });
    D.gaps.forEach(function (g) { octx.fillStyle = "#c2185b"; octx.fillRect(M.left + g[0] * sx, h - 6, 1.5, 6); });
    trials.forEach(function (tr) { octx.fillStyle = "#1e88e5"; octx.fillRect(M.left + (tr.cs_onset_s - t0abs) * sx, 6, 1, 4); });
    if (ovSeries) {
      var saved = { t0: view.t0, t1: view.t1 };
      view.t0 = 0; view.t1 = SPAN;
      var e = envelope(ovSeries, 0, N, Math.max(1, Math.floor(W)));
      view.t0 = saved.t0; view.t1 = saved.t1;
      var lo = ovSeries.panel === "closure" ? -0.1 : 0, hi = ovSeries.panel === "closure" ? 1.2 : 0.45;
      octx.strokeStyle = "#555"; octx.lineWidth = 1; octx.beginPath();
      for (var c = 0; c < e.max.length; c++) {
        if (isNaN(e.max[c])) continue;
        var y0 = 8 + (h - 14) * (1 - (e.max[c] - lo) / (hi - lo)), y1 = 8 + (h - 14) * (1 - (e.min[c] - lo) / (hi - lo));
        octx.moveTo(M.left + c + 0.5, y0); octx.lineTo(M.left + c + 0.5, Math.max(y1, y0 + 1));
      }
      octx.stroke();
    }
    var xa = M.left + Math.max(0, view.t0) * sx, xb = M.left + Math.min(SPAN, view.t1) * sx;
    octx.fillStyle = "rgba(31,119,180,0.12)"; octx.fillRect(xa, 0, Math.max(2, xb - xa), h);
    octx.strokeStyle = "#1f77b4"; octx.lineWidth = 1.5; octx.strokeRect(xa, 0.75, Math.max(2, xb - xa), h - 1.5);
    octx.fillStyle = "#888"; octx.font = "10px system-ui, sans-serif"; octx.textAlign = "right";
    octx.fillText("overview", M.left - 6, h / 2 + 3);
  }
  function ovTime(ev) {
    var r = ov.getBoundingClientRect();
    return (ev.clientX - r.left - M.left) / (r.width - M.left - M.right) * SPAN;
  }
  var ovDrag = false;
  ov.addEventListener("mousedown", function (ev) {
    ovDrag = true; var c = ovTime(ev), s = view.t1 - view.t0; setView(c - s / 2, c + s / 2);
  });
  window.addEventListener("mousemove", function (ev) {
    if (ovDrag) { var c = ovTime(ev), s = view.t1 - view.t0; setView(c - s / 2, c + s / 2); }
  });
  window.addEventListener("mouseup", function () { ovDrag = false; });

  // ------------------------------------------------------------------ trace interactions
  var drag = null;
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = canvas.getBoundingClientRect();
    zoom(Math.exp(ev.deltaY * 0.0015), tOf(ev.clientX - r.left));
  }, { passive: false });
  canvas.addEventListener("mousedown", function (ev) {
    var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left;
    var edge = edgeAt(x);
    if (edge) {                 // the selected blink's onset or end: drag it to retime the blink
      drag = { edge: edge, moved: false, x: ev.clientX };
    } else if (ev.shiftKey) {   // shift + drag: select a span (to add a blink or closure, or exclude it)
      var t = tOf(x);
      drag = { select: true, a: t, moved: false, x: ev.clientX };
      view.sel = { a: t, b: t };
      redraw();
    } else {
      drag = { x: ev.clientX, t0: view.t0, t1: view.t1, moved: false };
    }
    canvas.classList.add("dragging");
  });
  window.addEventListener("mousemove", function (ev) {
    var r = canvas.getBoundingClientRect();
    if (drag) {
      var dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.edge) {
        drag.edge.t = tOf(ev.clientX - r.left);
        redraw();
      } else if (drag.select) {
        view.sel.b = tOf(ev.clientX - r.left);
        redraw();
      } else {
        var dt = -dx / plotW() * (drag.t1 - drag.t0);
        setView(drag.t0 + dt, drag.t1 + dt);
      }
    }
    var x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (x >= M.left && x <= r.width - M.right && y >= 0 && y <= r.height) { showReadout(tOf(x)); }
    else if (view.hover !== null) { view.hover = null; readout.hidden = true; redraw(); }
  });
  window.addEventListener("mouseup", function (ev) {
    if (!drag) return;
    canvas.classList.remove("dragging");
    var d = drag, click = !drag.moved;
    drag = null;
    if (d.edge) { if (d.moved) finishRetime(d.edge); return; }
    if (d.select) {
      var a = Math.min(view.sel.a, view.sel.b), b = Math.max(view.sel.a, view.sel.b);
      view.sel = b - a > 0.5 * (D.interval || 0.002) ? { a: a, b: b } : null;
      showSelection();
      redraw();
      return;
    }
    if (!click) return;
    var r = canvas.getBoundingClientRect(), t = tOf(ev.clientX - r.left) + t0abs;
    if (N) setCursor(nearestRow(t - t0abs), false);  // a click seeks: the cursor (and the eyes' video) to that frame
    for (var k = 0; k < events.length; k++) {
      var e = events[k], a = e.source === "rejected" ? e.autoStart : e.start_s, z = e.source === "rejected" ? e.autoEnd : e.end_s;
      if (a <= t && t <= z) { selectEvent(e, false, true); return; }
    }
  });
  var readout = document.getElementById("readout");
  function showReadout(t) {
    view.hover = t;
    var i = nearestRow(t);
    var lines = ["t " + fmtTime(T[i], 0.001) + "   frame " + frameOf(i).toLocaleString()];
    series.forEach(function (s) { lines.push(s.label + "  " + fmt(s.value(s.raw[i]), 3)); });
    readout.textContent = lines.join("\n");
    readout.hidden = false;
    redraw();
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "TEXTAREA")) return;
    var k = ev.key;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (reviewKey(k)) { ev.preventDefault(); return; }
    if ((k === "," || k === ".") && N) {  // one frame earlier / later
      setCursor(Math.max(0, Math.min(N - 1, (cursor.row === null ? lowerBound(view.t0) : cursor.row + (k === "." ? 1 : -1)))), true);
      ev.preventDefault();
      return;
    }
    if (k === "+" || k === "=") zoom(0.5); else if (k === "-") zoom(2);
    else if (k === "ArrowLeft") pan(-0.25); else if (k === "ArrowRight") pan(0.25);
    else if (k === "0") whole(); else return;
    ev.preventDefault();
  });
  document.getElementById("zoom-in").onclick = function () { zoom(0.5); };
  document.getElementById("zoom-out").onclick = function () { zoom(2); };
  document.getElementById("pan-left").onclick = function () { pan(-0.5); };
  document.getElementById("pan-right").onclick = function () { pan(0.5); };
  document.getElementById("zoom-all").onclick = whole;

  function legend() {
    var items = series.map(function (s) { return [COLORS[s.name], s.label]; });
    items.push(["rgba(255,170,0,0.45)", "blink (numbered)"]);
    items.push(["rgba(110,110,130,0.35)", "no face"]);
    items.push(["#c2185b", "dropped / damaged frames"]);
    items.push(["rgba(46,160,67,0.5)", "added by you"], ["rgba(123,31,162,0.4)", "retimed by you"],
               ["rgba(40,40,40,0.4)", "excluded by you"]);
    if (trials.length) { items.push(["rgba(30,136,229,0.6)", "CS"]); items.push(["#7b1fa2", "US"]); }
    var box = document.getElementById("legend");
    box.textContent = "";
    items.forEach(function (it) {
      var sw = el("span", "sw");
      sw.style.background = it[0];
      box.appendChild(el("span", "", [sw, it[1]]));
    });
  }

  // ------------------------------------------------------------------ tables
  function sortableTable(table, columns, rows, onRow, rowClass) {
    var state = { key: null, dir: 1 };
    function render() {
      var order = rows.map(function (_, i) { return i; });
      if (state.key !== null) {
        var c = columns[state.key];
        order.sort(function (a, b) {
          var va = c.sort ? c.sort(rows[a]) : rows[a][c.key], vb = c.sort ? c.sort(rows[b]) : rows[b][c.key];
          if (va === vb) return a - b;
          if (va === null || va === undefined) return 1;
          if (vb === null || vb === undefined) return -1;
          return (va < vb ? -1 : 1) * state.dir;
        });
      }
      // built as DOM nodes: every cell is text (or a node a column builds), never markup read from a file
      var thead = el("thead"), hr = el("tr");
      columns.forEach(function (c, i) {
        var th = el("th", (c.text ? "text " : "") + (state.key === i ? (state.dir > 0 ? "sorted-asc" : "sorted-desc") : ""),
                    c.label);
        th.setAttribute("data-col", String(i));
        if (c.title) th.title = c.title;
        hr.appendChild(th);
      });
      thead.appendChild(hr);
      var tbody = el("tbody");
      order.forEach(function (i) {
        var tr = el("tr", rowClass ? rowClass(rows[i]) : "");
        tr.setAttribute("data-row", String(i));
        columns.forEach(function (c) { tr.appendChild(el("td", (c.cls || "") + (c.text ? " text" : ""), c.fmt(rows[i]))); });
        tbody.appendChild(tr);
      });
      table.textContent = "";
      table.appendChild(thead);
      table.appendChild(tbody);
    }
    table.addEventListener("click", function (ev) {
      var th = ev.target.closest("th"), tr = ev.target.closest("tbody tr");
      if (th) {
        var k = +th.getAttribute("data-col");
        state.dir = state.key === k ? -state.dir : 1; state.key = k; render();
        table.dispatchEvent(new Event("rendered"));
      } else if (tr) { onRow(+tr.getAttribute("data-row")); }
    });
    render();
    return render;
  }
  function mark(table, k) {
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      tr.classList.toggle("selected", +tr.getAttribute("data-row") === k);
    });
  }
  function num(key, d, unit) {
    return { key: key, label: unit ? key + " " + unit : key, fmt: function (r) { return fmt(r[key], d); } };
  }

  var blinkTable = document.getElementById("blink-table");
  var blinkCols = [
    { key: "blink", label: "#", fmt: function (r) { return fmt(r.blink, 0); } },
    { key: "start_s", label: "start (s)", fmt: function (r) { return fmt(r.start_s, 3); } },
    { key: "peak_s", label: "peak (s)", fmt: function (r) { return fmt(r.peak_s, 3); } },
    { key: "duration_ms", label: "duration (ms)", fmt: function (r) { return fmt(r.duration_ms, 0); } },
    { key: "amplitude", label: "amplitude", title: "1 - min EAR / baseline, both eyes",
      fmt: function (r) { return fmt(r.amplitude, 3); } },
    { key: "amplitude_left", label: "ampl. left", fmt: function (r) { return fmt(r.amplitude_left, 3); } },
    { key: "amplitude_right", label: "ampl. right", fmt: function (r) { return fmt(r.amplitude_right, 3); } },
    { key: "min_ear", label: "min EAR", fmt: function (r) { return fmt(r.min_ear, 3); } },
    { key: "baseline_ear", label: "baseline EAR", fmt: function (r) { return fmt(r.baseline_ear, 3); } },
    { key: "kind", label: "kind", text: true, title: "blink, or prolonged closure (longer than max_blink_ms: not a blink)",
      fmt: function (r) { return r.kind === "prolonged_closure" ? el("span", "err", "prolonged closure") : "blink"; } },
    { key: "cue", label: "eyes", text: true, fmt: function (r) { return fmt(r.cue); } },
    { key: "partial", label: "partial", fmt: function (r) { return r.partial ? "yes" : "no"; } },
    { key: "complete", label: "complete", title: "0: the recording ended or the face was lost during the blink",
      fmt: function (r) { return r.complete ? "yes" : el("span", "err", "no"); } },
    { key: "start_frame", label: "frames", fmt: function (r) { return fmt(r.start_frame, 0) + "–" + fmt(r.end_frame, 0); } }
  ];
  if (D.crops && Object.keys(D.crops).length) {
    // beside the times, so the eye is in view without scrolling the table sideways
    var cropNames = ["onset", "peak", "offset"];
    blinkCols.splice(4, 0, { key: "blink", label: "eyes at onset · peak · offset", text: true, cls: "crops",
      title: "both eyes as the camera saw them (subject's right eye on the left), the fitted eye points drawn",
      sort: function (r) { return r.autoBlink; },
      fmt: function (r) {
        return (r.autoBlink === null ? [] : D.crops[String(r.autoBlink)] || []).map(function (src, i) {
          if (!/^data:image\/(png|jpeg);base64,/.test(src)) return null;  // only images the report itself drew
          var img = el("img");
          img.alt = cropNames[i]; img.title = cropNames[i]; img.src = src;
          return img;
        }).filter(function (img) { return img !== null; });
      } });
  }
  blinkCols.splice(1, 0, { key: "source", label: "review", text: true,
    title: "your decision: accepted, rejected, retimed or added (keys a, r, u, b; [ ] { } or drag the onset or end)",
    fmt: function (r) {
      if (r.excluded) return el("span", "rejected", "in an excluded span");
      if (r.replaced) return el("span", "rejected", "replaced by an added event");
      if (r.source === "auto") return "–";
      if (r.source === "corrected") return el("span", "retimed", "retimed");
      if (r.source === "added") return el("span", "added", r.kind === "prolonged_closure" ? "added closure" : "added");
      return el("span", r.source === "rejected" ? "rejected" : "accepted", r.source);
    } });
  rebuildEvents();
  var renderBlinks = sortableTable(blinkTable, blinkCols, events, function (k) { selectEvent(events[k], true); },
    function (r) { return r.source === "auto" ? "" : "review-" + r.decision; });
  blinkTable.addEventListener("rendered", markSelected);
  function markSelected() {
    blinkTable.querySelectorAll("tbody tr").forEach(function (tr) {
      tr.classList.toggle("selected", events[+tr.getAttribute("data-row")].ref === view.selRef);
    });
  }

  function selectEvent(e, zoomTo, keepCursor) {
    view.selRef = e.ref;
    if (!keepCursor && N && Number.isFinite(e.start_frame)) setCursor(rowOfFrame(e.start_frame), false);  // the eyes at its onset
    if (zoomTo) {
      var a = e.start_s - t0abs, z = e.end_s - t0abs, pad = Math.max(0.4, (z - a) * 1.5);
      setView(a - pad, z + pad);
      document.getElementById("trace-section").scrollIntoView({ block: "nearest" });
    } else {
      redraw();
    }
    markSelected();
    var tr = blinkTable.querySelector("tbody tr.selected");
    if (tr && !zoomTo) tr.scrollIntoView({ block: "nearest" });
    status.setAttribute("data-selected", e.number === null ? "" : String(e.number));
    status.setAttribute("data-selected-frames", e.start_frame + "-" + e.end_frame);
  }
  function selected() {
    for (var i = 0; i < events.length; i++) if (events[i].ref === view.selRef) return events[i];
    return null;
  }

  // ------------------------------------------------------------------ trials
  var trialTable = document.getElementById("trial-table"), renderTrials = null;
  var trialPlot = document.getElementById("trial-plot");
  var closureSeries = series.filter(function (s) { return s.name === "closure"; })[0];
  if (trials.length) {
    var trialCols = [
      { key: "trial", label: "trial", fmt: function (r) { return fmt(r.trial, 0); } },
      { key: "trial_type", label: "type", text: true, fmt: function (r) { return fmt(r.trial_type); } },
      { key: "cs_onset_s", label: "CS (s)", fmt: function (r) { return fmt(r.cs_onset_s, 3); } },
      { key: "isi_ms", label: "ISI (ms)", fmt: function (r) { return fmt(r.isi_ms, 0); } },
      { key: "cr", label: "CR", fmt: function (r) {
          if (!r.baseline_valid) { var ns = el("span", "no", "n/s"); ns.title = "baseline not valid: not scored"; return ns; }
          return r.cr ? el("span", "yes", "yes") : el("span", "no", "no"); } },
      { key: "cr_onset_latency_ms", label: "CR onset (ms)", fmt: function (r) { return fmt(r.cr_onset_latency_ms, 0); } },
      { key: "cr_peak_latency_ms", label: "CR peak (ms)", fmt: function (r) { return fmt(r.cr_peak_latency_ms, 0); } },
      { key: "cr_peak_amplitude", label: "CR peak FEC", fmt: function (r) { return fmt(r.cr_peak_amplitude, 2); } },
      { key: "fec_at_us", label: "FEC at US", fmt: function (r) { return fmt(r.fec_at_us, 2); } },
      { key: "ur_amplitude", label: "UR FEC", fmt: function (r) { return fmt(r.ur_amplitude, 2); } },
      { key: "startle", label: "startle", fmt: function (r) { return r.startle ? el("span", "err", "yes") : "no"; } }
    ];
    trialCols.push({ key: "excluded", label: "excluded", text: true, title: "excluded from the scores (key t)",
      fmt: function (r) { return review.excludedTrials.has(r.trial) ? el("span", "err", "excluded") : ""; } });
    renderTrials = sortableTable(trialTable, trialCols, trials, function (k) { selectTrial(k, true); },
      function (r) { return review.excludedTrials.has(r.trial) ? "review-excluded" : ""; });
    trialTable.addEventListener("rendered", function () { mark(trialTable, view.selTrial); });
  }
  var trialWin = (function () {
    var isi = 0;
    trials.forEach(function (tr) { if (isFinite(tr.isi_ms)) isi = Math.max(isi, tr.isi_ms); });
    return { pre: 0.2, post: (isi || 300) / 1000 + 0.35 };
  })();
  function trialTrace(tr) {
    var cs = tr.cs_onset_s - t0abs, out = [];
    if (!closureSeries || !isFinite(cs)) return out;
    for (var i = lowerBound(cs - trialWin.pre); i < N && T[i] <= cs + trialWin.post; i++) {
      out.push([(T[i] - cs) * 1000, closureSeries.value(closureSeries.raw[i])]);
    }
    return out;
  }
  var traces = trials.map(trialTrace);
  var meanTrace = (function () {
    var dt = (D.interval || 0.002) * 1000, bins = {};
    traces.forEach(function (tr) { tr.forEach(function (p) {
      if (!isFinite(p[1])) return;
      var k = Math.round(p[0] / dt); (bins[k] = bins[k] || [0, 0]); bins[k][0] += p[1]; bins[k][1]++;
    }); });
    return Object.keys(bins).map(Number).sort(function (a, b) { return a - b; })
      .map(function (k) { return [k * dt, bins[k][0] / bins[k][1]]; });
  })();
  function drawTrialPlot() {
    if (!trials.length) return;
    var dpr = window.devicePixelRatio || 1, w = trialPlot.clientWidth, h = trialPlot.clientHeight;
    trialPlot.width = Math.round(w * dpr); trialPlot.height = Math.round(h * dpr);
    var c = trialPlot.getContext("2d");
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = "#fff"; c.fillRect(0, 0, w, h);
    var L = 40, R = 10, Tp = 10, B = 28, lo = -0.2, hi = 1.2;
    var X = function (ms) { return L + (ms + trialWin.pre * 1000) / ((trialWin.pre + trialWin.post) * 1000) * (w - L - R); };
    var Y = function (v) { return Tp + (hi - Math.max(lo, Math.min(hi, v))) / (hi - lo) * (h - Tp - B); };
    c.font = "11px system-ui, sans-serif"; c.textAlign = "right"; c.fillStyle = "#555";
    [0, 0.5, 1].forEach(function (v) {
      c.strokeStyle = v === 0 ? "#c9ced6" : "#eceff3"; c.beginPath(); c.moveTo(L, Y(v) + 0.5); c.lineTo(w - R, Y(v) + 0.5); c.stroke();
      c.fillText(v.toFixed(1), L - 5, Y(v) + 4);
    });
    c.textAlign = "center";
    var st = niceStep((trialWin.pre + trialWin.post) * 1000, 6);
    for (var ms = Math.ceil(-trialWin.pre * 1000 / st) * st; ms <= trialWin.post * 1000; ms += st) {
      c.fillText(ms.toFixed(0), X(ms), h - B + 14);
    }
    c.fillText("ms from CS onset", (L + w - R) / 2, h - 3);
    var sel = view.selTrial === null ? null : trials[view.selTrial];
    var csDur = sel && sel.cs_duration_ms ? sel.cs_duration_ms : (trials[0].cs_duration_ms || 0);
    c.fillStyle = "rgba(30,136,229,0.10)"; c.fillRect(X(0), Tp, X(csDur) - X(0), h - Tp - B);
    c.strokeStyle = "#1e88e5"; c.beginPath(); c.moveTo(X(0) + 0.5, Tp); c.lineTo(X(0) + 0.5, h - B); c.stroke();
    var isi = sel ? sel.isi_ms : trials[0].isi_ms;
    if (isFinite(isi)) {
      c.save(); c.setLineDash([4, 3]); c.strokeStyle = "#7b1fa2"; c.beginPath();
      c.moveTo(X(isi) + 0.5, Tp); c.lineTo(X(isi) + 0.5, h - B); c.stroke(); c.restore();
      c.fillStyle = "#7b1fa2"; c.fillText("US", X(isi) + 10, Tp + 10);
    }
    c.fillStyle = "#1e88e5"; c.fillText("CS", X(0) + 10, Tp + 10);
    function path(pts, color, width) {  // broken where a value is missing or frames are
      var maxStep = 1.5 * (D.interval || 0.002) * 1000, prev = -Infinity, pen = false;
      c.strokeStyle = color; c.lineWidth = width; c.beginPath();
      pts.forEach(function (p) {
        if (!isFinite(p[1])) { pen = false; return; }
        if (pen && p[0] - prev <= maxStep) c.lineTo(X(p[0]), Y(p[1])); else c.moveTo(X(p[0]), Y(p[1]));
        pen = true; prev = p[0];
      });
      c.stroke();
    }
    traces.forEach(function (tr) { path(tr, "rgba(0,0,0,0.10)", 1); });
    path(meanTrace, "#2b2b2b", 1.8);
    if (sel) path(traces[view.selTrial], "#ef6c00", 2.2);
    var cap = document.getElementById("trial-plot-caption");
    var line1 = el("span", "", "━"); line1.style.color = "#2b2b2b";
    var parts = [line1, " mean of all " + trials.length + " trials · grey: each trial"];
    if (sel) {
      var line2 = el("span", "", "━"); line2.style.color = "#ef6c00";
      parts.push(" · ", line2, " trial " + fmt(sel.trial) + (sel.cr ? " (CR)" : " (no CR)"));
    } else parts.push(" · click a trial to show it");
    cap.textContent = "";
    parts.forEach(function (x) { cap.appendChild(typeof x === "string" ? document.createTextNode(x) : x); });
  }
  function selectTrial(k, zoomTo) {
    view.selTrial = k;
    var tr = trials[k], cs = tr.cs_onset_s - t0abs;
    if (zoomTo) setView(cs - trialWin.pre - 0.3, cs + trialWin.post + 0.3);
    mark(trialTable, k);
    drawTrialPlot();
    redraw();
  }

  // ------------------------------------------------------------------ review: check and correct by eye
  var reviewStatus = document.getElementById("review-status");
  var reviewerInput = document.getElementById("reviewer");
  reviewerInput.value = R.reviewer || "";
  reviewerInput.addEventListener("input", function () { review.dirty = true; updateReview(); });

  function overlaps(a0, a1, b0, b1) { return a0 <= b1 && b0 <= a1; }
  function inExcluded(a, b) { return review.excluded.some(function (s) { return overlaps(a, b, s.start_s, s.end_s); }); }
  // one duration rule for every row, as the detector's: end - start + one frame interval (frames are inclusive)
  function durationMs(a, b) { return (b - a + INTERVAL) * 1000; }
  // the events of the review, in time order: one per automatic blink (with its decision) and one per added event.
  // kept: what blinks.csv will hold (not rejected, not replaced by an added event, not in an excluded span);
  // number: the number blinks.csv gives it (kept events numbered in time order, as eyeblink report does)
  function rebuildEvents() {
    events.length = 0;
    blinks.forEach(function (b, k) {
      var d = review.decisions[k], e = {};
      Object.keys(b).forEach(function (c) { e[c] = b[c]; });
      e.ref = b; e.order = k; e.autoBlink = b.blink; e.autoStart = b.start_s; e.autoEnd = b.end_s;
      e.source = !d ? "auto" : d.decision === "reject" ? "rejected" : d.decision === "retime" ? "corrected" : "accepted";
      e.decision = d ? d.decision : null;
      if (d && d.decision === "retime") {
        e.start_s = d.new_start_s; e.end_s = d.new_end_s; e.start_frame = d.new_start_frame; e.end_frame = d.new_end_frame;
        e.duration_ms = durationMs(e.start_s, e.end_s); e.complete = 1;
        MEASURES.forEach(function (c) { e[c] = null; });  // measured again when the corrections are applied
      }
      e.replaced = review.added.some(function (s) { return overlaps(b.start_s, b.end_s, s.start_s, s.end_s); });
      events.push(e);
    });
    review.added.forEach(function (s, j) {
      var e = { ref: s, order: blinks.length + j, autoBlink: null, source: "added", decision: "added", kind: s.kind,
                start_s: s.start_s, end_s: s.end_s, start_frame: s.start_frame, end_frame: s.end_frame,
                duration_ms: durationMs(s.start_s, s.end_s), complete: 1, replaced: false };
      MEASURES.forEach(function (c) { e[c] = null; });
      events.push(e);
    });
    events.forEach(function (e) {  // a file written by hand may give times only: each on its nearest frame
      if (N && !Number.isFinite(e.start_frame)) e.start_frame = frameOf(nearestRow(e.start_s - t0abs));
      if (N && !Number.isFinite(e.end_frame)) e.end_frame = frameOf(nearestRow(e.end_s - t0abs));
    });
    var byTime = function (x, y) { return x.start_s - y.start_s || x.order - y.order; };
    events.forEach(function (e) {
      e.excluded = e.source !== "rejected" && inExcluded(e.start_s, e.end_s);
      e.kept = e.source !== "rejected" && !e.replaced && !e.excluded;
      e.number = null;
    });
    events.filter(function (e) { return e.kept; }).sort(byTime).forEach(function (e, i) { e.number = i + 1; });
    events.sort(byTime);
    events.forEach(function (e) { e.blink = e.number; });
  }
  function kept() { return events.filter(function (e) { return e.kept; }); }
  // seconds of the session outside the excluded spans (the rate's minutes)
  function keptSeconds() {
    var total = 0, end = -Infinity, t1 = N ? TABS[N - 1] : t0abs;
    review.excluded.slice().sort(function (x, y) { return x.start_s - y.start_s; }).forEach(function (s) {
      var a = Math.max(s.start_s, t0abs, end), b = Math.min(s.end_s, t1);
      if (b > a) total += b - a;
      end = Math.max(end, Math.min(s.end_s, t1));
    });
    return (t1 - t0abs) - total;
  }
  function g3(v) { return isFinite(v) ? String(parseFloat(v.toPrecision(3))) : "–"; }
  function updateReview() {
    var n = { accept: 0, reject: 0, retime: 0 };
    review.decisions.forEach(function (d) { if (d) n[d.decision]++; });
    var reviewed = n.accept + n.reject + n.retime;
    var k = kept(), count = k.length;
    // the cards follow the decisions: events kept, and the rate of the complete blinks over the time not excluded
    var complete = k.filter(function (e) { return e.kind !== "prolonged_closure" && e.complete; }).length;
    var secs = keptSeconds();
    document.getElementById("blink-count").textContent = String(count);
    var rate = document.getElementById("blink-rate");  // the summary's own until the review changes something
    if (rate && secs > 0 && review.changedOnce) rate.textContent = g3(complete / secs * 60) + "/min";
    reviewStatus.textContent = reviewed + " of " + blinks.length + " blinks reviewed · " + n.accept + " accepted · " +
      n.reject + " rejected · " + n.retime + " retimed · " + review.added.length + " added · " +
      review.excluded.length + " spans and " + review.excludedTrials.size + " trials excluded · " + count +
      " events kept" + (review.dirty ? " · unsaved changes" : "");
    status.setAttribute("data-reviewed", String(reviewed));
    status.setAttribute("data-kept", String(count));
    status.setAttribute("data-dirty", review.dirty ? "1" : "0");
    status.setAttribute("data-blink-rows", String(events.length));
  }
  function changed() {
    review.dirty = true; review.changedOnce = true;
    rebuildEvents();
    renderBlinks(); markSelected();
    if (renderTrials) { renderTrials(); mark(trialTable, view.selTrial); }
    var e = selected();
    if (e) { status.setAttribute("data-selected", e.number === null ? "" : String(e.number));
             status.setAttribute("data-selected-frames", e.start_frame + "-" + e.end_frame); }
    updateReview(); drawTrialPlot(); redraw();
  }
  function decide(decision) {
    var e = selected();
    if (!e) return false;
    if (e.source === "added") {  // the reviewer's own event: reject removes it, accept and undo keep it
      if (decision === "reject") {
        review.added = review.added.filter(function (s) { return s !== e.ref; });
        view.selRef = null;
        changed();
      }
      return true;
    }
    var k = e.order, cur = review.decisions[k];
    review.decisions[k] = decision === null ? null : { decision: decision };
    if (decision === "accept" && cur && cur.decision === "retime") review.decisions[k] = cur;  // a retimed one is kept
    changed();
    return true;
  }
  // n / p: the next (previous) event in time, added ones too; with none selected, n goes to the first one not yet
  // reviewed (the first in view when all are) and p to the last one in view
  function step(dir) {
    if (!events.length) return false;
    var cur = selected(), k = cur ? events.indexOf(cur) : -1;
    if (k < 0) {
      var edge = (dir > 0 ? view.t0 : view.t1) + t0abs;
      k = dir > 0 ? events.length - 1 : 0;
      var todo = dir > 0 ? events.findIndex(function (e) { return e.source === "auto"; }) : -1;
      if (todo >= 0) k = todo;
      else {
        for (var i = 0; i < events.length; i++) {
          if (dir > 0 && events[i].end_s >= edge) { k = i; break; }
          if (dir < 0 && events[i].start_s <= edge) k = i;
        }
      }
    } else k += dir;
    k = Math.max(0, Math.min(events.length - 1, k));
    selectEvent(events[k], true);
    return true;
  }
  function selectionAbs() { return view.sel ? { a: view.sel.a + t0abs, b: view.sel.b + t0abs } : null; }
  function showSelection() {
    var s = selectionAbs(), box = document.getElementById("selection");
    box.textContent = s ? "selected " + fmt(s.a - t0abs, 3) + "–" + fmt(s.b - t0abs, 3) + " s (" +
      Math.round((s.b - s.a) * 1000) + " ms): b add a blink · c add a prolonged closure · e exclude · Delete remove what is added or excluded there"
      : "shift + drag on the trace to select a span";
  }
  // the frames of a span: its first frame at or after a, its last at or before b (rows i0..i1)
  function framesOf(a, b) {
    var i0 = lowerBound(a - t0abs - 1e-9), i1 = lowerBound(b - t0abs + 1e-9) - 1;
    if (i0 >= N || i1 < i0) { i0 = i1 = nearestRow((a + b) / 2 - t0abs); }
    return { start_s: TABS[i0], end_s: TABS[i1], start_frame: frameOf(i0), end_frame: frameOf(i1) };
  }
  function addSpan(what) {
    var s = selectionAbs();
    if (!s || !N) return false;
    if (what === "exclude") review.excluded.push({ start_s: s.a, end_s: s.b, reason: "" });
    else { var f = framesOf(s.a, s.b); f.kind = what; review.added.push(f); view.selRef = f; }
    review.added.sort(function (x, y) { return x.start_s - y.start_s; });
    review.excluded.sort(function (x, y) { return x.start_s - y.start_s; });
    view.sel = null; showSelection(); changed();
    return true;
  }
  function removeSpans() {
    var s = selectionAbs();
    if (!s) return false;
    var keep = function (x) { return !overlaps(x.start_s, x.end_s, s.a, s.b); };
    review.added = review.added.filter(keep); review.excluded = review.excluded.filter(keep);
    view.sel = null; showSelection(); changed();
    return true;
  }
  function toggleTrial() {
    if (view.selTrial === null) return false;
    var n = trials[view.selTrial].trial;
    if (review.excludedTrials.has(n)) review.excludedTrials.delete(n); else review.excludedTrials.add(n);
    changed();
    return true;
  }
  // the selected event's onset and end (relative seconds), when it can be retimed
  function selectedSpan() {
    var e = selected();
    if (!e || e.source === "rejected") return null;
    return { a: e.start_s - t0abs, b: e.end_s - t0abs };
  }
  function edgeAt(x) {
    var sp = selectedSpan();
    if (!sp) return null;
    if (Math.abs(xOf(sp.a) - x) <= 6) return { which: "a", t: sp.a };
    if (Math.abs(xOf(sp.b) - x) <= 6) return { which: "b", t: sp.b };
    return null;
  }
  // the selected event from row i0 to row i1 (inclusive): a retime of an automatic blink, or the added event moved
  function setRows(i0, i1) {
    var e = selected();
    if (!e || i1 < i0) return;
    var span = { start_s: TABS[i0], end_s: TABS[i1], start_frame: frameOf(i0), end_frame: frameOf(i1) };
    if (e.source === "added") Object.keys(span).forEach(function (c) { e.ref[c] = span[c]; });
    else review.decisions[e.order] = { decision: "retime", new_start_s: span.start_s, new_end_s: span.end_s,
                                      new_start_frame: span.start_frame, new_end_frame: span.end_frame };
    changed();
  }
  function rowsOfSelected() {
    var e = selected();
    return { a: rowOfFrame(e.start_frame), b: rowOfFrame(e.end_frame) };
  }
  function finishRetime(edge) {  // a dragged edge lands on the nearest frame
    var r = rowsOfSelected(), i = nearestRow(edge.t);
    if (edge.which === "a") setRows(i, r.b); else setRows(r.a, i);
  }
  // keys [ ] move the selected event's onset, { } its end, one frame earlier or later (a retime)
  function nudge(which, dir) {
    if (!selectedSpan() || !N) return false;
    var r = rowsOfSelected();
    if (which === "a") r.a = Math.max(0, Math.min(N - 1, r.a + dir)); else r.b = Math.max(0, Math.min(N - 1, r.b + dir));
    if (r.b >= r.a) setRows(r.a, r.b);  // never shorter than one frame
    return true;
  }
  function drawReview(top, bottom) {
    review.excluded.forEach(function (s) {
      var a = s.start_s - t0abs, b = s.end_s - t0abs;
      if (b < view.t0 || a > view.t1) return;
      ctx.fillStyle = "rgba(40, 40, 40, 0.22)";
      ctx.fillRect(xOf(a), top, Math.max(1, xOf(b) - xOf(a)), bottom - top);
      if (xOf(b) - xOf(a) > 50) label("excluded", (xOf(a) + xOf(b)) / 2, bottom - 16, "#222", "center");
    });
    var sp = selectedSpan();
    if (sp && drag && drag.edge) { if (drag.edge.which === "a") sp.a = drag.edge.t; else sp.b = drag.edge.t; }
    if (sp) [sp.a, sp.b].forEach(function (t) { line(t, "#e65100", top, bottom, [3, 2]); });  // the edges that can be dragged
    if (view.sel) {
      var a = Math.min(view.sel.a, view.sel.b), b = Math.max(view.sel.a, view.sel.b);
      ctx.fillStyle = "rgba(30, 136, 229, 0.22)";
      ctx.fillRect(xOf(a), top, Math.max(1, xOf(b) - xOf(a)), bottom - top);
    }
  }
  function reviewKey(k) {
    if (k === "n" || k === "j") return step(1);
    if (k === "p" || k === "k") return step(-1);
    if (k === "a") return decide("accept");
    if (k === "r" || k === "x") return decide("reject");
    if (k === "u") return decide(null);
    if (k === "b") return addSpan("blink");
    if (k === "c") return addSpan("prolonged_closure");
    if (k === "e") return addSpan("exclude");
    if (k === "Delete" || k === "Backspace") return removeSpans();
    if (k === "t") return toggleTrial();
    if (k === "[") return nudge("a", -1);
    if (k === "]") return nudge("a", 1);
    if (k === "{") return nudge("b", -1);
    if (k === "}") return nudge("b", 1);
    if (k === "s") { save(); return true; }
    if (k === "Escape") { view.sel = null; showSelection(); redraw(); return true; }
    return false;
  }
  // what <stem>.corrections.json holds: decisions by the automatic blink's frames and times (so a rerun can match
  // them); a retimed or added event by its first and last frame, with those frames' times from frames.csv
  function corrections() {
    var out = [];
    review.decisions.forEach(function (d, k) {
      if (!d) return;
      var b = blinks[k], o = { start_s: b.start_s, end_s: b.end_s };
      if (Number.isFinite(b.start_frame) && Number.isFinite(b.end_frame)) { o.start_frame = b.start_frame; o.end_frame = b.end_frame; }
      o.decision = d.decision;
      if (d.decision === "retime") {
        o.new_start_s = d.new_start_s; o.new_end_s = d.new_end_s;
        if (Number.isFinite(d.new_start_frame) && Number.isFinite(d.new_end_frame)) {
          o.new_start_frame = d.new_start_frame; o.new_end_frame = d.new_end_frame;
        }
      }
      out.push(o);
    });
    return {
      format: "eyeblink.corrections", format_version: 1, stem: D.stem, reviewer: reviewerInput.value,
      saved_at: new Date().toISOString(), eyeblink_version: D.version,
      blinks: out.concat(review.unmatched),  // decisions no blink matches now are kept, never dropped
      added: review.added.map(function (s) {
        var o = { start_s: s.start_s, end_s: s.end_s };
        if (Number.isFinite(s.start_frame) && Number.isFinite(s.end_frame)) { o.start_frame = s.start_frame; o.end_frame = s.end_frame; }
        o.kind = s.kind;
        return o;
      }), excluded: review.excluded,
      excluded_trials: Array.from(review.excludedTrials).sort(function (a, b) { return a - b; })
    };
  }
  var FILE_NAME = D.stem + ".corrections.json";  // the one name the page writes: never a session output
  function saved(how) {
    review.dirty = false; updateReview();
    status.setAttribute("data-saved", how);
    document.getElementById("save-note").textContent = how === "download"
      ? "Downloaded " + FILE_NAME + ": put it beside the session's files, then run eyeblink report (or process) again."
      : "Saved " + FILE_NAME + " in the chosen folder.";
  }
  function save() {
    var text = JSON.stringify(corrections(), null, 2) + "\n";
    var a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    a.download = FILE_NAME;
    document.body.appendChild(a); a.click(); a.remove();
    window.setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
    saved("download");
  }
  document.getElementById("save").onclick = save;
  var saveDir = document.getElementById("save-folder");
  if (window.showDirectoryPicker) {
    saveDir.hidden = false;
    saveDir.onclick = function () {
      window.showDirectoryPicker({ mode: "readwrite" }).then(function (dir) {
        return dir.getFileHandle(FILE_NAME, { create: true });
      }).then(function (fh) { return fh.createWritable(); }).then(function (w) {
        return w.write(JSON.stringify(corrections(), null, 2) + "\n").then(function () { return w.close(); });
      }).then(function () { saved("folder"); }, function (e) {
        if (e && e.name !== "AbortError") document.getElementById("save-note").textContent = "Not saved: " + e.message;
      });
    };
  }
  window.addEventListener("beforeunload", function (ev) { if (review.dirty) { ev.preventDefault(); ev.returnValue = ""; } });
  [["rev-prev", function () { step(-1); }], ["rev-next", function () { step(1); }],
   ["rev-accept", function () { decide("accept"); }], ["rev-reject", function () { decide("reject"); }],
   ["rev-clear", function () { decide(null); }], ["rev-add", function () { addSpan("blink"); }],
   ["rev-closure", function () { addSpan("prolonged_closure"); }], ["rev-exclude", function () { addSpan("exclude"); }],
   ["rev-remove", removeSpans], ["rev-trial", toggleTrial]].forEach(function (b) {
    document.getElementById(b[0]).onclick = b[1];
  });
  showSelection();

  // ------------------------------------------------------------------ the cursor and the eyes' video
  // <stem>.eyes.webm beside the report: frame k of the session is shown from k / fps to (k + 1) / fps, so the
  // cursor's frame is the video's; without the file the cursor still shows its frame and time
  var cursor = { row: null };
  var EV = D.eyesVideo || null, video = document.getElementById("eye-video"), eyeFrame = document.getElementById("eye-frame");
  var videoOk = false, following = false;
  function cursorText(i) {
    return "frame " + frameOf(i).toLocaleString() + " · " + fmtTime(T[i], 0.0001);
  }
  function shownFrame(now, meta) {
    var f = Math.round(meta.mediaTime * EV.fps);
    status.setAttribute("data-video-frame", String(f));
    // a frame of an earlier seek (the keys outran the decoder): wait for the cursor's own
    if (video.paused && cursor.row !== null && f !== frameOf(cursor.row)) video.requestVideoFrameCallback(shownFrame);
  }
  function setCursor(i, keepInView) {
    cursor.row = i;
    var f = frameOf(i);
    status.setAttribute("data-cursor-frame", String(f));
    eyeFrame.textContent = cursorText(i);
    if (keepInView && (T[i] < view.t0 || T[i] > view.t1)) { var s = view.t1 - view.t0; setView(T[i] - s / 2, T[i] + s / 2); }
    if (videoOk && !following) {
      if (!video.paused) video.pause();
      var target = (f + 0.5) / EV.fps;
      if (Math.abs(video.currentTime - target) > 0.25 / EV.fps) {
        // the frame now on screen: the presented frame's own time, as the browser tells it (asked before the seek:
        // the frame can be on screen before the seeked event)
        if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(shownFrame);
        video.currentTime = target;
      } else status.setAttribute("data-video-frame", String(f));
    }
    redraw();
  }
  if (EV && video) {
    document.getElementById("eyes").hidden = false;
    video.addEventListener("loadedmetadata", function () {
      videoOk = true;
      video.width = video.videoWidth * 2; video.height = video.videoHeight * 2;
      status.setAttribute("data-video", "1");
      if (cursor.row !== null) setCursor(cursor.row, false);
    });
    video.addEventListener("seeked", function () {  // without requestVideoFrameCallback: the seek's frame
      if (!video.requestVideoFrameCallback) status.setAttribute("data-video-frame", String(Math.floor(video.currentTime * EV.fps + 1e-6)));
    });
    video.addEventListener("error", function () {
      document.getElementById("eyes").hidden = true;
      var note = document.getElementById("eyes-note");
      note.hidden = false;
      note.textContent = "The eyes' video (" + EV.src + ") is not beside this report; make it with " +
        "eyeblink report --eyes-video OUTDIR/" + D.stem + ".";
      status.setAttribute("data-video", "0");
    });
    // playing: the cursor follows the frame on screen
    function follow() {
      if (video.paused) return;
      var f = Math.floor(video.currentTime * EV.fps + 1e-6);
      following = true; setCursor(rowOfFrame(f), true); following = false;
      if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(follow); else window.requestAnimationFrame(follow);
    }
    video.addEventListener("play", follow);
    video.src = EV.url || EV.src.split("/").map(encodeURIComponent).join("/");  // url: quoted by the writer
  }

  // ------------------------------------------------------------------ start
  // a link can open a view: #blink=3, #trial=2 or #t=12.5,14 (seconds from the first frame)
  function fromHash() {
    var h = decodeURIComponent(window.location.hash.slice(1)), m;
    if ((m = /^blink=(\d+)$/.exec(h))) {
      var e = events.find(function (x) { return x.number === +m[1]; });  // blinks.csv's number
      if (e) { selectEvent(e, true); return; }
    } else if ((m = /^trial=(\d+)$/.exec(h))) {
      var j = trials.findIndex(function (tr) { return tr.trial === +m[1]; });
      if (j >= 0) { selectTrial(j, true); return; }
    } else if ((m = /^t=([-\d.]+),([-\d.]+)$/.exec(h))) { setView(+m[1], +m[2]); return; }
    whole();
  }
  legend();
  layout();
  whole();
  fromHash();
  window.addEventListener("hashchange", fromHash);
  window.addEventListener("resize", function () { layout(); drawTrialPlot(); redraw(); });
  drawTrialPlot();
  draw();
  updateReview();
  status.setAttribute("data-ok", "1");
  status.setAttribute("data-draw-ms", String(Math.round(performance.now())));
  status.setAttribute("data-frames", String(N));
  status.setAttribute("data-blinks", String(blinks.length));
  status.textContent = "drawn: " + N + " frames, " + blinks.length + " blinks";
})();
