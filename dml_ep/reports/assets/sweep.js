// dml_ep's sweep page: draws the tasks embedded as JSON (#sweep-data) as a matrix of models by settings and
// as a table the reader sorts (click a header) and filters. Written by dml_ep/sweep_page.py. Every value from
// the data enters the page as text (textContent, Option, title), never as markup.
"use strict";
(function () {
  const MATRIX_OPEN_MOST = 40;  // models: a larger matrix is drawn when the reader opens it
  const status = document.getElementById("status");
  try {
    draw(JSON.parse(document.getElementById("sweep-data").textContent));
  } catch (error) {
    status.textContent = "the table could not be drawn: " + error;
    throw error;
  }

  function draw(data) {
    const tasks = data.tasks;
    tasks.forEach((task, index) => {
      task.index = index;
      if (task.max_diff === "inf") task.max_diff = Infinity;  // JSON has no infinity: sweep_page writes "inf"
      task.said = task.reason || task.causes;
      task.searched = (task.model + "\n" + task.causes + "\n" + (task.reason || "")).toLowerCase();
    });
    const collator = new Intl.Collator(undefined, {numeric: true});
    const rows = tasks.map(taskRow);
    const body = document.querySelector("#tasks tbody");
    const filter = document.getElementById("filter");
    const selects = Array.from(document.querySelectorAll("#tools select"));
    const count = document.getElementById("row-count");
    let order = tasks;

    function show() {
      const needle = filter.value.trim().toLowerCase();
      const chosen = selects.filter((select) => select.value !== "").map((select) => [select.dataset.key, select.value]);
      const shown = order.filter((task) => task.searched.includes(needle) && chosen.every(([key, value]) => task[key] === value));
      const fragment = document.createDocumentFragment();
      for (const task of shown) fragment.append(rows[task.index]);
      body.replaceChildren(fragment);
      count.textContent = `${shown.length} of ${tasks.length} tasks shown`;
    }

    // Ascending or descending by the header's column, numbers as numbers; tasks without a value last either
    // way, ties in the data's order.
    function sortBy(header) {
      const ascending = header.getAttribute("aria-sort") !== "ascending";
      for (const other of header.parentElement.children) other.removeAttribute("aria-sort");
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const key = header.dataset.key, numeric = header.dataset.type === "number", sign = ascending ? 1 : -1;
      order = tasks.slice().sort((a, b) => {
        const x = a[key], y = b[key];
        if (x === null || y === null) return (x === null) - (y === null) || a.index - b.index;
        const compared = numeric ? (x < y ? -1 : x > y ? 1 : 0) : collator.compare(x, y);
        return sign * compared || a.index - b.index;
      });
      show();
    }

    for (const select of selects) {
      select.append(new Option("all", ""));
      const values = Array.from(new Set(tasks.map((task) => task[select.dataset.key]))).sort(collator.compare);
      for (const value of values) select.append(new Option(value, value));
      select.addEventListener("change", show);
    }
    filter.addEventListener("input", show);
    for (const header of document.querySelectorAll("#tasks th[data-key]")) {
      header.tabIndex = 0;
      header.addEventListener("click", () => sortBy(header));
      header.addEventListener("keydown", (event) => { if (event.key === "Enter") sortBy(header); });
    }
    show();
    matrix(tasks, collator);
    status.hidden = true;
    document.documentElement.dataset.renderMs = String(Math.round(performance.now()));  // since navigation began
  }

  function taskRow(task) {
    const row = document.createElement("tr");
    row.dataset.key = task.key;
    row.dataset.status = task.status;
    cell(row, task.name, "model").title = task.model;
    cell(row, task.arithmetic);
    cell(row, task.ort_release);
    cell(row, task.feature_level);
    cell(row, task.status, "status " + task.status);
    cell(row, percent(task.exact_percent, 2), "number").title = task.exact_percent === null ? "" : String(task.exact_percent);
    cell(row, task.max_diff === null ? "" : `${amount(task.max_diff)} ${task.max_diff_unit}`, "number").title =
      task.max_diff === null ? "" : String(task.max_diff);
    cell(row, task.said, task.reason ? "said reason" : "said");
    cell(row, percent(task.dml_macs_percent, 1), "number");
    cell(row, task.seconds === null ? "" : task.seconds.toFixed(2), "number");
    const report = cell(row, "");
    if (task.href) report.append(link(task.href, "report"));
    return row;
  }

  function cell(row, text, className) {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function link(href, text) {
    const a = document.createElement("a");
    a.setAttribute("href", href);
    a.textContent = text;
    return a;
  }

  // Truncated, not rounded: only an exact 100 reads 100.00 (the epsilon undoes 0.29 * 100 = 28.999...).
  function percent(value, digits) {
    if (value === null) return "";
    const scale = 10 ** digits;
    return (Math.floor(value * scale + 1e-7) / scale).toFixed(digits);
  }

  function amount(value) {
    if (value === Infinity) return "inf";
    const size = Math.abs(value);
    return size === 0 || (size >= 1e-3 && size < 1e6) ? String(Number(value.toPrecision(4))) : value.toExponential(2);
  }

  // Models by settings, each cell the task's exact-match % (its status where it has none), coloured by
  // status and linking to its report; drawn now when small, else when opened.
  function matrix(tasks, collator) {
    const section = document.getElementById("matrix-section");
    const models = new Map(tasks.map((task) => [task.model, task.name]));
    section.open = models.size > 0 && models.size <= MATRIX_OPEN_MOST;
    let drawn = false;
    const drawOnce = () => {
      if (drawn || !section.open) return;
      drawn = true;
      drawMatrix(tasks, models, collator);
    };
    section.addEventListener("toggle", drawOnce);
    drawOnce();
  }

  function drawMatrix(tasks, models, collator) {
    const settings = Array.from(new Map(tasks.map((task) => [task.settings_key, task.settings])))
      .sort((a, b) => collator.compare(a[1], b[1]) || collator.compare(a[0], b[0]));
    const byCell = new Map(tasks.map((task) => [task.model + "\n" + task.settings_key, task]));
    const table = document.getElementById("matrix");
    const header = table.createTHead().insertRow();
    header.append(document.createElement("th"));
    for (const [key, label] of settings) {
      const th = document.createElement("th");
      th.textContent = label;
      th.title = key;
      header.append(th);
    }
    const body = table.createTBody();
    for (const [model, name] of models) {
      const row = body.insertRow();
      const th = document.createElement("th");
      th.textContent = name;
      th.title = model;
      row.append(th);
      for (const [key] of settings) {
        const task = byCell.get(model + "\n" + key);
        const td = row.insertCell();
        if (!task) continue;
        const text = task.exact_percent === null ? task.status : percent(task.exact_percent, 2);
        td.className = "status " + task.status;
        td.dataset.key = task.key;
        td.title = `${task.name}, ${task.settings}: ${task.status}` + (task.said ? ` (${task.said})` : "");
        if (task.href) td.append(link(task.href, text));
        else td.textContent = text;
      }
    }
  }
})();
