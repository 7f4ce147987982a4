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
