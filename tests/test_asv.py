"""The asv suite: it passes `asv check`, its cheap benchmarks run through asv and save
numbers that match the anchors' traffic formula, the profile knob changes what asv
would run, and a failed or unmeasurable training row never becomes a number."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SUITE = ROOT / "benchmarks"  # asv.conf.json's benchmark_dir (asv imports it from the checkout)

# anchors.md: (total params P, conv params P_conv, floats per image into the first FC layer A)
ANCHORS = {"alexnet": (61_100_840, 2_469_696, 9_216), "vgg16": (138_357_544, 14_714_688, 25_088),
           "resnet50": (25_557_032, 23_508_032, 2_048)}


def _env(**extra):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RALP_ASV_PROFILE", None)
    return {**env, **extra}


def _discover(tmp_path, profile=None):
    """What asv itself would run: its discovery script over the suite -> {name: benchmark}."""
    from asv.runner import BENCHMARK_RUN_SCRIPT

    out = tmp_path / f"discovered-{profile}.json"
    env = _env(**({"RALP_ASV_PROFILE": profile} if profile else {}))
    proc = subprocess.run([sys.executable, BENCHMARK_RUN_SCRIPT, "discover", str(SUITE), str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        return proc
    return {b["name"]: b for b in json.loads(out.read_text())}


def test_asv_check_passes():
    # In the project's .venv ("existing"): a plain `asv check` first builds asv's own benchmark
    # environment (TensorFlow and all, ~100 s on a fresh clone), which the first `asv run` does anyway.
    proc = subprocess.run([str(VENV_BIN / "asv"), "check", "-E", "existing"], cwd=ROOT, capture_output=True,
                          text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No problems found" in proc.stdout


def test_smoke_script_saves_cost_model_numbers_matching_the_anchor_traffic_ratio(tmp_path):
    """ci/asv-smoke runs asv (check, run --quick, publish) into a temporary results dir."""
    home = tmp_path / "home"
    home.mkdir()
    env = _env(HOME=str(home))  # asv writes its machine file there, not in the user's home
    gitconfig = Path.home() / ".gitconfig"
    if gitconfig.exists():  # keep safe.directory and the like with the temporary HOME
        env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    asv_dir_before = sorted((ROOT / ".asv").rglob("*")) if (ROOT / ".asv").exists() else []
    proc = subprocess.run(["bash", str(ROOT / "ci" / "asv-smoke")], capture_output=True, text=True, env=env,
                          timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "asv-smoke: ok (2 benchmarks saved, HTML published)" in proc.stdout
    after = sorted((ROOT / ".asv").rglob("*")) if (ROOT / ".asv").exists() else []
    assert after == asv_dir_before  # results and HTML went to a temporary directory
    saved = _saved_values(proc.stdout)
    # At 1 Gbit/s every strategy is bound by the PS link, so the predicted speedup is
    # the PS link's traffic ratio (anchors.md): P / (P_conv + B*A), B = 32 per worker.
    speedups = saved["bench_planning.PredictedSpeedup.track_predicted_speedup"]
    for model, (total, conv, floats) in ANCHORS.items():
        traffic_ratio = total / (conv + 32 * floats)
        assert speedups[f"'{model}', 8, '1gbit'"] == pytest.approx(traffic_ratio, rel=0.06), model
        assert speedups[f"'{model}', 8, '10gbit'"] <= speedups[f"'{model}', 8, '1gbit'"] + 1e-9
    times = saved["bench_planning.TimeAnalyze.time_analyze"]
    assert set(times) == {f"'{m}', 8" for m in ANCHORS}
    assert all(0 < t < 1.0 for t in times.values()), times  # one decision: milliseconds, not seconds


def _saved_values(stdout):
    """The smoke script's summary lines: {benchmark: {"param, param": value}}."""
    saved = {}
    for line in stdout.splitlines():
        if line.startswith("asv-smoke: bench_"):
            name, values = line[len("asv-smoke: "):].split(" = ", 1)
            saved[name] = json.loads(values)
    return saved


def test_profile_knob_changes_the_grid_asv_discovers(tmp_path):
    fast, regular, large = (_discover(tmp_path, p) for p in ("fast", "regular", "large"))
    default = _discover(tmp_path)
    name = "bench_training.MeasuredTraining.track_images_per_sec"
    combos = {label: math.prod(len(p) for p in grid[name]["params"])
              for label, grid in (("fast", fast), ("regular", regular), ("large", large), ("default", default))}
    # models x strategies x workers x cluster, from profiles.json
    assert combos == {"fast": 1 * 2 * 1 * 1, "regular": 2 * 4 * 1 * 1, "large": 4 * 4 * 2 * 1, "default": 2}
    assert fast[name]["params"][1] == ["'ps'", "'ralp'"]
    assert fast[name]["unit"] == "images/s"
    assert fast["bench_training.MeasuredTraining.track_bytes_per_step"]["unit"] == "bytes"
    assert fast[name]["timeout"] == 900
    cluster = fast[name]["params"][3]
    assert cluster in (["'local'"], ["'emulated-1gbit'"])
    bad = _discover(tmp_path, "huge")
    assert bad.returncode != 0 and "valid: fast, regular, large" in bad.stderr


@pytest.fixture(scope="module")
def training():
    os.environ.pop("RALP_ASV_PROFILE", None)
    from benchmarks import bench_training

    return bench_training


def _row(strategy, plan=None, status="ok", images=100.0, ps_bytes=8e6, worker_bytes=3e6):
    return {"status": status, "failure": None if status == "ok" else "rank 2 (worker 1) exited with 137",
            "plan": plan or strategy, "images_per_sec": images, "bytes_ps_measured": ps_bytes,
            "bytes_worker_measured": worker_bytes}


def test_track_values_come_from_the_shared_rows(training):
    rows = {("m", "ps", 2): _row("ps", images=60.0), ("m", "ralp", 2): _row("ralp", images=150.0),
            ("m", "horovod", 2): _row("horovod"), ("m", "auto", 2): _row("auto", plan="horovod")}
    measured, speedup = training.MeasuredTraining(), training.RalpSpeedup()
    assert speedup.track_speedup_ralp_over_ps(rows, "m", 2, "local") == pytest.approx(2.5)
    assert measured.track_images_per_sec(rows, "m", "ps", 2, "local") == 60.0
    assert measured.track_bytes_per_step(rows, "m", "ps", 2, "local") == 8e6
    assert measured.track_bytes_per_step(rows, "m", "horovod", 2, "local") == 3e6  # no PS: a worker's link
    assert measured.track_bytes_per_step(rows, "m", "auto", 2, "local") == 3e6     # auto chose horovod


def test_failed_or_unmeasured_rows_give_no_number(training):
    from asv_runner.benchmarks.mark import SkipNotImplemented

    rows = {("m", "ps", 2): _row("ps", ps_bytes=None), ("m", "ralp", 2): _row("ralp", status="failed")}
    measured = training.MeasuredTraining()
    with pytest.raises(SkipNotImplemented):  # asv records NaN: shown as n/a
        measured.track_bytes_per_step(rows, "m", "ps", 2, "local")
    for call in (lambda: measured.track_images_per_sec(rows, "m", "ralp", 2, "local"),
                 lambda: training.RalpSpeedup().track_speedup_ralp_over_ps(rows, "m", 2, "local")):
        with pytest.raises(RuntimeError, match="exited with 137"):  # asv records the benchmark as failed
            call()
