"""Launchers behind one interface, and the one place that runs mpirun.

As Horovod's runner keeps mpi_run/gloo_run behind launch, a ``Launcher``
(local.py: this machine; emulated_launcher.py: network namespaces with shaped
links; hosts.py: a real cluster from a hostfile) only decides WHERE ranks go
and WHICH mpirun options that needs. ``run_mpirun`` is shared: it streams
progress, enforces a deadline, names the rank and role that died, and always
kills the whole process group, so no rank outlives a run.
"""
import abc
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from bench.core.errors import RunFailed, UserError, log_file, one_line
from bench.core.roles import RankLayout
from bench.launch import kernel_log, processes

# Every rank runs with the same environment: quiet TF, mpirun allowed as root.
BASE_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "PYTHONUNBUFFERED": "1",
}


def mpirun_path() -> str:
    for candidate in ("mpirun", "/usr/bin/mpirun"):
        if subprocess.run(["which", candidate], capture_output=True).returncode == 0:
            return candidate
    raise UserError("mpirun not found; install Open MPI (apt-get install -y openmpi-bin) or run ci/setup.sh")


def place_ranks(layout: RankLayout, host_slots: List[int]) -> List[int]:
    """Ranks per host, in rank order (mpirun fills hosts in order).

    TF layout: chief and ps 0 on host 0, ps i on host i, then workers fill the
    following hosts up to their slots. Colocated sync PS: the chief alone on host 0
    (the dedicated PS host every other strategy of the comparison uses), then each
    worker host takes its workers' (ps i, worker i) pairs. Horovod (no TF layout)
    uses only the worker hosts, so its workers sit where the others' do."""
    per_worker = 2 if layout.colocated else 1   # ranks each worker brings to its host
    counts = [per_worker * n for n in worker_counts(layout, host_slots)]
    if layout.tf:
        counts[0] += 1
        for i in range(0 if layout.colocated else layout.ps):
            counts[i] += 1
    return counts


def worker_counts(layout: RankLayout, host_slots: List[int]) -> List[int]:
    """Workers per host, in host order: the worker hosts (after the PS hosts; colocated: after
    the chief's) fill up to their slots. What the cost model's ``workers_per_host`` reads."""
    workers, ps = layout.workers, layout.ps
    dedicated = 1 if layout.colocated else ps   # hosts before the worker hosts
    if len(host_slots) < dedicated + 1:
        raise UserError(f"{ps} PS need at least {ps + 1} hosts (PS hosts + worker hosts); got {len(host_slots)}")
    counts = [0] * len(host_slots)
    left = workers
    for h in range(dedicated, len(host_slots)):
        counts[h] = min(left, host_slots[h])
        left -= counts[h]
    if left:
        raise UserError(f"{workers} workers do not fit the worker hosts' {sum(host_slots[dedicated:])} slots; "
                        "add hosts or slots, or lower --workers")
    return counts


@dataclass
class LaunchSpec:
    argv: List[str]                     # the full command (mpirun ... python -m bench.run ...)
    env: Dict[str, str] = field(default_factory=dict)
    this_machine: bool = False          # every rank runs here: its PIDs are this kernel's (bench/launch/kernel_log.py)


class Launcher(abc.ABC):
    mode = "?"
    link = None  # the LinkSpec (ralp/links.py) of the cluster's NICs, where the launcher knows it

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @abc.abstractmethod
    def spec(self, layout: RankLayout, rank_argv: List[str]) -> LaunchSpec:
        """The command that starts every rank of one configuration."""

    @abc.abstractmethod
    def cluster_fields(self) -> Dict:
        """Result-row fields describing this cluster (mode, hosts, link rates...)."""

    def host_slots(self) -> List[int]:
        """Ranks each host may take, in host order (what ``place_ranks`` fills)."""
        raise NotImplementedError

    def link_checks(self):
        """The cluster's link check (bench/launch/link_probe.py ``LinkChecks``) where this launcher
        makes one: emulated links, or real NICs whose rate the user stated. None: no check."""
        return None

    def in_run_link_probe(self, pattern: Optional[str], layout: RankLayout) -> Optional[int]:
        """fp32 values for the run of ``layout`` to all-reduce in its own ranks before training,
        where that run makes the cluster's still-missing check of ``pattern``; None: nothing."""
        checks = self.link_checks()
        return checks.in_run_floats(pattern, place_ranks(layout, self.host_slots())) if checks else None

    def link_fields(self, pattern: Optional[str], in_run: Optional[Dict[str, float]] = None) -> Dict:
        """Result-row fields on how well the links carry traffic ``pattern`` (``in_run``: what the
        run measured itself, after ``in_run_link_probe``); {} where there is no check."""
        checks = self.link_checks()
        return checks.fields(pattern, in_run) if checks else {}

    def measure_link(self):
        """Learn ``link`` by measuring it where nobody stated it (hosts.py); the driver calls it
        once before planning a run, never for a dry run. Built or stated links: nothing to do."""

    def workers_per_host(self, layout: RankLayout) -> Optional[int]:
        """The most workers this launcher puts on one worker host (None: not known; the cost model
        then takes its hardware's ``gpus_per_host``)."""
        return None

    def calibration_spec(self, layout: RankLayout):
        """(host, LaunchSpec starting one program there) where the cost model's compute must be
        measured on another machine than this one (hosts.py); None: here, under the host's cap."""
        return None

    def after_run(self):
        """Hook to kill what a launcher left (emulated: processes inside namespaces)."""


_DIED = re.compile(r"process rank (\d+) with PID (\d+) on node \S+ exited on signal (\d+)")
_EXIT = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)", re.S)
_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+)")
# TF's op errors say only "Graph execution error:" on the exception line; the op's own failure
# (a Gloo timeout, a lost peer) is logged above or below it by Horovod or the transport.
_CAUSE = re.compile(r"(?:uncaught exception: |\] )?((?:Timed out|Connection (?:reset|refused|closed)|Read error|"
                    r"Broken pipe)[^\n]*)")
# TensorFlow's gRPC error where a peer task no longer answers: the task is named, in TF's terms.
_UNREACHABLE = re.compile(r"UnavailableError: ([^\n]*)\nAdditional GRPC error information from remote target "
                          r"/job:(\w+)/replica:\d+/task:(\d+)")
_RAISED = re.compile(r"^(?:\[[^\]]*\]\s*)?((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exhausted)\b:? .*)$", re.M)


def diagnose(output: str, layout: RankLayout, oom_killed: Optional[Callable[[int], bool]] = None) -> str:
    """One line: which rank (and role) failed and how, from mpirun's and our ranks' output;
    ``oom_killed(pid)``, where the ranks ran on this machine, says whether the kernel's
    out-of-memory killer ended a rank mpirun saw killed."""
    ours = [line.split("error: ", 1)[1] for line in output.splitlines() if line.startswith("ralp-bench: error: ")]
    m = _DIED.search(output)
    if m:
        who = layout.describe(int(m.group(1)))
        sig = int(m.group(3))
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL and oom_killed is not None and oom_killed(int(m.group(2))):
            return (f"{who} died ({name}): the kernel's out-of-memory killer ended it; this machine's "
                    f"{kernel_log.memory_gib():.0f} GiB hold every rank of the run (emulated hosts share them), "
                    "so run fewer workers, a smaller model or batch here, or on separate hosts")
        return f"{who} died ({name})" + (f"; {ours[0]}" if ours else "")
    if ours:
        m = _ABORT.search(output)
        return (f"{layout.describe(int(m.group(1)))}: " if m else "") + ours[0]
    m = _UNREACHABLE.search(output) if layout.tf else None
    rank = layout.rank_of(m.group(2), int(m.group(3))) if m else None
    if rank is not None:
        # mpirun's own notice of a dead rank is sometimes lost (Open MPI 4.1 prints "ORTE_ERROR_LOG:
        # Data unpack had inadequate space ... show_help.c" in its place); the chief's failed call
        # to the task that vanished still names it, and that task, not the chief whose call failed
        # and which then aborted the job, is the cause (found: a killed worker reported as the chief's
        # "Connection reset by peer").
        return f"{layout.describe(rank)} is gone: TensorFlow could not reach it ({m.group(1).strip()[:200]})"
    m = _ABORT.search(output)
    raised = _RAISED.findall(output)
    if m and raised:  # a rank's uncaught exception, then bench.run's abort of the job
        return f"{layout.describe(int(m.group(1)))} failed: {raised[-1].strip()[:300]}"
    m = _EXIT.search(output)
    if m:
        raised = _RAISED.findall(output)  # a rank's uncaught exception: say what it was
        cause = _CAUSE.findall(output)
        last = raised[-1].strip()[:300] if raised else ""
        if cause and (not last or last.endswith(":")):
            last = f"{last} {cause[0].strip()[:200]}".strip()
        return (f"{layout.describe(int(m.group(1)))} exited with code {m.group(2)}"
                + (f"; last error: {last}" if last else ""))
    tail = [line for line in output.splitlines() if line.strip()][-3:]
    return "mpirun failed: " + " | ".join(tail)


class LaunchStalled(RunFailed):
    """mpirun never started every rank."""


# A backstop, not the detector: every rank reports its first phase ~0.3 s after it starts
# (before TensorFlow is imported), which on a host capped at a fraction of a core with a cold
# page cache can take tens of seconds, so the limit is generous. A daemon that dies is no
# longer waited for: launchers keep Open MPI's daemons attached (emulated_cluster.py, mpirun_args),
# so mpirun sees it exit and fails the run at once with the daemon's own error. Measured
# cause of the old stalls: daemonized orteds lost on the way (5 of 65 launches on 4 hosts),
# which left mpirun waiting forever; none in 100 attached launches.
STARTUP_S = 300.0
EXIT_GRACE_S = 60.0  # once rank 0 handed over its result, how long the ranks get to exit


def run_mpirun(spec: LaunchSpec, *, timeout_s: float, layout: RankLayout,
               on_progress: Optional[Callable[[int, int], None]] = None, echo: bool = False,
               result=None, log_label: str = "launch") -> str:
    """Run one launch to completion; return its stdout. Raise RunFailed naming the failed rank
    in one line, which names the log file that keeps the launch's whole output (every rank's
    tracebacks included); the log of a launch that succeeded is removed.

    ``result`` (a bench.rank.result.ResultReceiver) collects rank 0's RALP-RESULT lines from
    the output; a launch that exits 0 without all of them fails. Once it is complete, a job
    that does not exit within EXIT_GRACE_S (a rank stuck in MPI_Finalize or in TF's shutdown)
    is killed and the result kept: the measurement is complete."""
    log_path = log_file(log_label)
    with open(log_path, "w") as log:
        try:
            output = _run_logged(spec, timeout_s, layout, on_progress, echo, result, log)
        except RunFailed as exc:
            raise type(exc)(f"{one_line(str(exc))}; full output: {log_path}") from None
    os.unlink(log_path)
    return output


def _run_logged(spec, timeout_s, layout, on_progress, echo, result, log) -> str:
    env = {**os.environ, **BASE_ENV, **spec.env}
    world = layout.world
    since = time.monotonic()
    oom_killed = (lambda pid: kernel_log.oom_killed(pid, since)) if spec.this_machine else None
    proc = processes.popen(spec.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1)
    lines: deque = deque(maxlen=400)
    phases: Dict[int, str] = {}
    reader = threading.Thread(target=_pump, args=(proc, lines, phases, on_progress, echo, log, result),
                              daemon=True)
    reader.start()
    started = time.monotonic()
    deadline = started + timeout_s
    finished_at = None
    try:
        while proc.poll() is None:
            processes.raise_if_interrupted()
            if len(phases) < world and time.monotonic() - started > STARTUP_S:
                _stop_launch(proc)
                reader.join(5)
                missing = [layout.describe(r) for r in range(world) if r not in phases]
                raise LaunchStalled(f"mpirun did not start {', '.join(missing)} within {STARTUP_S:.0f}s")
            if result is not None and finished_at is None and result.complete:
                finished_at = time.monotonic()
            if finished_at is not None and time.monotonic() - finished_at > EXIT_GRACE_S:
                lines.append(f"ralp-bench: note: ranks did not exit {EXIT_GRACE_S:.0f}s after the result; "
                             "stopped them\n")
                _stop_launch(proc)
                reader.join(5)
                return "".join(lines)
            if time.monotonic() > deadline:
                _stop_launch(proc)
                reader.join(5)
                raise RunFailed(f"run exceeded its {timeout_s:.0f}s deadline and was stopped; "
                                f"{diagnose(''.join(lines), layout, oom_killed)}{_where(phases, layout)}")
            time.sleep(0.1)
    except KeyboardInterrupt:
        _stop_launch(proc)
        raise
    finally:
        _stop_launch(proc)
    reader.join(5)
    output = "".join(lines)
    if proc.returncode != 0:
        where = _where(phases, layout) if "exceeded" in output else ""
        raise RunFailed(diagnose(output, layout, oom_killed) + where)
    if result is not None and not result.complete:
        raise RunFailed(f"{layout.describe(0)} ended without handing over its whole result: {result.missing()}")
    return output


def _where(phases: Dict[int, str], layout: RankLayout) -> str:
    """'; last phase: rank 0 (chief 0) waiting for all TF servers, ...' for a hung run."""
    if not phases:
        return ""
    return "; last phase: " + ", ".join(f"{layout.describe(r)} {phases[r]}"
                                         for r in sorted(phases))


_MARKER = re.compile(r"(?=RALP-(?:PHASE|PROGRESS|RESULT) )")


def _pump(proc, lines, phases, on_progress, echo, log, result=None):
    started = time.monotonic()
    for raw in proc.stdout:
        log.write(raw)
        # Open MPI forwards each rank's output in chunks, and two ranks' lines can meet on one
        # line: a marker is read wherever it starts.
        for line in (_MARKER.split(raw) if "RALP-" in raw else [raw]):
            if not line:
                continue
            if line.startswith("RALP-RESULT "):
                if result is not None:
                    result.feed(line)
                continue
            if line.startswith("RALP-PHASE "):
                _, rank, what = (line.rstrip("\n").split(" ", 2) + [""])[:3]
                if rank.isdigit():
                    phases[int(rank)] = what
                    if echo:  # --verbose: where each rank's start-up time goes
                        sys.stderr.write(f"[{time.monotonic() - started:6.1f}s] rank {rank}: {what}\n")
                continue
            if line.startswith("RALP-PROGRESS "):
                numbers = line.split()[1:3]
                if on_progress and len(numbers) == 2 and all(n.isdigit() for n in numbers):
                    on_progress(*map(int, numbers))
                continue
            lines.append(line)
            if echo:
                sys.stderr.write(line)


def _stop_launch(proc):
    """Stop the launch: mpirun and every rank it started (they share its session, not its
    process group: bench/launch/processes.py), then reap mpirun."""
    processes.stop(lambda: processes.session_members(proc.pid))
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
