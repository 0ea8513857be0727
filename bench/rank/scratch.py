"""A rank's own temporary directory, removed as the rank leaves.

Why: ranks leave with ``os._exit`` (bench/rank/main.py says why), so no ``atexit`` handler runs,
and TensorFlow's autograph removes the source file it writes for every function it converts
only in one: each rank left its files in /tmp (6,227 ``__autograph_generated_file*.py`` on
this machine after a day of suites), on every host of a real cluster too. Python's temporary
directory is pointed at one of the rank's own before anything is traced, and every exit the
rank controls (the end, an error, the watchdog) removes it first. A rank killed from outside
(SIGKILL, or mpirun aborting the job when another rank fails) runs none of those, so under Open
MPI the directory is made inside the rank's own session directory (``$OMPI_FILE_LOCATION``),
which Open MPI's daemon removes when the job ends, however it ends (checked with one of two
ranks SIGKILLed: both directories gone). Elsewhere it goes in the system's temporary directory.
Only Python's ``tempfile`` is redirected, not ``$TMPDIR``: Open MPI reads that for its session
directory.
"""
import os
import shutil
import tempfile
from typing import Optional

_own: Optional[str] = None


def enter():
    """Make the rank's directory and send Python's temporary files there."""
    global _own
    if _own is None:
        session = os.environ.get("OMPI_FILE_LOCATION")  # Open MPI 4's per-process session directory
        _own = tempfile.mkdtemp(prefix=f"ralp-rank-{os.getpid()}-",
                                dir=session if session and os.path.isdir(session) else None)
        tempfile.tempdir = _own


def remove():
    """Remove the directory and everything in it (safe to call twice, or without ``enter``)."""
    global _own
    if _own is not None:
        tempfile.tempdir = None
        shutil.rmtree(_own, ignore_errors=True)
        _own = None
