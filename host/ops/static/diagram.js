// drawWorkflow draws a workflow ({id, initial, states: [{name, final, tools}],
// transitions: [{from, to, event, tools}]}, as GET /admin/workflows gives it) as a
// layered SVG state diagram, left to right: each state in the column of its distance
// from the initial state (states it cannot reach last), forward transitions as curves
// between columns, self-loops above their state, transitions back (or within a column)
// below. Hand-drawn on purpose: no library, no fetch; every name is written with
// textContent (see RATIONALE.md, "The status page draws workflows itself").
"use strict";
const svgNS = "http://www.w3.org/2000/svg";
let diagramCount = 0;

function svgEl(name, attrs, text) {
  const e = document.createElementNS(svgNS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

function drawWorkflow(w) {
  if (w.states.some((s) => s.parent || s.kind)) return drawChart(w);
  const uid = "wf" + (++diagramCount);
  const layer = new Map([[w.initial, 0]]);
  const queue = [w.initial];
  while (queue.length) {
    const s = queue.shift();
    for (const t of w.transitions) {
      if (t.from === s && !layer.has(t.to)) { layer.set(t.to, layer.get(s) + 1); queue.push(t.to); }
    }
  }
  const reached = Math.max(0, ...layer.values());
  for (const s of w.states) if (!layer.has(s.name)) layer.set(s.name, reached + 1);
  const cols = [];
  for (const s of w.states) { const l = layer.get(s.name); (cols[l] = cols[l] || []).push(s); }
  const boxW = 180, boxH = 56, colGap = 150, rowGap = 56, left = 50, top = 60;
  const pos = new Map();
  let rows = 1;
  cols.forEach((col, l) => {
    (col || []).forEach((s, i) => pos.set(s.name, { x: left + l * (boxW + colGap), y: top + i * (boxH + rowGap) }));
    rows = Math.max(rows, (col || []).length);
  });
  const width = left + cols.length * (boxW + colGap);
  const height = top + rows * (boxH + rowGap) + 60;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "diagram" });
  svg.appendChild(svgEl("title", {}, "workflow " + w.id + " (key: " + w.key + ")"));
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: uid + "-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  const edges = svgEl("g", { class: "edges" });
  const nodes = svgEl("g", { class: "nodes" });
  svg.append(edges, nodes);

  const edge = (d, label, tip, lx, ly, t) => {
    const g = svgEl("g", { class: "edge", "data-event": t.event, "data-from": t.from, "data-to": t.to });
    g.appendChild(svgEl("path", { d, "marker-end": `url(#${uid}-arrow)` }));
    const text = svgEl("text", { x: lx, y: ly, "text-anchor": "middle" }, label);
    text.appendChild(svgEl("title", {}, tip));
    g.appendChild(text);
    edges.appendChild(g);
  };
  // The initial state's entry.
  const init = pos.get(w.initial);
  if (init) {
    nodes.appendChild(svgEl("circle", { cx: init.x - 28, cy: init.y + boxH / 2, r: 7, class: "start" }));
    edges.appendChild(svgEl("path", { d: `M${init.x - 21},${init.y + boxH / 2} L${init.x - 2},${init.y + boxH / 2}`, "marker-end": `url(#${uid}-arrow)` }));
  }
  const seen = new Map(); // edges between the same pair, to spread their labels
  for (const t of w.transitions) {
    const a = pos.get(t.from), b = pos.get(t.to);
    if (!a || !b) continue;
    const pair = t.from + "\u0000" + t.to;
    const n = seen.get(pair) || 0;
    seen.set(pair, n + 1);
    const label = t.event;
    const tip = t.event + (t.tools.length ? " — fired by " + t.tools.join(", ") : "");
    if (t.from === t.to) {
      const x1 = a.x + boxW * 0.3, x2 = a.x + boxW * 0.7, h = 36 + 14 * n;
      edge(`M${x1},${a.y} C${x1},${a.y - h} ${x2},${a.y - h} ${x2},${a.y}`, label, tip, a.x + boxW / 2, a.y - h + 4, t);
    } else if (layer.get(t.to) > layer.get(t.from)) {
      const x1 = a.x + boxW, y1 = a.y + boxH / 2, x2 = b.x, y2 = b.y + boxH / 2, mx = (x1 + x2) / 2;
      edge(`M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, label, tip, mx, (y1 + y2) / 2 - 6 - 14 * n, t);
    } else {
      const x1 = a.x + boxW / 2, y1 = a.y + boxH, x2 = b.x + boxW / 2, y2 = b.y + boxH, dip = Math.max(y1, y2) + 40 + 14 * n;
      edge(`M${x1},${y1} C${x1},${dip} ${x2},${dip} ${x2},${y2}`, label, tip, (x1 + x2) / 2, dip - 8, t);
    }
  }
  for (const s of w.states) {
    const p = pos.get(s.name);
    const g = svgEl("g", { class: "state" + (s.final ? " final" : ""), "data-state": s.name });
    g.appendChild(svgEl("rect", { x: p.x, y: p.y, width: boxW, height: boxH, rx: 10 }));
    if (s.final) g.appendChild(svgEl("rect", { x: p.x + 4, y: p.y + 4, width: boxW - 8, height: boxH - 8, rx: 7, class: "inner" }));
    g.appendChild(svgEl("text", { x: p.x + boxW / 2, y: p.y + 22, "text-anchor": "middle", class: "name" }, clip(s.name, 24)));
    const tools = s.tools.length ? s.tools.join(", ") : "no bound tool";
    g.appendChild(svgEl("text", { x: p.x + boxW / 2, y: p.y + 42, "text-anchor": "middle", class: "tools" }, clip(tools, 30)));
    g.appendChild(svgEl("title", {}, s.name + (s.final ? " (final)" : "") + "\ntools: " + tools));
    nodes.appendChild(g);
  }
  return svg;
}

// drawChart draws a statechart: a compound state is a box holding its children, laid out
// left to right by their distance from its initial child (an arrow from a dot marks it);
// a parallel state stacks its regions, each in a dashed box; transitions are drawn
// between the boxes they join, wherever those sit. data-state holds each state's path.
function drawChart(w) {
  const uid = "wf" + (++diagramCount);
  const byName = new Map(w.states.map((s) => [s.name, s]));
  const kids = new Map();
  for (const s of w.states) {
    const p = s.parent || "";
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(s);
  }
  const boxW = 170, boxH = 50, gap = 46, pad = 16, head = 26;
  const size = new Map(), rel = new Map();
  // measure lays out the children of path (the root is ""), bottom up.
  const measure = (path, kind, initial, depth) => {
    const ch = kids.get(path) || [];
    if (!ch.length || depth > 64) { size.set(path, { w: boxW, h: boxH }); return; }
    for (const c of ch) measure(c.name, c.kind, c.initial, depth + 1);
    if (kind === "parallel") {
      let y = head, wMax = 0;
      for (const c of ch) { const z = size.get(c.name); rel.set(c.name, { x: pad, y }); y += z.h + pad; wMax = Math.max(wMax, z.w); }
      size.set(path, { w: wMax + 2 * pad, h: y });
      return;
    }
    const names = new Set(ch.map((c) => c.name));
    const first = initial && names.has(initial) ? initial : ch[0].name;
    const layer = new Map([[first, 0]]), queue = [first];
    while (queue.length) {
      const a = queue.shift();
      for (const t of w.transitions) if (t.from === a && names.has(t.to) && !layer.has(t.to)) { layer.set(t.to, layer.get(a) + 1); queue.push(t.to); }
    }
    const reached = Math.max(0, ...layer.values());
    for (const c of ch) if (!layer.has(c.name)) layer.set(c.name, reached + 1);
    const cols = [];
    for (const c of ch) { const l = layer.get(c.name); (cols[l] = cols[l] || []).push(c); }
    let x = pad + 22, hMax = 0;
    for (const col of cols) {
      if (!col) continue;
      let y = head, wCol = 0;
      for (const c of col) { const z = size.get(c.name); rel.set(c.name, { x, y }); y += z.h + pad; wCol = Math.max(wCol, z.w); }
      x += wCol + gap;
      hMax = Math.max(hMax, y);
    }
    size.set(path, { w: x - gap + pad, h: hMax });
  };
  measure("", "compound", w.initial, 0);
  const abs = new Map();
  const place = (path, x, y, depth) => {
    abs.set(path, { x, y });
    if (depth > 64) return;
    for (const c of kids.get(path) || []) { const r = rel.get(c.name); place(c.name, x + r.x, y + r.y, depth + 1); }
  };
  place("", 10, 30, 0);
  const root = size.get("");
  const width = root.w + 40, height = root.h + 90;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "diagram chart" });
  svg.appendChild(svgEl("title", {}, "workflow " + w.id + " (key: " + w.key + ")"));
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: uid + "-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  const boxes = svgEl("g", { class: "nodes" }), edges = svgEl("g", { class: "edges" });
  svg.append(boxes, edges);
  const draw = (path, depth) => {
    if (depth > 64) return;
    for (const c of kids.get(path) || []) {
      const p = abs.get(c.name), z = size.get(c.name);
      const leaf = !(kids.get(c.name) || []).length;
      const g = svgEl("g", { class: (leaf ? "state" : "state container " + c.kind) + (c.final ? " final" : ""), "data-state": c.name });
      const region = byName.get(path) && byName.get(path).kind === "parallel";
      g.appendChild(svgEl("rect", { x: p.x, y: p.y, width: z.w, height: z.h, rx: leaf ? 10 : 14, class: region ? "region" : "" }));
      if (c.final) g.appendChild(svgEl("rect", { x: p.x + 4, y: p.y + 4, width: z.w - 8, height: z.h - 8, rx: 7, class: "inner" }));
      const label = c.name.split(".").pop();
      const tools = c.tools.length ? c.tools.join(", ") : "";
      if (leaf) {
        g.appendChild(svgEl("text", { x: p.x + z.w / 2, y: p.y + 21, "text-anchor": "middle", class: "name" }, clip(label, 22)));
        g.appendChild(svgEl("text", { x: p.x + z.w / 2, y: p.y + 39, "text-anchor": "middle", class: "tools" }, clip(tools || "no bound tool", 28)));
      } else {
        g.appendChild(svgEl("text", { x: p.x + 10, y: p.y + 17, class: "name" }, clip(label + (c.kind === "parallel" ? " (parallel)" : "") + (tools ? " — " + tools : ""), 60)));
      }
      g.appendChild(svgEl("title", {}, c.name + (c.kind ? " (" + c.kind + ")" : "") + (c.final ? " (final)" : "") + "\ntools: " + (tools || "none")));
      boxes.appendChild(g);
      draw(c.name, depth + 1);
    }
  };
  draw("", 0);
  // The initial child of the root and of each compound state.
  const starts = [["", w.initial], ...w.states.filter((s) => s.kind === "compound" && s.initial).map((s) => [s.name, s.initial])];
  for (const [, init] of starts) {
    const p = abs.get(init);
    if (!p) continue;
    const z = size.get(init);
    boxes.appendChild(svgEl("circle", { cx: p.x - 16, cy: p.y + Math.min(z.h, boxH) / 2, r: 5, class: "start" }));
    edges.appendChild(svgEl("path", { d: `M${p.x - 11},${p.y + Math.min(z.h, boxH) / 2} L${p.x - 1},${p.y + Math.min(z.h, boxH) / 2}`, "marker-end": `url(#${uid}-arrow)` }));
  }
  const seen = new Map();
  for (const t of w.transitions) {
    const a = abs.get(t.from), b = abs.get(t.to);
    if (!a || !b) continue;
    const za = size.get(t.from), zb = size.get(t.to);
    const pair = t.from + "\u0000" + t.to, n = seen.get(pair) || 0;
    seen.set(pair, n + 1);
    const g = svgEl("g", { class: "edge", "data-event": t.event, "data-from": t.from, "data-to": t.to });
    let d, lx, ly;
    if (t.from === t.to) {
      const x1 = a.x + za.w * 0.3, x2 = a.x + za.w * 0.7, h = 30 + 12 * n;
      d = `M${x1},${a.y} C${x1},${a.y - h} ${x2},${a.y - h} ${x2},${a.y}`; lx = a.x + za.w / 2; ly = a.y - h + 4;
    } else if (b.x >= a.x + za.w) {
      const y1 = a.y + Math.min(za.h, boxH) / 2, y2 = b.y + Math.min(zb.h, boxH) / 2, x1 = a.x + za.w, x2 = b.x, mx = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`; lx = mx; ly = (y1 + y2) / 2 - 6 - 12 * n;
    } else {
      const x1 = a.x + za.w / 2, y1 = a.y + za.h, x2 = b.x + zb.w / 2, y2 = b.y + zb.h, dip = Math.max(y1, y2) + 28 + 12 * n;
      d = `M${x1},${y1} C${x1},${dip} ${x2},${dip} ${x2},${y2}`; lx = (x1 + x2) / 2; ly = dip - 6;
    }
    g.appendChild(svgEl("path", { d, "marker-end": `url(#${uid}-arrow)` }));
    const text = svgEl("text", { x: lx, y: ly, "text-anchor": "middle" }, t.event || "done");
    text.appendChild(svgEl("title", {}, (t.event || "done") + (t.tools.length ? " — fired by " + t.tools.join(", ") : "")));
    g.appendChild(text);
    edges.appendChild(g);
  }
  return svg;
}

// activePaths lists the active state paths of a state value: a name, or XState's object
// for compound and parallel states ({"paying": {"payment": "pending", "review": "open"}}).
function activePaths(v, prefix, out, depth) {
  out = out || [];
  if (depth > 64) return out;
  if (typeof v === "string") { out.push(prefix ? prefix + "." + v : v); return out; }
  if (v && typeof v === "object") {
    for (const [k, sub] of Object.entries(v)) {
      const p = prefix ? prefix + "." + k : k;
      out.push(p);
      activePaths(sub, p, out, (depth || 0) + 1);
    }
  }
  return out;
}
