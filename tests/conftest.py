import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from bench.core.cache import cache_dir

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every process this test session starts inherits the tag, so checks for left-over
# processes see only ours, not those of another run on the same machine.
# This file may be imported twice (as 'conftest' by pytest, as 'tests.conftest' by test modules):
# both copies must share one tag, so an inherited tag of this very process is kept.
_inherited = os.environ.get("RALP_TEST_TAG", "")
TEST_TAG = _inherited if _inherited.startswith(f"{os.getpid()}-") else f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
os.environ["RALP_TEST_TAG"] = TEST_TAG
# The suite's calibrations go to a cache of its own (kept between sessions, so a warm machine does
# not measure again). They are measured while the suite's processes share the cores, and in the
# user's cache they priced the next `./ci/main`: run after the suite, its predictions were built on
# figures measured under the suite's load.
os.environ["RALP_CALIBRATION_CACHE"] = str(cache_dir() / "tests" / "calibration.json")
# For the same reason, a calibration crowded by other processes is not measured again here
# (bench/driver/calibration.py MIN_FREE_SHARE): the suite's processes always crowd each other,
# so every figure would be measured three times for nothing.
os.environ["RALP_CALIBRATION_MIN_FREE"] = "0"


def _environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}


def our_processes(pattern=(b"bench.run", b"orted", b"mpirun")):
    """PIDs (other than this one) of processes started by this test session matching ``pattern``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if any(p in cmd for p in pattern) and _environ(pid).get(b"RALP_TEST_TAG") == TEST_TAG.encode():
            found.append(int(pid))
    return found


def rank_pids(rank):
    """Our bench.run processes whose Open MPI rank is ``rank``."""
    return [pid for pid in our_processes((b"bench.run",))
            if _environ(pid).get(b"OMPI_COMM_WORLD_RANK") == str(rank).encode()]


def failed_run(proc, tail: int = 3000) -> str:
    """What an assert on a failed CLI run shows: its output's tail, then the tail of every log its
    one-line error names ("full output: PATH", bench/launch/base.py). The rank's traceback is in
    that log, which CI keeps on its own machine: without it here a failure there cannot be read."""
    text = (proc.stdout or "")[-tail:] + (proc.stderr or "")[-tail:]
    for path in sorted(set(re.findall(r"full output: (\S+\.log)", text))):
        try:
            with open(path, errors="replace") as fh:
                text += f"\n--- {path} (tail) ---\n" + fh.read()[-tail:]
        except OSError as exc:
            text += f"\n--- {path}: {exc}"
    return text


def ralp_bench(*args, timeout=600, cwd=None):
    """Run the real CLI in a subprocess; return CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "bench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def start_cli(*args, ignore_sigint=False):
    """Start the real CLI in the background (pipes for stdout/stderr, text); ``ignore_sigint``
    starts it the way a shell starts a background job, with SIGINT ignored."""
    def preexec():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return subprocess.Popen([sys.executable, "-m", "bench.cli", *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                            preexec_fn=preexec if ignore_sigint else None)


def wait_for_rank(rank, proc, seconds=240):
    """PIDs of rank ``rank`` once it runs; fails if ``proc`` ends or time runs out first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        pids = rank_pids(rank)
        if pids:
            return pids
        time.sleep(2)
    raise AssertionError(f"rank {rank} never started" + (f": {proc.communicate()[1][-2000:]}" if proc.poll() else ""))


def signal_and_wait(proc, pid, sig, timeout=180):
    """Send ``sig`` to ``pid`` (a rank, or the CLI itself) and return the CLI's (stdout, stderr);
    the CLI is killed if it outlives ``timeout``, so a failing test leaves nothing behind."""
    try:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        os.kill(pid, sig)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture
def cli():
    return ralp_bench


# ---- several test processes on one machine (ci/test runs three, with pytest-xdist) -------------------
# Why: a test that starts an emulated cluster leaves the machine ~40% idle (ranks importing
# TensorFlow under one host's CPU cap, ssh and mpirun start-up, waits for a port). Measured on
# this 2-core VM: test_ssh_hosts + test_model_matrix one after the other 351 s (cores 63% busy),
# side by side 244 s (87%); the whole suite from a fresh clone 38 min 47 s in one process
# (2026-12-06), 21 min 40 s in two, 20 min 37 s in three (cores ~95% busy: the CPU is now
# what limits; on a later VM of the same kind whose cores ran Python half as fast, 42 min, then
# 36 min with the longest modules first and no test but one that stops the others). Tests
# check bytes, correctness and errors, never a step time, so a neighbour slows them and
# changes nothing else; every cluster, CPU group, firewall table and leftover
# check is scoped by name or by RALP_TEST_TAG. What remains machine-wide is marked
# ``machine_wide`` (pyproject.toml) and runs with no other test beside it.

README_BLOCK = "::test_readme_command_runs_as_typed["
# Seconds each of the longest modules took (its tests' set-up, call and tear-down summed; fresh
# clone, three processes, `./ci/test --durations=0`, 2026-12-06): the order they are handed out in,
# longest first. Alphabetical order left test_ssh_hosts, test_user_models and test_wheel for the
# end of the suite, one process running them with the other two idle. A module not listed counts
# as short; a stale figure only changes the order, never what runs.
MODULE_SECONDS = {
    "test_model_matrix": 790, "test_ssh_hosts": 417, "test_distributed": 407, "test_compression_runs": 340,
    "test_wheel": 329, "test_user_models": 310, "test_emulated_runs": 246, "test_firewall": 238,
    "test_accuracy": 154, "test_slurm": 118, "test_sweep": 95, "test_hybrid": 95, "test_browser": 69,
    "test_models": 54, "test_host_cpus": 54, "test_analyzer": 54, "test_link_checks": 25,
}


def _module(nodeid: str) -> str:
    return os.path.splitext(os.path.basename(nodeid.split("::", 1)[0]))[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The longest pieces of work first, so that nothing long is left for the end, when one
    process would run it alone: the README's blocks (most take minutes), then the modules by
    MODULE_SECONDS (the sort is stable: a module's tests stay in their order)."""
    items.sort(key=lambda item: (README_BLOCK not in item.nodeid, -MODULE_SECONDS.get(_module(item.nodeid), 0)))


def pytest_xdist_make_scheduler(config, log):
    """A module's tests go to one test process together (its module-scoped fixtures, often a
    cluster with a fixed name, are set up once), except the README's blocks: each is its own
    piece of work. In the order collected (above), not xdist's by number of tests per module.
    (xdist's own --dist loadgroup renames nodeids, which pytest 9.2 ignores: it split modules.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndBlocks(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return nodeid if README_BLOCK in nodeid else nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False
    return ModulesAndBlocks(config, log)


# One lock file for every test process on this machine (another pytest session included).
_SHARE = os.path.join(tempfile.gettempdir(), "ralp-bench-tests.lock")  # and its turnstile, + ".turn"


@contextlib.contextmanager
def machine_share(alone: bool, path: str = _SHARE):
    """A shared hold on the machine for an ordinary test, the whole of it for a ``machine_wide``
    one. Whoever waits for the whole holds the turnstile meanwhile, so a stream of ordinary
    tests in the other processes cannot keep it waiting for ever."""
    with open(path + ".turn", "a") as turnstile, open(path, "a") as share:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(share, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)


@contextlib.contextmanager
def no_bring_up_meanwhile():
    """Hold the lock every emulated cluster's bring-up takes to remove the stale clusters it finds
    (bench/launch/cluster_state.py): a test that kills a cluster's owner sees what the kill left
    before another test process's bring-up removes it. Call nothing inside that takes it too
    (a bring-up, destroy_cluster): the lock is a flock, not re-entrant."""
    from bench.launch.cluster_state import state_lock
    with state_lock():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Set-up (module fixtures included), the test and its tear-down, under the machine's lock."""
    with machine_share(item.get_closest_marker("machine_wide") is not None):
        yield
