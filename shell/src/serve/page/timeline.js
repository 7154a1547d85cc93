// commdb serve: the timeline page. Every view is asked from the server for the visible window
// at the canvas's width (GET /api/view); what the page holds is one view, bounded by the
// screen. The state a test reads is window.commdbTimeline.
"use strict";
(function () {
  const GUTTER = 180, RULER = 22, LANE = 14, MIN_ROW = 3, MAX_ROW = 22;
  const canvas = document.getElementById("timeline");
  const scroller = document.getElementById("scroller");
  const g = canvas.getContext("2d");
  const tip = document.getElementById("tip");
  const status = document.getElementById("status");
  const st = {
    run: null, t0: 0, t1: 1, view: null, group: "node", blocks: new Set(), opened: new Set(), threads: new Set(),
    overlays: {}, overlayOn: { critical_path: false, waits: false, blamed: false },
    pending: null, timings: [], errors: [], hover: null, selected: null, requested: 0, drawn: 0,
  };
  window.commdbTimeline = {
    state: () => ({
      t0: st.t0, t1: st.t1, group: st.group, rows: st.view ? st.view.rows.length : 0,
      cells: st.view ? st.view.calls.length : 0, lines: st.view ? st.view.messages.length : 0,
      marks: st.view ? st.view.collectives.length : 0, resolution: st.view ? st.view.resolution : null,
      viewT0: st.view ? st.view.t0 : null, viewT1: st.view ? st.view.t1 : null,
      requested: st.requested, drawn: st.drawn, loading: !!st.pending, hover: st.hover, selected: st.selected,
      timings: st.timings.slice(), errors: st.errors.slice(), status: status.textContent,
      overlays: Object.fromEntries(Object.entries(st.overlays).map(([k, v]) => [k, v ? v.stretches.length + v.bands.length : 0])),
      geometry: geometry(),
    }),
    view: () => st.view,
  };

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " us";
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    if (b >= 1 << 20) return (b / (1 << 20)).toPrecision(4) + " MiB";
    if (b >= 1024) return (b / 1024).toPrecision(4) + " KiB";
    return Math.round(b) + " B";
  }
  function hash(s) { let h = 2166136261; for (const c of s) h = Math.imul(h ^ c.charCodeAt(0), 16777619); return h >>> 0; }
  const colours = {};
  function colour(region) {
    if (colours[region]) return colours[region];
    const h = hash(region);
    let c;
    if (/^MPI_/i.test(region)) c = `hsl(${350 + (h % 25)}, ${60 + (h >> 5) % 30}%, ${40 + (h >> 9) % 25}%)`;
    else if (/^(omp|!\$omp|pthread)/i.test(region)) c = `hsl(${30 + h % 25}, 85%, ${45 + (h >> 7) % 20}%)`;
    else if (/^(cuda|cu[A-Z]|hip|kernel)/.test(region)) c = `hsl(${280 + h % 30}, 55%, ${45 + (h >> 7) % 20}%)`;
    else c = `hsl(${90 + h % 150}, ${35 + (h >> 5) % 35}%, ${50 + (h >> 9) % 25}%)`;
    return (colours[region] = c);
  }
  function setStatus(text, error) {
    status.textContent = text;
    status.className = error ? "error" : "";
    if (error) st.errors.push(text);
  }

  // Geometry: the timeline's width and the rows' height.
  function geometry() {
    const width = Math.max(1, Math.floor(scroller.clientWidth) - GUTTER);
    const rows = st.view ? st.view.rows.length : 1;
    const avail = Math.max(40, scroller.clientHeight - RULER - LANE - 4);
    const rowH = Math.max(MIN_ROW, Math.min(MAX_ROW, Math.floor(avail / Math.max(1, rows))));
    return { width, rowH, height: RULER + LANE + rows * rowH + 2 };
  }
  const xOf = (t, w) => GUTTER + (t - st.t0) / (st.t1 - st.t0) * w;
  const tOf = (x, w) => st.t0 + (x - GUTTER) / w * (st.t1 - st.t0);

  function lodResolution(t0, t1, px) {
    const raw = Math.max(1, (t1 - t0) / px);
    for (let scale = 1; ; scale *= 10) for (const m of [1, 2, 5]) if (m * scale >= raw) return m * scale;
  }

  // What is opened, as the server's parameters.
  const opened = () => ({ group: st.group, blocks: [...st.blocks].join(","), open: [...st.opened].join(","), threads: [...st.threads].join(",") });

  // Ask for the view of [st.t0, st.t1) at the current width; an older request still running
  // is cancelled (the server drops its query).
  function request() {
    const { width } = geometry();
    const res = lodResolution(st.t0, st.t1, width);
    const t0 = Math.floor(st.t0 / res) * res;
    const t1 = Math.max(t0 + res, Math.ceil(st.t1 / res) * res);
    if (st.pending) st.pending.abort();
    const ctl = new AbortController();
    st.pending = ctl;
    const q = new URLSearchParams({ t0, t1, width, ...opened() });
    const asked = performance.now();
    st.requested++;
    setStatus("loading…");
    fetch("/api/view?" + q, { signal: ctl.signal })
      .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
      .then(({ ok, body }) => {
        if (st.pending === ctl) st.pending = null;
        if (!ok) { setStatus(body.error || "the view failed", true); return; }
        st.view = body;
        index(body);
        draw();
        st.drawn++;
        const ms = performance.now() - asked;
        st.timings.push(ms);
        setStatus(`${body.rows.length} rows, ${body.calls.length} cells, ${body.messages.length} of ${body.message_rows} message lines, ${Math.round(ms)} ms`);
        legend();
        overlays();
      })
      .catch((e) => { if (e.name !== "AbortError") setStatus("the server did not answer: " + e.message, true); });
  }

  // Cells per row, sorted by start, for the hover.
  function index(v) {
    v.byRow = v.rows.map(() => []);
    for (const c of v.calls) if (v.byRow[c[0]]) v.byRow[c[0]].push(c);
    for (const r of v.byRow) r.sort((a, b) => a[1] - b[1]);
  }

  function draw() {
    const geo = geometry();
    const dpr = window.devicePixelRatio || 1;
    const cssW = scroller.clientWidth;
    if (canvas.width !== Math.floor(cssW * dpr) || canvas.height !== Math.floor(geo.height * dpr)) {
      canvas.width = Math.floor(cssW * dpr); canvas.height = Math.floor(geo.height * dpr);
      canvas.style.width = cssW + "px"; canvas.style.height = geo.height + "px";
    }
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cssW, geo.height);
    const v = st.view;
    document.getElementById("window").textContent = `${fmt(st.t0 - (st.run ? st.run.t0 : 0))} – ${fmt(st.t1 - (st.run ? st.run.t0 : 0))} (${fmt(st.t1 - st.t0)} shown)`;
    ruler(geo);
    if (!v) return;
    const w = geo.width, top = RULER + LANE;
    g.save();
    g.beginPath(); g.rect(GUTTER, 0, w, geo.height); g.clip();
    // Calls.
    for (const c of v.calls) {
      const x0 = xOf(c[1], w), x1 = xOf(c[2], w);
      g.fillStyle = colour(v.regions[c[3]]);
      g.fillRect(x0, top + c[0] * geo.rowH, Math.max(1, x1 - x0), geo.rowH - (geo.rowH > 5 ? 1 : 0));
    }
    // Overlays: the blamed windows as bands over every row, then waits and the critical path.
    const blamed = st.overlayOn.blamed && st.overlays.blamed;
    if (blamed) {
      for (const b of blamed.bands) {
        const x = GUTTER + b[0] * w / v.width, len = Math.max(1, (b[1] - b[0]) * w / v.width);
        g.fillStyle = "rgba(255,120,0,0.16)";
        g.fillRect(x, top, len, v.rows.length * geo.rowH);
        g.fillStyle = "rgba(230,90,0,0.9)";
        g.fillRect(x, RULER, len, 2);
      }
    }
    const wait = st.overlayOn.waits && st.overlays.waits;
    if (wait) {
      g.fillStyle = "rgba(200,0,0,0.55)";
      for (const s of wait.stretches) g.fillRect(GUTTER + s[1] * w / v.width, top + s[0] * geo.rowH + geo.rowH / 2, Math.max(1, (s[2] - s[1]) * w / v.width), Math.max(1, geo.rowH / 2 - 1));
    }
    const cp = st.overlayOn.critical_path && st.overlays.critical_path;
    if (cp) {
      g.fillStyle = "rgba(255,196,0,0.95)";
      g.strokeStyle = "rgba(0,0,0,0.9)";
      g.lineWidth = 1;
      for (const s of cp.stretches) {
        const x = GUTTER + s[1] * w / v.width, y = top + s[0] * geo.rowH + geo.rowH / 2 - 2.5, len = Math.max(1, (s[2] - s[1]) * w / v.width);
        g.fillRect(x, y, len, 5);
        g.strokeRect(x, y, len, 5);
      }
    }
    // Messages: a line from the send to the receive.
    g.strokeStyle = v.messages.length > 400 ? "rgba(20,20,20,0.25)" : "rgba(20,20,20,0.6)";
    for (const m of v.messages) {
      g.lineWidth = Math.min(3, 0.6 + Math.log10(m[4]));
      g.beginPath();
      const half = (m[10] || v.resolution) / 2;
      g.moveTo(xOf(m[2] + half, w), top + (m[0] + 0.5) * geo.rowH);
      g.lineTo(xOf(m[3] + half, w), top + (m[1] + 0.5) * geo.rowH);
      g.stroke();
    }
    // Collectives in their lane.
    for (const c of v.collectives) {
      const x0 = xOf(c[1], w), x1 = xOf(c[1] + c[4], w);
      g.fillStyle = colour(c[2] === "mixed" ? "collective" : c[2]);
      g.fillRect(x0, RULER + 2, Math.max(2, x1 - x0), LANE - 4);
    }
    g.restore();
    // Row labels.
    g.fillStyle = "#fafafa"; g.fillRect(0, top, GUTTER - 2, v.rows.length * geo.rowH);
    g.fillStyle = "#222"; g.font = `${Math.min(12, geo.rowH - 1)}px system-ui`; g.textBaseline = "middle";
    if (geo.rowH >= 7) {
      v.rows.forEach((r, i) => {
        const mark = r.kind === "node" || r.kind === "block" ? "▸ " : r.kind === "rank" && r.has_locations ? (st.threads.has(r.rank) ? "▾ " : "▸ ") : "  ";
        g.fillText(mark + r.label, 4, top + (i + 0.5) * geo.rowH, GUTTER - 8);
      });
    }
    g.fillText("collectives", 4, RULER + LANE / 2);
  }

  function ruler(geo) {
    const w = geo.width, span = st.t1 - st.t0;
    const step = lodResolution(0, span, Math.max(1, w / 110));
    g.fillStyle = "#f3f3f3"; g.fillRect(GUTTER, 0, w, RULER);
    g.fillStyle = "#333"; g.font = "11px system-ui"; g.textBaseline = "middle";
    const base = st.run ? st.run.t0 : 0;
    for (let t = Math.ceil((st.t0 - base) / step) * step + base; t < st.t1; t += step) {
      const x = xOf(t, w);
      g.fillRect(x, RULER - 5, 1, 5);
      g.fillText(fmt(t - base), x + 2, RULER / 2);
    }
  }

  function legend() {
    const v = st.view, el = document.getElementById("legend");
    const total = {};
    for (const c of v.calls) total[c[3]] = (total[c[3]] || 0) + (c[2] - c[1]);
    const order = Object.keys(total).sort((a, b) => total[b] - total[a]).slice(0, 24);
    el.innerHTML = "";
    for (const k of order) {
      const span = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = colour(v.regions[k]);
      span.append(i, v.regions[k]);
      el.append(span);
    }
    if (v.message_rows > v.messages.length) el.append(` · ${v.messages.length} busiest of ${v.message_rows} message lines drawn`);
    el.append(" · messages within a folded row are not drawn");
    if (v.line_resolution > v.resolution) el.append(` · lines between folded rows in slots of ${fmt(v.line_resolution)}`);
  }

  // Overlays: asked per view; a 202 means the analysis is still running.
  function overlays() {
    for (const name of Object.keys(st.overlayOn)) {
      if (!st.overlayOn[name] || !st.view) continue;
      const v = st.view;
      const q = new URLSearchParams({ name, t0: v.t0, t1: v.t1, width: v.width, ...opened() });
      fetch("/api/overlay?" + q).then((r) => r.json().then((body) => ({ code: r.status, body }))).then(({ code, body }) => {
        if (code === 202) { setStatus(`computing ${name.replace("_", " ")} over the whole run…`); setTimeout(overlays, 1000); return; }
        if (code !== 200) { setStatus(body.error, true); return; }
        if (st.view !== v) return;
        st.overlays[name] = body;
        setStatus(name === "blamed"
          ? `${body.bands.length} blamed windows in the window (attribution)`
          : `${name.replace("_", " ")}: ${body.stretches.length} stretches in the window`);
        draw();
      }).catch((e) => setStatus("the server did not answer: " + e.message, true));
    }
  }

  // Which row and time are under (x, y) of the canvas.
  function at(x, y) {
    const geo = geometry();
    const row = Math.floor((y - RULER - LANE) / geo.rowH);
    if (!st.view || x < GUTTER || row < 0 || row >= st.view.rows.length) return null;
    const t = tOf(x, geo.width);
    const cells = st.view.byRow[row];
    let lo = 0, hi = cells.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (cells[mid][2] <= t) lo = mid + 1; else hi = mid; }
    const cell = lo < cells.length && cells[lo][1] <= t ? cells[lo] : null;
    return { row, t: Math.round(t), cell, r: st.view.rows[row] };
  }

  function nearestMessage(x, y) {
    const geo = geometry(), v = st.view, top = RULER + LANE;
    if (!v) return null;
    let best = null, bestD = 4;
    for (const m of v.messages) {
      const half = (m[10] || v.resolution) / 2;
      const ax = xOf(m[2] + half, geo.width), ay = top + (m[0] + 0.5) * geo.rowH;
      const bx = xOf(m[3] + half, geo.width), by = top + (m[1] + 0.5) * geo.rowH;
      const dx = bx - ax, dy = by - ay, len = dx * dx + dy * dy;
      const k = len ? Math.max(0, Math.min(1, ((x - ax) * dx + (y - ay) * dy) / len)) : 0;
      const d = Math.hypot(x - ax - k * dx, y - ay - k * dy);
      if (d < bestD) { bestD = d; best = m; }
    }
    return best;
  }

  let stackTimer = null, stackCtl = null;
  function hover(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const m = nearestMessage(x, y);
    const h = at(x, y);
    st.hover = null;
    if (m) {
      const v = st.view;
      st.hover = { kind: "message", src: v.rows[m[0]].label, dst: v.rows[m[1]].label, messages: m[4] };
      const latency = m[9] == null ? '' : `, mean latency L ${m[9].toFixed(2)} (1 = the criterion)`;
      showTip(ev, `${m[4]} message(s) ${v.rows[m[0]].label} → ${v.rows[m[1]].label}\nmean size ${fmtBytes(m[5])}, mean transmission ${fmt(m[6] || 0)}${latency}\nsent from ${fmt(m[7] - st.run.t0)}, last received ${fmt(m[8] - st.run.t0)}`);
      return;
    }
    if (!h) { tip.hidden = true; return; }
    const region = h.cell ? st.view.regions[h.cell[3]] : "(no call)";
    st.hover = { kind: "cell", row: h.row, label: h.r.label, region, t: h.t, slot_start: h.cell ? h.cell[1] : null };
    let text = `${h.r.label}\n${region}` + (h.cell ? `: ${Math.round(h.cell[4] * 100)}% of ${fmt(h.cell[2] - h.cell[1])} from ${fmt(h.cell[1] - st.run.t0)}` : "");
    const blamed = st.overlayOn.blamed && st.overlays.blamed;
    if (blamed) {
      const px = (h.t - st.view.t0) / (st.view.t1 - st.view.t0) * st.view.width;
      const band = blamed.bands.find((b) => px >= b[0] && px < b[1]);
      if (band) text += `\nblamed window: ${blamed.labels[band[2]]}`;
    }
    showTip(ev, text);
    if (h.r.kind !== "node" && h.r.kind !== "block") {
      clearTimeout(stackTimer);
      stackTimer = setTimeout(() => stack(h, ev, text), 120);
    }
  }
  function stack(h, ev, text) {
    if (stackCtl) stackCtl.abort();
    stackCtl = new AbortController();
    const q = new URLSearchParams({ rank: h.r.rank, thread: h.r.thread ?? 0, ts: h.t });
    fetch("/api/stack?" + q, { signal: stackCtl.signal }).then((r) => r.json()).then((b) => {
      if (!b.stack || !st.hover || st.hover.t !== h.t) return;
      const path = b.stack.map((s) => s[0]).join(" / ");
      const inner = b.stack[b.stack.length - 1];
      st.hover.path = path;
      showTip(ev, text + (inner ? `\ncall path ${path}\n${inner[0]} from ${fmt(inner[1] - st.run.t0)}, ${fmt(inner[3])}` : "\nno call at this time"));
    }).catch(() => {});
  }
  function showTip(ev, text) {
    const rect = canvas.parentElement.parentElement.getBoundingClientRect();
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX - rect.left + 14, rect.width - 300) + "px";
    tip.style.top = (ev.clientY - rect.top + 14) + "px";
  }

  function click(ev) {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const geo = geometry();
    const row = Math.floor((y - RULER - LANE) / geo.rowH);
    if (!st.view || row < 0 || row >= st.view.rows.length) return;
    const r = st.view.rows[row];
    if (x < GUTTER) { // labels fold and open
      if (r.kind === "block") st.blocks.add(r.block);
      else if (r.kind === "node") st.opened.add(r.node);
      else if (r.kind === "rank" && r.has_locations) st.threads.has(r.rank) ? st.threads.delete(r.rank) : st.threads.add(r.rank);
      else if (st.opened.has(r.node)) st.opened.delete(r.node);
      request();
      return;
    }
    const h = at(x, y);
    if (!h || h.r.kind === "node" || h.r.kind === "block") return;
    const q = new URLSearchParams({ rank: r.rank, thread: r.thread ?? 0, ts: h.t, analyses: 1 });
    const details = document.getElementById("details");
    details.textContent = "…";
    select("details");
    fetch("/api/stack?" + q).then((res) => res.json()).then((b) => {
      st.selected = b;
      if (b.error) { details.innerHTML = `<div class="err"></div>`; details.firstChild.textContent = b.error; return; }
      const inner = b.stack[b.stack.length - 1];
      let html = `<b>${r.label}</b> at ${fmt(h.t - st.run.t0)}<br>`;
      html += inner ? `call path ${b.stack.map((s) => esc(s[0])).join(" / ")}; ${esc(inner[0])} from ${fmt(inner[1] - st.run.t0)} for ${fmt(inner[3])}<br>` : "no call at this time<br>";
      if (b.analyses === "running") html += "the wait states and the critical path are being computed; click again in a moment";
      else if (b.analyses) {
        html += b.on_critical_path ? "<b>on the critical path</b><br>" : "not on the critical path<br>";
        html += b.waits.length ? table(["pattern", "from", "wait"], b.waits.map((w) => [w[0], fmt(w[1] - st.run.t0), fmt(w[2] - w[1])])) : "no wait states in this call";
      }
      details.innerHTML = html;
    }).catch((e) => { details.textContent = "the server did not answer: " + e.message; });
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  function table(cols, rows) {
    return "<table><tr>" + cols.map((c) => `<th>${esc(c)}</th>`).join("") + "</tr>" +
      rows.map((r) => "<tr>" + r.map((v) => `<td class="${typeof v === "number" ? "" : "text"}">${v === null ? "" : esc(v)}</td>`).join("") + "</tr>").join("") + "</table>";
  }

  // Zoom about the cursor; pan by dragging.
  function zoom(factor, x) {
    const { width } = geometry();
    const run = st.run, span = st.t1 - st.t0;
    const newSpan = Math.max(width, Math.min(run.t1 - run.t0, span * factor));
    const anchor = tOf(Math.max(GUTTER, x), width);
    let t0 = anchor - (anchor - st.t0) * newSpan / span;
    t0 = Math.max(run.t0, Math.min(run.t1 - newSpan, t0));
    st.t0 = Math.round(t0); st.t1 = Math.round(t0 + newSpan);
    draw();
    request();
  }
  function pan(dx) {
    const { width } = geometry();
    const run = st.run, span = st.t1 - st.t0;
    let t0 = st.t0 - dx / width * span;
    t0 = Math.max(run.t0, Math.min(run.t1 - span, t0));
    st.t0 = Math.round(t0); st.t1 = Math.round(t0 + span);
  }
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const rect = canvas.getBoundingClientRect();
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, ev.clientX - rect.left);
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, t0: st.t0, moved: false }; canvas.classList.add("dragging"); });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) { if (ev.target === canvas) hover(ev); else tip.hidden = true; return; }
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    if (!drag.moved) return;
    tip.hidden = true;
    const span = st.t1 - st.t0;
    st.t0 = drag.t0; st.t1 = drag.t0 + span;
    pan(dx);
    draw();
  });
  window.addEventListener("mouseup", (ev) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (moved) request(); else click(ev);
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  document.getElementById("whole").onclick = () => { st.t0 = st.run.t0; st.t1 = st.run.t1; request(); };
  document.getElementById("fold").onclick = () => { st.blocks.clear(); st.opened.clear(); st.threads.clear(); request(); };
  // Rows by node or by communication region: everything folds, the window stays.
  document.getElementById("group").onchange = (ev) => {
    st.group = ev.target.value;
    st.blocks.clear(); st.opened.clear(); st.threads.clear(); st.overlays = {};
    request();
  };
  for (const name of Object.keys(st.overlayOn)) {
    document.getElementById("ov-" + name).onchange = (ev) => {
      st.overlayOn[name] = ev.target.checked;
      if (!ev.target.checked) { delete st.overlays[name]; draw(); } else overlays();
    };
  }
  window.addEventListener("resize", () => { draw(); clearTimeout(st.resize); st.resize = setTimeout(request, 150); });

  // Panes: details, the query box, the report.
  function select(name) {
    for (const b of document.querySelectorAll("#panes nav button")) b.classList.toggle("on", b.dataset.pane === name);
    for (const p of document.querySelectorAll(".pane")) p.hidden = p.id !== name;
  }
  for (const b of document.querySelectorAll("#panes nav button")) b.onclick = () => { select(b.dataset.pane); if (b.dataset.pane === "sections") report(); };
  function runQuery() {
    const out = document.getElementById("result");
    out.textContent = "running…";
    const q = new URLSearchParams({ t0: st.t0, t1: st.t1 });
    fetch("/api/query?" + q, { method: "POST", body: document.getElementById("sql").value })
      .then((r) => r.json()).then((b) => {
        if (b.error) { out.innerHTML = '<div class="err"></div>'; out.firstChild.textContent = b.error; return; }
        const more = b.total_rows > b.rows.length ? ` (the first ${b.rows.length} shown)` : "";
        out.innerHTML = `<div class="hint">${b.total_rows} rows in ${b.elapsed_ms} ms${more}</div>` + table(b.columns, b.rows) + (b.chart || "");
      }).catch((e) => { out.textContent = "the server did not answer: " + e.message; });
  }
  document.getElementById("run").onclick = runQuery;
  document.getElementById("sql").addEventListener("keydown", (ev) => { if (ev.key === "Enter" && ev.ctrlKey) runQuery(); });
  let reportAsked = false;
  function report() {
    if (reportAsked) return;
    reportAsked = true;
    const pane = document.getElementById("sections");
    pane.textContent = "making the report (it runs every analysis over the whole run)…";
    fetch("/api/report").then((r) => r.text().then((t) => ({ ok: r.ok, t }))).then(({ ok, t }) => {
      if (!ok) { pane.innerHTML = '<div class="err"></div>'; pane.firstChild.textContent = JSON.parse(t).error; reportAsked = false; return; }
      const frame = document.createElement("iframe");
      frame.style.cssText = "width:100%;height:100%;border:0";
      frame.srcdoc = t;
      pane.textContent = "";
      pane.append(frame);
    }).catch((e) => { pane.textContent = "the server did not answer: " + e.message; reportAsked = false; });
  }

  fetch("/api/trace").then((r) => r.json()).then((run) => {
    if (run.error) { setStatus(run.error, true); return; }
    st.run = run; st.t0 = run.t0; st.t1 = run.t1;
    draw();
    request();
  }).catch((e) => setStatus("the server did not answer: " + e.message, true));
})();
