"""The lock that lets several test processes share this machine (tests/conftest.py): ordinary
tests hold it together, a ``machine_wide`` one alone, and one waiting to be alone is not passed
by ordinary tests that come after it. Each holder is a process of its own, as xdist's are."""
import select
import subprocess
import sys

from tests.conftest import ROOT

HOLD = """
import sys
from tests.conftest import machine_share
with machine_share(sys.argv[1] == "alone", sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _holder(kind, lock):
    return subprocess.Popen([sys.executable, "-c", HOLD, kind, lock], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _holds(proc, wait_s):
    """Whether ``proc`` says it holds the lock within ``wait_s`` seconds."""
    return bool(select.select([proc.stdout], [], [], wait_s)[0]) and proc.stdout.readline() == "held\n"


def _release(proc):
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


def test_ordinary_tests_share_and_a_machine_wide_one_waits_for_all_and_is_not_passed(tmp_path):
    lock = str(tmp_path / "lock")
    procs = []
    try:
        first, second = _holder("shared", lock), _holder("shared", lock)
        procs += [first, second]
        assert _holds(first, 30) and _holds(second, 30)  # two ordinary tests at once
        alone = _holder("alone", lock)
        procs.append(alone)
        assert not _holds(alone, 2)                     # waits while any ordinary test runs
        later = _holder("shared", lock)
        procs.append(later)
        assert not _holds(later, 2)                     # a newcomer waits behind the one waiting to be alone
        _release(first)
        assert not _holds(alone, 1)
        _release(second)
        assert _holds(alone, 30)                        # the last one out lets it in...
        assert not _holds(later, 1)                     # ...alone
        _release(alone)
        assert _holds(later, 30)
        _release(later)
    finally:
        for p in procs:
            p.kill()
            p.wait()
