"""Any user's model under every strategy (issue 33): models whose layers nobody named, in every
form --model takes, each planned and priced under every strategy, and two of them run.

Keras numbers a layer not named by hand per process (``flatten``, then ``flatten_1``), so a cut
picked in the driver must still name the same layer in the calibration subprocess and on every
rank. Part (a) does, for every cell, what ``ralp-bench run`` does before any rank starts (the
driver's checks, ``resolve``, the row's prediction), with the default calibration measured
afresh; part (b) runs the two models of the issue end to end on the local cluster.
"""
import shlex
from dataclasses import replace

import pytest

from bench.core.errors import UserError
from tests.conftest import ROOT, our_processes

FILE = "tests/user_models.py"
MODELS = {  # label -> --model and its flags
    "unnamed Sequential (file.py:fn)": [f"{FILE}:build_sequential"],
    "unnamed functional (file.py:fn)": [f"{FILE}:build_functional"],
    "saved .keras file": ["{saved}"],
    "module:fn": ["tests.user_models:build_pooled"],
    "no Dense layer (file.py:fn)": [f"{FILE}:build_all_conv"],
    "keras:MobileNetV2": ["keras:MobileNetV2", "--input-shape", "32,32,3", "--classes", "10"],
    "keras:EfficientNetB0": ["keras:EfficientNetB0", "--input-shape", "32,32,3", "--classes", "10"],
    "keras:DenseNet121": ["keras:DenseNet121", "--input-shape", "32,32,3", "--classes", "10"],
}
STRATEGIES = {  # column -> --strategy and its flags
    "ps": ["ps"], "ps colocated": ["ps", "--ps-placement", "colocated"], "horovod": ["horovod"],
    "ralp": ["ralp"], "ralp-hybrid": ["ralp-hybrid"], "auto": ["auto"],
}
# The cells where a strategy cannot run the model: it has no Dense layer to split before.
REFUSED = {("no Dense layer (file.py:fn)", "ralp"), ("no Dense layer (file.py:fn)", "ralp-hybrid")}
NO_SPLIT = "has no cut point before a dense layer"


def run_flags(model, strategy):
    return ["--model", *model, "--strategy", *strategy, "--batch-size", "2", "--workers", "2"]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A .keras file saved from the functional model built second in its process, so the file
    carries suffixed names ('conv2d_2', 'flatten_1'...): every process must read those, not its own."""
    from tests import user_models

    user_models.build_functional()
    path = tmp_path_factory.mktemp("saved") / "unnamed.keras"
    user_models.build_functional().save(str(path))
    return str(path)


def flags_of(label, saved):
    return [flag.format(saved=saved) for flag in MODELS[label]]


def plan_cell(argv):
    """What `ralp-bench run --cluster local ARGV` settles before launching: the driver's checks,
    then per configuration the plan and the row's prediction (bench/driver/harness.py run_one). Returns
    ('ok', plan, cut, predicted seconds or None, warnings) or ('refused', one-line reason)."""
    import contextlib
    import io

    from bench.cli import build_parser
    from bench.driver.clusters import apply_cluster
    from bench.commands.run import configs_from_args
    from bench.driver.harness import _predicted
    from bench.launch.local import LocalLauncher
    from bench.driver.planning import check_head_shards, resolve

    args = build_parser().parse_args(["run", "--cluster", "local", *argv])
    try:
        (cfg,) = configs_from_args(args)
        cfg = apply_cluster(cfg, LocalLauncher())
        plan = resolve(cfg)
        check_head_shards(cfg, plan.strategy, plan.cut)
    except UserError as exc:
        return ("refused", str(exc))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        fields = _predicted(replace(cfg, compression=plan.compression), plan.strategy, plan.cut)
    return ("ok", plan.strategy, plan.cut, fields.get("predicted_step_time_s"), stderr.getvalue().strip())


@pytest.fixture(scope="module")
def planned(saved_model, tmp_path_factory, request):
    """Every cell of the matrix, planned in this one process as the driver plans it (from the
    repository root, as the CLI runs), with the calibration measured afresh (an empty cache):
    the calibration subprocess builds the model anew, so its layer names must match the
    driver's, which built it several times."""
    import bench.driver.calibration as calibration

    cache = tmp_path_factory.mktemp("calibration") / "calibration.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setattr(calibration, "CACHE", cache)
        cells = {(m, s): plan_cell(run_flags(flags_of(m, saved_model), STRATEGIES[s]))
                 for m in MODELS for s in STRATEGIES}
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print("\n\n### Planned before launch: plan, cut and predicted step time, or the refusal\n")
        print(markdown(MODELS, STRATEGIES, {k: _planned_text(v) for k, v in cells.items()}))
    return cells


def _planned_text(cell):
    if cell[0] == "refused":
        return f"refused: {cell[1]}"
    _, strategy, cut, predicted, warning = cell
    text = f"ok {strategy}" + (f" @{cut}" if cut else "")
    return text + (f", {predicted * 1e3:.3g} ms" if predicted is not None else f", NO PREDICTION {warning}")


def markdown(rows, columns, text):
    lines = ["| model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += ["| " + row + " | " + " | ".join(text[row, col].replace("|", "/") for col in columns) + " |"
              for row in rows]
    return "\n".join(lines)


@pytest.mark.parametrize("label", list(MODELS))
def test_every_model_is_planned_and_priced_under_every_strategy(planned, label):
    for strategy in STRATEGIES:
        cell = planned[label, strategy]
        if (label, strategy) in REFUSED:
            assert cell[0] == "refused" and NO_SPLIT in cell[1] and "\n" not in cell[1], cell
            continue
        assert cell[0] == "ok", (strategy, cell)
        _, ran, cut, predicted, warning = cell
        assert predicted is not None and predicted > 0 and not warning, (strategy, cell)
        if strategy != "auto":
            assert ran == STRATEGIES[strategy][0]
        assert (cut is not None) == (ran in ("ralp", "ralp-hybrid")), (strategy, cell)


def test_a_cut_names_the_same_layer_in_every_build():
    """The fix itself: a model built again in one process (as the driver does, then a rank) names
    its layers as a fresh process would, so a cut the driver picks exists on every rank."""
    import tensorflow as tf

    from bench.models import get_model
    from tests import user_models

    tf.keras.layers.Flatten()  # a layer built earlier in this process, as the driver's checks do
    first, second = (get_model(f"{ROOT / FILE}:build_sequential") for _ in range(2))
    names = [layer.name for layer in first.layers]
    assert names == [layer.name for layer in second.layers]
    assert names == ["conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "flatten", "dense", "dense_1"]
    assert [layer.name for layer in user_models.build_sequential().layers] != names  # Keras alone numbers on


def test_a_row_the_cost_model_cannot_price_says_why(capsys):
    """A prediction that fails leaves the row's measurement and says why on stderr, in one line
    (it used to vanish silently, which hid the broken calibration of issue 33)."""
    from bench.core.config import RunConfig
    from bench.driver.harness import _predicted

    cfg = RunConfig(model="lenet_mnist", strategy="ralp", hardware="v100-10gbe", workers=2, batch_size=8).validate()
    assert _predicted(cfg, "ralp", "no_such_layer") == {}
    err = capsys.readouterr().err.strip()
    assert err.startswith("ralp-bench: warning: no prediction for lenet_mnist ralp: 'no_such_layer' is not a valid "
                          "cut point") and "\n" not in err
    assert _predicted(cfg, "ralp", "flatten")["predicted_step_time_s"] > 0 and capsys.readouterr().err == ""


E2E = {  # label -> model flags for the end-to-end runs (the issue's two reports)
    "unnamed Sequential (file.py:fn)": MODELS["unnamed Sequential (file.py:fn)"],
    "keras:MobileNetV2": MODELS["keras:MobileNetV2"],
}
E2E_RUNS = [["ps,horovod,ralp,ralp-hybrid,auto"], ["ps", "--ps-placement", "colocated"]]


@pytest.mark.parametrize("label", list(E2E))
def test_the_issues_models_run_under_every_strategy(cli, tmp_path, capsys, label):
    """`ralp-bench run --cluster local` for the issue's two models under all six strategies:
    every row ok, with a prediction and a measured step."""
    from bench.store.results import ResultStore

    store = str(tmp_path / "results")
    runs = []
    for strategy in E2E_RUNS:
        argv = ["run", "--cluster", "local", "--steps", "1", "--warmup-steps", "1", "--quiet", "--results", store,
                *run_flags(E2E[label], strategy)]
        runs.append((shlex.join(argv), cli(*argv, timeout=400)))
    rows = ResultStore(store).load().to_dict("records")
    text = {(label, "ps colocated" if r["ps_placement"] == "colocated" else r["strategy"]): _row_text(r)
            for r in rows}
    with capsys.disabled():
        print(f"\n\n### End to end, --cluster local\n\n{markdown([label], STRATEGIES, text)}")
    for argv, proc in runs:
        assert proc.returncode == 0, f"ralp-bench {argv}\n{proc.stderr[-3000:]}"
        assert "warning: no prediction" not in proc.stderr, proc.stderr
    assert sorted(text) == sorted((label, s) for s in STRATEGIES)
    for r in rows:
        assert r["status"] == "ok" and r["predicted_step_time_s"] > 0 and r["step_time_median_s"] > 0, r
        assert (r["cut_layer"] is not None) == (r["plan"] in ("ralp", "ralp-hybrid")), r
    assert our_processes() == []


def _row_text(row):
    if row["status"] != "ok":
        return f"{row['status']}: {row['failure']}"
    cut = f" @{row['cut_layer']}" if row["cut_layer"] else ""
    return (f"ok {row['plan']}{cut}, predicted {row['predicted_step_time_s'] * 1e3:.3g} ms, "
            f"measured {row['step_time_median_s'] * 1e3:.3g} ms")

