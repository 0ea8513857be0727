"""Sweep files: validation before anything runs, and an interrupted sweep resumed without re-running
what it already measured."""
import json
import signal
import time

import pytest

from bench.core.errors import UserError
from bench.driver.sweep import load_sweep
from tests.conftest import ROOT, our_processes, signal_and_wait, start_cli


def _write(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def test_shipped_sweeps_expand_to_their_grids():
    headline = load_sweep(str(ROOT / "sweeps" / "headline.toml"))
    # 3 models x 5 (ps in both layouts, horovod, ralp, auto) x 2 worker counts x 2 link settings
    assert len(headline.points) == 60 and (headline.repeats, headline.max_steal) == (2, 0.10)
    assert {p.config.strategy for p in headline.points} == {"ps", "horovod", "ralp", "auto"}
    assert {p.config.ps_placement for p in headline.points if p.config.strategy == "auto"} == {"colocated"}
    assert {(p.cluster.get("bandwidth"), p.cluster.get("scale_to")) for p in headline.points} == \
        {("1gbit", None), (None, "v100-10gbe")}
    fair = load_sweep(str(ROOT / "sweeps" / "fair.toml"))
    scaled = load_sweep(str(ROOT / "sweeps" / "fair-scaled.toml"))
    # 2 models x 2 worker counts x (single, ps, ps colocated, horovod, ralp) / (ps, ps colocated, horovod, ralp)
    assert (len(fair.points), len(scaled.points)) == (20, 16) and fair.repeats == scaled.repeats == 3
    assert all(p.config.warmup_steps >= 5 and p.config.steps >= 10 and p.config.target_ci == 0.05
               for p in fair.points)
    # steps of up to ~25 s on the scaled links: fewer, stated in the file's description
    assert all(p.config.steps >= 6 and p.config.target_ci == 0.05 and p.config.time_cap for p in scaled.points)
    main = load_sweep(str(ROOT / "sweeps" / "main.toml"))
    assert len(main.points) == 10 and {p.config.workers for p in main.points} == {2}
    pipelined = load_sweep(str(ROOT / "sweeps" / "bound-pipelined.toml"))
    assert len(pipelined.points) == 6 and {p.config.micro_batches for p in pipelined.points} == {1, 2, 4}
    buckets = load_sweep(str(ROOT / "sweeps" / "buckets.toml"))
    assert sorted((p.config.model, p.config.hybrid_bucket_mb) for p in buckets.points) == [
        ("alexnet_cifar", 0.0), ("alexnet_cifar", 1.0), ("vgg_cifar", 0.0), ("vgg_cifar", 1.0), ("vgg_cifar", 4.0)]
    # bound-cifar is bound-full's CIFAR part, point for point and in its order (its rows stand beside that file's)
    full, cifar = (load_sweep(str(ROOT / "sweeps" / name)) for name in ("bound-full.toml", "bound-cifar.toml"))
    assert [(p.config, p.cluster) for p in cifar.points] == [
        (p.config, p.cluster) for p in full.points if p.config.model.endswith("_cifar")]
    assert len(cifar.points) == 36 and cifar.repeats == full.repeats == 2
    # bound-imagenet is bound-full's ImageNet part less its three slowest cells (the file's header names them)
    imagenet = load_sweep(str(ROOT / "sweeps" / "bound-imagenet.toml"))
    rest = [(p.config, p.cluster) for p in full.points if not p.config.model.endswith("_cifar")]
    assert all((p.config, p.cluster) in rest for p in imagenet.points) and imagenet.repeats == 2
    assert sorted((c.model, c.strategy, c.workers) for c, _ in rest if (c, _) not in
                  [(p.config, p.cluster) for p in imagenet.points]) == [
        ("alexnet", "ps", 4), ("vgg16", "ps", 4), ("vgg16", "ralp", 8)]


@pytest.mark.parametrize("text, message", [
    ("[[grid]]\nmodel = 'alexnet_cifar'\nwrokers = 2\n", "unknown key 'wrokers'"),
    ("[[grid]]\nmodel = 'nosuchnet'\n", "nosuchnet"),
    ("[[grid]]\nmodel = ['alexnet_cifar'\n", "not valid TOML"),
    ("[[grid]]\nmodel = 'alexnet_cifar'\nstrategy = []\n", "grid is empty"),
    ("repeats = 0\n[[grid]]\nmodel = 'alexnet_cifar'\n", "--repeats must be a positive integer"),
    ("repeats = 'x'\n[[grid]]\nmodel = 'alexnet_cifar'\n", "--repeats must be a positive integer"),
])
def test_bad_sweep_files_are_refused_before_anything_runs(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        load_sweep(_write(tmp_path, text))


def test_repeats_come_from_the_file_or_the_command_line(cli, tmp_path):
    path = _write(tmp_path, "repeats = 3\n[[grid]]\nmodel = 'alexnet_cifar'\nstrategy = ['ps', 'ralp']\n")
    assert load_sweep(path).repeats == 3 and load_sweep(path, repeats=2).repeats == 2
    proc = cli("sweep", path, "--dry-run")
    assert proc.returncode == 0 and "6 runs (3 repeats, interleaved)" in proc.stdout


def test_dry_run_estimates_each_point_from_the_cost_model_and_the_step_bounds(cli, tmp_path):
    """A preset's hardware (no calibration here): the estimate is start-up plus warm-up and the
    most timed steps the run may take, each at the predicted step time."""
    from bench.commands.sweep import STARTUP_S, expected_steps
    from bench.core.config import RunConfig

    path = _write(tmp_path, "[defaults]\nhardware = 'v100-10gbe'\ncluster = 'local'\nbandwidth = '10gbit'\n"
                            "warmup_steps = 5\nsteps = 10\ntarget_ci = 0.05\nmax_steps = 40\ntime_cap = 30\n"
                            "[[grid]]\nmodel = 'alexnet_cifar'\nstrategy = ['ps', 'single']\n"
                            "ps_placement = ['dedicated', 'colocated']\n")
    proc = cli("sweep", path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len([line for line in lines if "at most" in line and "step ~" in line]) == 4
    assert any("ps (colocated)" in line for line in lines) and "4 runs; estimated at most" in proc.stdout
    cfg = RunConfig(steps=10, target_ci=0.05, max_steps=40, time_cap=30).validate()
    assert expected_steps(cfg, 0.5) == 40 and expected_steps(cfg, 2.0) == 16 and expected_steps(cfg, 10.0) == 10
    assert STARTUP_S > 0


def test_missing_sweep_file_exits_2_with_one_line(cli, tmp_path):
    proc = cli("sweep", tmp_path / "none.toml")
    assert proc.returncode == 2 and "not found" in proc.stderr and "Traceback" not in proc.stderr
    assert "shipped ones: sweeps/bound-cifar.toml, " in proc.stderr and "sweeps/custom-model.toml" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_a_sweep_not_here_is_read_from_the_shipped_copy_with_its_model_file(tmp_path, monkeypatch):
    """From a directory without sweeps/ (an installed copy: bench/shipped, tests/test_wheel.py; here
    the checkout), the README's path still works, and so does the example model it names."""
    from bench.driver.sweep import model_under

    monkeypatch.chdir(ROOT)
    here = load_sweep("sweeps/custom-model.toml")
    assert here.shipped_copy is None and {p.config.model for p in here.points} == {"examples/custom_cnn.py:build"}
    monkeypatch.chdir(tmp_path)
    elsewhere = load_sweep("sweeps/custom-model.toml")
    assert elsewhere.shipped_copy == ROOT / "sweeps" / "custom-model.toml"
    assert {p.config.model for p in elsewhere.points} == {f"{ROOT}/examples/custom_cnn.py:build"}
    assert [p.config.strategy for p in elsewhere.points] == [p.config.strategy for p in here.points]
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "custom-model.toml").write_text("[[grid]]\nmodel = 'lenet_mnist'\n")
    assert load_sweep("sweeps/custom-model.toml").points[0].config.model == "lenet_mnist"  # a file here wins
    for unchanged in ("lenet_mnist", "keras:MobileNetV2", "mypackage.nets:build", "/abs/net.py:build", "/abs/m.h5"):
        assert model_under(unchanged, tmp_path) == unchanged
    assert model_under("nets/m.keras", tmp_path) == str(tmp_path / "nets" / "m.keras")
    assert model_under("nets/m.py:build", None) == "nets/m.py:build"


def _sweep(tmp_path, *extra):
    spec = _write(tmp_path, """name = "resume"
[defaults]
model = "lenet_mnist"
dataset = "synthetic"
batch_size = 8
workers = 2
steps = 1
warmup_steps = 0
[[grid]]
strategy = ["ps", "horovod"]
""")
    return start_cli("sweep", spec, "--cluster", "local", "--quiet", "--results", tmp_path / "results", *extra)


def test_interrupted_sweep_keeps_its_rows_and_resumes(tmp_path):
    pending = tmp_path / "results" / "pending"
    proc = _sweep(tmp_path)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if any(p.read_text().count("\n") >= 1 for p in pending.glob("*.jsonl")):
            break
        time.sleep(0.2)
    # the second point has just started (its launch takes seconds): interrupt it
    _, err = signal_and_wait(proc, proc.pid, signal.SIGINT, timeout=120)
    assert proc.returncode == 130, err
    journals = list(pending.glob("*.jsonl"))
    assert len(journals) == 1
    run_id = journals[0].stem
    rows = [json.loads(line) for line in journals[0].read_text().splitlines()]
    assert [r["strategy"] for r in rows] == ["ps"] and rows[0]["status"] == "ok"
    assert f"--resume {run_id}" in err
    assert not (tmp_path / "results" / "runs").exists()  # nothing half-stored
    assert our_processes() == []

    proc = _sweep(tmp_path, "--resume", run_id)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "1 already done" in err
    stored = sorted((tmp_path / "results" / "runs").glob("*.csv"))
    assert [p.stem for p in stored] == [run_id]
    import pandas as pd
    df = pd.read_csv(stored[0])
    assert sorted(df["strategy"]) == ["horovod", "ps"] and set(df["status"]) == {"ok"}
    # the ps row is the one measured before the interruption, not a second run of it
    assert df.loc[df["strategy"] == "ps", "started_at"].item() == rows[0]["started_at"]
    assert list(pending.glob("*.jsonl")) == []


def test_resume_of_an_unknown_run_is_refused(cli, tmp_path):
    spec = _write(tmp_path, "[[grid]]\nmodel = 'lenet_mnist'\ndataset = 'synthetic'\n")
    proc = cli("sweep", spec, "--results", tmp_path / "results", "--resume", "nope-1")
    assert proc.returncode == 2 and "no interrupted sweep 'nope-1'" in proc.stderr


def test_resume_can_retry_the_points_whose_row_failed(cli, tmp_path):
    """--retry-failed: a resumed sweep runs a failed point again (a long sweep should not need a
    new run for one transient failure); without it the failed row counts as done."""
    import argparse

    from bench.commands.sweep import _Journal
    from bench.store.results import ResultStore, new_row

    store = ResultStore(tmp_path / "results")
    rows = [new_row(model="lenet_mnist", strategy=s, workers=2, status=st, run_id="20260101T000000Z-abcdef")
            for s, st in (("ps", "ok"), ("horovod", "failed"))]
    store.append_rows("20260101T000000Z-abcdef", rows)
    args = dict(no_store=False, results=str(tmp_path / "results"), resume="20260101T000000Z-abcdef")
    plain = _Journal(argparse.Namespace(**args, retry_failed=False))
    retry = _Journal(argparse.Namespace(**args, retry_failed=True))
    assert len(plain.done) == 2 and len(retry.done) == 1
    assert [_Journal.key(r) for r in rows if r["status"] == "ok"] == list(retry.done)
    spec = _write(tmp_path, "[[grid]]\nmodel = 'lenet_mnist'\ndataset = 'synthetic'\n")
    proc = cli("sweep", spec, "--results", tmp_path / "results", "--retry-failed")
    assert proc.returncode == 2 and "--retry-failed goes with --resume" in proc.stderr


def test_resume_tells_apart_points_that_differ_only_where_rows_cannot(tmp_path):
    """A journaled row stands for the point the sweep file asked for (its digest), not for the row's
    columns: the fused, the bucketed and the auto-bucketed hybrid (a row records the size the plan
    chose) and two Horovod fusion buffers (no row column) are five points, and a journal holding one
    of them leaves the others to run. Found resuming bound-imagenet, whose 20 rows read as 16 points.
    An older journal (rows without ``sweep_point``) still resumes by its columns, bucket size now
    among them."""
    import argparse

    from bench.commands.sweep import _Journal
    from bench.driver.harness import failed_row
    from bench.store.results import ResultStore

    text = """[defaults]
model = "lenet_mnist"
dataset = "synthetic"
[[grid]]
strategy = "ralp-hybrid"
hybrid_bucket_mb = [0.0, 4.0, "auto"]
[[grid]]
strategy = "horovod"
horovod_fusion_mb = [0.0, 32.0]
"""
    points = load_sweep(_write(tmp_path, text)).points
    digests = [p.digest() for p in points]
    assert len(set(digests)) == 5
    assert digests == [p.digest() for p in load_sweep(_write(tmp_path, text)).points]  # the same file, the same

    def journal(run_id, rows):
        ResultStore(tmp_path / "results").append_rows(run_id, rows)
        return _Journal(argparse.Namespace(no_store=False, results=str(tmp_path / "results"), resume=run_id,
                                           retry_failed=False))

    def row(point, digest):
        return {**failed_row(point.config, "", {}), "status": "ok", "repeat": 0, "sweep_point": digest}

    done = journal("20260101T000000Z-aaaaaa", [row(points[1], digests[1]), row(points[4], digests[4])])
    assert [done.has(d, p.config, {}, 0) for d, p in zip(digests, points)] == [False, True, False, False, True]
    assert not done.has(digests[1], points[1].config, {}, 1)  # the next repeat of the same point
    legacy = journal("20260101T000000Z-bbbbbb", [row(points[0], None)])
    assert [legacy.has(d, p.config, {}, 0) for d, p in zip(digests[:2], points[:2])] == [True, False]


def test_a_point_measured_under_cpu_steal_is_measured_again(tmp_path, monkeypatch):
    """max_steal: a row measured while the hypervisor took more of the VM's CPU is kept as
    "noisy" (never in a median) and the point measured again, at most STEAL_TRIES times; the
    last try stands whatever its steal, so a sweep on a busy host still ends."""
    import argparse

    import pandas as pd

    import bench.commands.sweep
    from bench.commands.sweep import _Journal, _measure
    from bench.driver.progress import RunProgress
    from bench.report.summary import summarize
    from bench.store.results import new_row
    from bench.launch.cpu_steal import STEAL_TRIES

    cfg = load_sweep(_write(tmp_path, "[[grid]]\nmodel = 'lenet_mnist'\ndataset = 'synthetic'\n")).points[0].config
    args = argparse.Namespace(no_store=False, results=str(tmp_path / "results"), resume=None, verbose=False)

    def measure(steals, max_steal):
        seq, count = iter(steals), iter(range(len(steals)))
        monkeypatch.setattr(bench.commands.sweep, "run_one", lambda *a, **k: new_row(
            model=cfg.model, strategy=cfg.strategy, workers=cfg.workers, status="ok", cpu_steal=next(seq),
            images_per_sec=100.0 / (1 + next(count)), step_time_median_s=0.1))
        journal = _Journal(args)
        row = _measure(cfg, None, RunProgress(1, quiet=True), args, 0, max_steal, journal)
        return row, journal.rows

    row, noisy = measure([0.30, 0.04, 0.5], 0.10)
    assert (row["cpu_steal"], row["status"], len(noisy)) == (0.04, "ok", 1)
    assert noisy[0]["status"] == "noisy" and noisy[0]["failure"].startswith("cpu steal 30% over max_steal 10%")
    row, noisy = measure([0.30] * STEAL_TRIES, 0.10)
    assert (row["status"], len(noisy)) == ("ok", STEAL_TRIES - 1)
    row, noisy = measure([0.30], None)  # no limit: the first row stands
    assert (row["cpu_steal"], noisy) == (0.30, [])
    row, noisy = measure([0.30, 0.01], 0.10)  # 100 img/s under steal, then 50 img/s: the median is 50
    summary = summarize(pd.DataFrame([*noisy, row]), [])
    assert summary["images_per_sec"].tolist() == [50.0] and summary["repeats"].tolist() == [1]
    with pytest.raises(UserError, match="max_steal must be a share of the CPU between 0 and 1"):
        load_sweep(_write(tmp_path, "max_steal = 10\n[[grid]]\nmodel = 'lenet_mnist'\n"))


def test_the_report_counts_step_time_cells_within_the_bar_by_cpu_steal():
    import pandas as pd

    from bench.report.tables import step_time_bar

    cells = pd.DataFrame({"step_time_median_s": [1.0, 1.5, 1.1, 1.0], "predicted_step_time_s": [1.0, 1.0, 1.0, 2.0],
                          "cpu_steal": [0.01, 0.02, 0.3, None]})
    assert step_time_bar(cells) == ("Step time within ±20% of the cost model: 2 of 4 cells; 1 of 2 measured under "
                                    "≤ 5% CPU steal, 1 of 1 above it.")


def test_smoke_override_keeps_the_first_point_of_each_strategy_and_each_grid(monkeypatch):
    """RALP_SMOKE=1 (the README test's one override): the sweep keeps the first point of every
    (strategy, PS layout) and the first of every [[grid]] (headline's scaled-link grids bring no
    new strategy, but their links), with at most two timed steps and one warm-up, one repeat."""
    import tomllib

    from bench.driver.sweep import load_sweep

    full = load_sweep("sweeps/headline.toml")
    monkeypatch.setenv("RALP_SMOKE", "1")
    small = load_sweep("sweeps/headline.toml")
    grids = tomllib.loads(open("sweeps/headline.toml").read())["grid"]
    kinds = [(p.config.strategy, p.config.ps_placement) for p in full.points]
    assert [(p.config.strategy, p.config.ps_placement) for p in small.points] == [
        ("ps", "dedicated"), ("horovod", "dedicated"), ("ralp", "dedicated"), ("ps", "colocated"),
        ("auto", "colocated"), ("ps", "dedicated"), ("ps", "colocated")]
    assert set(kinds) == {(p.config.strategy, p.config.ps_placement) for p in small.points}
    assert [p.cluster for p in small.points[-2:]] == [{"scale_to": "v100-10gbe"}] * 2 and len(grids) == 4
    assert all(p.config.model == "alexnet_cifar" and p.config.workers == 2 for p in small.points)
    assert all(p.config.steps <= 2 and p.config.warmup_steps <= 1 and p.config.target_ci is None
               for p in small.points)
    assert small.repeats == 1 and full.repeats == 2
    accuracy = load_sweep("sweeps/main.toml")
    assert all(p.config.train_to_accuracy is None for p in accuracy.points)
