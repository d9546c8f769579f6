/* eyeblink view: the live page (inlined by eyeblink.runtime.view; no external resource). Data come from the run
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
    loadColours(); dirty = true; shownDirty = true; draw();
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
    dirty = true; draw();
  }
  function setPaused(p) {
    paused = p;
    if (p && endT === null) endT = newestT();
    if (!p) endT = null;
    $("pause").textContent = p ? "resume" : "pause";
    $("pause").classList.toggle("on", p);
    dirty = true; draw();
  }
  function goLive() { setPaused(false); endT = null; dirty = true; draw(); }

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
    dirty = true; shownDirty = true; draw();
  }).observe(trace);
  new ResizeObserver((entries) => {
    for (const e of entries) {
      const z = size.get(e.target); z.w = e.contentRect.width; z.h = e.contentRect.height;
    }
    shownDirty = true; draw();
  }).observe(frameCanvas);
  // The page draws only what changed (new rows, a new image, a scroll), at most DRAW_MS apart and never while
  // hidden: a watching browser costs little CPU beside the session.
  let drawPending = false, lastDraw = 0, dirty = false, shownDirty = false;
  const DRAW_MS = 100;  // the trace at most 10 times a second
  function draw() {
    if (drawPending || document.hidden || !(dirty || shownDirty)) return;
    drawPending = true;
    setTimeout(() => requestAnimationFrame(() => {
      drawPending = false; lastDraw = performance.now();
      if (dirty) { dirty = false; drawTrace(); }
      if (shownDirty) { shownDirty = false; drawFrame(); }
    }), Math.max(0, lastDraw + DRAW_MS - performance.now()));
  }
  // the per-pixel-column envelopes, kept between draws (no allocation per draw or per row)
  let envCols = 0, envBuf = null, noface = null, dropped = null;
  function envelopes(cols) {
    if (cols !== envCols) {
      envCols = cols; envBuf = new Float64Array(cols * 8); noface = new Uint8Array(cols); dropped = new Uint8Array(cols);
    }
    for (let i = 0; i < cols * 8; i += 2) { envBuf[i] = Infinity; envBuf[i + 1] = -Infinity; }
    noface.fill(0); dropped.fill(0);
  }
  function drawTrace() {
    const dpr = window.devicePixelRatio || 1;
    const z = fit(trace), W = z.w, H = z.h;
    if (!W || !H) return;
    const g = trace.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const padL = 46, padR = 8, top = 8, gap = 18;
    const plotW = Math.max(10, W - padL - padR);
    const laneA = { y: top, h: (H - top - gap - 20) * 0.62 };
    const laneB = { y: laneA.y + laneA.h + gap, h: (H - top - gap - 20) * 0.38 };
    const t1 = viewEnd(), t0 = t1 - windowS;
    const X = (t) => padL + (t - t0) / windowS * plotW;
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = COL.muted; g.strokeStyle = COL.grid; g.lineWidth = 1;
    // the EAR lane's scale: up to 1.5 x the highest baseline in view (0.45 before one is known)
    const i0 = lowerBound(t0), i1 = lowerBound(t1 + 1e-9);
    let top1 = 0;
    for (let i = i0; i < i1; i++) { const b = rows[i][C.base]; if (b !== null && b > top1) top1 = b; }
    const yMax = top1 > 0 ? top1 * 1.5 : 0.45;
    const YA = (v) => laneA.y + laneA.h - v / yMax * laneA.h;
    const YB = (v) => laneB.y + laneB.h - Math.max(0, Math.min(1, v)) * laneB.h;
    for (const [lane, ticks, Y, fmt] of [[laneA, [0, yMax / 3, 2 * yMax / 3, yMax], YA, (v) => v.toFixed(2)],
                                         [laneB, [0, 0.5, 1], YB, (v) => v.toFixed(1)]]) {
      for (const v of ticks) {
        const y = Math.round(Y(v)) + 0.5;
        g.beginPath(); g.moveTo(padL, y); g.lineTo(padL + plotW, y); g.stroke();
        g.fillText(fmt(v), 4, y + 4);
      }
      g.strokeRect(padL + 0.5, lane.y + 0.5, plotW - 1, lane.h - 1);
    }
    g.fillText("EAR", padL + 4, laneA.y + 12); g.fillText("FEC", padL + 4, laneB.y + 12);
    // time ticks (capture time, s)
    const step = windowS > 30 ? 10 : windowS > 12 ? 5 : windowS > 4 ? 1 : 0.5;
    for (let s = Math.ceil(t0 / step) * step; s <= t1; s += step) {
      const x = Math.round(X(s)) + 0.5;
      g.beginPath(); g.moveTo(x, laneA.y); g.lineTo(x, laneB.y + laneB.h); g.stroke();
      g.fillText(s.toFixed(step < 1 ? 1 : 0) + " s", x - 10, H - 5);
    }
    g.save();
    g.beginPath(); g.rect(padL, 0, plotW, H); g.clip();
    // blinks and prolonged closures: bands over both lanes
    for (const b of blinks) {
      if (b.end_s === null || b.end_s < t0 || b.start_s > t1) continue;
      g.fillStyle = b.kind === "prolonged_closure" ? COL.prolonged : COL.blink;
      const x = X(b.start_s), w = Math.max(2, X(b.end_s) - x);
      g.fillRect(x, laneA.y, w, laneA.h); g.fillRect(x, laneB.y, w, laneB.h);
    }
    // per pixel column: min/max envelopes of every frame (each column's min and max of left, right, baseline and
    // closure, side by side in one buffer); no face and dropped frames marked
    const cols = Math.ceil(plotW);
    envelopes(cols);
    const e = envBuf, kx = plotW / windowS;
    for (let i = i0; i < i1; i++) {
      const r = rows[i]; let c = Math.floor((r[C.t] - t0) * kx);
      c = c < 0 ? 0 : c >= cols ? cols - 1 : c;
      if (r[C.drop]) { dropped[c] = 1; continue; }
      if (!r[C.face]) noface[c] = 1;
      const o = c * 8;
      let v = r[C.el]; if (v !== null) { if (v < e[o]) e[o] = v; if (v > e[o + 1]) e[o + 1] = v; }
      v = r[C.er]; if (v !== null) { if (v < e[o + 2]) e[o + 2] = v; if (v > e[o + 3]) e[o + 3] = v; }
      v = r[C.base]; if (v !== null) { if (v < e[o + 4]) e[o + 4] = v; if (v > e[o + 5]) e[o + 5] = v; }
      v = r[C.cl]; if (v !== null) { if (v < e[o + 6]) e[o + 6] = v; if (v > e[o + 7]) e[o + 7] = v; }
    }
    g.fillStyle = COL.noface;
    for (let c = 0; c < cols; c++) if (noface[c]) { g.fillRect(padL + c, laneA.y, 1, laneA.h); g.fillRect(padL + c, laneB.y, 1, laneB.h); }
    g.fillStyle = COL.drop;
    for (let c = 0; c < cols; c++) if (dropped[c]) g.fillRect(padL + c, laneB.y + laneB.h - 5, 1, 5);
    function envelope(k, Y, color, width) {  // k: the series' offset in a column's 8 values
      g.strokeStyle = color; g.lineWidth = width; g.beginPath();
      let on = false;
      for (let c = 0; c < cols; c++) {
        const lo = e[c * 8 + k], hi = e[c * 8 + k + 1];
        if (lo === Infinity) { on = false; continue; }
        const x = padL + c + 0.5;
        if (!on) { g.moveTo(x, Y(hi)); on = true; } else g.lineTo(x, Y(hi));
        if (lo !== hi) g.lineTo(x, Y(lo));
      }
      g.stroke();
    }
    g.setLineDash([4, 3]); envelope(4, YA, COL.base, 1); g.setLineDash([]);
    envelope(0, YA, COL.left, 1.4);
    envelope(2, YA, COL.right, 1.4);
    envelope(6, YB, COL.closure, 1.4);
    // the gate's events: a tick at the top of the closure lane
    for (const ev of events) {
      if (ev.t === null || ev.t < t0 || ev.t > t1) continue;
      const col = ev.event === "prolonged_closure" ? COL.prolonged : ev.event === "face_lost" ? COL.drop : null;
      if (!col) continue;
      g.fillStyle = col; const x = X(ev.t);
      g.beginPath(); g.moveTo(x - 5, laneB.y); g.lineTo(x + 5, laneB.y); g.lineTo(x, laneB.y + 8); g.fill();
    }
    g.restore();
    const n = i1 - i0;
    setData(trace, "rows", String(rows.length - start));
    setData(trace, "newest", rows.length > start ? String(rows[rows.length - 1][C.frame]) : "-1");
    setText(rangeEl, t0.toFixed(1) + " – " + t1.toFixed(1) + " s · " + n + " frames in view" +
      (paused ? " · paused" : endT !== null ? " · scrolled back" : ""));
  }

  // ------------------------------------------------------------------ the camera image
  const rangeEl = $("range");
  // two images taking turns: the one shown stays while the next loads, each drawn straight onto the canvas
  const imgs = [new Image(), new Image()];
  let shot = null, imgMeta = null, shownMeta = null, loading = false, wanted = null;
  for (const im of imgs) {
    im.onload = () => { loading = false; shot = im; shownMeta = imgMeta; drawFrame(); next(); };
    im.onerror = () => { loading = false; next(); };
  }
  function next() {  // the newest image announced, once the last one has loaded (a slow browser fetches fewer)
    if (loading || !wanted || paused || document.hidden) return;  // a hidden tab fetches no image
    if (shownMeta && wanted.seq === shownMeta.seq) return;
    imgMeta = wanted; loading = true;
    (shot === imgs[0] ? imgs[1] : imgs[0]).src = "frame.jpg?seq=" + wanted.seq + q(false);
  }
  function drawFrame() {
    if (!shownMeta || document.hidden) return;
    const dpr = window.devicePixelRatio || 1;
    const z = fit(frameCanvas), W = z.w, H = z.h;
    if (!W || !H) return;
    const g = frameCanvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#000"; g.fillRect(0, 0, W, H);
    const k = Math.min(W / shownMeta.width, H / shownMeta.height);
    const dw = shownMeta.width * k, dh = shownMeta.height * k, ox = (W - dw) / 2, oy = (H - dh) / 2;
    g.drawImage(shot, ox, oy, dw, dh);
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
    setText($("image-frame"), String(shownMeta.frame));
    setText($("image-caption"), shownMeta.frame_width + "×" + shownMeta.frame_height + " px, shown at " +
      shownMeta.width + "×" + shownMeta.height + ", at most " + (status.images_hz || hello.max_image_hz || 30) +
      " images/s" + (status.busy ? " (machine busy)" : ""));
    updateLag();
  }
  function updateLag() {
    if (!shownMeta || rows.length <= start) return;
    const last = rows[rows.length - 1];
    const r = rowOfFrame(shownMeta.frame);
    const frames = last[C.frame] - shownMeta.frame;
    const ms = r && r[C.t] !== null && last[C.t] !== null ? (last[C.t] - r[C.t]) * 1000 : null;
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
    setData(b, "kind", kind); setText(b, text); if (b.hidden !== !kind) b.hidden = !kind;
  }
  function fmt(v, unit) { return v === null || v === undefined ? "–" : v + (unit || ""); }
  function onStatus(s) {
    status = s;
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
    updateLag();
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
      connected = true;
      $("stem").textContent = hello.stem || ""; $("source").textContent = hello.source + " · " + hello.mode;
      document.title = "eyeblink view: " + (hello.stem || hello.source || "");
      $("model").textContent = hello.eye_model || "–";
      $("conn").textContent = "connected"; $("conn").dataset.ok = "1";
      $("blink-list").textContent = ""; for (const b of blinks) addBlinkItem(b);
      prune(); setBanner(); dirty = true; draw();
    });
    es.addEventListener("reset", (m) => {  // process --view: the next input
      hello = JSON.parse(m.data); rows = []; start = 0; blinks = []; events = []; shownMeta = null; wanted = null;
      $("stem").textContent = hello.stem || ""; $("source").textContent = hello.source + " · " + hello.mode;
      document.title = "eyeblink view: " + (hello.stem || hello.source || "");
      $("blink-list").textContent = ""; goLive();
    });
    es.addEventListener("rows", (m) => {
      const add = JSON.parse(m.data);
      for (const r of add) rows.push(r);
      prune();
      if (!paused) { dirty = true; draw(); }
    });
    es.addEventListener("blink", (m) => {
      const b = JSON.parse(m.data); blinks.push(b); addBlinkItem(b); dirty = true; draw();
    });
    es.addEventListener("event", (m) => { events.push(JSON.parse(m.data)); });
    es.addEventListener("status", (m) => onStatus(JSON.parse(m.data)));
    es.addEventListener("image", (m) => { wanted = JSON.parse(m.data); next(); });
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
    else if (k === "+" || k === "=") { windowS = Math.max(2, windowS / 1.5); dirty = true; draw(); }
    else if (k === "-" || k === "_") { windowS = Math.min(hello.history_s || 60, windowS * 1.5); dirty = true; draw(); }
    else if (k === "End" || k === "l" || k === "L") { goLive(); }
    else if (k === "t" || k === "T") { setTheme(theme === "dark" ? "light" : "dark"); }
    else return;
    e.preventDefault();
  });
  trace.addEventListener("wheel", (e) => {
    e.preventDefault(); if (endT === null) endT = newestT(); scrollBy((e.deltaY || e.deltaX) > 0 ? 1 : -1);
  }, { passive: false });
  let dragX = null;
  trace.addEventListener("pointerdown", (e) => { dragX = e.clientX; if (endT === null) endT = newestT(); trace.setPointerCapture(e.pointerId); });
  trace.addEventListener("pointermove", (e) => {
    if (dragX === null) return;
    const plotW = Math.max(10, size.get(trace).w - 54);
    const ds = -(e.clientX - dragX) / plotW * windowS; dragX = e.clientX; scrollBy(ds);
  });
  trace.addEventListener("pointerup", () => { dragX = null; });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) { dirty = true; shownDirty = true; next(); draw(); }
  });
  loadColours();
  connect();
})();
