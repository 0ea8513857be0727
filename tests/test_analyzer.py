"""Analyzer decisions on the reference models, its reasons, bad input, and the CLI."""
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from bench.core.errors import UserError  # noqa: E402
from ralp.analyzer import MIN_SPLIT_GAIN, analyze  # noqa: E402
from ralp.hardware import load_hardware  # noqa: E402
from ralp.profile import LayerProfile, ModelProfile  # noqa: E402
from test_profile import zoo_profile  # noqa: E402  (profiles built once per session)

REPO = Path(__file__).resolve().parents[1]
BANDWIDTHS = ["1gbit", "10gbit"]
WORKERS = range(2, 9)


PAPER = ("ps", "horovod", "ralp")  # the RALP paper's decision space


@pytest.mark.parametrize("model,batch", [("vgg16", 32), ("alexnet", 128)])
@pytest.mark.parametrize("bandwidth", BANDWIDTHS)
def test_fc_heavy_models_split_at_the_first_fc_layer(model, batch, bandwidth):
    """The paper's decision (sync PS, ring, FC-on-PS); the joint space with the hybrid is below."""
    profile = zoo_profile(model)
    hardware = load_hardware("v100-10gbe", bandwidth=bandwidth)
    for workers in WORKERS:
        plan = analyze(profile, batch_size=batch, workers=workers, hardware=hardware, overlap=True, strategies=PAPER)
        assert (plan.strategy, plan.cut) == ("ralp", profile.first_dense_cut()), (workers, plan.reason)
        plan = analyze(profile, batch_size=batch, workers=workers, hardware=hardware, overlap=False, strategies=PAPER)
        ralp, ring = plan.predictions["ralp"], plan.predictions["horovod"]
        if model == "vgg16" and workers == 8:
            # The links' crossover without overlap: an unpipelined PS uses one direction of its
            # link at a time, so 8 x 124 MB through one PS link ~ ring all-reduce's 2*(7/8)*553 MB
            # each way (within 5%); the step times part where compute counts: RALP's tower
            # gradients stream out during its backward (ralp/step_cost.py Setting.streamed).
            assert ralp.breakdown["ps_link_busy_s"] == pytest.approx(ring.breakdown["worker_link_busy_s"], rel=0.05)
            assert ralp.step_time_s <= ring.step_time_s * 1.01
        if ralp.step_time_s > ring.step_time_s * (1 - MIN_SPLIT_GAIN):  # near the crossover: no clear gain
            assert plan.strategy == "horovod" and "Do not split" in plan.reason, (workers, plan.reason)
            continue
        assert (plan.strategy, plan.cut) == ("ralp", profile.first_dense_cut()), (workers, plan.reason)
        sync = plan.predictions["ps"]
        assert plan.predictions["ralp"].worker_bytes < sync.worker_bytes / 8


@pytest.mark.parametrize("model", ["resnet50", "inception3"])
@pytest.mark.parametrize("bandwidth", BANDWIDTHS)
def test_global_pooling_models_do_not_split(model, bandwidth):
    profile = zoo_profile(model)
    hardware = load_hardware("v100-10gbe", bandwidth=bandwidth)
    for workers in WORKERS:
        for overlap in (False, True):
            plan = analyze(profile, batch_size=32, workers=workers, hardware=hardware, overlap=overlap,
                           strategies=PAPER)
            assert plan.strategy != "ralp" and plan.cut is None, (workers, overlap, plan.reason)
            assert plan.reason.startswith("Do not split")
            # The split saves under 10% of the bytes: the 2,048 pooled floats are cheap,
            # but the conv parameters (92% of the model) still cross the PS link.
            ralp, sync = plan.predictions["ralp"], plan.predictions["ps"]
            assert 0.9 < ralp.worker_bytes / sync.worker_bytes < 1.0


def test_the_joint_search_picks_the_hybrid_where_it_wins_and_not_where_it_loses():
    """VGG-16 on V100 + 10 GbE: the hybrid keeps the tower's bytes off the PS link, so it beats
    FC-on-PS and the ring up to 128 workers (64 with one fused ring after the backward, before its
    rings ran in buckets under it: strategies/ralp_hybrid.py); beyond, the head's W x B activations through
    one PS host cost more than the ring's all-reduce, which is picked (README, the table).
    Unpipelined (micro_batches=1): with micro-batches the crossover moves to 512 workers
    (tests/test_joint_search.py). At 128 workers fc1 joins the tower: its gradients' ring runs
    under the conv layers' backward, and the PS takes 4096 floats an image instead of 25088."""
    profile = zoo_profile("vgg16")
    hardware = load_hardware("v100-10gbe")
    for workers in (2, 4, 8, 16, 32, 64, 128, 1024):
        plan = analyze(profile, batch_size=32, workers=workers, hardware=hardware, micro_batches=1)
        t = {s: p.step_time_s for s, p in plan.predictions.items()}
        best = min(t, key=t.get)
        assert plan.strategy == best, (workers, plan.reason)
        assert plan.strategy == ("ralp-hybrid" if workers <= 128 else "horovod"), (workers, t)
        if plan.strategy == "ralp-hybrid":
            assert plan.cut == ("flatten" if workers <= 64 else "fc1")
            assert "hybrid" in plan.reason and f"{t['ralp']:.3g} s" in plan.reason
    # with a codec its ring can carry (fp16, int8) the hybrid is a candidate; with top-k it is not
    assert "ralp-hybrid" in analyze(profile, batch_size=32, workers=8, hardware=hardware,
                                    compression="fp16").predictions
    assert "ralp-hybrid" not in analyze(profile, batch_size=32, workers=8, hardware=hardware,
                                        compression="topk:0.01").predictions


def test_reason_quotes_the_decisive_numbers():
    plan = analyze(zoo_profile("alexnet"), batch_size=128, workers=4,
                   hardware=load_hardware("v100-10gbe", bandwidth="1gbit"), strategies=PAPER)
    assert plan.split and plan.cut == "flatten"
    assert "29.2 MB/worker/step vs 488.8 MB for sync PS" in plan.reason
    assert f"{plan.predictions['ralp'].step_time_s:.3g} s" in plan.reason
    assert f"{plan.predictions['ps'].step_time_s:.3g} s" in plan.reason
    gain = 1 - plan.predictions["ralp"].step_time_s / plan.predictions["horovod"].step_time_s
    assert gain > MIN_SPLIT_GAIN
    assert set(plan.ralp_by_cut) == {"flatten", "fc6", "fc7"}  # FC-only heads by default


def test_all_cuts_also_tries_convolutions_on_the_ps():
    profile = zoo_profile("alexnet")
    plan = analyze(profile, batch_size=128, workers=4, hardware="v100-10gbe", all_cuts=True)
    assert set(plan.ralp_by_cut) == set(profile.cut_points)
    best = min(plan.ralp_by_cut.values(), key=lambda p: p.step_time_s)
    assert plan.predictions["ralp"].step_time_s == best.step_time_s


def test_model_without_dense_layers_says_no_split_possible():
    profile = ModelProfile("allconv", (8, 8, 3), [
        LayerProfile("conv", "Conv2D", 1_000, 1_000, 10**6, 64, False),
        LayerProfile("gap", "GlobalAveragePooling2D", 0, 0, 64, 4, False)], ["conv"],
        _tower_layers={"conv": frozenset({"conv"})})
    plan = analyze(profile, batch_size=8, workers=4, hardware="v100-10gbe")
    assert not plan.split_possible and plan.cut is None and "ralp" not in plan.predictions
    assert plan.reason.startswith("No split possible")
    with pytest.raises(UserError, match="no split possible"):
        analyze(profile, batch_size=8, workers=4, hardware="v100-10gbe", strategies=("ralp",))


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=0, workers=2), "batch size"),
    (dict(batch_size=32, workers=-1), "workers"),
    (dict(batch_size=32, workers=2, strategies=("magic",)), "strategies"),
    (dict(batch_size=32, workers=2, hardware="tpu-v9"), "presets"),
])
def test_bad_input_is_a_user_error(kwargs, match):
    with pytest.raises(UserError, match=match):
        analyze(zoo_profile("alexnet"), **{"hardware": "v100-10gbe", **kwargs})


def _cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "bench.cli", "analyze", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)


def test_cli_bad_bandwidth_exits_2_without_traceback():
    result = _cli("--model", "lenet_mnist", "--bandwidth", "fast")
    assert result.returncode == 2
    assert "bandwidth 'fast' not understood" in result.stderr and "Traceback" not in result.stderr


def test_cli_bad_micro_batches_exit_2_without_traceback():
    result = _cli("--model", "lenet_mnist", "--batch-size", "32", "--micro-batches", "3")
    assert result.returncode == 2
    assert "--micro-batches 3 does not divide --batch-size 32" in result.stderr and "Traceback" not in result.stderr


def test_cli_bad_bucket_size_exits_2_without_traceback():
    result = _cli("--model", "lenet_mnist", "--hybrid-bucket-mb", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--hybrid-bucket-mb expects MiB >= 0 (0: one fused ring) or auto, got '-1'" in result.stderr


def test_cli_searches_the_hybrids_ring_buckets_unless_given():
    args = ("--model", "vgg16", "--workers", "8", "--hardware", "v100-10gbe", "--micro-batches", "1", "--json")
    searched, given = (json.loads(_cli(*args, *extra).stdout)["plan"] for extra in ((), ("--hybrid-bucket-mb", "1")))
    assert set(searched["hybrid_buckets"]) == {"0", "1", "4", "16"} and searched["hybrid_bucket_mb"] == 16.0
    assert given["hybrid_buckets"] == {} and given["hybrid_bucket_mb"] == 1.0


def test_cli_json_and_plot(tmp_path):
    png = tmp_path / "scaling.png"
    result = _cli("--model", "lenet_mnist", "--batch-size", "64", "--workers", "4", "--bandwidth", "100mbit",
                  "--latency", "0.1ms", "--ps", "2", "--json", "--plot", str(png), "--results", str(tmp_path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["params"] == sum(layer["params"] for layer in data["layers"])
    assert data["hardware"]["worker_bandwidth"] == 1e8 and data["hardware"]["latency_s"] == pytest.approx(1e-4)
    assert set(data["predictions"]) == {"ps", "horovod", "ralp", "ralp-hybrid"}
    assert data["plan"]["strategy"] in ("ralp", "ralp-hybrid") and data["plan"]["cut"] == "flatten"  # 97% is FC
    chosen = data["predictions"][data["plan"]["strategy"]]
    assert (data["plan"]["ps"], data["plan"]["micro_batches"]) == (chosen["ps"], chosen["micro_batches"])
    # the joint search: the hybrid over 1..2 PS x 1, 2, 4, 8 micro-batches; sync PS in both layouts
    assert {(v["ps"], v["micro_batches"]) for v in data["plan"]["hybrid_variants"]} == {
        (S, m) for S in (1, 2) for m in (1, 2, 4, 8)}
    assert set(data["plan"]["sync_ps_layouts"]) == {"dedicated", "colocated"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


# ----------------------------------------------------------------------------- plugin strategies

TREE_PS = "tree PS (demo)"


@pytest.fixture
def priced_plugin():
    """A strategy from outside the tree that the cost model prices as sync PS (the test-only
    tree-reduced PS of tests/demo_strategy.py), registered for one test the way a module named
    in RALP_STRATEGY_MODULES registers itself."""
    from bench.core.strategy_specs import SPECS, StrategySpec, register

    spec = register(StrategySpec("ps-tree-demo", "tests.demo_strategy:ReduceOnWorker0", "tf",
                                 "sync PS reduced on worker 0 (test only)", "#17becf", priced_as="ps",
                                 codecs=False, label=TREE_PS))
    yield spec
    SPECS.pop(spec.name, None)


def _table_rows(text):
    """The predictions table's rows of `analyze`'s output: label -> its cells."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 12:
            rows[cells[0]] = cells
    return rows


def test_a_priced_plugin_strategy_is_a_row_under_its_own_label(priced_plugin, capsys, tmp_path):
    """Defect: labels came from a table in analyze.py keyed by strategy name (and analyze_plot
    imported it back), so a strategy missing from it raised KeyError. Now each row is a
    registered strategy under its spec's label, priced as ``run`` prices it: a plugin that cannot
    colocate gets sync PS's dedicated layout."""
    from bench.cli import build_parser
    from bench.commands.analyze_plot import measured_points, plot
    from bench.models.sources import get_spec
    from bench.driver.planning import model_profile
    from bench.store.results import ResultStore
    from ralp.cost_model import predict

    args = build_parser().parse_args(["analyze", "--model", "lenet_mnist", "--workers", "2", "--bandwidth", "1gbit"])
    assert args.func(args) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert set(rows) == {"sync PS", "Horovod (ring)", "FC-on-PS", "hybrid", TREE_PS}  # not single, not async PS
    profile, hardware = model_profile(get_spec("lenet_mnist")), load_hardware("v100-10gbe", bandwidth="1gbit")
    dedicated = predict(profile, "ps", workers=2, batch_size=32, hardware=hardware)
    assert rows[TREE_PS][1:4] == ["1 PS", "-", f"{dedicated.step_time_s:.3g} s"]

    store = ResultStore(tmp_path / "results")
    base = dict(model="lenet_mnist", batch_size=32, link_bps=1e9, status="ok", ps=1, ps_placement="dedicated")
    store.write_run([dict(base, strategy="ps-tree-demo", plan="ps-tree-demo", workers=2, step_time_median_s=t)
                     for t in (0.2, 0.3, 0.4)])
    points = measured_points(store.root, "lenet_mnist", 32, 1e9)
    assert points == {"ps-tree-demo": [(2, 0.3)]}
    settings = dict(batch_size=32, workers=2, ps=1, hardware=hardware, compression=None, overlap=False,
                    all_cuts=False, search_layouts=True, micro_batches=None)
    labels = plot(profile, settings, tmp_path / "scaling.png", points)
    assert f"measured: {TREE_PS} (median)" in labels and "predicted: sync PS, dedicated" in labels


def test_an_unpriced_plugin_strategy_is_no_row():
    """The test-only strategy of tests/demo_strategy_spec.py (no ``priced_as``), loaded through
    RALP_STRATEGY_MODULES by the real CLI: analyze lists what it can price and nothing else."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO), RALP_STRATEGY_MODULES="tests.demo_strategy_spec")
    result = subprocess.run([sys.executable, "-m", "bench.cli", "analyze", "--model", "lenet_mnist"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    from bench.core.strategy_specs import SPECS

    assert set(_table_rows(result.stdout)) == {spec.label for spec in SPECS.values()
                                               if spec.priced_as and not spec.one_batch_per_step}
