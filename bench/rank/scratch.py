"""A rank's own temporary directory, removed as the rank leaves.

Why: ranks leave with ``os._exit`` (bench/rank/main.py says why), so no ``atexit`` handler runs,
and TensorFlow's autograph removes the source file it writes for every function it converts
only in one: each rank left its files in /tmp (6,227 ``__autograph_generated_file*.py`` on
this machine after a day of suites), on every host of a real cluster too. Python's temporary
directory is pointed at one of the rank's own before anything is traced, and every exit the
rank controls (the end, an error, the watchdog) removes it first; a rank killed from outside
leaves that one directory. Only Python's ``tempfile`` is redirected, not ``$TMPDIR``: Open MPI
reads that for its session directory, which is its own business.
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
        _own = tempfile.mkdtemp(prefix=f"ralp-rank-{os.getpid()}-")
        tempfile.tempdir = _own


def remove():
    """Remove the directory and everything in it (safe to call twice, or without ``enter``)."""
    global _own
    if _own is not None:
        tempfile.tempdir = None
        shutil.rmtree(_own, ignore_errors=True)
        _own = None
