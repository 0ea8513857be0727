"""One calibration cache for the whole tool (issue 33): ``analyze --hardware local`` and ``run``'s
predictions read and write the same keyed entries (bench/driver/calibration.py), and neither erases
the other's. Defect: ``analyze`` wrote a one-entry file of its own format over the cache,
deleting every quota figure and model timing that ``run`` had measured.

The cache lives in a temporary ``$RALP_CACHE`` so the user's real one is never touched.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

import bench.driver.calibration as calibration  # noqa: E402
from bench.core.cache import cache_dir  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

MODEL_FIGURES = {"full_s": 0.125}  # a run's model timing, as the capped subprocess reports it


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache: this process through ``CACHE``, subprocesses through ``$RALP_CACHE``."""
    monkeypatch.setenv("RALP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("RALP_CALIBRATION_CACHE")  # the suite's own cache (tests/conftest.py): here the default path
    monkeypatch.setattr(calibration, "CACHE", tmp_path / "cache" / "calibration.json")
    return calibration.CACHE


def _entries(path):
    return json.loads(path.read_text())


def _seed_model_timing(cores):
    """A ``run``-format entry, written by the cache's own code (the figures stand in for the
    capped subprocess's measurement, which takes a minute)."""
    from bench.models.sources import get_spec

    key = calibration.model_key(get_spec("lenet_mnist"), 8, 2, None, cores)
    return key, calibration._cached(key, lambda: dict(MODEL_FIGURES))


def test_the_cache_path_follows_ralp_cache_unless_ralp_calibration_names_the_file(tmp_path):
    code = "import bench.driver.calibration as c; print(c.CACHE)"
    env = {k: v for k, v in os.environ.items() if k != "RALP_CALIBRATION_CACHE"}
    for extra, expected in (({"RALP_CACHE": str(tmp_path)}, tmp_path / "calibration.json"),
                            ({"RALP_CACHE": str(tmp_path), "RALP_CALIBRATION_CACHE": str(tmp_path / "other.json")},
                             tmp_path / "other.json")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra},
                             cwd=ROOT, timeout=60)
        assert out.stdout.strip() == str(expected), out.stderr


def test_the_suite_never_writes_the_users_calibration_cache():
    """Every process of the suite inherits RALP_CALIBRATION_CACHE (tests/conftest.py), a file of the suite's own."""
    from bench.driver import calibration

    users = cache_dir() / "calibration.json"
    assert Path(os.environ["RALP_CALIBRATION_CACHE"]).parent.name == "tests"
    assert calibration.CACHE == Path(os.environ["RALP_CALIBRATION_CACHE"]) != users


def test_analyze_local_and_run_keep_each_others_entries(cache):
    """The real CLI measures this machine once (~8 s) into the shared cache; the entry a run
    wrote before stays, the run's planning reads analyze's figures, and a later run's entry
    leaves analyze's in place."""
    from bench.core.config import RunConfig
    from bench.driver.planning import hardware_for

    run_key, run_entry = _seed_model_timing(cores=1.5)
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "analyze", "--model", "lenet_mnist", "--hardware",
                           "local", "--workers", "2", "--json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    hardware = json.loads(proc.stdout)["hardware"]
    assert hardware["name"] == "local" and not hardware["is_preset"] and str(cache) in hardware["description"]

    entries = _entries(cache)
    assert entries[run_key] == run_entry  # analyze kept run's entry
    measured = entries[calibration.hardware_key(None)]
    assert (measured["worker_conv_flops"], measured["worker_dense_flops"]) == (
        hardware["worker_conv_flops"], hardware["worker_dense_flops"])
    assert 1e7 < measured["worker_conv_flops"] < 1e15 and 0 < measured["pass_s"] < 1e-6

    # run's predictions on the whole machine read analyze's figures (bit for bit: not measured again)
    start = time.perf_counter()
    local = hardware_for(RunConfig(model="lenet_mnist", hardware="local", bandwidth="1gbit"))
    assert time.perf_counter() - start < 2.0
    assert (local.worker_conv_flops, local.pass_s, local.worker_bandwidth) == (
        measured["worker_conv_flops"], measured["pass_s"], 1e9)

    # and a later run-format entry keeps analyze's
    later_key, later_entry = _seed_model_timing(cores=None)
    assert _entries(cache) == {**entries, later_key: later_entry}


WRITER = """
import sys, time
import bench.driver.calibration as c
name, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
for i in range(int(sys.argv[3])):
    c._store(f"{name}|{i}", {"i": i})
"""


def test_two_processes_writing_at_once_keep_every_entry(cache):
    """The merge is read-modify-write under the cache's lock: without it, two writers read the
    same file and the second replace drops the first's entry (seen in 10 of 10 tries here)."""
    count, start = 60, time.time() + 1.0
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, name, str(start), str(count)], cwd=ROOT)
               for name in ("a", "b")]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    assert set(_entries(cache)) == {f"{name}|{i}" for name in ("a", "b") for i in range(count)}
    assert not list(cache.parent.glob("*.tmp*"))  # every temporary file (bench/store/atomic.py) was renamed into place


def test_a_file_in_the_old_single_entry_format_reads_as_empty_and_is_replaced(cache):
    """What ralp/calibrate.py used to write over the cache: flat figures, no keys."""
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"worker_conv_flops": 1e10, "worker_dense_flops": 2e10, "machine": "m",
                                 "measured_at": "2026-12-01T00:00:00"}))
    assert calibration._load() == {}
    key, entry = _seed_model_timing(cores=2.0)
    assert _entries(cache) == {key: entry}
    cache.write_text("not json")
    assert calibration._load() == {}
