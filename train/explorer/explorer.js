// glass step explorer: draws one recorded training step from the JSON the report embeds
// (train/report.cpp writes it into <script id="glass-data">), in the course's order:
//   summary   the run's numbers, each card explaining itself on hover (formula, peak, source)
//   timeline  every launch of the step as a box on its phase's lane; the host's own work that
//             launches nothing (data: reading the batch; host wait; checkpoint) as labelled bands
//             in lanes of their own; host gaps hatched; wheel to zoom, drag to pan; hover for
//             details, click to select a node's launches
//   tape      the step's autograd graph in layers (longest path from the inputs), forward nodes
//             above their backward nodes, each with its output's gradient norm after backward
//             ("—" where none was measured or none arrived), collapsible by module; linked to
//             the timeline
//   memory    the ledger's categories stacked over the step, phase markers, the cost model's
//             predicted peak beside the measured one, the largest tensors alive at the peak
//   roofline  a point per kernel and phase under the roof of its unit, kernels without FLOPs
//             listed beside it
//   tables    per-kernel self vs total time (sortable); the loss curves
// Tests read the DOM: data-launch, data-node, data-ledger, data-kernel, and body[data-ready]
// once everything is drawn. Errors are shown at the top of the page (and fail those tests).
"use strict";

(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const PHASE_COLOR = {
    forward: "#4878d0", backward: "#ee854a", recompute: "#8c613c", optimizer: "#6acc64",
    comm: "#d65f5f", other: "#797979",
    // the host's own work (HostSpan phases: train/step.cpp, train/trainer.cpp)
    data: "#8172b3", "host wait": "#937860", checkpoint: "#da8bc3",
  };
  // Lanes top to bottom: the step's course, the host's work where it falls in it.
  const LANE_ORDER = ["data", "forward", "recompute", "backward", "comm", "optimizer", "other",
                      "host wait", "checkpoint"];
  const LEDGER_COLOR = {
    parameters: "#4878d0", master_weights: "#82c6e2", optimizer_moments: "#6acc64",
    gradients: "#ee854a", saved_activations: "#d65f5f", temporaries: "#956cb4",
    allocator_cache: "#dddddd",
  };
  const LEDGER_LABEL = {
    parameters: "parameters", master_weights: "f32 master weights",
    optimizer_moments: "optimizer moments", gradients: "gradients",
    saved_activations: "saved activations", temporaries: "temporaries",
    allocator_cache: "allocator cache (reserved - allocated)",
  };

  // ---- small helpers ----
  function el(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function sv(tag, attrs, parent, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function si(v, unit) {
    const p = ["", "k", "M", "G", "T", "P"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < p.length - 1) { v /= 1000; i++; }
    return (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)) + " " + p[i] + unit;
  }
  // A gradient norm, "—" where there is none (not measured, or no gradient reached the node).
  function gradNorm(v) {
    if (v === null || v === undefined) return "—";
    return v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e4) ? v.toExponential(2) : v.toPrecision(3);
  }
  function mib(b) { return (b / 1048576).toFixed(b < 10485760 ? 2 : 1) + " MiB"; }
  function us(t) { return t >= 1000 ? (t / 1000).toFixed(2) + " ms" : t.toFixed(1) + " µs"; }
  // Tick labels of a time axis in µs: one unit for the whole axis (chosen from the tick step),
  // with as many decimals as the step needs, so that "0" and "1.5 ms" never share an axis with
  // "0.0 µs".
  function timeTicks(step) {
    const [scale, unit] = step >= 1e5 ? [1e6, " s"] : step >= 100 ? [1e3, " ms"] : [1, " µs"];
    const decimals = Math.max(0, -Math.floor(Math.log10(step / scale) + 1e-9));
    return (t) => (t / scale).toFixed(decimals) + unit;
  }
  function section(id, title, hint) {
    const s = el("section", { id: id }, document.body);
    el("h2", {}, s, title);
    if (hint) el("p", { class: "hint" }, s, hint);
    return s;
  }
  // A "nice" tick step: 1, 2 or 5 times a power of ten, about span / n.
  function tickStep(span, n, integer) {
    let step = Math.pow(10, Math.floor(Math.log10(span / n)));
    for (const m of [1, 2, 5, 10]) if (span / (step * m) <= n) { step *= m; break; }
    return integer ? Math.max(1, Math.round(step)) : step;
  }

  // ---- the hover box ----
  const tip = el("div", { id: "tip" }, document.body);
  function hover(node, text) {
    node.addEventListener("mousemove", (ev) => {
      tip.textContent = typeof text === "function" ? text() : text;
      tip.style.display = "block";
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
      tip.style.top = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8) + "px";
    });
    node.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  }

  const D = JSON.parse(document.getElementById("glass-data").textContent);
  const launches = D.launches;
  const hostSpans = D.host_spans || [];
  // The step: its launches and the host work inside it (reading its batch, waiting for it); host
  // work after it (writing a checkpoint) extends the timeline to fullEnd.
  const AFTER_STEP = ["checkpoint"];
  const endOf = (xs) => xs.reduce((m, l) => Math.max(m, l.start + l.dur), 0);
  const stepEnd = endOf(launches.concat(hostSpans.filter((h) => !AFTER_STEP.includes(h.phase)))) || 1;
  const fullEnd = Math.max(stepEnd, endOf(hostSpans));
  const launchesOfNode = new Map();
  launches.forEach((l, i) => {
    if (l.node < 0) return;
    if (!launchesOfNode.has(l.node)) launchesOfNode.set(l.node, []);
    launchesOfNode.get(l.node).push(i);
  });

  // ---- selection, shared by the timeline and the tape ----
  const launchRects = [];
  const nodeBoxes = new Map();  // node id -> [<g>]
  function select(node) {
    document.querySelectorAll(".hl").forEach((e) => e.classList.remove("hl"));
    const tl = document.getElementById("timeline-svg");
    if (node === null || node === undefined || node < 0) { if (tl) tl.classList.remove("dim"); return; }
    (launchesOfNode.get(node) || []).forEach((i) => launchRects[i].classList.add("hl"));
    (nodeBoxes.get(node) || []).forEach((g) => g.classList.add("hl"));
    if (tl) tl.classList.add("dim");
  }

  function describeLaunch(l, i) {
    const s = l.dur > 0 ? l.dur * 1e-6 : 0;
    return [
      "launch " + i + ": " + l.kernel + "  (" + l.phase + ")",
      "op " + (l.op || "-") + (l.node >= 0 ? "  node #" + l.node : ""),
      "module " + (l.module || "-"),
      "shapes " + (l.shapes || "-") + (l.dtype ? "  dtype " + l.dtype : ""),
      "start " + us(l.start) + ", duration " + us(l.dur) + " = " +
        (100 * l.dur / stepEnd).toFixed(2) + "% of the step",
      "FLOPs " + si(l.flops, "FLOP") + ", bytes " + si(l.bytes, "B"),
      s > 0 ? "achieved " + si(l.flops / s, "FLOP/s") + ", " + si(l.bytes / s, "B/s") : "untimed",
      "bound: " + l.bound + " (" + l.unit + ")",
      "allocated " + mib(l.allocated) + ", reserved " + mib(l.reserved) + " after it",
    ].join("\n");
  }

  // ---- header and summary ----
  function header() {
    el("h1", {}, document.body, D.title);
    for (const n of D.notes) el("p", { class: "note" }, document.body, n);
    el("div", { id: "errors" }, document.body);
  }

  function summary() {
    const s = section("summary", "Summary",
      "Hover over a number for its formula, its inputs and the peak it is against. MFU counts " +
      "the model's FLOPs, HFU every FLOP the kernels did; kernel-busy / step is what " +
      "'GPU utilization' measures, which is not MFU.");
    const cards = el("div", { class: "cards" }, s);
    for (const c of D.summary) {
      const wide = c.key === "model" || c.key === "device";
      const d = el("div", { class: "card" + (wide ? " wide" : ""), "data-summary": c.key,
                            "data-value": String(c.value) }, cards);
      el("div", { class: "label" }, d, c.label);
      el("div", { class: "value" }, d, c.text);
      hover(d, c.label + ": " + c.text + "\n\n" + c.explain);
    }
  }

  // ---- timeline ----
  function timeline() {
    const s = section("timeline", "Timeline of step " + D.step,
      "Look at the holes first (hatched: the host ran no kernel), then the longest boxes. " +
      "Wheel: zoom, drag: pan, click a box: its node's launches (and the node in the tape).");
    const phases = [];
    for (const l of launches.concat(hostSpans)) if (!phases.includes(l.phase)) phases.push(l.phase);
    const rank = (p) => (LANE_ORDER.indexOf(p) + LANE_ORDER.length + 1) % (LANE_ORDER.length + 1);
    phases.sort((a, b) => rank(a) - rank(b));
    const lanes = phases.concat(["host gaps"]);
    const W = 1180, left = 90, laneH = 26, top = 8;
    const H = top + lanes.length * laneH + 24;
    const ctl = el("div", { class: "controls" }, s);
    const reset = el("button", {}, ctl, "reset zoom (the step)");
    const after = hostSpans.filter((h) => AFTER_STEP.includes(h.phase)).map((h) => h.name);
    const whole = fullEnd > stepEnd
      ? el("button", {}, ctl, "zoom out to the host work after the step (" + [...new Set(after)].join(", ") + ")")
      : null;
    const legend = el("span", { class: "legend" }, ctl);
    for (const p of phases) {
      const sp = el("span", {}, legend);
      el("i", { style: "background:" + PHASE_COLOR[p] }, sp);
      sp.appendChild(document.createTextNode(p));
    }
    const svg = sv("svg", { id: "timeline-svg", width: W, height: H }, s);
    const defs = sv("defs", {}, svg);
    const pat = sv("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
                                patternTransform: "rotate(45)" }, defs);
    sv("rect", { width: 6, height: 6, fill: "#f3f3f3" }, pat);
    sv("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#bbb", "stroke-width": 2 }, pat);
    lanes.forEach((p, k) => {
      sv("text", { x: 4, y: top + k * laneH + laneH / 2 + 4 }, svg, p);
      sv("line", { class: "grid", x1: left, x2: W, y1: top + (k + 1) * laneH,
                   y2: top + (k + 1) * laneH }, svg);
    });
    const plot = sv("g", {}, svg);
    const axis = sv("g", { class: "axis" }, svg);
    let view = [0, stepEnd];
    const x = (t) => left + (t - view[0]) / (view[1] - view[0]) * (W - left - 4);
    // Gaps: where no launch runs, longer than 0.5% of the step.
    const iv = launches.map((l) => [l.start, l.start + l.dur]).sort((a, b) => a[0] - b[0]);
    const gaps = [];
    let end = 0;
    for (const [a, b] of iv) {
      if (a - end > stepEnd * 0.005) gaps.push([end, a]);
      end = Math.max(end, b);
    }
    if (fullEnd - end > stepEnd * 0.005) gaps.push([end, fullEnd]);
    const gapRects = gaps.map(([a, b]) => {
      const r = sv("rect", { class: "gap", y: top + phases.length * laneH + 3, height: laneH - 6 }, plot);
      const during = hostSpans.filter((h) => h.start < b && h.start + h.dur > a).map((h) => h.name);
      hover(r, "host gap: " + us(b - a) + " without a kernel (" +
        (a >= stepEnd - 1e-9 ? "after the step" : (100 * (b - a) / stepEnd).toFixed(1) + "% of the step") + "): " +
        (during.length ? "the host was busy with " + [...new Set(during)].join(", ") +
                         " (see its bands)" : "the host preparing, waiting or launching"));
      return [r, a, b];
    });
    // The host's own work: a labelled band per span, on its phase's lane.
    const spanBands = hostSpans.map((h, i) => {
      const k = phases.indexOf(h.phase);
      const g = sv("g", { class: "hostspan", "data-host-span": i, "data-phase": h.phase }, plot);
      const r = sv("rect", { y: top + k * laneH + 3, height: laneH - 6,
                             fill: PHASE_COLOR[h.phase] || "#999" }, g);
      const t = sv("text", { class: "band-label", y: top + k * laneH + laneH / 2 + 4 }, g, h.name);
      hover(g, h.name + "  (" + h.phase + ", host work: no kernel launched by it)\nstart " +
        us(h.start) + ", duration " + us(h.dur) + (AFTER_STEP.includes(h.phase)
          ? ", after the step (" + us(stepEnd) + " long)"
          : " = " + (100 * h.dur / stepEnd).toFixed(1) + "% of the step"));
      return [r, t, h];
    });
    launches.forEach((l, i) => {
      const k = phases.indexOf(l.phase);
      const r = sv("rect", { class: "launch", "data-launch": i, y: top + k * laneH + 3,
                             height: laneH - 6, fill: PHASE_COLOR[l.phase] || "#999" }, plot);
      hover(r, () => describeLaunch(l, i));
      r.addEventListener("click", (ev) => { ev.stopPropagation(); select(l.node); });
      launchRects.push(r);
    });
    function draw() {
      for (let i = 0; i < launches.length; i++) {
        const l = launches[i], x0 = x(l.start), x1 = x(l.start + l.dur);
        launchRects[i].setAttribute("x", Math.max(left, x0));
        launchRects[i].setAttribute("width", Math.max(x1 < left ? 0 : 1, Math.min(W, x1) - Math.max(left, x0)));
      }
      for (const [r, a, b] of gapRects) {
        r.setAttribute("x", Math.max(left, x(a)));
        r.setAttribute("width", Math.max(0, Math.min(W, x(b)) - Math.max(left, x(a))));
      }
      for (const [r, t, h] of spanBands) {
        // A band outside the view stays as a sliver at the edge it lies beyond, its label saying
        // where it is; inside, the label goes in the band where it fits, else just right of it.
        const a = x(h.start), b = x(h.start + h.dur), beyond = a > W ? 1 : b < left ? -1 : 0;
        const x0 = beyond > 0 ? W - 4 : Math.max(left, a);
        const x1 = beyond < 0 ? left + 4 : Math.min(W, b);
        r.setAttribute("x", x0);
        r.setAttribute("width", Math.max(2, x1 - x0));
        const label = beyond > 0 ? h.name + " (" + us(h.dur) + ", later) →"
                    : beyond < 0 ? h.name + " (earlier) ←"
                    : b > W + 1 ? h.name + " (" + us(h.dur) + ") →" : h.name;
        t.textContent = label;
        const w = 6.2 * label.length, fits = !beyond && x1 - x0 >= w + 6;
        t.setAttribute("x", fits ? x0 + 3 : beyond > 0 ? W - 8 - w : Math.min(W - w, x1 + 3));
        t.setAttribute("class", "band-label" + (fits ? " inside" : ""));
      }
      axis.textContent = "";
      const span = view[1] - view[0], step = tickStep(span, 8, false), label = timeTicks(step);
      for (let k = Math.ceil(view[0] / step); k * step <= view[1]; k++) {
        const t = k * step;  // a multiple of the step, not a running sum: no drift in the labels
        sv("line", { x1: x(t), x2: x(t), y1: H - 22, y2: H - 18 }, axis);
        sv("text", { x: x(t), y: H - 6, "text-anchor": "middle" }, axis, label(t));
      }
    }
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const f = ev.deltaY > 0 ? 1.25 : 0.8;
      const t = view[0] + (ev.offsetX - left) / (W - left) * (view[1] - view[0]);
      view = [t - (t - view[0]) * f, t + (view[1] - t) * f];
      draw();
    });
    let drag = null;
    svg.addEventListener("mousedown", (ev) => { drag = [ev.clientX, view.slice()]; });
    window.addEventListener("mouseup", () => { drag = null; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dt = (ev.clientX - drag[0]) / (W - left) * (drag[1][1] - drag[1][0]);
      view = [drag[1][0] - dt, drag[1][1] - dt];
      draw();
    });
    svg.addEventListener("click", () => select(null));
    reset.addEventListener("click", () => { view = [0, stepEnd]; draw(); });
    if (whole) whole.addEventListener("click", () => { view = [0, fullEnd]; draw(); });
    draw();
  }

  // ---- tape graph ----
  function tapeGraph() {
    const s = section("tape", "Tape of step " + D.step + " (" + D.tape.length + " nodes)",
      "Forward nodes (solid) in layers from the inputs; under each, its backward node (dashed), " +
      "which runs in the reverse order. Click a node: its launches on the timeline. Collapse " +
      "modules to see the model's structure.");
    if (!D.tape.length) { el("p", { class: "note" }, s, "No tape was recorded for this report."); return; }
    const ctl = el("div", { class: "controls" }, s);
    ctl.appendChild(document.createTextNode("collapse modules to depth "));
    const depthSel = el("select", {}, ctl);
    const maxDepth = D.tape.reduce((m, n) => Math.max(m, n.module ? n.module.split(".").length : 0), 0);
    el("option", { value: "-1" }, depthSel, "none (every node)");
    for (let d = 1; d <= maxDepth; d++) el("option", { value: String(d) }, depthSel, String(d));
    const box = el("div", { class: "scroll" }, s);
    const byId = new Map(D.tape.map((n) => [n.id, n]));
    const expanded = new Set();
    function groupOf(n, depth) {
      if (depth < 0 || !n.module) return null;
      const parts = n.module.split(".");
      if (parts.length < depth) return null;
      const g = parts.slice(0, depth).join(".");
      return expanded.has(g) ? null : g;
    }
    function draw() {
      box.textContent = "";
      nodeBoxes.clear();
      const depth = Number(depthSel.value);
      // Units: a node, or a collapsed module holding several.
      const unitOf = new Map(), units = new Map();
      for (const n of D.tape) {
        const g = groupOf(n, depth);
        const key = g === null ? "#" + n.id : g;
        unitOf.set(n.id, key);
        if (!units.has(key)) units.set(key, { key: key, nodes: [], group: g, inputs: new Set() });
        units.get(key).nodes.push(n);
      }
      for (const u of units.values())
        for (const n of u.nodes)
          for (const i of n.inputs)
            if (typeof i === "number" && unitOf.has(i) && unitOf.get(i) !== u.key) u.inputs.add(unitOf.get(i));
      // Layers: the longest path from a unit without inputs (units come in tape order).
      const layer = new Map();
      for (const u of units.values()) {
        let l = 0;
        for (const i of u.inputs) l = Math.max(l, (layer.get(i) || 0) + 1);
        layer.set(u.key, l);
      }
      const rows = [];
      for (const u of units.values()) {
        const l = layer.get(u.key);
        (rows[l] = rows[l] || []).push(u);
      }
      const bw = 132, bh = 46, gx = 26, gy = 10;
      const tallest = rows.reduce((m, r) => Math.max(m, r ? r.length : 0), 0);
      const bandH = tallest * (bh + gy) + 10;
      const W = rows.length * (bw + gx) + 20, H = 2 * bandH + 40;
      const svg = sv("svg", { width: W, height: H }, box);
      const defs = sv("defs", {}, svg);
      const mk = sv("marker", { id: "arrow", viewBox: "0 0 6 6", refX: 6, refY: 3, markerWidth: 6,
                                markerHeight: 6, orient: "auto" }, defs);
      sv("path", { d: "M0,0 L6,3 L0,6 z", fill: "#aab" }, mk);
      sv("text", { x: 4, y: 12 }, svg, "forward");
      sv("text", { x: 4, y: bandH + 34 }, svg, "backward");
      const pos = new Map();
      rows.forEach((r, l) => (r || []).forEach((u, k) => pos.set(u.key, [10 + l * (bw + gx), 18 + k * (bh + gy)])));
      const edges = sv("g", {}, svg);
      for (const u of units.values()) {
        const [x1, y1] = pos.get(u.key);
        for (const i of u.inputs) {
          const [x0, y0] = pos.get(i);
          sv("path", { class: "tedge", d: "M" + (x0 + bw) + "," + (y0 + bh / 2) + " C" + (x0 + bw + gx) + "," +
                       (y0 + bh / 2) + " " + (x1 - gx) + "," + (y1 + bh / 2) + " " + x1 + "," + (y1 + bh / 2) }, edges);
          const by0 = y0 + bandH + 30, by1 = y1 + bandH + 30;
          sv("path", { class: "tedge back", d: "M" + x1 + "," + (by1 + bh / 2) + " C" + (x1 - gx) + "," +
                       (by1 + bh / 2) + " " + (x0 + bw + gx) + "," + (by0 + bh / 2) + " " + (x0 + bw) + "," + (by0 + bh / 2) }, edges);
        }
      }
      for (const u of units.values()) {
        const [x0, y0] = pos.get(u.key);
        for (const back of [false, true]) {
          const attrs = { class: "tnode" + (back ? " back" : ""),
                          transform: "translate(" + x0 + "," + (y0 + (back ? bandH + 30 : 0)) + ")" };
          if (u.group === null) attrs[back ? "data-backward-node" : "data-node"] = u.nodes[0].id;
          else if (!back) attrs["data-nodes"] = u.nodes.map((n) => n.id).join(" ");
          const g = sv("g", attrs, svg);
          const phase = back ? "backward" : "forward";
          sv("rect", { width: bw, height: bh, fill: u.group === null ? (back ? "#fbe3cf" : "#dbe5f7") : "#eee" }, g);
          const n = u.nodes[0];
          const title = u.group === null ? "#" + n.id + " " + (back ? "∂ " : "") + n.op
                                         : u.group + " (" + u.nodes.length + ")";
          sv("text", { x: 4, y: 13 }, g, title.length > 22 ? title.slice(0, 21) + "…" : title);
          const sub = u.group === null ? n.shape : "click to expand";
          sv("text", { x: 4, y: 27, fill: "#555" }, g, sub.length > 24 ? sub.slice(0, 23) + "…" : sub);
          if (u.group === null) {
            g.setAttribute("data-grad-norm", n.grad_norm === null ? "" : n.grad_norm);
            sv("text", { x: 4, y: 40, class: "gnorm" }, g, "|∂out| " + gradNorm(n.grad_norm));
          }
          for (const m of u.nodes) {
            if (!nodeBoxes.has(m.id)) nodeBoxes.set(m.id, []);
            nodeBoxes.get(m.id).push(g);
          }
          hover(g, () => {
            if (u.group !== null)
              return "module " + u.group + ": " + u.nodes.length + " nodes (" +
                u.nodes.map((m) => m.op).slice(0, 12).join(", ") + (u.nodes.length > 12 ? ", …" : "") + ")";
            const ls = (launchesOfNode.get(n.id) || []).filter((i) => launches[i].phase === phase ||
              (back && launches[i].phase === "recompute"));
            const t = ls.reduce((a, i) => a + launches[i].dur, 0);
            return "#" + n.id + " " + n.op + (back ? " (backward)" : "") + "\nout " + n.shape +
              "\nmodule " + (n.module || "-") + "\ncreated at " + (n.site || "-") +
              "\ninputs " + n.inputs.map((i) => typeof i === "number" ? "#" + i + " " + (byId.get(i) || {}).op : i).join(", ") +
              "\nsaved for backward " + mib(n.saved_bytes) +
              "\ngradient norm |∂loss/∂out|₂ after backward: " + gradNorm(n.grad_norm) +
              (n.grad_norm === null ? " (none measured, or no gradient reached it)" : "") +
              "\n" + ls.length + " launch(es) in " + phase + ", " + us(t) +
              (ls.length ? ": " + ls.map((i) => launches[i].kernel).join(", ") : "");
          });
          g.addEventListener("click", () => {
            if (u.group !== null) { expanded.add(u.group); draw(); return; }
            select(n.id);
            const ls = launchesOfNode.get(n.id);
            if (ls && ls.length) document.getElementById("timeline").scrollIntoView({ block: "nearest" });
          });
        }
      }
    }
    depthSel.addEventListener("change", () => { expanded.clear(); draw(); });
    draw();
  }

  // ---- a plot frame with axes (linear or log) ----
  function frame(parent, W, H, xr, yr, xlog, ylog, xlabel, ylabel, xint) {
    const m = { l: 64, r: 14, t: 10, b: 40 };
    const svg = sv("svg", { width: W, height: H }, parent);
    const f = (v, r, lg) => lg ? (Math.log10(v) - Math.log10(r[0])) / (Math.log10(r[1]) - Math.log10(r[0]))
                               : (v - r[0]) / (r[1] - r[0]);
    const X = (v) => m.l + f(v, xr, xlog) * (W - m.l - m.r);
    const Y = (v) => H - m.b - f(v, yr, ylog) * (H - m.t - m.b);
    const ax = sv("g", { class: "axis" }, svg);
    sv("path", { d: "M" + m.l + "," + m.t + " V" + (H - m.b) + " H" + (W - m.r), fill: "none" }, ax);
    const ticks = (r, lg, integer) => {
      const out = [];
      if (lg) { for (let e = Math.ceil(Math.log10(r[0])); e <= Math.log10(r[1]); e++) out.push(Math.pow(10, e)); return out; }
      const st = tickStep(r[1] - r[0], 6, integer);
      for (let v = Math.ceil(r[0] / st) * st; v <= r[1] + 1e-9; v += st) out.push(v);
      return out;
    };
    const label = (v) => Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(0) : String(+v.toPrecision(4));
    for (const v of ticks(xr, xlog, xint)) {
      sv("line", { class: "grid", x1: X(v), x2: X(v), y1: m.t, y2: H - m.b }, ax);
      sv("text", { x: X(v), y: H - m.b + 14, "text-anchor": "middle" }, ax, label(v));
    }
    for (const v of ticks(yr, ylog, false)) {
      sv("line", { class: "grid", x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }, ax);
      sv("text", { x: m.l - 4, y: Y(v) + 4, "text-anchor": "end" }, ax, label(v));
    }
    sv("text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle" }, ax, xlabel);
    sv("text", { x: 12, y: (m.t + H - m.b) / 2, transform: "rotate(-90 12 " + (m.t + H - m.b) / 2 + ")",
                 "text-anchor": "middle" }, ax, ylabel);
    return { svg: svg, X: X, Y: Y, m: m, W: W, H: H };
  }

  // ---- memory ledger ----
  function ledger() {
    const L = D.ledger;
    const s = section("memory", "Memory ledger of step " + D.step,
      "Two ledgers: the state that lives across steps (parameters, masters, moments) and what " +
      "the step makes and frees (gradients, saved activations, temporaries). Allocated peaks " +
      "where backward starts: forward has saved everything, and the first gradients arrive.");
    const cats = L.categories;
    const n = launches.length;
    // Per launch, the bytes of each category: the ledger's, or without a tape only what the
    // allocator measures (everything allocated as temporaries).
    const bytes = L.bytes || launches.map((l) => cats.map((c) =>
      c === "temporaries" ? l.allocated : c === "allocator_cache" ? l.reserved - l.allocated : 0));
    const top = Math.max(1, ...bytes.map((b) => b.reduce((a, v) => a + v, 0)), L.predicted_peak || 0);
    const legend = el("div", { class: "legend" }, s);
    for (const c of cats) {
      const sp = el("span", {}, legend);
      el("i", { style: "background:" + LEDGER_COLOR[c] }, sp);
      sp.appendChild(document.createTextNode(LEDGER_LABEL[c]));
    }
    const P0 = frame(s, 1180, 320, [0, stepEnd / 1000], [0, top / 1048576 * 1.08], false, false,
                     "ms since the step began (the timeline's zero)", "MiB");
    const P = Object.assign({}, P0, { X: (t) => P0.X(t / 1000) });  // launch times are in µs
    const t = (i) => launches[i].start + launches[i].dur;
    const base = new Array(n).fill(0);
    cats.forEach((c, k) => {
      let up = "", down = "";
      for (let i = 0; i < n; i++) {
        const x0 = P.X(i ? t(i - 1) : 0), x1 = P.X(t(i));
        const y = P.Y((base[i] + bytes[i][k]) / 1048576);
        up += (i ? " L" : "M") + x0 + "," + y + " L" + x1 + "," + y;
      }
      for (let i = n - 1; i >= 0; i--) {
        const x0 = P.X(i ? t(i - 1) : 0), x1 = P.X(t(i));
        const y = P.Y(base[i] / 1048576);
        down += " L" + x1 + "," + y + " L" + x0 + "," + y;
      }
      const path = sv("path", { d: up + down + " Z", fill: LEDGER_COLOR[c], "data-ledger": c,
                                stroke: "none", opacity: 0.9 }, P.svg);
      for (let i = 0; i < n; i++) base[i] += bytes[i][k];
      hover(path, () => LEDGER_LABEL[c] + ": up to " +
        mib(Math.max(...bytes.map((b) => b[k]))) + " in this step");
    });
    // Phase markers: where each run of one phase begins. A label goes on the first of three rows
    // where it does not run into the previous label; where none is free (runs that alternate
    // quickly, as backward and recompute do) the marker keeps only its line and its hover.
    let prev = "";
    const rowEnds = [-Infinity, -Infinity, -Infinity], charW = 6.5;
    launches.forEach((l, i) => {
      if (l.phase === prev) return;
      prev = l.phase;
      const x = P.X(l.start);
      const line = sv("line", { x1: x, x2: x, y1: P.m.t, y2: P.H - P.m.b, stroke: PHASE_COLOR[l.phase], "stroke-dasharray": "4 3" }, P.svg);
      hover(line, l.phase + " begins at " + us(l.start) + " (launch " + i + ")");
      // right of the marker, or left of it where the plot ends first
      const w = charW * l.phase.length, right = x + 3 + w <= P.W - P.m.r;
      const a = right ? x + 3 : x - 3 - w;
      const row = rowEnds.findIndex((end) => a > end + 4);
      if (row < 0) return;
      rowEnds[row] = a + w;
      sv("text", { x: right ? x + 3 : x - 3, y: P.m.t + 10 + 12 * row, fill: PHASE_COLOR[l.phase],
                   "text-anchor": right ? "start" : "end" }, P.svg, l.phase);
    });
    // Measured peak and the cost model's prediction.
    const peakAlloc = Math.max(...launches.map((l) => l.allocated));
    const yp = P.Y(peakAlloc / 1048576);
    const mline = sv("line", { x1: P.m.l, x2: P.W - P.m.r, y1: yp, y2: yp, stroke: "#000", "stroke-width": 1.2 }, P.svg);
    sv("text", { x: P.W - P.m.r - 4, y: yp - 4, "text-anchor": "end" }, P.svg, "measured peak " + mib(peakAlloc));
    hover(mline, "the most allocated after any launch of the step: " + mib(peakAlloc));
    if (L.predicted_peak) {
      const y = P.Y(L.predicted_peak / 1048576);
      const pl = sv("line", { x1: P.m.l, x2: P.W - P.m.r, y1: y, y2: y, stroke: "#a00", "stroke-dasharray": "6 4", "stroke-width": 1.5 }, P.svg);
      sv("text", { x: P.m.l + 4, y: y - 4, fill: "#a00" }, P.svg, "cost model: " + mib(L.predicted_peak));
      hover(pl, "predicted peak " + mib(L.predicted_peak) + "\n" + L.predicted_source);
    }
    if (L.largest && L.largest.length) {
      el("p", { class: "note" }, s, "Largest tensors alive at the peak (after launch " + L.peak + ", " +
        launches[L.peak].kernel + " in " + launches[L.peak].phase + "):");
      table(s, ["bytes", "category", "tensor", "op", "module", "node"],
            L.largest.map((r) => [r.bytes, LEDGER_LABEL[r.category], r.tensor, r.op, r.module, r.node]),
            { 0: mib });
    }
  }

  // ---- roofline ----
  function roofline() {
    const R = D.roofline;
    const s = section("roofline", "Roofline of step " + D.step,
      "Each kernel per phase at its arithmetic intensity and achieved FLOP/s. Under the slope it " +
      "is memory-bound: only fewer bytes help. The roof of its unit is the most it can reach.");
    const wrap = el("div", { class: "flex" }, s);
    const pts = R.points;
    const bw = R.bandwidth_gbps;
    const roofs = Object.entries(R.roofs_gflops);
    const peakMax = Math.max(...roofs.map((r) => r[1]), ...pts.map((p) => p.roof_gflops));
    let xmin = Infinity, xmax = 0, ymin = Infinity;
    for (const p of pts) {
      const i = p.flops / p.bytes;
      xmin = Math.min(xmin, i); xmax = Math.max(xmax, i);
      if (p.gflops > 0) ymin = Math.min(ymin, p.gflops);
    }
    const ridge = peakMax / bw;
    xmin = Math.pow(10, Math.floor(Math.log10(Math.min(xmin, ridge / 10))));
    xmax = Math.pow(10, Math.ceil(Math.log10(Math.max(xmax, ridge * 10))));
    ymin = Math.pow(10, Math.floor(Math.log10(Math.min(ymin, bw * xmin))));
    const ymax = Math.pow(10, Math.ceil(Math.log10(peakMax * 1.5)));
    const P = frame(wrap, 760, 420, [xmin, xmax], [ymin, ymax], true, true,
                    "arithmetic intensity (FLOP/byte)", "achieved GFLOP/s");
    const roofLine = (peak, color, label, dash, source) => {
      const knee = peak / bw;
      const a = Math.max(xmin, ymin / bw);
      const p = sv("path", { d: "M" + P.X(a) + "," + P.Y(bw * a) + " L" + P.X(knee) + "," + P.Y(peak) + " L" + P.X(xmax) + "," + P.Y(peak),
                             fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": dash }, P.svg);
      sv("text", { x: P.X(xmax) - 4, y: P.Y(peak) - 4, "text-anchor": "end", fill: color }, P.svg, label);
      hover(p, label + "\nbandwidth " + si(bw * 1e9, "B/s") + ", ridge at " + knee.toPrecision(3) +
        " FLOP/byte\n" + source);
    };
    const label = (unit) => (R.roof_labels && R.roof_labels[unit]) || unit;
    for (const [unit, peak] of roofs) roofLine(peak, "#333", label(unit) + " roof " + si(peak * 1e9, "FLOP/s"), "", R.source);
    if (R.attainable_gflops) roofLine(R.attainable_gflops, "#2a2", "attainable " + si(R.attainable_gflops * 1e9, "FLOP/s"), "5 3", R.attainable_source);
    for (const p of pts) {
      const i = p.flops / p.bytes;
      const y = Math.max(p.gflops, ymin);
      const roof = Math.min(p.roof_gflops, bw * i);
      const c = sv("circle", { cx: P.X(i), cy: P.Y(y), r: 4.5, fill: PHASE_COLOR[p.phase] || "#999",
                               "fill-opacity": 0.8, stroke: "#fff", "data-kernel": p.kernel,
                               "data-phase": p.phase }, P.svg);
      if (p.gflops > roof * 1.0001) c.classList.add("above");
      hover(c, p.kernel + " (" + p.phase + ", " + p.calls + " calls, " + (p.unit_label || p.unit) + ")\nintensity " +
        i.toPrecision(3) + " FLOP/byte\nachieved " + si(p.gflops * 1e9, "FLOP/s") + " = " +
        (100 * p.gflops / roof).toFixed(1) + "% of its roof " + si(roof * 1e9, "FLOP/s") +
        "\n" + si(p.gbps * 1e9, "B/s") + " over self time " + us(p.self_us));
    }
    const side = el("div", {}, wrap);
    const legend = el("div", { class: "legend" }, side);
    for (const ph of [...new Set(pts.map((p) => p.phase))]) {
      const sp = el("span", {}, legend);
      el("i", { style: "background:" + PHASE_COLOR[ph] }, sp);
      sp.appendChild(document.createTextNode(ph));
    }
    el("p", { class: "note" }, side, "Kernels without FLOPs (no intensity: judged by bandwidth alone):");
    table(side, ["kernel", "phase", "calls", "bytes", "GB/s", "% of bandwidth", "self"],
          R.memory_only.map((p) => [p.kernel, p.phase, p.calls, p.bytes, p.gbps, 100 * p.gbps / bw, p.self_us]),
          { 3: (v) => si(v, "B"), 4: (v) => v.toFixed(2), 5: (v) => v.toFixed(1), 6: us }, "data-kernel");
  }

  // ---- tables ----
  function table(parent, heads, rows, formats, keyAttr) {
    const t = el("table", {}, parent);
    const tr = el("tr", {}, el("thead", {}, t));
    const body = el("tbody", {}, t);
    let by = -1, desc = true;
    heads.forEach((h, k) => {
      const th = el("th", {}, tr, h);
      th.addEventListener("click", () => {
        desc = by === k ? !desc : true;
        by = k;
        fill();
      });
    });
    function fill() {
      body.textContent = "";
      const sorted = rows.slice();
      if (by >= 0) sorted.sort((a, b) => {
        const c = typeof a[by] === "number" ? a[by] - b[by] : String(a[by]).localeCompare(String(b[by]));
        return desc ? -c : c;
      });
      for (const r of sorted) {
        const row = el("tr", keyAttr ? { [keyAttr + "-row"]: r[0] } : {}, body);
        r.forEach((v, k) => el("td", {}, row, formats && formats[k] ? formats[k](v) : String(v)));
      }
    }
    fill();
    return t;
  }

  function kernelTable() {
    const s = section("kernels", "Time per kernel (profiled steps)",
      "Self time is the kernel's own; total includes the kernels it launched (a composite cpu op). " +
      "The shares add up to the fraction of the steps spent in kernels. Click a header to sort.");
    table(s, ["kernel", "calls", "self", "total", "share %", "GB/s", "GFLOP/s", "FLOP/byte", "bound", "× floor"],
          D.kernels.map((r) => [r.kernel, r.calls, r.self_us, r.total_us, 100 * r.share, r.gbps, r.gflops,
                                r.intensity, r.bound, r.over_floor]),
          { 2: us, 3: us, 4: (v) => v.toFixed(1), 5: (v) => v.toFixed(2), 6: (v) => v.toFixed(2),
            7: (v) => v.toPrecision(3), 9: (v) => v.toFixed(1) });
  }

  function lossCurve() {
    const s = section("loss", "Loss", "Cross-entropy per step (train) and on held-out batches (validation).");
    const tr = D.loss.train, va = D.loss.val;
    const all = tr.concat(va);
    if (!all.length) { el("p", { class: "note" }, s, "No training steps in this report."); return; }
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]).filter((v) => isFinite(v));
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (y1 - y0 < 1e-9) { y0 -= 0.5; y1 += 0.5; }
    const P = frame(s, 900, 300, [x0, x1], [y0 - 0.05 * (y1 - y0), y1 + 0.05 * (y1 - y0)], false, false,
                    "step", "cross-entropy", true);
    const series = [["train", tr, "#4878d0"], ["validation", va, "#ee854a"]];
    for (const [name, pts, color] of series) {
      if (!pts.length) continue;
      sv("path", { d: pts.map((p, i) => (i ? "L" : "M") + P.X(p[0]) + "," + P.Y(p[1])).join(" "),
                   fill: "none", stroke: color, "stroke-width": 1.5, "data-series": name }, P.svg);
      if (pts.length < 60 || name === "validation")
        for (const p of pts) sv("circle", { cx: P.X(p[0]), cy: P.Y(p[1]), r: 2.5, fill: color }, P.svg);
    }
    const legend = el("div", { class: "legend" }, s);
    for (const [name, pts, color] of series) {
      if (!pts.length) continue;
      const sp = el("span", {}, legend);
      el("i", { style: "background:" + color }, sp);
      sp.appendChild(document.createTextNode(name));
    }
    // Values on hover: the nearest step's.
    const cursor = sv("line", { y1: P.m.t, y2: P.H - P.m.b, stroke: "#999", visibility: "hidden" }, P.svg);
    P.svg.addEventListener("mousemove", (ev) => {
      const step = x0 + (ev.offsetX - P.m.l) / (P.W - P.m.l - P.m.r) * (x1 - x0);
      const near = (pts) => pts.reduce((b, p) => !b || Math.abs(p[0] - step) < Math.abs(b[0] - step) ? p : b, null);
      const t = near(tr), v = near(va);
      const at = t || v;
      cursor.setAttribute("x1", P.X(at[0])); cursor.setAttribute("x2", P.X(at[0]));
      cursor.setAttribute("visibility", "visible");
      tip.textContent = "step " + at[0] + (t ? "\ntrain " + t[1].toFixed(4) : "") +
        (v ? "\nvalidation " + v[1].toFixed(4) + " (step " + v[0] + ")" : "");
      tip.style.display = "block";
      tip.style.left = ev.clientX + 14 + "px";
      tip.style.top = ev.clientY + 14 + "px";
    });
    P.svg.addEventListener("mouseleave", () => { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); });
  }

  // ---- errors show on the page (tests read them) ----
  function report(msg) {
    const e = document.getElementById("errors") || el("div", { id: "errors" }, document.body);
    e.textContent += "explorer error: " + msg + "\n";
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
  }
  window.addEventListener("error", (ev) => report(ev.message));

  header();
  for (const part of [summary, timeline, tapeGraph, ledger, roofline, kernelTable, lossCurve]) {
    try {
      part();
    } catch (err) {
      report(part.name + ": " + err.message);
      console.error(err);
    }
  }
  // "#only=memory" shows one section alone (scripts/explorer_screenshots.sh photographs them).
  const only = new URLSearchParams(location.hash.slice(1)).get("only");
  if (only)
    for (const sec of document.querySelectorAll("section"))
      if (sec.id !== only) sec.style.display = "none";
  // Milliseconds from the start of navigation to drawn (bench/RESULTS.md quotes it).
  document.body.dataset.renderMs = performance.now().toFixed(1);
  document.body.dataset.ready = "1";
})();
