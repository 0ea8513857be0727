"""Why the kernel ended a process: its out-of-memory killer, read from the kernel's own log.

Why: mpirun says only that a rank "exited on signal 9", which reads like a crash or an operator's
kill. When every rank runs on this machine (the local and emulated launchers: network namespaces
share the machine's memory and its process IDs), the kernel's log says whether its OOM killer
chose that process, and the failure can name the cause and the fix (tuned Horovod on VGG-16 at 8
workers, 2026-12-07: eight ranks of ~3.2 GB on a 23 GiB machine, reported as a bare SIGKILL).
Read from /dev/kmsg (root, or kernel.dmesg_restrict=0); where it cannot be read, nothing is said.
"""
import errno
import os
import re
from typing import Optional

_KILLED = re.compile(r"[Oo]ut of memory: Killed process (\d+) ")


def oom_killed(pid: int, since_monotonic: Optional[float] = None) -> bool:
    """Whether the kernel's log records its OOM killer ending ``pid`` (after ``since_monotonic``,
    a time.monotonic() reading, when given: process IDs are reused)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode(errors="replace")
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on
                    continue
                return False  # EAGAIN: the end of the log
            header, _, message = record.partition(";")
            m = _KILLED.search(message)
            if m and int(m.group(1)) == pid:
                fields = header.split(",")
                at_s = int(fields[2]) / 1e6 if len(fields) > 2 and fields[2].isdigit() else None
                if since_monotonic is None or at_s is None or at_s >= since_monotonic - 1.0:
                    return True
    finally:
        os.close(fd)


def memory_gib() -> float:
    """This machine's memory in GiB (MemTotal)."""
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return kib / 2 ** 20
