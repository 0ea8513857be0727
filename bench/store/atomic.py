"""Files written whole: a new file's bytes go to a temporary file beside it, are flushed to disk,
and replace the old file in one rename, so a reader (another process, a resumed sweep, a crash's
survivor) sees the old file or the new one, never half of one. The result store, the calibration
cache, the profile cache, an emulated cluster's state file and rank 0's ``--out`` file write through it."""
import contextlib
import os
import secrets
from pathlib import Path


def temp_path(final: Path) -> Path:
    return final.with_name(f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def write_temp(final: Path, write) -> Path:
    """``write(handle)`` into a new temporary file beside ``final``, flushed to disk; its path."""
    tmp = temp_path(final)
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def fsync_dir(directory):
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(final: Path, write):
    """Write via a temp file in the same directory, fsync, rename over ``final``."""
    tmp = write_temp(final, write)
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_text_atomic(final: Path, text: str):
    write_atomic(final, lambda handle: handle.write(text.encode("utf-8")))
