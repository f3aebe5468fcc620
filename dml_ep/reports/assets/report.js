// dml_ep's report: draws the plan embedded as JSON (#plan-data), fills the node table beside it, and lets
// the reader search, zoom, pan, recolour, sort, filter and click. Written by dml_ep/html_report.py.
// Graphs of up to ELK_MOST boxes are laid out by ELK's layered algorithm; larger ones by layeredLayout
// below (in Chromium ELK took 1.7-2.7 s on 2,400 nodes, and 1.5 s on 180 boxes as the page opens; this
// takes 0.2 s on 2,500), with long chains drawn collapsed, one box each, where the graph has more than
// COLLAPSE_ABOVE nodes.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_WIDTH = 168, NODE_HEIGHT = 38, IO_WIDTH = 120, IO_HEIGHT = 24, DUMMY_WIDTH = 8;
  const LAYER_GAP = 28, NODE_GAP = 18;
  const ELK_MOST = 150, COLLAPSE_ABOVE = 300, CHAIN_LEAST = 5, READABLE_SCALE = 0.75;
  const PLACEMENT_COLOURS = {"modelled": "#009e73", "real-ep-dml": "#56b4e9", "cpu": "#e69f00", "pending": "#ffffff"};
  const PLACEMENT_TEXT = {"modelled": "on DirectML, modelled by dml_ep", "real-ep-dml": "on DirectML in the real EP, not modelled",
                          "cpu": "on the CPU in the real EP", "pending": "planned only when run (shapes depend on data)"};
  const MIXED = "#c8c8c8";  // a collapsed chain whose nodes run in more than one place
  // Largest difference by band: exact, then a quantized value's LSB or a float value's ULPs (of its
  // type at the tensor's largest magnitude), one colour per band; grey when not compared that way.
  const BANDS = [{fill: "#d9f0d3", lsb: 0, ulp: 0, lsbText: "exact", ulpText: "exact"},
                 {fill: "#fee08b", lsb: 1, ulp: 1, lsbText: "1 LSB", ulpText: "\u2264 1 ulp"},
                 {fill: "#fc8d59", lsb: 2, ulp: 16, lsbText: "2 LSB", ulpText: "\u2264 16 ulp"},
                 {fill: "#d73027", lsb: Infinity, ulp: Infinity, lsbText: "> 2 LSB", ulpText: "> 16 ulp"}];
  const NOT_COMPARED = "#e0e0e0";

  const started = performance.now();
  const data = JSON.parse(document.getElementById("plan-data").textContent);
  for (const node of data.nodes) {  // JSON has no infinity: html_report writes a difference without bound as "inf"
    for (const key of ["isolated", "propagated", "isolated_ulps", "propagated_ulps"]) {
      if (node.difference && node.difference[key] === "inf") node.difference[key] = Infinity;
    }
  }
  const svg = document.getElementById("graph");
  const viewport = document.getElementById("viewport");
  const details = document.getElementById("details");
  const status = document.getElementById("status");
  const minimap = document.getElementById("minimap");
  const colourBy = document.getElementById("colour-by");
  const collapse = document.getElementById("collapse");
  const expanded = new Set();  // chains the reader opened, by their first node's index
  let graph = null;  // what is drawn: units (boxes), their edges, where each node is
  let drawn = null;  // the layout of graph: positions, size, the <g> of each unit
  let view = {x: 0, y: 0, scale: 1};
  let selected = null, draws = 0;

  function element(name, attributes, parent) {
    const made = document.createElementNS(SVG, name);
    for (const key in attributes) made.setAttribute(key, attributes[key]);
    if (parent) parent.appendChild(made);
    return made;
  }

  // Long names keep their ends: exporters' names differ in their last part (/encoder/layer.3/attention/Add).
  function shorten(text, most) {
    if (text.length <= most) return text;
    const head = Math.floor((most - 1) / 3);
    return text.slice(0, head) + "\u2026" + text.slice(text.length - (most - 1 - head));
  }

  // ---- differences ----

  function isFloat(difference) { return difference.unit !== "LSB"; }

  // The number a node's band is read from: LSB for a quantized value, ULPs for a float one (0 when
  // exact); null when it was not compared that way.
  function bandValue(node, kind) {
    const difference = node.difference;
    if (!difference || difference[kind] === null || difference[kind] === undefined) return null;
    if (difference[kind] === 0 || !isFloat(difference)) return difference[kind];
    const ulps = difference[kind + "_ulps"];
    return ulps === null || ulps === undefined ? Infinity : ulps;  // no ULPs: unbounded (NaN on one side, shapes differ)
  }

  function band(node, kind) {
    const value = bandValue(node, kind);
    if (value === null) return -1;
    const unit = isFloat(node.difference) ? "ulp" : "lsb";
    return BANDS.findIndex(b => value <= b[unit]);
  }

  function differs(node) {
    const d = node.difference;
    return Boolean(d) && (d.isolated > 0 || d.propagated > 0);
  }

  function thousands(value) { return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }  // toLocaleString is slow

  function number(value) { return Number.isInteger(value) || !isFinite(value) ? String(value) : String(Number(value.toPrecision(3))); }

  function differenceCell(node, kind) {
    const d = node.difference;
    if (!d || d[kind] === null || d[kind] === undefined) return "-";
    const ulps = d[kind + "_ulps"];
    return `${number(d[kind])} ${d.unit || ""}` + (isFloat(d) && d[kind] !== 0 && ulps !== null && ulps !== undefined ? ` (${number(ulps)} ulp)` : "");
  }

  // A table cell's difference: LSB for a quantized value, ULPs for a float one (its cell's title has both).
  function shortDifference(node, kind) {
    const d = node.difference;
    if (!d || d[kind] === null || d[kind] === undefined) return "-";
    if (d[kind] === 0) return "0";
    const ulps = d[kind + "_ulps"];
    return isFloat(d) ? (ulps === null || ulps === undefined ? `${number(d[kind])} ${d.unit}` : `${number(ulps)} ulp`) : `${number(d[kind])} LSB`;
  }

  function differenceText(difference, node) {
    const parts = [];
    if (difference.isolated !== null) parts.push("isolated: " + differenceCell(node, "isolated"));
    if (difference.propagated !== null) parts.push("propagated: " + differenceCell(node, "propagated"));
    if (difference.cause) parts.push("cause: " + difference.cause);
    if (difference.first_divergent) parts.push("the first node that differs in isolation");
    return "largest difference, " + (parts.join("; ") || "not compared");
  }

  // ---- the graph drawn: nodes, or chains collapsed into one box ----

  // Runs of CHAIN_LEAST or more nodes where each feeds only the next and the next reads only it.
  function chains() {
    const count = data.nodes.length;
    const ins = new Array(count).fill(0), outs = new Array(count).fill(0), next = new Array(count).fill(-1);
    for (const [from, to] of data.edges) { outs[from]++; ins[to]++; next[from] = to; }
    data.nodes.forEach((node, index) => { ins[index] += node.reads.length; outs[index] += node.writes.length; });
    const linked = index => outs[index] === 1 && next[index] >= 0 && ins[next[index]] === 1;
    const inside = new Array(count).fill(false);
    for (let index = 0; index < count; index++) if (linked(index)) inside[next[index]] = true;
    const found = [];
    for (let index = 0; index < count; index++) {
      if (inside[index]) continue;  // its run's first node finds it
      const run = [index];
      while (linked(run[run.length - 1])) run.push(next[run[run.length - 1]]);
      if (run.length >= CHAIN_LEAST) found.push(run);
    }
    return found;
  }

  function buildGraph() {
    const count = data.nodes.length;
    const units = [], unitOf = new Array(count);
    const runs = collapse.checked ? chains().filter(run => !expanded.has(run[0])) : [];
    for (const run of runs) {
      const unit = units.length;
      units.push({kind: "chain", members: run, width: NODE_WIDTH, height: NODE_HEIGHT + 6});
      for (const index of run) unitOf[index] = unit;
    }
    for (let index = 0; index < count; index++) {
      if (unitOf[index] !== undefined) continue;
      unitOf[index] = units.length;
      units.push({kind: "node", index: index, width: NODE_WIDTH, height: NODE_HEIGHT});
    }
    units.sort((a, b) => first(a) - first(b));  // execution order: the layout's first guess at each layer's order
    units.forEach((unit, position) => { for (const index of members(unit)) unitOf[index] = position; });
    const edges = new Set();
    for (const [from, to] of data.edges) if (unitOf[from] !== unitOf[to]) edges.add(unitOf[from] + ">" + unitOf[to]);
    const inputUnit = {}, outputUnit = {};
    data.inputs.forEach(name => { inputUnit[name] = units.length; units.push({kind: "input", name: name, width: IO_WIDTH, height: IO_HEIGHT}); });
    data.outputs.forEach(name => { outputUnit[name] = units.length; units.push({kind: "output", name: name, width: IO_WIDTH, height: IO_HEIGHT}); });
    data.nodes.forEach((node, index) => {
      node.reads.forEach(name => edges.add(inputUnit[name] + ">" + unitOf[index]));
      node.writes.forEach(name => edges.add(unitOf[index] + ">" + outputUnit[name]));
    });
    return {units: units, unitOf: unitOf, edges: [...edges].map(edge => edge.split(">").map(Number))};
  }

  function members(unit) { return unit.kind === "chain" ? unit.members : unit.kind === "node" ? [unit.index] : []; }
  function first(unit) { return unit.kind === "chain" ? unit.members[0] : unit.index; }

  // ---- layout ----

  function elkLayout() {
    const children = graph.units.map((unit, index) => ({id: "u" + index, width: unit.width, height: unit.height}));
    const edges = graph.edges.map(([from, to], index) => ({id: "e" + index, sources: ["u" + from], targets: ["u" + to]}));
    const options = {"elk.algorithm": "layered", "elk.direction": "DOWN", "elk.edgeRouting": "POLYLINE",
                     "elk.layered.spacing.nodeNodeBetweenLayers": String(LAYER_GAP), "elk.spacing.nodeNode": String(NODE_GAP),
                     "elk.layered.thoroughness": "1"};
    return new ELK().layout({id: "root", layoutOptions: options, children: children, edges: edges}).then(layout => ({
      boxes: layout.children.map(child => ({x: child.x, y: child.y})),
      edges: layout.edges.map(edge => (edge.sections || []).flatMap(s => [s.startPoint, ...(s.bendPoints || []), s.endPoint])),
      width: layout.width, height: layout.height}));
  }

  // A layered layout in linear time per sweep: layers by longest path from the inputs (each source
  // moved down next to its first reader), edges longer than one layer through a point per layer
  // crossed, layers ordered by barycentres (four sweeps), and each box placed at the mean of its
  // neighbours' centres as near as the boxes beside it allow (isotonic regression, four sweeps).
  function layeredLayout() {
    const units = graph.units, count = units.length;
    const successors = units.map(() => []), predecessors = units.map(() => []);
    for (const [from, to] of graph.edges) { successors[from].push(to); predecessors[to].push(from); }
    const layer = new Array(count).fill(0), order = [], waiting = predecessors.map(p => p.length);
    for (let unit = 0; unit < count; unit++) if (!waiting[unit]) order.push(unit);
    for (let at = 0; at < order.length; at++) {
      for (const to of successors[order[at]]) {
        layer[to] = Math.max(layer[to], layer[order[at]] + 1);
        if (--waiting[to] === 0) order.push(to);
      }
    }
    for (const unit of order) {  // sources down to just above their first reader
      if (!predecessors[unit].length && successors[unit].length) layer[unit] = Math.min(...successors[unit].map(s => layer[s])) - 1;
    }
    // boxes, then a dummy box per layer an edge crosses; each edge as its chain of boxes
    const boxes = units.map((unit, index) => ({width: unit.width, height: unit.height, layer: layer[index], up: [], down: []}));
    const routes = graph.edges.map(([from, to]) => {
      const route = [from];
      for (let l = layer[from] + 1; l < layer[to]; l++) {
        route.push(boxes.length);
        boxes.push({width: DUMMY_WIDTH, height: 0, layer: l, up: [], down: []});
      }
      route.push(to);
      for (let i = 1; i < route.length; i++) { boxes[route[i - 1]].down.push(route[i]); boxes[route[i]].up.push(route[i - 1]); }
      return route;
    });
    const layers = [];
    boxes.forEach((box, index) => (layers[box.layer] = layers[box.layer] || []).push(index));
    for (let l = 0; l < layers.length; l++) layers[l] = layers[l] || [];
    const position = new Float64Array(boxes.length);
    const number = () => layers.forEach(members => members.forEach((box, at) => { position[box] = at; }));
    number();
    for (let sweep = 0; sweep < 4; sweep++) {
      const down = sweep % 2 === 0;
      for (let k = 1; k < layers.length; k++) {
        const members = layers[down ? k : layers.length - 1 - k];
        const key = new Map(members.map(box => {
          const near = down ? boxes[box].up : boxes[box].down;
          return [box, near.length ? near.reduce((sum, other) => sum + position[other], 0) / near.length : position[box]];
        }));
        members.sort((a, b) => key.get(a) - key.get(b));
        members.forEach((box, at) => { position[box] = at; });
      }
    }
    const centre = new Float64Array(boxes.length);
    for (const members of layers) {  // packed side by side, centred on 0
      let at = 0;
      for (const box of members) { centre[box] = at + boxes[box].width / 2; at += boxes[box].width + NODE_GAP; }
      for (const box of members) centre[box] -= at / 2;
    }
    for (let sweep = 0; sweep < 4; sweep++) {
      const down = sweep % 2 === 0;
      for (let k = 1; k < layers.length; k++) {
        const members = layers[down ? k : layers.length - 1 - k];
        const wanted = members.map(box => {
          const near = down ? boxes[box].up : boxes[box].down;
          return near.length ? near.reduce((sum, other) => sum + centre[other], 0) / near.length : centre[box];
        });
        place(members, wanted);
      }
    }
    function place(members, wanted) {  // nearest centres to wanted, in order, no two boxes closer than NODE_GAP
      const offset = [0];
      for (let i = 1; i < members.length; i++) {
        offset.push(offset[i - 1] + (boxes[members[i - 1]].width + boxes[members[i]].width) / 2 + NODE_GAP);
      }
      const blocks = [];  // pool adjacent violators: [sum, count] of targets, each block at their mean
      wanted.forEach((value, i) => {
        blocks.push([value - offset[i], 1]);
        while (blocks.length > 1 && blocks[blocks.length - 2][0] / blocks[blocks.length - 2][1] > blocks[blocks.length - 1][0] / blocks[blocks.length - 1][1]) {
          const last = blocks.pop();
          blocks[blocks.length - 1][0] += last[0];
          blocks[blocks.length - 1][1] += last[1];
        }
      });
      let i = 0;
      for (const [sum, size] of blocks) for (let j = 0; j < size; j++, i++) centre[members[i]] = sum / size + offset[i];
    }
    let left = Infinity, right = -Infinity;
    boxes.forEach((box, index) => { left = Math.min(left, centre[index] - box.width / 2); right = Math.max(right, centre[index] + box.width / 2); });
    const top = [];
    let y = 0;
    for (const members of layers) {
      top.push(y);
      y += Math.max(0, ...members.map(box => boxes[box].height)) + LAYER_GAP;
    }
    const heightOf = l => Math.max(0, ...layers[l].map(box => boxes[box].height));
    const at = index => ({x: centre[index] - boxes[index].width / 2 - left,
                          y: top[boxes[index].layer] + (heightOf(boxes[index].layer) - boxes[index].height) / 2});
    return Promise.resolve({
      boxes: units.map((unit, index) => at(index)),
      edges: routes.map(route => route.map((box, i) => {
        const corner = at(box), middle = corner.x + boxes[box].width / 2;
        if (i === 0) return {x: middle, y: corner.y + boxes[box].height};
        if (i === route.length - 1) return {x: middle, y: corner.y};
        return {x: middle, y: top[boxes[box].layer] + heightOf(boxes[box].layer) / 2};
      })),
      width: right - left, height: Math.max(0, y - LAYER_GAP)});
  }

  // ---- drawing ----

  function draw(layout) {
    viewport.replaceChildren();
    const edgeLayer = element("g", {"class": "edges"}, viewport);
    const nodeLayer = element("g", {"class": "nodes"}, viewport);
    for (const points of layout.edges) {
      element("polyline", {"points": points.map(p => p.x + "," + p.y).join(" "), "marker-end": "url(#arrow)"}, edgeLayer);
    }
    const gs = graph.units.map((unit, index) => {
      const at = layout.boxes[index], transform = `translate(${at.x},${at.y})`;
      if (unit.kind === "node") {
        const node = data.nodes[unit.index];
        const box = element("g", {"class": "node", "data-node": node.name, "data-placement": node.placement, "data-index": unit.index,
                                   "transform": transform}, nodeLayer);
        element("rect", {"width": NODE_WIDTH, "height": NODE_HEIGHT, "rx": 4}, box);
        element("text", {"x": 6, "y": 15, "class": "op"}, box).textContent = shorten(node.op, 24);
        element("text", {"x": 6, "y": 30, "class": "name"}, box).textContent = shorten(node.name, 27);
        element("title", {}, box).textContent = tooltip(node);
        return box;
      }
      if (unit.kind === "chain") {
        const box = element("g", {"class": "chain", "data-chain": unit.members[0], "data-count": unit.members.length, "transform": transform}, nodeLayer);
        element("rect", {"class": "behind", "x": 4, "y": -4, "width": NODE_WIDTH, "height": NODE_HEIGHT + 6, "rx": 4}, box);  // a stack
        element("rect", {"width": NODE_WIDTH, "height": NODE_HEIGHT + 6, "rx": 4}, box);
        element("text", {"x": 6, "y": 15, "class": "op"}, box).textContent = `${unit.members.length} nodes: ${opCounts(unit.members)}`;
        element("text", {"x": 6, "y": 30, "class": "name"}, box).textContent = shorten(data.nodes[unit.members[0]].name, 27);
        element("text", {"x": 6, "y": 41, "class": "name"}, box).textContent = "\u2192 " + shorten(data.nodes[unit.members[unit.members.length - 1]].name, 25);
        element("title", {}, box).textContent = `${unit.members.length} nodes one after the other: click to open`;
        return box;
      }
      const io = element("g", {"class": "io", ["data-graph-" + unit.kind]: unit.name, "transform": transform}, nodeLayer);
      element("rect", {"width": IO_WIDTH, "height": IO_HEIGHT, "rx": 12}, io);
      element("text", {"x": IO_WIDTH / 2, "y": 16, "text-anchor": "middle"}, io).textContent = shorten(unit.name, 18);
      return io;
    });
    drawn = {boxes: layout.boxes, width: layout.width, height: layout.height, gs: gs, fills: []};
  }

  function opCounts(indices) {
    const counts = new Map();
    for (const index of indices) counts.set(data.nodes[index].op, (counts.get(data.nodes[index].op) || 0) + 1);
    const text = [...counts].sort((a, b) => b[1] - a[1]).map(([op, n]) => `${op} \u00d7${n}`).join(", ");
    return text.length > 20 ? text.slice(0, 19) + "\u2026" : text;
  }

  function tooltip(node) {
    const lines = [`${node.name} (${node.op})`, PLACEMENT_TEXT[node.placement]];
    if (node.operator) lines.push(node.operator);
    if (node.reason) lines.push(node.reason);
    if (node.rule) lines.push("made by " + node.rule);
    if (node.difference) lines.push(differenceText(node.difference, node));
    return lines.join("\n");
  }

  function nodeColour(node, by) {
    if (by === "placement") return PLACEMENT_COLOURS[node.placement];
    const index = band(node, by);
    return index < 0 ? NOT_COMPARED : BANDS[index].fill;
  }

  function unitColour(unit, by) {
    if (unit.kind === "node") return nodeColour(data.nodes[unit.index], by);
    if (by === "placement") {
      const placements = new Set(unit.members.map(index => data.nodes[index].placement));
      return placements.size === 1 ? PLACEMENT_COLOURS[[...placements][0]] : MIXED;
    }
    const worst = Math.max(...unit.members.map(index => band(data.nodes[index], by)));  // the chain's worst node
    return worst < 0 ? NOT_COMPARED : BANDS[worst].fill;
  }

  function recolour() {
    const by = colourBy.value;
    graph.units.forEach((unit, index) => {
      if (unit.kind !== "node" && unit.kind !== "chain") return;
      const fill = unitColour(unit, by);
      drawn.fills[index] = fill;
      drawn.gs[index].querySelector("rect:not(.behind)").style.fill = fill;
      if (unit.kind === "node") {
        const node = data.nodes[unit.index];
        drawn.gs[index].classList.toggle("first-divergent", Boolean(node.difference && node.difference.first_divergent));
      }
    });
    const items = by === "placement" ? placementLegend() : differenceLegend();
    document.getElementById("legend").replaceChildren(...items.map(([fill, text]) => {
      const item = document.createElement("span");
      item.className = "legend-item";
      if (fill) {
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = fill;
        item.append(swatch);
      }
      item.append(text);
      return item;
    }));
    drawMinimap();
  }

  function placementLegend() {
    const present = new Set(data.nodes.map(node => node.placement));
    const items = Object.entries(PLACEMENT_TEXT).filter(([key]) => key !== "pending" || present.has(key))
      .map(([key, text]) => [PLACEMENT_COLOURS[key], text]);
    return graph.units.some(unit => unit.kind === "chain") ? items.concat([[MIXED, "a chain in more than one place"]]) : items;
  }

  // Says which unit each band is in: LSB for quantized values, ULPs for float ones, as the nodes have them.
  function differenceLegend() {
    const compared = data.nodes.filter(node => node.difference && node.difference.unit);
    const lsb = compared.some(node => !isFloat(node.difference)), ulp = compared.some(node => isFloat(node.difference));
    const items = BANDS.map((b, index) => [b.fill, index === 0 ? "exact" :
      [lsb ? b.lsbText : null, ulp ? b.ulpText : null].filter(Boolean).join(" / ") || b.lsbText]);
    items.push([NOT_COMPARED, "not compared"]);
    if (ulp) items.push([null, "(float values in ULPs of float32 at the tensor's largest magnitude" + (lsb ? "; quantized ones in LSB)" : ")")]);
    return items;
  }

  // ---- the view: pan, zoom, minimap ----

  function applyView() {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.scale})`);
    drawMinimapView();
  }

  // The whole graph; or, as the page opens, its top at a readable scale, across it when it fits, else
  // from its first input.
  function fit(whole) {
    const box = svg.getBoundingClientRect();
    const across = (box.width - 20) / drawn.width;
    if (whole) {
      view.scale = Math.min(1, across, (box.height - 20) / drawn.height) || 1;
      view.x = (box.width - drawn.width * view.scale) / 2;
    } else {
      view.scale = Math.min(1, Math.max(across, READABLE_SCALE)) || 1;
      if (drawn.width * view.scale <= box.width - 20) {
        view.x = (box.width - drawn.width * view.scale) / 2;
      } else {
        const start = graph.units.findIndex(unit => unit.kind === "input");
        const at = drawn.boxes[start >= 0 ? start : 0];
        view.x = box.width / 2 - (at.x + graph.units[start >= 0 ? start : 0].width / 2) * view.scale;
      }
    }
    view.y = 10;
    applyView();
  }

  function minimapScale() { return Math.min(minimap.width / drawn.width, minimap.height / drawn.height); }

  let minimapPicture = null;
  function drawMinimap() {
    const box = svg.getBoundingClientRect();
    minimap.hidden = drawn.width * READABLE_SCALE <= box.width && drawn.height * READABLE_SCALE <= box.height;
    const fitted = Math.min(180 / drawn.width, 240 / drawn.height);
    const width = Math.max(40, Math.round(drawn.width * fitted)), height = Math.max(40, Math.round(drawn.height * fitted));
    minimap.width = width;
    minimap.height = height;
    const context = minimap.getContext("2d"), scale = minimapScale();
    context.fillStyle = "#f4f4f4";
    context.fillRect(0, 0, width, height);
    graph.units.forEach((unit, index) => {
      const at = drawn.boxes[index];
      context.fillStyle = drawn.fills[index] || "#ffffff";
      context.fillRect(at.x * scale, at.y * scale, Math.max(1, unit.width * scale), Math.max(1, unit.height * scale));
    });
    minimapPicture = context.getImageData(0, 0, width, height);
    drawMinimapView();
  }

  function drawMinimapView() {
    if (!minimapPicture || minimap.hidden) return;
    const context = minimap.getContext("2d"), scale = minimapScale(), box = svg.getBoundingClientRect();
    context.putImageData(minimapPicture, 0, 0);
    context.strokeStyle = "#d0008f";
    context.lineWidth = 2;
    const left = Math.max(1, -view.x / view.scale * scale), top = Math.max(1, -view.y / view.scale * scale);  // inside the canvas
    const right = Math.min(minimap.width - 1, (box.width - view.x) / view.scale * scale);
    const bottom = Math.min(minimap.height - 1, (box.height - view.y) / view.scale * scale);
    context.strokeRect(left, top, Math.max(2, right - left), Math.max(2, bottom - top));
  }

  function moveTo(graphX, graphY) {  // the view centred on a point of the graph
    const box = svg.getBoundingClientRect();
    view.x = box.width / 2 - graphX * view.scale;
    view.y = box.height / 2 - graphY * view.scale;
    applyView();
  }

  // ---- selecting: the graph, the panel, the table ----

  function centreOn(index) {
    if (graph.units[graph.unitOf[index]].kind === "chain") {  // open its chain first
      expanded.add(graph.units[graph.unitOf[index]].members[0]);
      return relayout(false).then(() => centreOn(index));
    }
    const at = drawn.boxes[graph.unitOf[index]];
    view.scale = Math.max(view.scale, 0.8);
    moveTo(at.x + NODE_WIDTH / 2, at.y + NODE_HEIGHT / 2);
    select(index);
    return Promise.resolve();
  }

  function select(index) {
    selected = index;
    for (const box of viewport.querySelectorAll("g.node.selected")) box.classList.remove("selected");
    const unit = graph.unitOf[index];
    if (graph.units[unit].kind === "node") drawn.gs[unit].classList.add("selected");
    for (const row of tableBody.querySelectorAll("tr.selected")) row.classList.remove("selected");
    const row = rows[index];
    row.classList.add("selected");
    if (!row.hidden) scrollRowIntoView(row);
    const node = data.nodes[index];
    const facts = [["node", node.name], ["op type", node.op], ["placement", PLACEMENT_TEXT[node.placement]],
                   node.operator ? ["DirectML operator", node.operator] : ["fallback reason", node.reason],
                   ["made by", node.rule || "the model's own node"], ["stands for", node.from.join(", ") || "-"],
                   ["MACs", node.macs.toLocaleString("en")]];
    if (node.difference) facts.push(["difference", differenceText(node.difference, node)]);
    details.replaceChildren();
    const close = document.createElement("button");
    close.textContent = "\u00d7";
    close.className = "close";
    close.onclick = () => { details.hidden = true; };
    details.append(close);
    const list = document.createElement("dl");
    for (const [key, value] of facts) {
      const term = document.createElement("dt"), text = document.createElement("dd");
      term.textContent = key;
      text.textContent = value;
      list.append(term, text);
    }
    details.append(list);
    details.hidden = false;
  }

  function scrollRowIntoView(row) {  // within the table's pane only: the page stays where it is
    const pane = document.getElementById("table-pane"), head = tableBody.parentElement.tHead.offsetHeight;
    if (row.offsetTop < pane.scrollTop + head || row.offsetTop + row.offsetHeight > pane.scrollTop + pane.clientHeight) {
      pane.scrollTop = row.offsetTop - head - pane.clientHeight / 3;
    }
  }

  // ---- the node table ----

  const tableBody = document.querySelector("#node-table tbody");
  const rows = [];
  const sortKeys = {
    index: index => index, name: index => data.nodes[index].name, op: index => data.nodes[index].op,
    placement: index => data.nodes[index].placement, operator: index => operatorText(data.nodes[index]),
    macs: index => data.nodes[index].macs,
    isolated: index => sortableBand(data.nodes[index], "isolated"), propagated: index => sortableBand(data.nodes[index], "propagated"),
  };

  function operatorText(node) { return node.operator || (node.placement === "pending" ? "pending" : "fallback"); }
  function sortableBand(node, kind) { const value = bandValue(node, kind); return value === null ? -1 : value; }

  function fillTable() {
    const compared = Boolean(document.getElementById("only-differing"));
    const fragment = document.createDocumentFragment();
    data.nodes.forEach((node, index) => {
      const row = document.createElement("tr");
      row.dataset.index = index;
      const cells = [index, node.name, node.op, node.placement, operatorText(node).replace(/^DML_OPERATOR_/, ""), thousands(node.macs)];
      if (compared) cells.push(shortDifference(node, "isolated"), shortDifference(node, "propagated"));
      for (const value of cells) {
        const cell = document.createElement("td");
        cell.textContent = value;
        row.append(cell);
      }
      row.children[1].title = node.name;
      row.children[4].title = node.operator || node.reason || "";
      if (compared) [6, 7].forEach((at, k) => { row.children[at].title = differenceCell(node, k ? "propagated" : "isolated"); });
      row.children[3].className = "placement " + node.placement;
      if (compared) {
        for (const [at, kind] of [[6, "isolated"], [7, "propagated"]]) {
          const index = band(node, kind);
          if (index > 0) row.children[at].style.background = BANDS[index].fill;
        }
      }
      rows.push(row);
      fragment.append(row);
    });
    tableBody.append(fragment);
    countRows();
  }

  function sortBy(header) {
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    for (const other of header.parentElement.children) other.removeAttribute("aria-sort");
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const key = sortKeys[header.dataset.key], numeric = header.dataset.type === "number";
    const order = data.nodes.map((node, index) => index).sort((a, b) => {
      const x = key(a), y = key(b);
      const compared = numeric ? x - y : String(x).localeCompare(String(y));
      return (ascending ? compared : -compared) || a - b;
    });
    tableBody.append(...order.map(index => rows[index]));
  }

  function filterRows() {
    const text = document.getElementById("table-filter").value.trim().toLowerCase();
    const onlyDiffering = document.getElementById("only-differing");
    data.nodes.forEach((node, index) => {
      const shown = (!text || [node.name, node.op, node.operator || "", node.placement].some(v => v.toLowerCase().includes(text)))
        && (!onlyDiffering || !onlyDiffering.checked || differs(node));
      rows[index].hidden = !shown;
    });
    countRows();
  }

  function countRows() {
    const shown = rows.filter(row => !row.hidden).length;
    document.getElementById("row-count").textContent = shown === rows.length ? `${rows.length} rows` : `${shown} of ${rows.length} rows`;
  }

  // ---- wiring ----

  function wire() {
    let drag = null;
    svg.addEventListener("wheel", event => {
      event.preventDefault();
      const box = svg.getBoundingClientRect();
      const factor = Math.exp(-event.deltaY * 0.0015);
      const px = event.clientX - box.left, py = event.clientY - box.top;
      view.x = px - (px - view.x) * factor;
      view.y = py - (py - view.y) * factor;
      view.scale *= factor;
      applyView();
    }, {passive: false});
    svg.addEventListener("pointerdown", event => { drag = {x: event.clientX, y: event.clientY, moved: false}; });
    window.addEventListener("pointermove", event => {
      if (!drag) return;
      view.x += event.clientX - drag.x;
      view.y += event.clientY - drag.y;
      drag.moved = drag.moved || Math.abs(event.clientX - drag.x) + Math.abs(event.clientY - drag.y) > 2;
      drag.x = event.clientX;
      drag.y = event.clientY;
      applyView();
    });
    window.addEventListener("pointerup", event => {
      const target = event.target.closest ? event.target : null;
      const box = target && target.closest("g.node"), chain = target && target.closest("g.chain");
      if (drag && !drag.moved && box) select(Number(box.dataset.index));
      if (drag && !drag.moved && chain) centreOn(Number(chain.dataset.chain));
      drag = null;
    });
    let steering = false;
    const steer = event => {
      const box = minimap.getBoundingClientRect(), scale = minimapScale();
      moveTo((event.clientX - box.left) / scale, (event.clientY - box.top) / scale);
    };
    minimap.addEventListener("pointerdown", event => { steering = true; minimap.setPointerCapture(event.pointerId); steer(event); });
    minimap.addEventListener("pointermove", event => { if (steering) steer(event); });
    minimap.addEventListener("pointerup", () => { steering = false; });
    document.getElementById("fit").onclick = () => fit(true);
    colourBy.onchange = recolour;
    collapse.onchange = () => { expanded.clear(); relayout(true); };
    const tableToggle = document.getElementById("table-toggle");
    tableToggle.onclick = () => {
      const pane = document.getElementById("table-pane");
      pane.hidden = !pane.hidden;
      tableToggle.setAttribute("aria-pressed", String(!pane.hidden));
      drawMinimapView();
    };
    const search = document.getElementById("search");
    let found = [], next = 0;
    search.addEventListener("input", () => {
      const text = search.value.trim().toLowerCase();
      found = data.nodes.map((node, index) => index)
        .filter(index => text !== "" && [data.nodes[index].name, data.nodes[index].op, data.nodes[index].operator || ""]
          .some(v => v.toLowerCase().includes(text)));
      markMatches(found);
      next = 0;
      document.getElementById("matches").textContent = text ? `${found.length} match(es), Enter for the next` : "";
    });
    search.addEventListener("keydown", event => {
      if (event.key === "Enter" && found.length) centreOn(found[next++ % found.length]).then(() => markMatches(found));
    });
    for (const link of document.querySelectorAll("a.goto")) {
      link.onclick = event => {
        event.preventDefault();
        const index = data.nodes.findIndex(node => node.name === link.dataset.goto);
        if (index >= 0) { document.getElementById("graph-section").scrollIntoView(); centreOn(index); }
      };
    }
    for (const header of document.querySelectorAll("#node-table th")) header.onclick = () => sortBy(header);
    document.getElementById("table-filter").addEventListener("input", filterRows);
    const onlyDiffering = document.getElementById("only-differing");
    if (onlyDiffering) onlyDiffering.onchange = filterRows;
    tableBody.addEventListener("click", event => {
      const row = event.target.closest("tr");
      if (row) centreOn(Number(row.dataset.index));
    });
  }

  function markMatches(found) {
    const hit = new Set(found.map(index => graph.unitOf[index]));
    drawn.gs.forEach((g, unit) => g.classList.toggle("match", hit.has(unit)));
  }

  // Lays out and draws graph (after the chains open or close); the view at the top, or kept.
  function relayout(top) {
    const begun = performance.now();
    graph = buildGraph();
    const laidOut = graph.units.length > ELK_MOST ? layeredLayout() : elkLayout();
    return laidOut.then(layout => {
      draw(layout);
      recolour();
      if (top) fit(false); else applyView();
      if (selected !== null && graph.units[graph.unitOf[selected]].kind === "node") drawn.gs[graph.unitOf[selected]].classList.add("selected");
      const chains = graph.units.filter(unit => unit.kind === "chain").length;
      status.textContent = `${data.nodes.length} node(s)` + (chains ? `, ${chains} chain(s) of ${CHAIN_LEAST} or more drawn as one box (click one to open it)` : "")
        + "; drag to pan, wheel to zoom, click a node for its details.";
      document.documentElement.dataset.renderMs = String(Math.round(performance.now() - (draws ? begun : started)));
      document.documentElement.dataset.draws = String(++draws);
    });
  }

  collapse.checked = data.nodes.length > COLLAPSE_ABOVE;
  fillTable();
  relayout(true).then(wire).catch(error => {
    status.textContent = "the graph could not be laid out: " + error;
    console.error(error);
  });
})();
