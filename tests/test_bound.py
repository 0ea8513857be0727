"""The bound per cell (issue 35 item 1): the least step time a plan allows on its hardware.

Hand formulas (bytes / link rate, FLOPs / rate) on a two-layer profile check the cost model's
overlapped pricing for every strategy; a sweep over strategies, layouts, codecs, micro-batches
and links checks that no bound exceeds its plan's predicted step; the row column, the report's
fraction-of-bound table (with stored rows priced again only where that is sound) and
``analyze``'s output close the loop.
"""
import json
import os
import platform

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from bench.core.config import RunConfig  # noqa: E402
from bench.core.errors import UserError  # noqa: E402
from bench.driver import calibration, planning  # noqa: E402
from bench.store.results import new_row  # noqa: E402
from ralp.cost_model import predict  # noqa: E402
from ralp.hardware import Hardware  # noqa: E402
from test_cost_model import two_layer_profile  # noqa: E402

P_CONV, P_FC, A = 2_000_000, 8_000_000, 4096  # parameters of the tower and the head, floats at the cut
CONV_FLOPS, FC_FLOPS = 1e9, 1e8               # forward FLOPs per image
W, B = 4, 8
LAT = 1e-3
# Link-bound: compute is free; workers' links 1 GB/s, the PS's 2 GB/s, 1 ms latency.
LINKS = Hardware("links", 1e30, 1e30, 1e30, 8e9, 16e9, LAT, pass_s=1e-30)
# Compute-bound: links are free; 1 TFLOP/s conv, 0.5 TFLOP/s dense, 0.25 TFLOP/s on the PS.
CPU = Hardware("cpu", 1e12, 5e11, 2.5e11, 1e30, 1e30, 0.0, pass_s=1e-30)


def _profile():
    return two_layer_profile(P_CONV, P_FC, A, conv_flops=CONV_FLOPS, fc_flops=FC_FLOPS)


def _bound(strategy, hardware, **settings):
    settings = {"workers": W, "batch_size": B, **settings}
    return predict(_profile(), strategy, hardware=hardware, overlap=True, **settings).step_time_s


# ----------------------------------------------------------------------------- hand formulas

def test_sync_ps_bound_is_the_ps_link_or_the_workers_flops():
    P = P_CONV + P_FC
    # each worker pulls 4P and pushes 4P (one per direction); the PS sends and receives 4PW
    assert _bound("ps", LINKS) == pytest.approx(max(4 * P / 1e9, 4 * P * W / 2e9) + LAT, rel=1e-9)
    assert _bound("ps", LINKS, ps=2) == pytest.approx(max(4 * P / 1e9, 4 * P * W / 2 / 2e9) + LAT, rel=1e-9)
    assert _bound("ps", CPU) == pytest.approx(3 * B * (CONV_FLOPS / 1e12 + FC_FLOPS / 5e11), rel=1e-9)


def test_horovod_bound_is_the_ring_bytes_once_plus_one_latency():
    P = P_CONV + P_FC
    # 2(W-1)/W x 4P each way; one latency, not the ring's 2(W-1) hops summed
    assert _bound("horovod", LINKS) == pytest.approx(2 * (W - 1) / W * 4 * P / 1e9 + LAT, rel=1e-9)
    assert _bound("horovod", CPU) == pytest.approx(3 * B * (CONV_FLOPS / 1e12 + FC_FLOPS / 5e11), rel=1e-9)


def test_ralp_bound_is_the_ps_link_or_the_head_on_the_ps():
    acts = 4 * B * A
    worker = (4 * P_CONV + acts) / 1e9        # pull tower + activation gradients in; the same out
    ps = W * (4 * P_CONV + acts) / 2e9        # the PS serves every worker's tower and activations
    assert _bound("ralp", LINKS, cut="conv") == pytest.approx(max(worker, ps) + LAT, rel=1e-9)
    # the head at W x B images on the PS against the tower at B on a worker
    head, tower = 3 * W * B * FC_FLOPS / 2.5e11, 3 * B * CONV_FLOPS / 1e12
    assert _bound("ralp", CPU, cut="conv") == pytest.approx(max(head, tower), rel=1e-9)


def test_hybrid_bound_counts_the_tower_ring_and_the_activations_and_not_micro_batch_latency():
    acts = 4 * B * A
    worker = (2 * (W - 1) / W * 4 * P_CONV + acts) / 1e9
    expected = max(worker, W * acts / 2e9) + LAT
    for m in (1, 2, 4):  # bytes per step do not change with micro-batches; nor does one latency
        assert _bound("ralp-hybrid", LINKS, cut="conv", micro_batches=m) == pytest.approx(expected, rel=1e-9)


def test_a_colocated_ps_host_does_its_workers_compute_and_its_shards_work_on_one_cpu():
    """Dedicated, the PS's sums and update run on another host (max); colocated, on the worker's (sum)."""
    slow_passes = Hardware("cpu", 1e12, 5e11, 2.5e11, 1e30, 1e30, 0.0, pass_s=1e-9)
    workers = 2
    worker = 3 * B * (CONV_FLOPS / 1e12 + FC_FLOPS / 5e11)
    shard = max(P_CONV, P_FC) * (workers + 2) * 1e-9   # the largest shard: W gradients summed, then the update
    colocated = _bound("ps", slow_passes, workers=workers, ps_placement="colocated")
    dedicated = _bound("ps", slow_passes, workers=workers)
    assert colocated == pytest.approx(worker + shard, rel=1e-9)
    assert dedicated == pytest.approx(max(worker, (P_CONV + P_FC) * (workers + 2) * 1e-9), rel=1e-9)


def test_a_colocated_ps_link_bound_is_real_bytes_not_contention():
    """Two hosts: each sends its shard to the other and the other shard's gradients, 4P in all
    (and receives as much); the prediction's phases add the contention of a push with the pulls."""
    workers, P = 2, P_CONV + P_FC
    slow = Hardware("links", 1e13, 1e13, 1e13, 8e9, 8e9, LAT, pass_s=1e-30)
    colocated = predict(_profile(), "ps", workers=workers, batch_size=B, hardware=slow, ps_placement="colocated",
                        overlap=True)
    assert colocated.step_time_s == pytest.approx(4 * P / 1e9 + LAT, rel=1e-6)


# ----------------------------------------------------------------------------- bound <= predicted

def _settings():
    """Every priced strategy over layouts, PS tasks, codecs, micro-batches, workers and links."""
    for workers in (1, 2, 4, 8):
        for bandwidth, latency in ((1e8, 0.0), (1e9, 1e-3), (1e11, 5e-5)):
            hardware = Hardware("h", 2e11, 1e11, 1e11, bandwidth, bandwidth * 2, latency, pass_s=2e-9)
            common = dict(workers=workers, batch_size=8, hardware=hardware)
            for codec in (None, "fp16", "int8", "topk:0.01"):
                for ps in (1, 2):
                    yield "ps", dict(common, ps=ps, compression=codec)
                    yield "ralp", dict(common, ps=ps, cut="conv", compression=codec)
                yield "ps", dict(common, ps_placement="colocated", compression=codec)
                yield "horovod", dict(common, compression=codec)
            for ps in (1, 2):
                for m in (1, 2, 4, 8):
                    yield "ralp-hybrid", dict(common, ps=ps, cut="conv", micro_batches=m)


def test_no_bound_exceeds_its_plans_predicted_step():
    profile, checked = _profile(), 0
    for strategy, settings in _settings():
        try:
            step = predict(profile, strategy, **settings)
        except UserError:  # a combination the strategy refuses (the toy's head cannot be sharded: zoo test below)
            continue
        least = predict(profile, strategy, overlap=True, **settings)
        assert 0 < least.step_time_s <= step.step_time_s * (1 + 1e-12), (strategy, settings)
        # every resource it counts is there: the bound is at least each one
        assert least.step_time_s >= least.breakdown.get("bound_worker_host_s", 0.0)
        checked += 1
    assert checked > 300


def test_no_bound_exceeds_the_predicted_step_on_zoo_models():
    from test_profile import zoo_profile

    from ralp.hardware import load_hardware

    for name in ("alexnet_cifar", "vgg_cifar"):
        profile = zoo_profile(name)
        for bandwidth in ("100mbit", "10gbit"):
            hardware = load_hardware("v100-10gbe", bandwidth=bandwidth)
            for workers in (2, 8):
                common = dict(workers=workers, batch_size=32, hardware=hardware)
                cases = [("ps", {}), ("ps", dict(ps_placement="colocated")), ("horovod", {}), ("ralp", {}),
                         ("ralp", dict(compression="fp16")), ("ralp", dict(ps=2)), ("ralp-hybrid", {}),
                         ("ralp-hybrid", dict(micro_batches=4)), ("ralp-hybrid", dict(ps=2)),  # a sharded head
                         ("ralp-hybrid", dict(ps=2, micro_batches=4))]
                for strategy, extra in cases:
                    step = predict(profile, strategy, **common, **extra).step_time_s
                    assert predict(profile, strategy, overlap=True, **common, **extra).step_time_s <= step, (
                        name, bandwidth, workers, strategy, extra)


# ----------------------------------------------------------------------------- rows, planning

PRESET = dict(model="lenet_mnist", hardware="v100-10gbe", bandwidth="100mbit", workers=2, batch_size=8)


def test_planning_bound_is_the_cost_models_overlapped_step_for_what_ran():
    from bench.driver.harness import _predicted

    cfg = RunConfig(strategy="ralp", **PRESET)
    cut = planning.first_cut(cfg)
    expected = predict(planning.model_profile(cfg.model_spec()), "ralp", workers=2, batch_size=8, cut=cut,
                       hardware=planning.hardware_for(cfg), overlap=True).step_time_s
    assert planning.bound(cfg, "ralp", cut) == expected
    columns = _predicted(cfg, "ralp", cut)
    assert columns["bound_step_time_s"] == expected <= columns["predicted_step_time_s"]
    assert new_row(**columns)["bound_step_time_s"] == expected
    # the one-process reference: one batch, no communication: its bound is its compute
    single = planning.bound(RunConfig(strategy="single", **PRESET), "single", None)
    assert single == planning.predict(RunConfig(strategy="single", **PRESET), "single", None).step_time_s
    assert planning.bound(RunConfig(strategy="ps-async", **PRESET), "ps-async", None) is None


def _report_rows(bounds):
    rows = []
    for strategy, measured, least in bounds:
        rows.append(new_row(run_id="20261210T000000Z-abcdef", model="lenet_mnist", workers=2, batch_size=8,
                            strategy=strategy, status="ok", images_per_sec=16 / measured,
                            step_time_median_s=measured, predicted_step_time_s=measured * 0.9,
                            bound_step_time_s=least, hostname="elsewhere"))
    return pd.DataFrame(rows)


def _table(text, title):
    lines = text.split(f"## {title}\n\n", 1)[1].splitlines()
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:] if line.startswith("|")]


def test_report_shows_the_fraction_of_bound_per_cell_and_a_dash_without_one():
    from bench.report import document as report

    df = _report_rows([("horovod", 2.0, 1.8), ("ralp", 1.0, 0.46), ("ralp-hybrid", 0.5, None)])
    text = report.to_markdown(report.build_report(df)[0])
    assert _table(text, "Fraction of bound") == [["lenet_mnist", "2", "0.90 of 1.8 s", "0.46 of 0.46 s", "—"]]
    assert "1 of 3 cells show —" in text


def _cache_hardware(tmp_path, monkeypatch, cores):
    monkeypatch.setattr(calibration, "CACHE", tmp_path / "calibration.json")
    calibration._store(calibration.hardware_key(cores), {
        "worker_conv_flops": 3e10, "worker_dense_flops": 2e10, "pass_s": 2e-9,
        "measured_at": "2026-12-01T00:00:00", "steal": 0.0})


def _stored_row(cfg, predicted, **fields):
    """A row as a run before the bound column wrote it: no bound_step_time_s."""
    return {**new_row(model=cfg.model, workers=cfg.workers, batch_size=cfg.batch_size, strategy=cfg.strategy,
                      ps=1, ps_placement="dedicated", micro_batches=1, compression="none", status="ok",
                      cut_layer="flatten", link_bps=1e8, ps_link_bps=1e8, latency_s=0.0, cpus_per_host=0.5,
                      hostname=platform.node(), predicted_step_time_s=predicted, step_time_median_s=1.0),
            **fields}


def test_a_stored_row_without_a_bound_is_priced_again_only_when_its_calibration_reproduces_it(tmp_path, monkeypatch):
    from bench.report.summary import with_bounds

    _cache_hardware(tmp_path, monkeypatch, 0.5)
    cfg = RunConfig(model="lenet_mnist", strategy="ralp", workers=2, batch_size=8, bandwidth="1e8",
                    cpus_per_host=0.5, calibration="hardware")
    predicted = planning.predict(cfg, "ralp", "flatten").step_time_s
    expected = planning.bound(cfg, "ralp", "flatten")
    assert planning.stored_bound(_stored_row(cfg, predicted)) == pytest.approx(expected, rel=1e-12)
    # another prediction (another calibration, cost model or preset priced it), another host, no cache: no bound
    assert planning.stored_bound(_stored_row(cfg, predicted * 1.1)) is None
    assert planning.stored_bound(_stored_row(cfg, predicted, hostname="some-other-host")) is None
    assert planning.stored_bound(_stored_row(cfg, predicted, cpus_per_host=0.25)) is None
    frame = pd.DataFrame([_stored_row(cfg, predicted), _stored_row(cfg, predicted * 1.1),
                          dict(_stored_row(cfg, predicted), bound_step_time_s=0.123)])
    filled = with_bounds(frame)
    assert filled["bound_step_time_s"].tolist()[0] == pytest.approx(expected)
    assert pd.isna(filled["bound_step_time_s"].tolist()[1])
    assert filled["bound_step_time_s"].tolist()[2] == 0.123  # a stored bound is kept as it is
    assert frame["bound_step_time_s"].isna().tolist()[:2] == [True, True]  # the rows themselves are not changed


def test_a_row_says_what_priced_it_and_is_priced_again_from_that_after_the_cache_moved_on(tmp_path, monkeypatch):
    """``priced_with`` keeps the Hardware (and the model's measured step) a row was priced with:
    re-priced from it, the row's own prediction comes back exactly, on any machine, after the
    cache was measured again; a row without it is priced from today's cache (here: 2x faster)."""
    from bench.driver.harness import _predicted

    _cache_hardware(tmp_path, monkeypatch, 0.5)
    cfg = RunConfig(model="lenet_mnist", strategy="ralp", workers=2, batch_size=8, bandwidth="1e8",
                    cpus_per_host=0.5, calibration="hardware")
    columns = _predicted(cfg, "ralp", "flatten")
    inputs = json.loads(columns["priced_with"])
    assert inputs["timing"] is None and inputs["hardware"]["worker_conv_flops"] == 3e10
    row = _stored_row(cfg, columns["predicted_step_time_s"], priced_with=columns["priced_with"],
                      hostname="some-other-host")
    calibration._store(calibration.hardware_key(0.5), {  # the cache measured again: a faster machine
        "worker_conv_flops": 6e10, "worker_dense_flops": 4e10, "pass_s": 1e-9,
        "measured_at": "2026-12-02T00:00:00", "steal": 0.0})
    assert planning.reprice(row).step_time_s == pytest.approx(columns["predicted_step_time_s"], rel=1e-12)
    today = planning.reprice(dict(_stored_row(cfg, columns["predicted_step_time_s"]), priced_with=None))
    assert today.step_time_s < columns["predicted_step_time_s"]
    assert planning.reprice(dict(row, status="failed")) is None
    assert planning.reprice(dict(row, priced_with=None)) is None  # another host's row, priced from nothing known


def test_stored_rows_without_the_column_load_and_report_a_dash():
    """Run 20261204T115426Z-30fb48 predates the column: its rows load with it empty and the report
    says that no cell has a bound, and why, instead of a grid of dashes (here: rows said to come from
    another machine); with one row that has a bound, the grid shows it and — elsewhere."""
    from pathlib import Path

    from bench.report.document import build_report
    from bench.report.format import to_html, to_markdown
    from bench.store.results import ResultStore

    results = Path(__file__).resolve().parent.parent / "results"
    df = ResultStore(results).load(["20261204T115426Z-30fb48"], quiet=True)
    assert df["bound_step_time_s"].isna().all() and df["predicted_step_time_s"].notna().any()
    report, _, keys = build_report(df.assign(hostname="not-this-machine"))
    (table,) = [t for t in report.tables if t.title == "Fraction of bound"]
    assert table.rows == [] and table.headers == []
    assert table.notes[0].startswith(f"None of the {len(df)} cells has a bound: their rows were written before")
    markdown = to_markdown(report)
    assert "## Fraction of bound\n\nNone of the" in markdown
    assert '<h2>Fraction of bound</h2>\n<p class="note">None of the' in to_html(report)
    first = df.index[0]
    report, _, keys = build_report(df.assign(hostname="not-this-machine").assign(
        bound_step_time_s=[0.5 * df.loc[first, "step_time_median_s"] if i == first else None for i in df.index]))
    (table,) = [t for t in report.tables if t.title == "Fraction of bound"]
    cells = [cell for row in table.rows for cell in row[2 + len(keys):]]
    assert len(table.rows) > 10 and cells.count("—") == len(cells) - 1 and any("0.50 of" in c for c in cells)
    assert any(f"{len(df) - 1} of {len(df)} cells show —" in note for note in table.notes)


def test_paper_claim_b_says_how_close_ralp_and_horovod_came_to_their_bounds():
    from bench.report.paper_claims import Cell, Grid, claim_scaling_over_horovod

    grid = Grid()
    for workers, ralp_rate, ralp_bound in ((2, 100.0, 0.5), (8, 400.0, 0.46)):
        grid.cells[Cell("alexnet", workers, "1 Gbit/s")] = {
            "ralp": dict(images_per_sec=ralp_rate, step_time_median_s=1.0, bound_step_time_s=ralp_bound),
            "horovod": dict(images_per_sec=100.0, step_time_median_s=4.0 * workers / 2, bound_step_time_s=None)}
    claim = claim_scaling_over_horovod(grid)
    assert "(fraction of bound: ralp 0.46)" in claim.ours


# ----------------------------------------------------------------------------- analyze

def test_analyze_prints_the_bound_per_plan(capsys):
    from bench.cli import main

    assert main(["analyze", "--model", "lenet_mnist", "--workers", "4", "--bandwidth", "100mbit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for name, p in out["predictions"].items():
        assert 0 < p["bound_step_time_s"] <= p["step_time_s"], name
    overlapped = predict(planning.model_profile(RunConfig(model="lenet_mnist").model_spec()), "horovod", workers=4,
                         batch_size=32, hardware=Hardware(**out["hardware"]), overlap=True)
    assert out["predictions"]["horovod"]["bound_step_time_s"] == pytest.approx(overlapped.step_time_s, rel=1e-12)
    assert main(["analyze", "--model", "lenet_mnist", "--workers", "4", "--bandwidth", "100mbit"]) == 0
    text = capsys.readouterr().out
    assert "Bound per plan" in text and "fraction of bound" in text
    bound_rows = [line for line in text.splitlines() if line.startswith("│ Horovod")]
    least = out["predictions"]["horovod"]["bound_step_time_s"]
    assert any(f"{least:.3g} s" in line for line in bound_rows)
