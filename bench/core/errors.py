"""The one exception type users see.

Anything that is the user's to fix (bad flag, missing data, no root for the
emulated cluster, a rank that died) is raised as ``UserError`` with a one-line
message that names the fix; the CLI prints it without a traceback and exits 2.
"""
import os
import re
import time
import traceback

from bench.core.cache import cache_dir
from ralp.errors import UserError  # the engine's, so that it imports nothing above it

# "ValueError: ...", "tensorflow.python.framework.errors_impl.InternalError: ...", "KeyError"
_TRACEBACK = "Traceback (most recent call last)"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")



class RunFailed(UserError):
    """A distributed run ended abnormally (a rank died, hung or timed out)."""

    exit_code = 3


def one_line(text: str, limit: int = 600) -> str:
    """``text`` as the one line a user or a row's ``failure`` gets: a Python traceback is reduced
    to the exception it ends in, source lines and ``^^^`` markers are dropped, whitespace collapsed.
    The full text belongs in a log file (``log_file``), which the message then names."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if any(_TRACEBACK in ln for ln in lines):
        kept, skip_source = [], False
        for ln in lines:
            if _TRACEBACK in ln:
                before = ln.split(_TRACEBACK)[0].rstrip(" :")
                kept += [before + ":"] if before else []
                skip_source = True
                continue
            if ln.startswith('File "'):
                skip_source = True
                continue
            if skip_source and not _EXCEPTION_LINE.match(ln):
                continue  # the source line under a frame, or its ^^^^ markers
            skip_source = False
            kept.append(ln)
        lines = kept or lines[-1:]
    lines = [ln for ln in lines if not set(ln) <= set("^~ ")]
    flat = " ".join(" ".join(lines).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def log_file(label: str) -> str:
    """A new file for one launch's or one failure's full output, under RALP_LOG_DIR (default
    $RALP_CACHE/logs, bench/core/cache.py): named in the one-line message so the details are one step away."""
    root = os.environ.get("RALP_LOG_DIR") or str(cache_dir() / "logs")
    os.makedirs(root, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.+-]+", "-", label).strip("-")[:80] or "log"
    return os.path.join(root, f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{safe}.log")


def traceback_to_log(exc: BaseException, label: str) -> str:
    """Write ``exc``'s full traceback to a new log file; return its path."""
    path = log_file(label)
    with open(path, "w") as f:
        f.write("".join(traceback.format_exception(exc)))
    return path
