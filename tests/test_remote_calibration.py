"""Calibration on a cluster host (issue 34): the driver reads the calibration program's figures
out of mpirun's output, and caches them under the key the measured host reports for itself.

No root needed: the host reached here is this machine, named ``localhost`` in a hostfile, which
mpirun starts without ssh. The measurement itself (TensorFlow, seconds) is not run: the cache is
seeded under the key the host reported, which is what a later run reads. tests/test_ssh_hosts.py
runs the real thing on emulated ssh hosts from a login host.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from bench.driver.calibration import MARK, emit, parse_output
import bench.driver.calibration as calibration
from tests.conftest import ROOT

FIGURES = {"worker_conv_flops": 3.0e10, "worker_dense_flops": 4.0e10, "pass_s": 2.5e-9, "machine": "h1|x86_64|8|tf2"}


# ---- reading the program's line out of mpirun's output ------------------------------------

def test_the_emitted_line_reads_back_as_sent():
    line = emit(FIGURES)
    assert line.startswith(MARK) and line.endswith("\n") and line.count("\n") == 1
    assert parse_output(line) == FIGURES


def test_the_line_is_found_behind_a_prefix_and_before_trailing_text():
    """mpirun --tag-output's prefix, a daemon's warning written before the line ends, text after it."""
    tagged = "[1,0]<stdout>:" + emit(FIGURES)
    assert parse_output(tagged) == FIGURES
    behind_warning = "Warning: Permanently added 'h1' (ED25519)." + emit(FIGURES).rstrip("\n") + " [h1:01234] ok\n"
    assert parse_output(behind_warning) == FIGURES


def test_among_other_output_the_last_whole_object_wins_and_a_cut_one_is_skipped():
    other = {**FIGURES, "pass_s": 9e-9}
    cut = emit(other)[:40] + "[1,1]<stdout>: another rank's text\n"
    text = "\n".join(["RALP-PHASE 0 calibrating", '{"not": "ours"}', emit(FIGURES).rstrip("\n"), cut,
                      "2026-12-05 tensorflow noise: {\"a\": 1}"])
    assert parse_output(text) == FIGURES  # the cut copy of ``other`` is not half read
    assert parse_output(text + "\n" + emit(other)) == other


@pytest.mark.parametrize("text", ["", '{"full_s": 1.0}\n', MARK + "\n", MARK + "[1, 2]\n", MARK + '{"full_s": \n'])
def test_no_whole_marked_object_reads_as_none(text):
    """A bare JSON line (what the program printed before it had a marker), a list, a cut object."""
    assert parse_output(text) is None


# ---- the program ---------------------------------------------------------------------------

def test_the_key_program_reports_its_machine_and_usable_cores_without_tensorflow():
    from bench.launch.cgroups import usable_cores

    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "bench.driver.calibration", "key"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "RALP-PHASE 0 calibrating"  # what the shared mpirun runner waits for
    assert parse_output(out.stdout) == {"machine": calibration._machine_key(), "cores": usable_cores()}
    assert "tensorflow" not in out.stderr.lower() and time.monotonic() - start < 20


def test_a_wrong_call_is_refused_with_the_usage():
    out = subprocess.run([sys.executable, "-m", "bench.driver.calibration", "model", "x"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode != 0 and "usage: python -m bench.driver.calibration key | hardware | model" in out.stderr
    assert parse_output(out.stdout) is None


# ---- through a launcher's mpirun -------------------------------------------------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "CACHE", tmp_path / "calibration.json")
    monkeypatch.setattr(calibration, "_PLACES", {})
    monkeypatch.setattr(calibration, "_HOSTS", {})
    return calibration.CACHE


def _cluster(tmp_path, hardware=None):
    """A RunConfig placed on a two-host hostfile whose worker host is this machine."""
    from bench.driver.clusters import apply_cluster
    from bench.core.config import RunConfig
    from bench.launch.hosts import HostsLauncher

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=1\nlocalhost slots=1\n")
    cfg = RunConfig(model="lenet_mnist", strategy="ps", workers=1, hardware=hardware).validate()
    return apply_cluster(cfg, HostsLauncher(str(hostfile), firewall=False))


def test_a_cluster_run_calibrates_on_its_first_worker_host_and_rows_say_so(cache, tmp_path):
    from bench.core.config import RunConfig
    from bench.driver.harness import failed_row

    cfg = _cluster(tmp_path)
    assert cfg.calibrate_on == "localhost"  # host 1: the worker host, not the PS host 127.0.0.1
    argv = calibration._PLACES["localhost"].argv
    assert argv[argv.index("-H") + 1] == "localhost:1" and "bench.driver.calibration" not in argv  # the program comes later
    assert failed_row(cfg, "x")["calibrated_on"] == "localhost"
    assert ("calibrate_on", "calibrated_on") in RunConfig.row_fields() and "calibrate_on" not in RunConfig.rank_fields()
    assert _cluster(tmp_path, hardware="v100-10gbe").calibrate_on is None  # a preset measures nothing


def test_the_figures_are_cached_under_the_key_the_host_reports_and_reused_without_measuring(cache, tmp_path):
    from bench.launch.cgroups import usable_cores
    from bench.driver.planning import hardware_for

    cfg = _cluster(tmp_path, hardware="local")
    key = calibration.hardware_key(None, cfg.calibrate_on)  # one mpirun: the host's own answer
    assert key == f"{calibration._machine_key()}|hardware|{usable_cores():.3f}"
    calibration._store(key, {**FIGURES, "measured_at": "2026-12-05T10:00:00", "steal": 0.0})
    start = time.monotonic()
    hardware = hardware_for(cfg)
    assert time.monotonic() - start < 2.0  # the host's key is asked once per process; nothing measured
    assert (hardware.worker_conv_flops, hardware.pass_s) == (3.0e10, 2.5e-9)
    assert "on host localhost" in hardware.description
    assert json.loads(cache.read_text()).keys() == {key}  # nothing under this machine's own local key


def test_a_host_no_launcher_registered_is_refused_in_one_line(cache):
    from bench.core.errors import UserError

    with pytest.raises(UserError, match=r"cannot calibrate on h9: no launcher in this process reaches it"):
        calibration.hardware_under(None, "h9")
    assert not os.path.exists(cache)
