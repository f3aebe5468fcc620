// dml_ep's report: draws the plan embedded as JSON (#plan-data) with ELK's layered layout, then lets
// the reader search, zoom, pan, recolour and click nodes. Written by dml_ep/html_report.py.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_WIDTH = 168, NODE_HEIGHT = 38, IO_WIDTH = 120, IO_HEIGHT = 24;
  const PLACEMENT_COLOURS = {"modelled": "#009e73", "real-ep-dml": "#56b4e9", "cpu": "#e69f00", "pending": "#ffffff"};
  const PLACEMENT_TEXT = {"modelled": "on DirectML, modelled by dml_ep", "real-ep-dml": "on DirectML in the real EP, not modelled",
                          "cpu": "on the CPU in the real EP", "pending": "planned only when run (shapes depend on data)"};
  // Largest difference in LSB: exact, 1, 2, more; grey when the node was not compared that way.
  const DIFFERENCE_BANDS = [[0, "#d9f0d3", "exact"], [1, "#fee08b", "1"], [2, "#fc8d59", "2"], [Infinity, "#d73027", "> 2"]];
  const NOT_COMPARED = "#e0e0e0";

  const started = performance.now();
  const data = JSON.parse(document.getElementById("plan-data").textContent);
  for (const node of data.nodes) {  // JSON has no infinity: html_report writes a difference without bound as "inf"
    for (const kind of ["isolated", "propagated"]) {
      if (node.difference && node.difference[kind] === "inf") node.difference[kind] = Infinity;
    }
  }
  const svg = document.getElementById("graph");
  const viewport = document.getElementById("viewport");
  const details = document.getElementById("details");
  const status = document.getElementById("status");
  const boxes = [];  // the <g> drawn for each plan entry, by index
  let view = {x: 0, y: 0, scale: 1};
  let size = {width: 0, height: 0};

  function element(name, attributes, parent) {
    const made = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) made.setAttribute(key, value);
    if (parent) parent.appendChild(made);
    return made;
  }

  // Long names keep their ends: exporters' names differ in their last part (/encoder/layer.3/attention/Add).
  function shorten(text, most) {
    if (text.length <= most) return text;
    const head = Math.floor((most - 1) / 3);
    return text.slice(0, head) + "\u2026" + text.slice(text.length - (most - 1 - head));
  }

  function layoutGraph() {
    const children = data.nodes.map((node, index) => ({id: "n" + index, width: NODE_WIDTH, height: NODE_HEIGHT}));
    const edges = data.edges.map(([from, to], index) => ({id: "e" + index, sources: ["n" + from], targets: ["n" + to]}));
    data.inputs.forEach((name, index) => children.push({id: "i" + index, width: IO_WIDTH, height: IO_HEIGHT}));
    data.outputs.forEach((name, index) => children.push({id: "o" + index, width: IO_WIDTH, height: IO_HEIGHT}));
    data.nodes.forEach((node, index) => {
      node.reads.forEach(name => edges.push({id: "r" + edges.length, sources: ["i" + data.inputs.indexOf(name)], targets: ["n" + index]}));
      node.writes.forEach(name => edges.push({id: "w" + edges.length, sources: ["n" + index], targets: ["o" + data.outputs.indexOf(name)]}));
    });
    const options = {"elk.algorithm": "layered", "elk.direction": "DOWN", "elk.edgeRouting": "POLYLINE",
                     "elk.layered.spacing.nodeNodeBetweenLayers": "28", "elk.spacing.nodeNode": "18",
                     "elk.layered.thoroughness": "1"};
    return new ELK().layout({id: "root", layoutOptions: options, children: children, edges: edges});
  }

  function draw(layout) {
    const edgeLayer = element("g", {"class": "edges"}, viewport);
    const nodeLayer = element("g", {"class": "nodes"}, viewport);
    for (const edge of layout.edges) {
      for (const section of edge.sections || []) {
        const points = [section.startPoint, ...(section.bendPoints || []), section.endPoint];
        element("polyline", {"points": points.map(p => p.x + "," + p.y).join(" "), "marker-end": "url(#arrow)"}, edgeLayer);
      }
    }
    for (const child of layout.children) {
      const kind = child.id[0], index = Number(child.id.slice(1));
      if (kind === "n") {
        const node = data.nodes[index];
        const box = element("g", {"class": "node", "data-node": node.name, "data-placement": node.placement, "data-index": index,
                                   "transform": `translate(${child.x},${child.y})`}, nodeLayer);
        element("rect", {"width": NODE_WIDTH, "height": NODE_HEIGHT, "rx": 4}, box);
        element("text", {"x": 6, "y": 15, "class": "op"}, box).textContent = shorten(node.op, 24);
        element("text", {"x": 6, "y": 30, "class": "name"}, box).textContent = shorten(node.name, 27);
        element("title", {}, box).textContent = tooltip(node);
        boxes[index] = box;
      } else {
        const name = (kind === "i" ? data.inputs : data.outputs)[index];
        const io = element("g", {"class": "io", ["data-graph-" + (kind === "i" ? "input" : "output")]: name,
                                 "transform": `translate(${child.x},${child.y})`}, nodeLayer);
        element("rect", {"width": IO_WIDTH, "height": IO_HEIGHT, "rx": 12}, io);
        element("text", {"x": IO_WIDTH / 2, "y": 16, "text-anchor": "middle"}, io).textContent = shorten(name, 18);
      }
    }
    const defs = element("defs", {}, svg);
    const marker = element("marker", {"id": "arrow", "viewBox": "0 0 8 8", "refX": 8, "refY": 4, "markerWidth": 6, "markerHeight": 6,
                                      "orient": "auto"}, defs);
    element("path", {"d": "M0,0 L8,4 L0,8 z"}, marker);
    size = {width: layout.width, height: layout.height};
  }

  function tooltip(node) {
    const lines = [`${node.name} (${node.op})`, PLACEMENT_TEXT[node.placement]];
    if (node.operator) lines.push(node.operator);
    if (node.reason) lines.push(node.reason);
    if (node.rule) lines.push("made by " + node.rule);
    if (node.difference) lines.push(differenceText(node.difference));
    return lines.join("\n");
  }

  function differenceText(difference) {
    const unit = difference.unit || "";
    const number = value => Number.isInteger(value) ? String(value) : value.toPrecision(3);
    const parts = [];
    if (difference.isolated !== null) parts.push(`isolated: ${number(difference.isolated)} ${unit}`);
    if (difference.propagated !== null) parts.push(`propagated: ${number(difference.propagated)} ${unit}`);
    if (difference.cause) parts.push("cause: " + difference.cause);
    if (difference.first_divergent) parts.push("the first node that differs in isolation");
    return "largest difference, " + (parts.join("; ") || "not compared");
  }

  function colour(node, by) {
    if (by === "placement") return PLACEMENT_COLOURS[node.placement];
    const value = node.difference ? node.difference[by] : null;
    if (value === null || value === undefined || node.difference.unit !== "LSB" && value !== 0) return NOT_COMPARED;
    return DIFFERENCE_BANDS.find(([most]) => value <= most)[1];
  }

  function recolour() {
    const by = document.getElementById("colour-by").value;
    boxes.forEach((box, index) => {
      const node = data.nodes[index];
      box.querySelector("rect").style.fill = colour(node, by);
      box.classList.toggle("first-divergent", Boolean(node.difference && node.difference.first_divergent));
    });
    const legend = document.getElementById("legend");
    const present = new Set(data.nodes.map(node => node.placement));
    const items = by === "placement" ? Object.entries(PLACEMENT_TEXT).filter(([key]) => key !== "pending" || present.has(key))
      .map(([key, text]) => [PLACEMENT_COLOURS[key], text])
      : DIFFERENCE_BANDS.map(([, fill, text]) => [fill, text + (text === "exact" ? "" : " LSB")]).concat([[NOT_COMPARED, "not compared"]]);
    legend.replaceChildren(...items.map(([fill, text]) => {
      const item = document.createElement("span");
      item.className = "legend-item";
      item.innerHTML = `<span class="swatch" style="background:${fill}"></span>`;
      item.append(text);
      return item;
    }));
  }

  function applyView() {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.scale})`);
  }

  // The whole graph; or, as the page opens, its top at a readable scale (a model is often a long chain).
  function fit(whole) {
    const box = svg.getBoundingClientRect();
    const across = box.width / (size.width + 20);
    view.scale = Math.min(1, across, whole ? box.height / (size.height + 20) : Math.max(across, 0.6)) || 1;
    view.x = Math.max(10, (box.width - size.width * view.scale) / 2);
    view.y = 10;
    applyView();
  }

  function centreOn(index) {
    const box = svg.getBoundingClientRect();
    const at = boxes[index].transform.baseVal.consolidate().matrix;
    view.scale = Math.max(view.scale, 0.8);
    view.x = box.width / 2 - (at.e + NODE_WIDTH / 2) * view.scale;
    view.y = box.height / 2 - (at.f + NODE_HEIGHT / 2) * view.scale;
    applyView();
    select(index);
  }

  function select(index) {
    boxes.forEach(box => box.classList.remove("selected"));
    boxes[index].classList.add("selected");
    const node = data.nodes[index];
    const rows = [["node", node.name], ["op type", node.op], ["placement", PLACEMENT_TEXT[node.placement]],
                  node.operator ? ["DirectML operator", node.operator] : ["fallback reason", node.reason],
                  ["made by", node.rule || "the model's own node"], ["stands for", node.from.join(", ") || "-"],
                  ["MACs", node.macs.toLocaleString("en")]];
    if (node.difference) rows.push(["difference", differenceText(node.difference)]);
    details.replaceChildren();
    const close = document.createElement("button");
    close.textContent = "\u00d7";
    close.className = "close";
    close.onclick = () => { details.hidden = true; };
    details.append(close);
    const list = document.createElement("dl");
    for (const [key, value] of rows) {
      const term = document.createElement("dt"), text = document.createElement("dd");
      term.textContent = key;
      text.textContent = value;
      list.append(term, text);
    }
    details.append(list);
    details.hidden = false;
  }

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
      const box = event.target.closest && event.target.closest("g.node");
      if (drag && !drag.moved && box) select(Number(box.dataset.index));
      drag = null;
    });
    document.getElementById("fit").onclick = () => fit(true);
    document.getElementById("colour-by").onchange = recolour;
    const search = document.getElementById("search");
    let found = [], next = 0;
    search.addEventListener("input", () => {
      const text = search.value.trim().toLowerCase();
      found = [];
      boxes.forEach((box, index) => {
        const node = data.nodes[index];
        const hit = text !== "" && [node.name, node.op, node.operator || ""].some(v => v.toLowerCase().includes(text));
        box.classList.toggle("match", hit);
        if (hit) found.push(index);
      });
      next = 0;
      document.getElementById("matches").textContent = text ? `${found.length} match(es), Enter for the next` : "";
    });
    search.addEventListener("keydown", event => {
      if (event.key === "Enter" && found.length) centreOn(found[next++ % found.length]);
    });
    for (const link of document.querySelectorAll("a.goto")) {
      link.onclick = event => {
        event.preventDefault();
        const index = data.nodes.findIndex(node => node.name === link.dataset.goto);
        if (index >= 0) { document.getElementById("graph-section").scrollIntoView(); centreOn(index); }
      };
    }
  }

  layoutGraph().then(layout => {
    draw(layout);
    recolour();
    wire();
    fit(false);
    status.textContent = `${data.nodes.length} node(s); drag to pan, wheel to zoom, click a node for its details.`;
    document.documentElement.dataset.renderMs = String(Math.round(performance.now() - started));
  }).catch(error => {
    status.textContent = "the graph could not be laid out: " + error;
    console.error(error);
  });
})();
