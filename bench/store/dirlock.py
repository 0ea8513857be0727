"""One exclusive flock on ``<directory>/.lock``: what the result store and the emulated
clusters' state directory use to serialise writers across processes."""
import fcntl
import os
from contextlib import contextmanager


@contextmanager
def dir_lock(directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
