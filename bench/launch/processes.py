"""Stopping a set of processes: a launch's whole session, or everything inside a namespace.

Why by session and not by process group: mpirun is started in a session of its own, but Open
MPI puts each rank it forks in a process group of its own (``setpgid`` in its launcher), so
signalling mpirun's group reaches mpirun alone. mpirun forwards a SIGTERM to its ranks, but
when it is slow to (a loaded 2-core machine, ranks still importing TensorFlow) and is then
SIGKILLed, the ranks are orphaned and run on. Every process mpirun starts keeps its session
id, so the session names them all, orphans included (CI, 2026-12-05: an interrupted sweep
left mpirun and both ranks of its second point running).

A session of its own also means a launch outlives a driver killed outright (``kill -9``): no
signal the driver could catch, no process group it shares. So every launch is started by
``popen``, which asks the kernel to send it SIGTERM when the driver dies (PR_SET_PDEATHSIG);
mpirun passes that on to its ranks and remote daemons (fresh-clone suite, 2026-12-06: a hosts
run's mpirun and ranks trained on for minutes after its driver was SIGKILLed)."""
import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Iterable, List, Optional

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


# The interrupt (Ctrl-C, SIGTERM) whose exception Python may have dropped: a signal's handler runs
# wherever the main thread is, at-fork callbacks included (logging's lock release as subprocess
# forks), where what it raises is printed ("Exception ignored in: <function _releaseLock>") and
# lost. A sweep ran on to its end after Ctrl-C that way (fresh-clone suite, 2026-12-06). The
# driver's handlers record the exception here before raising it (bench/cli.py); the loops that
# wait, on a launch and between configurations, raise it again.
_interrupt: Optional[BaseException] = None


def interrupted(exc: BaseException) -> BaseException:
    """Record ``exc``, the exception a signal handler is about to raise, and return it."""
    global _interrupt
    _interrupt = exc
    return exc


def raise_if_interrupted():
    """Raise the recorded interrupt again, in case it was dropped where it was first raised."""
    if _interrupt is not None:
        raise _interrupt


def popen(argv, **popen_kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` for a command that starts others (mpirun and its ranks, a probe's
    programs): in a session of its own (``stop`` finds them all by it), and sent SIGTERM by the
    kernel when this process dies, however it dies. The signal is set in the child before it
    runs the command, which keeps it through exec (``sh -c ... exec nsenter ... exec mpirun``
    is one process); a driver already gone by then ends the child at once."""
    parent = os.getpid()

    def end_with_parent():
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return subprocess.Popen(argv, start_new_session=True, preexec_fn=end_with_parent, **popen_kwargs)


def stop_started() -> List[int]:
    """Stop every session this process started (``popen``'s children lead their own) and what
    they hold. For an interrupt (Ctrl-C, SIGTERM) that lands inside ``subprocess.Popen``, between
    the fork and the child's exec, where Popen raises without handing over the child, or before
    the launch's own ``try``: that launch was left to PR_SET_PDEATHSIG, which ends it only once
    the driver is gone, so the driver exited with ranks still running (fresh-clone suite,
    2026-12-06: a sweep interrupted as its second point started). A child of this process that
    leads its own session is one ``popen`` started, so nothing else is touched. Returns the pids
    still alive afterwards (normally none)."""
    me = os.getpid()
    sessions = {pid for pid, (ppid, sid) in _table().items() if ppid == me and sid == pid}
    return stop(lambda: [pid for pid, (_, sid) in _table().items() if sid in sessions]) if sessions else []


def session_members(sid: int) -> List[int]:
    """Live processes (not zombies) whose session id is ``sid``, never this process."""
    return [pid for pid, (_, session) in _table().items() if session == sid]


def _table():
    """{pid: (parent pid, session id)} of every live process (zombies left out), this one excepted."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # fields after the command (which may hold spaces and parentheses): state, ppid, pgrp, session
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[3]))
    return table


def stop(find: Callable[[], Iterable[int]], grace_s: float = 3.0, kill_wait_s: float = 5.0) -> List[int]:
    """SIGTERM every process ``find`` returns, SIGKILL whatever is left after ``grace_s``;
    the pids still there ``kill_wait_s`` later (normally none). ``find`` is asked again at
    each step, so a process started meanwhile (a rank mpirun was forking) is signalled too."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        pids = list(find())
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = list(find())
        if not pids:
            return []
    return pids


def run(argv, timeout: float, **popen_kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)`` for a command that
    starts others (mpirun and its ranks or its ssh clients): in a session of its own, and on a
    timeout or an interrupt the whole session is stopped, not the command alone (which is what
    subprocess.run kills, orphaning the rest)."""
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop(lambda: session_members(proc.pid))
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
