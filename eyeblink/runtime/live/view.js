/* eyeblink view: the live page (inlined by eyeblink.runtime.live.view; no external resource). Data come from the run
   as Server-Sent Events (/events): a snapshot of the last minute, then rows, blinks, events and the status. */
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const TOKEN = new URLSearchParams(location.search).get("token");
  const q = (first) => (TOKEN ? (first ? "?" : "&") + "token=" + encodeURIComponent(TOKEN) : "");
  const C = { frame: 0, t: 1, el: 2, er: 3, base: 4, cl: 5, face: 6, drop: 7, age: 8, x0: 9, y0: 10, x1: 11, y1: 12 };

  // ------------------------------------------------------------------ theme
  const root = document.documentElement;
  let theme = null;
  try { theme = localStorage.getItem("eyeblink-view-theme"); } catch (e) { theme = null; }
  if (theme !== "dark" && theme !== "light") {
    theme = window.matchMedia && window.matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark";
  }
  // the theme's colours, read once per theme (a draw never asks the style engine)
  const COL = {};
  function loadColours() {
    const cs = getComputedStyle(root);
    for (const n of ["muted", "grid", "prolonged", "blink", "noface", "drop", "base", "left", "right", "closure", "box",
                     "eye"]) {
      COL[n] = cs.getPropertyValue("--" + n).trim();
    }
  }
  function setTheme(t) {
    theme = t; root.setAttribute("data-theme", t);
    try { localStorage.setItem("eyeblink-view-theme", t); } catch (e) { /* private mode: not kept */ }
    loadColours(); shownDirty = true; redraw();
  }
  root.setAttribute("data-theme", theme);
  // text and attributes written only when they change (no layout work for a value that stayed the same)
  function setText(el, v) { if (el._t !== v) { el._t = v; el.textContent = v; } }
  function setData(el, k, v) { if (el.dataset[k] !== v) el.dataset[k] = v; }

  // ------------------------------------------------------------------ the data of the last minute
  let hello = { history_s: 60 };
  let rows = [];  // each: [frame, t, ear_left, ear_right, baseline, closure, face, dropped, age_ms, x0, y0, x1, y1]
  let start = 0;  // rows before this index are older than the history and dropped at the next compaction
  let blinks = [];
  let events = [];
  let status = {};
  let ended = null;

  function prune() {
    if (rows.length <= start) return;
    const newest = rows[rows.length - 1][C.t];
    const keep = (hello.history_s || 60) + 1;
    while (start < rows.length && rows[start][C.t] !== null && newest - rows[start][C.t] > keep) start++;
    if (start > 20000 || start > rows.length / 2) { rows = rows.slice(start); start = 0; }
    const tOld = rows.length ? rows[start][C.t] : 0;
    while (blinks.length && blinks[0].end_s !== null && blinks[0].end_s < tOld) blinks.shift();
    while (events.length && events[0].t !== null && events[0].t < tOld) events.shift();
  }
  function lowerBound(t) {  // first row index (>= start) with time >= t
    let lo = start, hi = rows.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if ((rows[mid][C.t] ?? -Infinity) < t) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function rowOfFrame(f) {
    let lo = start, hi = rows.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1; const v = rows[mid][C.frame];
      if (v === f) return rows[mid];
      if (v < f) lo = mid + 1; else hi = mid - 1;
    }
    return null;
  }

  // ------------------------------------------------------------------ the view window
  let paused = false;
  let windowS = 10;
  let endT = null;  // right edge when paused or scrolled back (null: follow the newest row)
  function newestT() { return rows.length > start ? rows[rows.length - 1][C.t] : 0; }
  function oldestT() { return rows.length > start ? rows[start][C.t] : 0; }
  function viewEnd() { return endT === null ? newestT() : endT; }
  function scrollBy(s) {
    const e = Math.max(Math.min(viewEnd() + s, newestT()), oldestT() + windowS);
    endT = e >= newestT() && !paused ? null : e;
    redraw();
  }
  function setPaused(p) {
    paused = p;
    if (p && endT === null) endT = newestT();
    if (!p) endT = null;
    $("pause").textContent = p ? "resume" : "pause";
    $("pause").classList.toggle("on", p);
    wantNow(); redraw();
  }
  function goLive() { setPaused(false); endT = null; redraw(); }

  // ------------------------------------------------------------------ the trace
  const trace = $("trace");
  const frameCanvas = $("frame");
  // the canvases' sizes in CSS pixels, kept by a ResizeObserver: a draw never reads the layout
  const size = new Map([[trace, { w: 0, h: 0 }], [frameCanvas, { w: 0, h: 0 }]]);
  function fit(c) {
    const dpr = window.devicePixelRatio || 1, z = size.get(c);
    const w = Math.round(z.w * dpr), h = Math.round(z.h * dpr);
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    return z;
  }
  new ResizeObserver((entries) => {
    for (const e of entries) {
      const z = size.get(e.target); z.w = e.contentRect.width; z.h = e.contentRect.height;
    }
    shownDirty = true; redraw();
  }).observe(trace);
  new ResizeObserver((entries) => {
    for (const e of entries) {
      const z = size.get(e.target); z.w = e.contentRect.width; z.h = e.contentRect.height;
    }
    shownDirty = true; draw();
  }).observe(frameCanvas);
  // The page draws only what changed (new rows, a new image, a scroll), in one animation frame for everything that
  // changed together, and nothing while hidden, paused with nothing new, or after the run ended: a watching browser
  // costs little CPU beside the session (each screen update costs a software-drawn browser a few milliseconds
  // across its processes). Following the newest rows, the trace is shifted left by the columns that passed and
  // only its newest columns are drawn; a blink, an event, a new scale, a scroll or a resize redraws it whole.
  // The trace at most 10 times a second, 5 while the run says the machine is busy (its frames come first).
  const drawMs = () => (status.busy ? 200 : 100);
  let pending = false, lastDraw = -1e9, dirty = false, full = true, shownDirty = false, textDirty = false;
  const counts = { frames: 0, trace: 0, traceFull: 0, image: 0 };  // for the page's tests (window.eyeblinkView)
  window.eyeblinkView = { counts };
  function redraw() { dirty = true; full = true; draw(); }  // the trace whole, at the next animation frame
  let timer = null;
  function draw() {
    if (pending || document.hidden || !(dirty || shownDirty || textDirty)) return;
    const now = performance.now();
    // an image or a whole redraw at the next frame; new rows when the trace is due (the status waits with them);
    // while images come, the trace is drawn in their frames (waiting a little longer for one)
    const wait = shownDirty || (dirty && full) ? 0 : dirty ? Math.max(0, lastDraw + traceDue(now) - now) : 0;
    if (timer !== null) {
      if (wait > 0) return;
      clearTimeout(timer); timer = null;
    }
    if (wait > 0) { timer = setTimeout(() => { timer = null; draw(); }, wait); return; }
    pending = true; askedAt = now;
    requestAnimationFrame(onFrame);
  }
  let askedAt = 0, imageAt = -1e9;
  function traceDue(now) { return now - imageAt < 2.5 * drawMs() ? 1.6 * drawMs() : drawMs(); }
  function onFrame(now) {
    pending = false; counts.frames++;
    pace(Math.max(0, performance.now() - askedAt - 17));
    // the trace in an image's frame when it is nearly due (one frame for both: fewer frames, less CPU)
    const withImage = shownDirty && now - lastDraw >= 0.6 * drawMs();
    if (dirty && (full || withImage || now >= lastDraw + traceDue(now) - 20)) {
      dirty = false; lastDraw = now; drawTrace();
    }
    if (shownDirty) { shownDirty = false; imageAt = now; drawFrame(); }
    if (textDirty) { textDirty = false; showStatus(); }
    draw();  // the trace, when it was not due yet
  }
  // the per-pixel-column envelopes of the columns drawn (reused between draws)
  let envCols = 0, envBuf = null, noface = null, dropped = null;
  function envelopes(cols) {
    if (cols !== envCols) {
      envCols = cols; envBuf = new Float64Array(cols * 8); noface = new Uint8Array(cols); dropped = new Uint8Array(cols);
    }
  }
  const LABEL_COLS = 30;  // the lanes' names sit over the plot's first columns: redrawn after a shift
  let last = null;  // what the trace on screen was drawn with (its geometry, scale and right edge)
  function geometry() {
    const dpr = window.devicePixelRatio || 1;
    const z = fit(trace), W = z.w, H = z.h;
    const padL = 46, padR = 8, top = 8, gap = 18;
    const cols = Math.max(10, Math.floor(W - padL - padR));
    const laneA = { y: top, h: (H - top - gap - 20) * 0.62 };
    const laneB = { y: laneA.y + laneA.h + gap, h: (H - top - gap - 20) * 0.38 };
    return { dpr, W, H, padL, cols, laneA, laneB, bottom: laneB.y + laneB.h + 1, kx: cols / windowS,
             key: [W, H, dpr, windowS].join(",") };
  }
  // the EAR lane's top: 1.5 x the highest baseline in view, up to the next 0.15 (ticks on round values; 0.45 before
  // a baseline is known)
  function scaleOf(i0, i1) {
    let top1 = 0;
    for (let i = i0; i < i1; i++) { const b = rows[i][C.base]; if (b !== null && b > top1) top1 = b; }
    return top1 > 0 ? Math.round(Math.ceil(top1 * 1.5 / 0.15 - 1e-9) * 15) / 100 : 0.45;
  }
  function drawTrace() {
    const G = geometry();
    if (!G.W || !G.H) return;
    counts.trace++;
    const g = trace.getContext("2d");
    // the right edge on the grid of whole columns (a column: windowS / cols seconds, counted from time 0)
    const R = Math.floor(viewEnd() * G.kx) + 1;
    G.R = R; G.c0 = R - G.cols; G.t0 = G.c0 / G.kx; G.t1 = R / G.kx;
    const i0 = lowerBound(G.t0), i1 = lowerBound(G.t1);
    let yMax = scaleOf(i0, i1);
    const shift = last ? R - last.R : 0;
    const incremental = !full && last && last.key === G.key && endT === null && shift >= 0 &&
      shift < G.cols - LABEL_COLS - 4 && Number.isInteger(G.dpr) &&
      yMax <= last.yMax && yMax > last.yMax - 0.2;  // a scale one step smaller is kept (no full redraw)
    if (incremental) yMax = last.yMax;
    G.yMax = yMax;
    G.YA = (v) => G.laneA.y + G.laneA.h - v / yMax * G.laneA.h;
    G.YB = (v) => G.laneB.y + G.laneB.h - Math.max(0, Math.min(1, v)) * G.laneB.h;
    g.font = "11px system-ui, sans-serif";
    if (incremental) {
      if (shift > 0) {  // the plot moved left by the columns that passed (copied within the canvas)
        const d = G.dpr, x = G.padL * d, w = G.cols * d, h = Math.ceil(G.bottom * d);
        g.save(); g.setTransform(1, 0, 0, 1, 0, 0);
        g.beginPath(); g.rect(x, 0, w, h); g.clip();
        g.globalCompositeOperation = "copy";
        g.drawImage(trace, x + shift * d, 0, w - shift * d, h, x, 0, w - shift * d, h);
        g.restore();
      }
      g.setTransform(G.dpr, 0, 0, G.dpr, 0, 0);
      drawColumns(g, G, 0, LABEL_COLS);
      drawColumns(g, G, Math.max(LABEL_COLS, G.cols - shift - 2), G.cols);
    } else {
      counts.traceFull++;
      g.setTransform(G.dpr, 0, 0, G.dpr, 0, 0);
      g.clearRect(0, 0, G.W, G.H);
      g.fillStyle = COL.muted;
      for (const [ticks, Y, fmt] of [[[0, yMax / 3, 2 * yMax / 3, yMax], G.YA, (v) => v.toFixed(2)],
                                     [[0, 0.5, 1], G.YB, (v) => v.toFixed(1)]]) {
        for (const v of ticks) g.fillText(fmt(v), 4, Math.round(Y(v)) + 4.5);
      }
      drawColumns(g, G, 0, G.cols);
    }
    full = false;
    last = G;
    g.fillStyle = COL.muted;
    g.fillText("EAR", G.padL + 4, G.laneA.y + 12); g.fillText("FEC", G.padL + 4, G.laneB.y + 12);
    // time ticks' labels (capture time, s), under the plot: redrawn whole
    g.clearRect(G.padL - 12, G.bottom, G.W - G.padL + 12, G.H - G.bottom);
    const step = timeStep();
    for (let s = Math.ceil(G.t0 / step) * step; s <= G.t1; s += step) {
      g.fillText(s.toFixed(step < 1 ? 1 : 0) + " s", Math.round(G.padL + (s * G.kx - G.c0)) - 9.5, G.H - 5);
    }
    setData(trace, "rows", String(rows.length - start));
    setData(trace, "newest", rows.length > start ? String(rows[rows.length - 1][C.frame]) : "-1");
    rangeText = G.t0.toFixed(1) + " – " + G.t1.toFixed(1) + " s · " + (i1 - i0) + " frames in view" +
      (paused ? " · paused" : endT !== null ? " · scrolled back" : "");
    if (endT !== null || !connected || ended !== null) setText(rangeEl, rangeText);  // else with the status
  }
  function timeStep() { return windowS > 30 ? 10 : windowS > 12 ? 5 : windowS > 4 ? 1 : 0.5; }
  // columns a..b-1 of the plot, everything on them: grid, blinks, no face, drops, the envelopes, the events
  function drawColumns(g, G, a, b) {
    const { padL, laneA, laneB, kx, c0 } = G;
    const X = (t) => padL + (t * kx - c0);
    const xa = padL + a, xb = padL + b;
    g.save();
    g.beginPath(); g.rect(xa, 0, xb - xa, G.bottom); g.clip();
    g.clearRect(xa, 0, xb - xa, G.bottom);
    g.strokeStyle = COL.grid; g.lineWidth = 1;
    for (const [lane, ticks, Y] of [[laneA, [0, G.yMax / 3, 2 * G.yMax / 3, G.yMax], G.YA], [laneB, [0, 0.5, 1], G.YB]]) {
      g.beginPath();
      for (const v of ticks) { const y = Math.round(Y(v)) + 0.5; g.moveTo(xa, y); g.lineTo(xb, y); }
      g.stroke();
      g.strokeRect(padL + 0.5, lane.y + 0.5, G.cols - 1, lane.h - 1);
    }
    const step = timeStep(), ta = (c0 + a - 1) / kx, tb = (c0 + b + 1) / kx;
    g.beginPath();
    for (let s = Math.ceil(ta / step) * step; s <= tb; s += step) {
      const x = Math.round(X(s)) + 0.5; g.moveTo(x, laneA.y); g.lineTo(x, laneB.y + laneB.h);
    }
    g.stroke();
    // blinks and prolonged closures: bands over both lanes
    for (const bl of blinks) {
      if (bl.end_s === null || bl.end_s < ta - 1 || bl.start_s > tb) continue;
      g.fillStyle = bl.kind === "prolonged_closure" ? COL.prolonged : COL.blink;
      const x = X(bl.start_s), w = Math.max(2, X(bl.end_s) - x);
      g.fillRect(x, laneA.y, w, laneA.h); g.fillRect(x, laneB.y, w, laneB.h);
    }
    // per pixel column: min/max envelopes of every frame (each column's min and max of left, right, baseline and
    // closure, side by side in one buffer), from the column before a (the line comes in from it); no face and
    // dropped frames marked
    envelopes(G.cols);
    const e = envBuf, from = Math.max(0, a - 1);
    for (let i = from * 8; i < b * 8; i += 2) { e[i] = Infinity; e[i + 1] = -Infinity; }
    noface.fill(0, from, b); dropped.fill(0, from, b);
    for (let i = lowerBound((c0 + from) / kx), i1 = lowerBound((c0 + b) / kx); i < i1; i++) {
      const r = rows[i]; let c = Math.floor(r[C.t] * kx) - c0;
      c = c < from ? from : c >= b ? b - 1 : c;
      if (r[C.drop]) { dropped[c] = 1; continue; }
      if (!r[C.face]) noface[c] = 1;
      const o = c * 8;
      let v = r[C.el]; if (v !== null) { if (v < e[o]) e[o] = v; if (v > e[o + 1]) e[o + 1] = v; }
      v = r[C.er]; if (v !== null) { if (v < e[o + 2]) e[o + 2] = v; if (v > e[o + 3]) e[o + 3] = v; }
      v = r[C.base]; if (v !== null) { if (v < e[o + 4]) e[o + 4] = v; if (v > e[o + 5]) e[o + 5] = v; }
      v = r[C.cl]; if (v !== null) { if (v < e[o + 6]) e[o + 6] = v; if (v > e[o + 7]) e[o + 7] = v; }
    }
    g.fillStyle = COL.noface;
    for (let c = a; c < b; c++) if (noface[c]) { g.fillRect(padL + c, laneA.y, 1, laneA.h); g.fillRect(padL + c, laneB.y, 1, laneB.h); }
    g.fillStyle = COL.drop;
    for (let c = a; c < b; c++) if (dropped[c]) g.fillRect(padL + c, laneB.y + laneB.h - 5, 1, 5);
    function envelope(k, Y, color, width) {  // k: the series' offset in a column's 8 values
      g.strokeStyle = color; g.lineWidth = width; g.beginPath();
      let on = false;
      for (let c = from; c < b; c++) {
        const lo = e[c * 8 + k], hi = e[c * 8 + k + 1];
        if (lo === Infinity) { on = false; continue; }
        const x = padL + c + 0.5;
        if (!on) { g.moveTo(x, Y(hi)); on = true; } else g.lineTo(x, Y(hi));
        if (lo !== hi) g.lineTo(x, Y(lo));
      }
      g.stroke();
    }
    g.setLineDash([4, 3]); g.lineDashOffset = (c0 + from) % 7; envelope(4, G.YA, COL.base, 1); g.setLineDash([]);
    envelope(0, G.YA, COL.left, 1.4);
    envelope(2, G.YA, COL.right, 1.4);
    envelope(6, G.YB, COL.closure, 1.4);
    // the gate's events: a tick at the top of the closure lane
    for (const ev of events) {
      if (ev.t === null || ev.t < ta - 0.5 || ev.t > tb + 0.5) continue;
      const col = ev.event === "prolonged_closure" ? COL.prolonged : ev.event === "face_lost" ? COL.drop : null;
      if (!col) continue;
      g.fillStyle = col; const x = X(ev.t);
      g.beginPath(); g.moveTo(x - 5, laneB.y); g.lineTo(x + 5, laneB.y); g.lineTo(x, laneB.y + 8); g.fill();
    }
    g.restore();
  }

  // ------------------------------------------------------------------ the camera image
  const rangeEl = $("range");
  // The images come inline in the stream (a JPEG in base64: no request per image), as many a second as this tab
  // asks for (want?hz=, 0 while hidden or paused), each decoded off the main thread, one at a time (one that came
  // meanwhile replaces the one waiting), then drawn in the next animation frame. The tab asks for fewer when its
  // animation frames come late (a busy machine or a slow browser) and for more again once they are on time.
  let shot = null, shownMeta = null, decoding = false, waiting = null;
  let tabId = null, askedHz = null, rateHz = 10, lateMs = 0, onTimeSince = 0;
  function want(hz) {
    if (tabId === null || hz === askedHz) return;
    askedHz = hz;
    fetch("want?tab=" + tabId + "&hz=" + hz + q(false)).catch(() => { askedHz = null; });
  }
  function wantNow() { want(paused || document.hidden || ended !== null ? 0 : rateHz); }
  function onImage(d) {
    if (paused || document.hidden) return;
    waiting = d; decodeNext();
  }
  function decodeNext() {
    if (decoding || !waiting) return;
    const d = waiting; waiting = null; decoding = true;
    const bin = atob(d.jpeg), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    d.jpeg = null;
    createImageBitmap(new Blob([bytes], { type: "image/jpeg" })).then((bmp) => {
      decoding = false;
      if (shot) shot.close();
      shot = bmp; shownMeta = d; shownDirty = true; draw(); decodeNext();
    }, () => { decoding = false; decodeNext(); });
  }
  function pace(late) {  // an animation frame `late` ms after it was asked for: the image rate follows
    lateMs = 0.8 * lateMs + 0.2 * late;
    const now = performance.now(), top = hello.max_image_hz || 10;
    if (lateMs > 40 && rateHz > 5) { rateHz = Math.max(5, Math.round(rateHz / 2)); lateMs = 0; onTimeSince = now; }
    else if (lateMs > 15) onTimeSince = now;
    else if (now - onTimeSince > 5000 && rateHz < top) { rateHz = Math.min(top, rateHz * 2); onTimeSince = now; }
    wantNow();
  }
  function drawFrame() {
    if (!shownMeta || document.hidden) return;
    counts.image++;
    const dpr = window.devicePixelRatio || 1;
    const z = fit(frameCanvas), W = z.w, H = z.h;
    if (!W || !H) return;
    const g = frameCanvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#000"; g.fillRect(0, 0, W, H);
    const k = Math.min(W / shownMeta.width, H / shownMeta.height);
    const dw = shownMeta.width * k, dh = shownMeta.height * k, ox = (W - dw) / 2, oy = (H - dh) / 2;
    g.drawImage(shot, ox, oy, dw, dh);
    frameAt = { ox: ox, oy: oy, s: dw / shownMeta.frame_width, fw: shownMeta.frame_width, fh: shownMeta.frame_height };
    if (roi) {  // the eye region drawn on the image (frame pixels), to pass as --eye-roi
      g.save(); g.setLineDash([6, 4]); g.strokeStyle = COL.eye; g.lineWidth = 2;
      g.strokeRect(ox + roi[0] * frameAt.s, oy + roi[1] * frameAt.s, roi[2] * frameAt.s, roi[3] * frameAt.s);
      g.restore();
    }
    const r = rowOfFrame(shownMeta.frame);
    if (r && r[C.face] && r[C.x0] !== null) {  // the face box the run used for this very frame
      const s = dw / shownMeta.frame_width;
      g.strokeStyle = COL.box; g.lineWidth = 2;
      g.strokeRect(ox + r[C.x0] * s, oy + r[C.y0] * s, (r[C.x1] - r[C.x0]) * s, (r[C.y1] - r[C.y0]) * s);
      g.font = "12px system-ui, sans-serif";
      const ear = (v) => (v === null ? "–" : v.toFixed(3));
      const label = "EAR L " + ear(r[C.el]) + "  R " + ear(r[C.er]);
      const lx = ox + r[C.x0] * s, ly = Math.max(16, oy + r[C.y0] * s - 4);
      g.fillStyle = "rgba(0, 0, 0, 0.6)"; g.fillRect(lx, ly - 13, g.measureText(label).width + 8, 16);
      g.fillStyle = COL.box; g.fillText(label, lx + 4, ly - 1);
      const p = shownMeta.points;  // the eye model's 12 points of this frame: each eye's outline (corner, upper
      setData(frameCanvas, "points", p ? String(p.length) : "0");  // lid, corner, lower lid; right eye first)
      if (p) {
        g.strokeStyle = COL.eye; g.fillStyle = COL.eye; g.lineWidth = 1.5;
        for (const e of [0, 6]) {
          g.beginPath();
          for (let i = 0; i < 6; i++) {
            const x = ox + p[e + i][0] * s, y = oy + p[e + i][1] * s;
            if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
          }
          g.closePath(); g.stroke();
          for (let i = 0; i < 6; i++) g.fillRect(ox + p[e + i][0] * s - 1.5, oy + p[e + i][1] * s - 1.5, 3, 3);
        }
      }
    } else if (r && r[C.drop]) {
      g.fillStyle = COL.drop; g.font = "13px system-ui, sans-serif"; g.fillText("dropped frame", ox + 8, oy + 18);
    } else if (r) {
      g.fillStyle = COL.drop; g.font = "13px system-ui, sans-serif"; g.fillText("no face", ox + 8, oy + 18);
    }
    measureLag();
    if (!imageText) { imageText = true; showImageText(); }  // the first image's; then with the status
  }
  let imageText = false, rangeText = "";
  // The text under the image and over the trace changes with every draw: written with the status (twice a second)
  // only, as the page's text costs a browser a layout and a paint each time it changes.
  function showImageText() {
    if (!shownMeta) return;
    setText($("image-frame"), String(shownMeta.frame));
    setText($("image-caption"), shownMeta.frame_width + "×" + shownMeta.frame_height + " px, shown at " +
      shownMeta.width + "×" + shownMeta.height + ", at most " +
      Math.min(status.images_hz || hello.max_image_hz || 10, rateHz) + " images/s" +
      (status.busy ? " (machine busy)" : rateHz < (hello.max_image_hz || 10) ? " (browser busy)" : ""));
    updateLag();
  }
  let lagAt = null;  // the image's lag behind the newest row when it was drawn: [frames, ms]
  function measureLag() {
    if (!shownMeta || rows.length <= start) return;
    const last = rows[rows.length - 1];
    const r = rowOfFrame(shownMeta.frame);
    lagAt = [last[C.frame] - shownMeta.frame,
             r && r[C.t] !== null && last[C.t] !== null ? (last[C.t] - r[C.t]) * 1000 : null];
  }
  function updateLag() {
    if (!lagAt) return;
    const [frames, ms] = lagAt;
    const lag = $("image-lag");
    setText(lag, frames + " frames" + (ms === null ? "" : " (" + ms.toFixed(0) + " ms)"));
    setData(lag, "ms", ms === null ? "" : String(ms));
  }

  // ------------------------------------------------------------------ status, banners, blinks
  function setBanner() {
    const b = $("banner");
    let kind = "", text = "";
    if (ended !== null) { kind = "ended"; text = "The run has ended (" + ended + "). What is shown stays until the page is closed."; }
    else if (!connected) { kind = "disconnected"; text = "Not connected to the run: reconnecting…"; }
    else if (status.stalled_s) { kind = "stalled"; text = "The stream stalled: no frame for " + status.stalled_s.toFixed(1) + " s."; }
    else if (status.face_lost) { kind = "face_lost"; text = "Face lost since frame " + status.face_lost_frame + ": check the camera, the light and the subject."; }
    else if (status.stale) { kind = "stale"; text = "Stale: the newest analysed frame is older than the freshness bound."; }
    setData(b, "kind", kind); setText(b, text); if (b.title !== text) b.title = text;  // whole, if cut short
    if (b.hidden !== !kind) b.hidden = !kind;
  }
  function fmt(v, unit) { return v === null || v === undefined ? "–" : v + (unit || ""); }
  function onStatus(s) { status = s; textDirty = true; draw(); }  // shown at the next animation frame
  function showStatus() {
    const s = status;
    const st = s.stale ? "stale" : s.state;
    const el = $("state");
    if (st) {
      setData(el, "state", st); setText(el, st.replace("_", " "));
      setText($("state-detail"), (s.pending ? "may be " + s.pending.replace("_", " ") + " · " : "") +
        "since frame " + s.since_frame + (s.held_ms !== null ? " (" + (s.held_ms / 1000).toFixed(1) + " s)" : "") +
        (s.open_stable ? " · open and stable" : ""));
    } else { setData(el, "state", ""); setText(el, "file"); setText($("state-detail"), "no gate for a file"); }
    setText($("rate"), fmt(s.rows_per_s));
    setText($("source-fps"), fmt(s.source_fps, " FPS"));
    setText($("drops"), s.dropped_1s + " / " + s.dropped);
    setText($("latency"), fmt(s.latency_ms_p50, " ms") + " / " + fmt(s.latency_ms_max, " ms"));
    setText($("late"), fmt(s.late_rows));
    setText($("tabs"), fmt(s.tabs));
    setText($("last-frame"), String(s.frame));
    showImageText(); setText(rangeEl, rangeText);
    setBanner();
  }
  function addBlinkItem(b) {
    const li = document.createElement("li");
    li.dataset.startFrame = String(b.start_frame); li.dataset.kind = b.kind;
    li.textContent = "#" + b.blink + " frame " + b.start_frame + " · " + (b.duration_ms === null ? "–" : b.duration_ms.toFixed(0)) +
      " ms" + (b.kind === "prolonged_closure" ? " · prolonged closure" : "");
    li.title = "from " + b.start_s + " s to " + b.end_s + " s, amplitude " + b.amplitude;
    const list = $("blink-list"); list.appendChild(li);
    while (list.children.length > 200) list.removeChild(list.firstChild);
    list.scrollTop = list.scrollHeight;
  }

  // ------------------------------------------------------------------ the stream from the run
  let connected = false, es = null;
  function connect() {
    es = new EventSource("events" + q(true));
    es.addEventListener("snapshot", (m) => {
      const d = JSON.parse(m.data);
      hello = d.hello; rows = d.rows; start = 0; blinks = d.blinks; events = d.events; ended = d.ended;
      connected = true; tabId = d.tab === undefined ? null : d.tab; askedHz = null;
      rateHz = Math.min(rateHz, hello.max_image_hz || 10); wantNow();
      $("stem").textContent = hello.stem || ""; $("source").textContent = hello.source + " · " + hello.mode;
      document.title = "eyeblink view: " + (hello.stem || hello.source || "");
      $("model").textContent = hello.eye_model || "–";
      $("conn").textContent = "connected"; $("conn").dataset.ok = "1";
      $("blink-list").textContent = ""; for (const b of blinks) addBlinkItem(b);
      prune(); setBanner(); redraw();
    });
    es.addEventListener("reset", (m) => {  // process --view: the next input
      hello = JSON.parse(m.data); rows = []; start = 0; blinks = []; events = []; shownMeta = null; waiting = null;
      $("stem").textContent = hello.stem || ""; $("source").textContent = hello.source + " · " + hello.mode;
      document.title = "eyeblink view: " + (hello.stem || hello.source || "");
      $("blink-list").textContent = ""; goLive();
    });
    es.addEventListener("rows", (m) => {
      const add = JSON.parse(m.data);
      for (const r of add) rows.push(r);
      prune();
      if (endT === null) { dirty = true; draw(); }  // paused or scrolled back: nothing new in view
    });
    es.addEventListener("blink", (m) => {
      const b = JSON.parse(m.data); blinks.push(b); addBlinkItem(b); redraw();
    });
    es.addEventListener("event", (m) => {
      const ev = JSON.parse(m.data); events.push(ev);
      if (ev.event === "prolonged_closure" || ev.event === "face_lost") redraw();  // its tick on the trace
    });
    es.addEventListener("status", (m) => onStatus(JSON.parse(m.data)));
    es.addEventListener("image", (m) => onImage(JSON.parse(m.data)));
    es.addEventListener("end", (m) => {
      ended = JSON.parse(m.data).reason || "ended"; es.close();
      $("conn").textContent = "run ended"; $("conn").dataset.ok = "0"; setBanner();
    });
    es.onerror = () => {
      if (ended !== null) return;
      connected = false; $("conn").textContent = "reconnecting…"; $("conn").dataset.ok = "0"; setBanner();
    };
  }

  // ------------------------------------------------------------------ keys and pointer
  $("pause").onclick = () => setPaused(!paused);
  $("live").onclick = goLive;
  $("theme").onclick = () => setTheme(theme === "dark" ? "light" : "dark");
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const k = e.key;
    if (k === " ") { setPaused(!paused); }
    else if (k === "ArrowLeft") { if (endT === null) endT = newestT(); scrollBy(e.shiftKey ? -10 : -1); }
    else if (k === "ArrowRight") { scrollBy(e.shiftKey ? 10 : 1); }
    else if (k === "+" || k === "=") { windowS = Math.max(2, windowS / 1.5); redraw(); }
    else if (k === "-" || k === "_") { windowS = Math.min(hello.history_s || 60, windowS * 1.5); redraw(); }
    else if (k === "End" || k === "l" || k === "L") { goLive(); }
    else if (k === "t" || k === "T") { setTheme(theme === "dark" ? "light" : "dark"); }
    else return;
    e.preventDefault();
  });
  trace.addEventListener("wheel", (e) => {
    e.preventDefault(); if (endT === null) endT = newestT(); scrollBy((e.deltaY || e.deltaX) > 0 ? 1 : -1);
  }, { passive: false });
  // An eye region drawn on the camera image (a recording of one eye): dragged in frame pixels, shown as the
  // --eye-roi X,Y,W,H a run of that camera takes (the region of a run is fixed from its start)
  let frameAt = null, roi = null, roiFrom = null;
  function framePoint(e) {
    const b = frameCanvas.getBoundingClientRect(), z = frameAt;
    const x = Math.round((e.clientX - b.left - z.ox) / z.s), y = Math.round((e.clientY - b.top - z.oy) / z.s);
    return [Math.max(0, Math.min(z.fw, x)), Math.max(0, Math.min(z.fh, y))];
  }
  function showRoi() {
    const text = roi ? "--eye-roi " + roi.join(",") : "–";
    setText($("roi"), text); setData($("roi"), "roi", roi ? roi.join(",") : "");
  }
  frameCanvas.addEventListener("pointerdown", (e) => {
    if (!frameAt) return;
    roiFrom = framePoint(e); roi = null; frameCanvas.setPointerCapture(e.pointerId);
  });
  frameCanvas.addEventListener("pointermove", (e) => {
    if (roiFrom === null) return;
    const p = framePoint(e);
    roi = [Math.min(p[0], roiFrom[0]), Math.min(p[1], roiFrom[1]), Math.abs(p[0] - roiFrom[0]),
           Math.abs(p[1] - roiFrom[1])];
    shownDirty = true; draw();
  });
  frameCanvas.addEventListener("pointerup", () => {
    if (roiFrom === null) return;
    roiFrom = null;
    if (roi && (roi[2] < 4 || roi[3] < 4)) roi = null;  // a click, not a region: the drawn one goes
    showRoi(); shownDirty = true; draw();
  });
  let dragX = null;
  trace.addEventListener("pointerdown", (e) => { dragX = e.clientX; if (endT === null) endT = newestT(); trace.setPointerCapture(e.pointerId); });
  trace.addEventListener("pointermove", (e) => {
    if (dragX === null) return;
    const plotW = Math.max(10, size.get(trace).w - 54);
    const ds = -(e.clientX - dragX) / plotW * windowS; dragX = e.clientX; scrollBy(ds);
  });
  trace.addEventListener("pointerup", () => { dragX = null; });
  document.addEventListener("visibilitychange", () => {
    wantNow();
    if (!document.hidden) { shownDirty = true; textDirty = true; redraw(); }
  });
  loadColours();
  connect();
})();
