"""``inspect --html`` and ``compare --html``, opened in headless Chromium as a reader would: the page
draws without console errors and without fetching anything, every plan node once with the right
``data-placement``, a screenshot that is not blank, in under 5 s on a 1,000-node transformer and
under 2 s on a 2,500-node chain; its node table sorts, filters and selects as the report data says;
float nodes are coloured by their difference in ULPs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.compose
import pytest

from browser import keep_screenshot, distinct_pixel_bytes, open_report
from onnx_builders import Feed, run_ort, single_node_model

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.onnx"))
SCREENSHOT = ROOT / "docs" / "report.png"
RENDER_BUDGET_S = 5.0
LARGE_RENDER_BUDGET_MS = 2000  # a 2,500-node graph, drawn in about 0.5 s here
# the page's difference bands (report.js), as Chromium writes a fill: exact, 1 LSB or <= 1 ulp, 2 LSB or <= 16 ulp, more
BAND_FILLS = ["rgb(217, 240, 211)", "rgb(254, 224, 139)", "rgb(252, 141, 89)", "rgb(215, 48, 39)"]
NOT_COMPARED = "rgb(224, 224, 224)"


def dml_ep(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dml_ep", *map(str, argv)], capture_output=True, text=True)


def plan_placements(model: Path, *options) -> list[tuple[str, str]]:
    """(node, placement) of each plan entry, as ``inspect --json`` gives them, and ``pending`` for
    each node it plans only when run."""
    done = dml_ep("inspect", model, "--json", "-", *options)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return [(row["node"], row["placement"]) for row in report["nodes"]] + [(name, "pending") for name in report["pending"]]


def drawn(opened) -> list[tuple[str, str]]:
    return opened.evaluate("[...document.querySelectorAll('g.node[data-node]')].map(e => [e.dataset.node, e.dataset.placement])")


def open_chains(opened) -> None:
    """Every node drawn as its own box: a large graph opens with its long chains collapsed."""
    if opened.evaluate("document.getElementById('collapse').checked"):
        draws = opened.evaluate("document.documentElement.dataset.draws")
        opened.page.click("#collapse")
        opened.page.wait_for_function(f"document.documentElement.dataset.draws !== '{draws}'")


def table_rows(opened) -> list[list[str]]:
    """The node table's shown rows, in their order, as the cells' text."""
    return opened.evaluate("[...document.querySelectorAll('#node-table tbody tr')].filter(r => !r.hidden)"
                           ".map(r => [...r.cells].map(c => c.textContent))")


def assert_renders(opened, expected: list[tuple[str, str]]) -> None:
    assert opened.errors == [], opened.errors
    open_chains(opened)
    assert opened.requests == [], f"the page fetched {opened.requests}"
    assert sorted(map(tuple, drawn(opened))) == sorted(expected)  # each plan node once, its placement
    assert opened.seconds < RENDER_BUDGET_S, f"drawn in {opened.seconds:.1f} s"
    assert distinct_pixel_bytes(opened.page.screenshot()) > 50, "a blank screenshot"


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_inspect_page_draws_every_plan_node_with_its_placement(browser, model, tmp_path):
    page = tmp_path / "plan.html"
    done = dml_ep("inspect", model, "--html", page)
    assert done.returncode == 0, done.stderr
    assert_renders(open_report(browser, page), plan_placements(model))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_compare_page_draws_the_plan_and_each_output(browser, model, tmp_path):
    page, report = tmp_path / "compare.html", tmp_path / "compare.json"
    done = dml_ep("compare", model, "--html", page, "--json", report, "--quiet", "--reference", "ort-exact")  # exact on every host
    assert done.returncode == 0, done.stderr
    opened = open_report(browser, page)
    assert_renders(opened, plan_placements(model))
    outputs = onnx.load(model).graph.output
    assert opened.evaluate("[...document.querySelectorAll('[data-output]')].map(e => e.dataset.output)") == [o.name for o in outputs]
    # coloured by difference, every node has a colour (compared, or the grey of not compared)
    opened.page.select_option("#colour-by", "propagated")
    fills = opened.evaluate("[...document.querySelectorAll('[data-node] rect')].map(r => r.style.fill)")
    assert fills and all(fills)


def stacked_transformer(blocks: int) -> onnx.ModelProto:
    """``blocks`` copies of the shipped dynamic transformer block, each feeding the next."""
    block = onnx.load(ROOT / "models" / "transformer_block.dynamic.onnx")
    model = onnx.compose.add_prefix(block, "b0/")
    for index in range(1, blocks):
        following = onnx.compose.add_prefix(block, f"b{index}/")
        model = onnx.compose.merge_models(model, following, io_map=[(model.graph.output[0].name, following.graph.input[0].name)])
    return model


def test_a_1000_node_transformer_renders_in_under_5_seconds(browser, tmp_path):
    path, page = tmp_path / "encoder.onnx", tmp_path / "encoder.html"
    onnx.save(stacked_transformer(42), path)  # 2,142 ONNX nodes, 1,008 after onnxruntime's fusions
    done = dml_ep("inspect", path, "--html", page)
    assert done.returncode == 0, done.stderr
    expected = plan_placements(path)
    assert len(expected) >= 1000
    opened = open_report(browser, page)
    assert_renders(opened, expected)
    assert int(opened.evaluate("document.documentElement.dataset.renderMs")) < RENDER_BUDGET_S * 1000
    # searchable: the matches are the nodes of that op type, and Enter selects the first
    opened.page.fill("#search", "Softmax")
    assert opened.evaluate("document.querySelectorAll('.node.match').length") == sum(1 for name, _ in expected if "softmax" in name.lower())
    opened.page.press("#search", "Enter")
    assert "Softmax" in opened.evaluate("document.getElementById('details').textContent")


def tie_pool_model() -> tuple[onnx.ModelProto, dict]:
    """QLinearAveragePool over pairs of codes with scales of 0.1: the exact average is often k + 1/2,
    which DirectML rounds to even and onnxruntime's float32 average to either side
    (test_qlinear_pool.py pins why)."""
    x = np.arange(200, dtype=np.uint8).reshape(1, 1, 1, 200)
    scale, zero = np.float32(0.1), np.uint8(0)
    return single_node_model("QLinearAveragePool", [Feed(x), scale, zero, scale, zero], np.uint8, 4, domain="com.microsoft",
                             kernel_shape=[1, 2])


@pytest.mark.native_children  # its child processes run on the real CPU under qemu-user
@pytest.mark.host_sensitive
def test_compare_page_marks_the_first_divergent_node_and_histograms_its_differences(browser, tmp_path):
    model, feeds = tie_pool_model()
    path, x, page = tmp_path / "pool.onnx", tmp_path / "x.npy", tmp_path / "pool.html"
    onnx.save(model, path)
    np.save(x, feeds["in0"])
    done = dml_ep("compare", path, "--input", f"in0={x}", "--html", page, "--quiet")
    assert done.returncode == 1, done.stderr  # a mismatch
    # hand-computed: the exact average of each pair of codes, rounded half to even (DirectML)
    codes = feeds["in0"].reshape(-1).astype(np.int64)
    pairs = codes[:-1] + codes[1:]  # windows of 2, stride 1
    directml = (pairs // 2 + ((pairs % 2 == 1) & ((pairs // 2) % 2 == 1))).astype(np.uint8)
    theirs = run_ort(model, feeds, "ort").reshape(-1)
    steps = directml.astype(int) - theirs.astype(int)
    opened = open_report(browser, page)
    assert opened.errors == []
    bins = dict(opened.evaluate("[...document.querySelectorAll('.histogram [data-bin]')].map(g => [g.dataset.bin, +g.dataset.count])"))
    assert bins == {"0": int((steps == 0).sum()), "-1": int((steps == -1).sum()), "+1": int((steps == 1).sum()),
                    "-2": 0, "+2": 0, "other": 0}
    assert bins["0"] < steps.size  # the two differ
    node = model.graph.node[0].name or f"<QLinearAveragePool -> {model.graph.node[0].output[0]}>"
    assert opened.evaluate("[...document.querySelectorAll('.first-divergent')].map(e => e.dataset.node)") == [node]
    opened.page.select_option("#colour-by", "isolated")
    assert opened.evaluate("document.querySelector('.first-divergent rect').style.fill") == "rgb(254, 224, 139)"  # the 1-LSB band
    opened.page.click("a.goto")
    assert "largest difference, isolated: 1 LSB" in opened.evaluate("document.getElementById('details').textContent")


def test_a_node_on_each_placement_is_coloured_for_it(browser, tmp_path):
    """A uint8 QDQ Conv (DirectML, modelled), a float Softplus (DirectML in the real EP, not
    modelled) and a com.microsoft QLinearMul, which the DML EP has no kernel for (CPU in the real EP)."""
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.UINT8, [1, 1, 1, 1], [3])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quantize"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wd"], name="dq_w"),
        helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
        helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q_conv"),
        helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cd"], name="dq_conv"),
        helper.make_node("Softplus", ["cd"], ["sig"], name="softplus"),
        helper.make_node("QLinearMul", ["cq", "s", "z", "cq", "s", "z", "s", "z"], ["r"], name="square", domain="com.microsoft"),
    ]
    graph = helper.make_graph(nodes, "placements", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("sig", TensorProto.FLOAT, [1, 1, 4, 4]),
                               helper.make_tensor_value_info("r", TensorProto.UINT8, [1, 1, 4, 4])],
                              [weight, helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
                               helper.make_tensor("z", TensorProto.UINT8, [], [128])])
    path, page = tmp_path / "placements.onnx", tmp_path / "placements.html"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]), path)
    done = dml_ep("inspect", path, "--html", page)
    assert done.returncode == 0, done.stderr
    placements = dict(drawn(open_report(browser, page)))
    assert placements["softplus"] == "real-ep-dml" and placements["square"] == "cpu"
    assert [p for name, p in placements.items() if name not in ("softplus", "square")] == ["modelled"] * (len(placements) - 2)
    assert any(re.search("conv", name, re.I) for name in placements)


def test_nodes_planned_only_when_run_are_drawn_pending(browser, tmp_path):
    """NonZero's output size comes with the data: the Cast and QuantizeLinear after it are planned
    only when run, and drawn, as pending, between the nodes around them."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quantize_x"),
             helper.make_node("NonZero", ["x"], ["where"], name="nonzero"),
             helper.make_node("Cast", ["where"], ["where_f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("QuantizeLinear", ["where_f", "s", "z"], ["y"], name="quantize_where")]
    graph = helper.make_graph(nodes, "pending", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("xq", TensorProto.UINT8, [2, 3]),
                               helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("z", TensorProto.UINT8, [], [0])])
    path, page = tmp_path / "pending.onnx", tmp_path / "pending.html"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert dml_ep("inspect", path, "--html", page).returncode == 0
    expected = plan_placements(path)
    assert ("cast", "pending") in expected and ("quantize_where", "pending") in expected and ("quantize_x", "modelled") in expected
    opened = open_report(browser, page)
    assert_renders(opened, expected)
    # x to quantize_x and nonzero, nonzero -> cast -> quantize_where, each QuantizeLinear to its output
    assert opened.evaluate("document.querySelectorAll('g.edges polyline').length") == 6


@pytest.mark.parametrize("name", ["</script><img src=x onerror=alert(1)>", "<!--<script>", "<!--" + "<script>x" * 12_000],
                         ids=["end-tag", "comment-script", "100kB"])
def test_the_page_fetches_nothing_and_escapes_what_the_model_names(browser, tmp_path, name):
    """Self-contained: no src or href leaves the file; a node named like markup stays text. A name
    "<!--<script>" in the JSON data block made the browser read on past its end: no graph was drawn."""
    model, _ = tie_pool_model()
    model.graph.node[0].name = name
    path, page = tmp_path / "named.onnx", tmp_path / "named.html"
    onnx.save(model, path)
    assert dml_ep("inspect", path, "--html", page).returncode == 0
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text, re.I)
    assert text.count("</script>") == text.count("<script")
    opened = open_report(browser, page)
    assert opened.errors == [] and opened.evaluate("document.images.length") == 0
    assert [node for node, _ in drawn(opened)] == [model.graph.node[0].name]


def test_html_takes_one_comparison_and_never_an_input(tmp_path):
    model = ROOT / "models" / "mlp.onnx"
    two = dml_ep("compare", model, ROOT / "models" / "small_cnn.onnx", "--html", tmp_path / "r.html")
    assert two.returncode == 2 and two.stderr.count("\n") == 1 and "--html draws one comparison" in two.stderr
    copy = tmp_path / "mlp.onnx"
    copy.write_bytes(model.read_bytes())
    over = dml_ep("inspect", copy, "--html", copy)
    assert over.returncode == 2 and copy.read_bytes() == model.read_bytes()
    assert not (tmp_path / "r.html").exists()


@pytest.mark.host_sensitive
def test_readme_screenshot_is_made_by_this_code(browser, tmp_path):
    """README's picture: the compare page of the shipped dynamic transformer block, a node clicked.
    DML_EP_UPDATE_SCREENSHOT=1 writes it to docs/report.png; otherwise the one committed must exist
    and not be blank."""
    page = tmp_path / "transformer.html"
    done = dml_ep("compare", ROOT / "models" / "transformer_block.dynamic.onnx", "--html", page, "--quiet", "--reference", "ort-exact")
    assert done.returncode == 0, done.stderr
    opened = open_report(browser, page)
    opened.page.locator("#graph-section").scroll_into_view_if_needed()
    opened.page.click("[data-node='attn.q.matmul_quant']")
    picture = opened.page.screenshot()
    keep_screenshot(picture, SCREENSHOT, ROOT / "README.md")


def test_a_float_output_is_histogrammed_in_ulps_of_the_reference():
    from dml_ep.reports.html import _ulp_bins

    one_ulp = np.spacing(np.float32(1))
    reference = np.array([1, 1, 1, 1, np.nan, 2, 0.5], np.float32)
    candidate = np.array([1, 1 + one_ulp, 1 - one_ulp, 1 + 3 * one_ulp, np.nan, 2 + 4 * one_ulp, np.nan], np.float32)
    # below 1 the spacing halves (1 - one_ulp is one ULP of 1 away, by 1's spacing); at 2 it doubles
    assert _ulp_bins(candidate, reference) == {"0": 2, "1 ulp": 2, "2": 1, "3-16": 1, "> 16": 1}


@pytest.mark.host_sensitive
def test_a_difference_without_bound_keeps_the_page_whole(browser, tmp_path):
    """NaN on one side only makes compare_tensors' largest difference infinite, which JSON cannot
    hold: the page still parses its data, draws, and says the difference is infinite."""
    from dml_ep.conformance.compare import compare_model
    from dml_ep.reports.report import compare_tensors
    from dml_ep.reports.html import compare_report

    model, feeds = tie_pool_model()
    report = compare_model(model, feeds, per_node=True)
    node = report.nodes[0]
    node.isolated = compare_tensors(node.node, np.array([np.nan, 1], np.float32), np.array([1, 1], np.float32), None)
    assert node.isolated.max_diff == np.inf
    page = tmp_path / "unbounded.html"
    page.write_text(compare_report(report), encoding="utf-8")
    opened = open_report(browser, page)
    assert opened.errors == [] and len(drawn(opened)) == 1
    opened.page.click("[data-node]")
    assert "isolated: Infinity abs" in opened.evaluate("document.getElementById('details').textContent")


def compared_transformer(tmp_path) -> tuple[Path, list[dict]]:
    """The compare page of the shipped dynamic transformer block (float activations between its
    quantized products) and its node comparisons from ``--json``."""
    page, report = tmp_path / "compare.html", tmp_path / "compare.json"
    done = dml_ep("compare", ROOT / "models" / "transformer_block.dynamic.onnx", "--html", page, "--json", report, "--quiet",
                  "--reference", "ort-exact")
    assert done.returncode == 0, done.stderr
    return page, json.loads(report.read_text())["models"][0]["nodes"]


def in_unit(node: dict) -> tuple[str, list[dict]]:
    """A compared node's unit and its comparisons in it, as the JSON has them: its output in
    isolation, else its first output's (node_table.comparisons_in_unit)."""
    unit = (node["isolated"] or next(iter(node["propagated"]), {"unit": None}))["unit"]
    return unit, [c for c in [node["isolated"], *node["propagated"]] if c is not None and c["unit"] == unit]


@pytest.mark.host_sensitive
def test_the_node_table_has_a_row_per_plan_entry_and_sorts_filters_and_selects(browser, tmp_path):
    path, nodes = compared_transformer(tmp_path)
    opened = open_report(browser, path)
    assert opened.errors == [] and opened.requests == []
    placements = plan_placements(ROOT / "models" / "transformer_block.dynamic.onnx")
    assert [(row[1], row[3]) for row in table_rows(opened)] == placements  # in plan order
    # sorting by MACs: ascending, then descending; by node name
    macs = [int(row[5].replace(",", "")) for row in table_rows(opened)]
    opened.page.click("#node-table th[data-key=macs]")
    assert [int(row[5].replace(",", "")) for row in table_rows(opened)] == sorted(macs) != macs
    opened.page.click("#node-table th[data-key=macs]")
    assert [int(row[5].replace(",", "")) for row in table_rows(opened)] == sorted(macs, reverse=True)
    opened.page.click("#node-table th[data-key=name]")
    names = [row[1] for row in table_rows(opened)]  # in the page's collation (localeCompare: "_" before ".")
    assert sorted(names) == sorted(name for name, _ in placements)
    assert names == opened.page.evaluate("names => names.map((n, i) => [n, i]).sort(([a], [b]) => a.localeCompare(b)).map(([n]) => n)",
                                         [name for name, _ in placements]) != [name for name, _ in placements]
    # only differing: exactly the nodes the report data has a nonzero largest difference for
    differing = {node["node"] for node in nodes if any(c["max_diff"] > 0 for c in in_unit(node)[1])}
    assert 0 < len(differing) < len(placements)
    opened.page.check("#only-differing")
    assert {row[1] for row in table_rows(opened)} == differing
    opened.page.fill("#table-filter", "reshape")
    assert {row[1] for row in table_rows(opened)} == {name for name in differing if "reshape" in name}
    # a row clicked selects its node in the graph and opens its panel; a node clicked highlights its row
    opened.page.click("#node-table tbody tr:not([hidden]) >> nth=0")
    name = table_rows(opened)[0][1]
    assert opened.evaluate("[...document.querySelectorAll('g.node.selected')].map(g => g.dataset.node)") == [name]
    assert name in opened.evaluate("document.getElementById('details').textContent")
    opened.page.click("[data-node='attn.softmax']")
    assert opened.evaluate("[...document.querySelectorAll('#node-table tr.selected')].map(r => r.cells[1].textContent)") == ["attn.softmax"]
    assert opened.errors == []


@pytest.mark.host_sensitive
def test_float_nodes_are_coloured_by_their_difference_in_ulps(browser, tmp_path):
    """Dynamic quantization leaves float activations: a Reshape or Softmax between the quantized
    products differs from onnxruntime by float32 ULPs, and is coloured by that band, not grey."""
    path, nodes = compared_transformer(tmp_path)
    opened = open_report(browser, path)
    opened.page.select_option("#colour-by", "propagated")
    fills = dict(opened.evaluate("[...document.querySelectorAll('g.node')].map(g => [g.dataset.node, g.querySelector('rect').style.fill])"))
    floats = 0
    for node in nodes:
        unit, compared = in_unit(node)
        propagated = [c for c in node["propagated"] if c["unit"] == unit]
        if unit != "abs" or not propagated:
            continue
        floats += 1
        exact = max(c["max_diff"] for c in propagated) == 0
        ulps = max(c["max_ulps"] for c in propagated)
        band = 0 if exact else 1 if ulps <= 1 else 2 if ulps <= 16 else 3
        assert fills[node["node"]] == BAND_FILLS[band], node["node"]
    assert floats >= 10 and NOT_COMPARED not in {fills[n["node"]] for n in nodes if in_unit(n)[0] == "abs" and n["propagated"]}
    assert "ulp" in opened.evaluate("document.getElementById('legend').textContent")


def branched_chain(n: int) -> onnx.ModelProto:
    """``n`` float nodes: a chain of Adds (DirectML, modelled) with a Sigmoid (not modelled) reading
    every 40th, joined back in five Adds later."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, last, joins, step = [], "x", {}, 0
    while len(nodes) < n:
        if step % 40 == 0 and len(nodes) + 2 < n:
            nodes.append(helper.make_node("Sigmoid", [last], [f"s{step}"], name=f"side{step}"))
            joins[step + 5] = f"s{step}"
        nodes.append(helper.make_node("Add", [last, joins.pop(step, "c")], [f"t{step}"], name=f"add{step}"))
        last, step = f"t{step}", step + 1
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 16])  # noqa: E731
    graph = helper.make_graph(nodes, "chain", [value("x")], [value(last)], [numpy_helper.from_array(np.full((1, 16), 0.01, np.float32), "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_2500_node_graph_draws_in_under_2_seconds_with_a_minimap(browser, tmp_path):
    path, page = tmp_path / "chain.onnx", tmp_path / "chain.html"
    onnx.save(branched_chain(2500), path)
    assert dml_ep("inspect", path, "--html", page).returncode == 0
    opened = open_report(browser, page)
    assert opened.errors == [] and opened.requests == []
    assert int(opened.evaluate("document.documentElement.dataset.renderMs")) < LARGE_RENDER_BUDGET_MS
    # long chains collapsed, and the view at a readable scale
    assert opened.evaluate("document.querySelectorAll('g.chain').length") > 0
    assert float(re.search(r"scale\(([\d.]+)\)", opened.evaluate("document.getElementById('viewport').getAttribute('transform')"))[1]) >= 0.75
    # the minimap moves the view where it is clicked
    assert opened.evaluate("!document.getElementById('minimap').hidden")
    before = opened.evaluate("document.getElementById('viewport').getAttribute('transform')")
    opened.page.locator("#minimap").scroll_into_view_if_needed()
    box = opened.page.locator("#minimap").bounding_box()
    opened.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    assert opened.evaluate("document.getElementById('viewport').getAttribute('transform')") != before
    assert_renders(opened, plan_placements(path))  # opened: every node drawn
    assert int(opened.evaluate("document.documentElement.dataset.renderMs")) < LARGE_RENDER_BUDGET_MS
    assert len(table_rows(opened)) == 2500
