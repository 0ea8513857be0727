"""Slurm: runs inside an allocation, and the files of an emulated Slurm for the tests.

Why: most GPU clusters hand out machines through Slurm, and a job must use the nodes it was
given, not a hostfile. Inside an allocation (``sbatch``, ``salloc``: ``SLURM_JOB_ID`` is set)
``SlurmLauncher`` takes the hosts from ``scontrol show hostnames "$SLURM_JOB_NODELIST"`` and
the workers each host may take from ``SLURM_TASKS_PER_NODE`` (``--ntasks-per-node``; 1 per
node when unset), then launches as HostsLauncher does (hosts.py: the same placement,
environment forwarding and row fields) with a plain ``mpirun``: Open MPI built with Slurm
support (Debian's is) sees the allocation and starts its daemons with ``srun`` itself, so no
ssh between the nodes is needed. Tasks, not CPUs, are the slots: ``--exclusive`` gives every
CPU of a node, and one TensorFlow worker per CPU is not what anyone asks for.

The emulated Slurm (``ralp-bench cluster up --ssh --slurm``, bench/launch/ssh_hosts.py) is a
real one: ``munged`` on every machine with one key, ``slurmctld`` on the login host and
``slurmd -D -N <host>`` on each host, from the files ``write_emulated_files`` puts under the
cluster's directory. The settings are those that work in namespaces on one machine
(../shared/notes/feasibility.md): per-node spool, pid and log files (``%n``), Linux process
tracking and no task or accounting plugins (no cgroup hierarchy of Slurm's own), CPUs no more
than the machine's cores (else nodes go ``inval``), each node's own address.
"""
import os
import re
import shutil
import subprocess
import time
from typing import Callable, Dict, List, Optional, Tuple

from bench.core.errors import UserError
from bench.launch import netns as nx
from bench.launch.hosts import HostsLauncher

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("scontrol", "sinfo", "sbatch", "srun")
PARTITION = "main"
MUNGE_SOCKET = "/run/munge/munge.socket.2"  # the clients' default; /run is private to each machine
SITE_CONF_DIR = "/etc/slurm"  # where Debian's Slurm commands read slurm.conf
OUTSIDE = ("--cluster slurm runs inside a Slurm allocation (SLURM_JOB_ID is not set): submit it with "
           "`sbatch examples/slurm/compare.sbatch` or run it under `salloc -N 3`")


# ---- the allocation ---------------------------------------------------------------------

def job_id(environ=None) -> Optional[str]:
    """The Slurm job this process runs in, None outside any allocation."""
    environ = os.environ if environ is None else environ
    return environ.get("SLURM_JOB_ID") or None


def expand_counts(spec: str) -> List[int]:
    """Slurm's compressed per-node counts as a list: '2(x3),1' is [2, 2, 2, 1]."""
    counts = []
    for part in filter(None, (spec or "").split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise UserError(f"cannot read Slurm's per-node count {spec!r}; expected e.g. '2(x3),1'")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def hostnames(nodelist: str, environ=None) -> List[str]:
    """``scontrol show hostnames``: Slurm's own expansion of a node list such as 'h[0-2]'
    (``environ``: the environment scontrol runs with, SLURM_CONF included; None: this one)."""
    environ = os.environ if environ is None else environ
    if not shutil.which("scontrol", path=environ.get("PATH")):
        raise UserError("scontrol not found; run where Slurm's commands are installed (a login or compute node)")
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60,
                         env=dict(environ))
    names = out.stdout.split()
    if out.returncode != 0 or not names:
        error = " ".join(out.stderr.split())[-200:]
        raise UserError(f"`scontrol show hostnames {nodelist}` failed ({error or out.returncode}); "
                        "check that Slurm's configuration is readable here (scontrol show config)")
    return names


def allocation_hosts(environ=None) -> List[Tuple[str, int]]:
    """(host, slots) for every node of this process's allocation, in Slurm's order."""
    environ = os.environ if environ is None else environ
    if not job_id(environ):
        raise UserError(OUTSIDE)
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise UserError(f"Slurm job {job_id(environ)} has no SLURM_JOB_NODELIST; run inside the job's batch "
                        "script or salloc shell, where Slurm sets it")
    names = hostnames(nodelist, environ)
    slots = expand_counts(environ.get("SLURM_TASKS_PER_NODE", "")) or [1] * len(names)
    if len(slots) != len(names):
        raise UserError(f"SLURM_TASKS_PER_NODE={environ.get('SLURM_TASKS_PER_NODE')!r} does not list the "
                        f"{len(names)} nodes of {nodelist}; unset it or submit with --ntasks-per-node")
    return list(zip(names, slots))


class SlurmLauncher(HostsLauncher):
    """HostsLauncher on the allocation's nodes; Open MPI reaches them through Slurm."""

    mode = "slurm"

    def __init__(self, network: Optional[str] = None, link=None, env: Optional[Dict[str, str]] = None,
                 mpirun_args: Optional[List[str]] = None, environ=None, firewall: bool = True):
        self.job = job_id(environ)
        self.configure(allocation_hosts(environ), network, link, env, mpirun_args, firewall)

    @staticmethod
    def placement_args(names: List[str], counts: List[int]) -> List[str]:
        """Inside an allocation mpirun takes each node's slots from Slurm and ignores ``-H
        host:N`` (measured: h0:1,h1:2,h2:2 placed 2,2,1), so every rank's host is named in rank
        order and mapped in sequence; oversubscribe, since the chief and PS 0 share the first
        node whatever its task count."""
        hosts = [h for h, n in zip(names, counts) for _ in range(n)]
        return ["-np", str(len(hosts)), "-H", ",".join(hosts), "--map-by", "seq", "--oversubscribe"]


# ---- an emulated Slurm --------------------------------------------------------------------

def available() -> Tuple[bool, str]:
    """(True, "") when Slurm's daemons and commands and munge are installed, else (False, the fix)."""
    missing = [tool for tool in DAEMONS + CLIENTS if not shutil.which(tool, path=os.environ.get("PATH", "")
                                                                       + ":/usr/sbin:/sbin")]
    if missing:
        return False, (f"{', '.join(missing)} not found; install Slurm and munge "
                       "(apt-get install -y --no-install-recommends slurm-wlm munge) or run ci/setup.sh")
    return True, ""


def paths(directory: str) -> dict:
    """Where an emulated Slurm's files live under the cluster's directory (the same on every machine)."""
    s = os.path.join(directory, "slurm")
    return {"dir": s, "etc": os.path.join(s, "etc"), "conf": os.path.join(s, "etc", "slurm.conf"),
            "munge": os.path.join(s, "munge"), "key": os.path.join(s, "munge", "munge.key"),
            "state": os.path.join(s, "state"), "spool": os.path.join(s, "spool"), "run": os.path.join(s, "run"),
            "log": os.path.join(s, "log"), "start": os.path.join(s, "start.sh")}


def machine_cpus() -> int:
    """What each node may claim: this machine's cores (a node claiming more goes 'inval')."""
    return max(1, len(os.sched_getaffinity(0)))


def slurm_conf(cluster: str, p: dict, controller: Tuple[str, str], nodes: List[Tuple[str, str]], cpus: int) -> str:
    """slurm.conf for a controller (name, address) and compute nodes [(name, address)]."""
    name, addr = controller
    lines = [f"# Generated by ralp-bench for emulated cluster {cluster} (bench/launch/slurm.py)",
             f"ClusterName={cluster}", f"SlurmctldHost={name}({addr})",
             "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
             "MpiDefault=none", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
             "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
             "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
             f"StateSaveLocation={p['state']}", f"SlurmdSpoolDir={p['spool']}/%n",
             f"SlurmctldPidFile={p['run']}/slurmctld.pid", f"SlurmdPidFile={p['run']}/slurmd-%n.pid",
             f"SlurmctldLogFile={p['log']}/slurmctld.log", f"SlurmdLogFile={p['log']}/slurmd-%n.log",
             "TmpFS=/tmp", "MailProg=/bin/true", "KillWait=5", "InactiveLimit=0"]
    lines += [f"NodeName={n} NodeAddr={a} CPUs={cpus} State=UNKNOWN" for n, a in nodes]
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


# start.sh DIR HOST: run by a machine's init (ssh_hosts.py) inside its namespaces, before its
# sshd; leaves munged and the machine's Slurm daemon running in the background. /etc/slurm is
# replaced by the cluster's, as a site deploys it, so sinfo/sbatch work without SLURM_CONF. cd /:
# slurmstepd returns to the daemon's working directory, which must exist on every machine.
_START = r"""#!/bin/sh
# Generated by ralp-bench: this machine's munged and Slurm daemon (bench/launch/slurm.py).
set -e
d=$1; host=$2; s=$d/slurm
export PATH="$PATH:/usr/sbin:/sbin"
cd /
mount -n --bind "$s/etc" """ + SITE_CONF_DIR + r"""
mkdir -p /run/munge
munged --foreground --force --key-file="$s/munge/munge.key" --socket=""" + MUNGE_SOCKET + r""" \
  --pid-file=/run/munge/munged.pid --seed-file="$s/munge/$host.seed" >>"$s/log/munged-$host.log" 2>&1 &
i=0; until [ -S """ + MUNGE_SOCKET + r""" ]; do
  i=$((i+1)); [ $i -lt 200 ] || { echo "munged did not start: $(tail -c 300 "$s/log/munged-$host.log")" >&2; exit 1; }
  sleep 0.05
done
if [ "$host" = "__CONTROLLER__" ]; then
  slurmctld -D -i >>"$s/log/slurmctld.out" 2>&1 &
else
  mkdir -p "$s/spool/$host"
  slurmd -D -N "$host" >>"$s/log/slurmd-$host.out" 2>&1 &
fi
"""


def write_emulated_files(directory: str, cluster: str, controller: Tuple[str, str], nodes: List[Tuple[str, str]]):
    """slurm.conf, one munge key for every machine, the daemons' directories and start.sh."""
    p = paths(directory)
    for key in ("etc", "state", "spool", "run", "log"):
        os.makedirs(p[key], mode=0o755, exist_ok=True)
    os.makedirs(p["munge"], mode=0o700, exist_ok=True)
    with open(os.open(p["key"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as fh:
        fh.write(os.urandom(1024))
    with open(p["conf"], "w") as fh:
        fh.write(slurm_conf(cluster, p, controller, nodes, machine_cpus()))
    with open(p["start"], "w") as fh:
        fh.write(_START.replace("__CONTROLLER__", controller[0]))
    os.chmod(p["start"], 0o755)


def wait_until_idle(directory: str, run_on_controller: Callable[[List[str]], subprocess.CompletedProcess],
                    nodes: List[str], timeout_s: float = 60.0) -> Dict[str, str]:
    """Return {node: state} once ``sinfo`` on the controller shows every node idle; else raise
    naming the nodes' states and the controller's log."""
    deadline = time.monotonic() + timeout_s
    states: Dict[str, str] = {}
    while True:
        out = run_on_controller(["sinfo", "-h", "-N", "-o", "%N %T"])
        if out.returncode == 0:
            states = dict(line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)
            if all(states.get(n) == "idle" for n in nodes):
                return states
        if time.monotonic() > deadline:
            raise nx.NetnsError(f"emulated Slurm: nodes not idle after {timeout_s:.0f}s "
                            f"({states or ' '.join(out.stderr.split())[-200:]}); "
                            f"slurmctld's log: {_tail(os.path.join(paths(directory)['log'], 'slurmctld.log'))}")
        time.sleep(0.3)


def _tail(path: str, chars: int = 300) -> str:
    try:
        with open(path) as fh:
            return " ".join(fh.read().split())[-chars:] or "empty"
    except OSError:
        return "none"
