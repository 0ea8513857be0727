"""A real cluster from a hostfile: the first host carries the chief and PS 0.

Hostfile lines are Open MPI's: ``host [slots=N]``. Ranks are placed in role
order (bench.launch.base.place_ranks) with ``-H host:count,...``; mpirun
reaches the hosts over ssh as usual (its rsh agent comes from the site's
Open MPI settings, or ``--mpirun-arg``). ``--network CIDR`` restricts MPI and the
TF servers to the cluster interface on multi-homed hosts.

Environment: ranks started over ssh get sshd's environment, not the driver's, so the
variables a GPU cluster needs are forwarded by name (``forwarded_env``) and ``--env`` adds
more; rows record the names forwarded, never the values (they may hold secrets).

Firewall: while the launcher's ``with`` lasts, the run's ports accept connections only from
the cluster (firewall.py), unless ``--no-firewall``.

Slurm: slurm.py's SlurmLauncher is this launcher on an allocation's nodes instead of a hostfile's.
"""
import ipaddress
import os
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from bench.core.errors import UserError, one_line
from bench.launch import link_probe
from bench.launch.base import BASE_ENV, LaunchSpec, Launcher, mpirun_path, place_ranks, worker_counts
from bench.launch.firewall import Firewall
from ralp.links import LinkSpec

# Forwarded (-x) when set on the driver: the libraries, paths and tuning of CUDA, NCCL, UCX and
# Horovod, and the suite's own settings (RALP_STRATEGY_MODULES, RALP_CALIBRATION, ...). OMPI_MCA_*
# are not listed: mpirun hands its own MCA environment to every daemon and rank itself.
FORWARD_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")
FORWARD_PREFIXES = ("NCCL_", "CUDA_", "HOROVOD_", "UCX_", "RALP_")


def read_hostfile(path: str) -> List[Tuple[str, int]]:
    if not path or not os.path.isfile(path):
        raise UserError(f"hostfile {path!r} not found; pass --hostfile FILE with lines like 'node1 slots=4'")
    hosts = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            slots = 1
            for word in words[1:]:
                key, _, value = word.partition("=")
                if key in ("slots", "max_slots") and value.isdigit():
                    slots = int(value)
                else:
                    raise UserError(f"{path}:{number}: cannot read {word!r}; expected 'host slots=N'")
            hosts.append((words[0], slots))
    if not hosts:
        raise UserError(f"hostfile {path} lists no hosts")
    return hosts


def parse_env(specs: Optional[List[str]], environ=None) -> Dict[str, str]:
    """``--env NAME=VALUE`` / ``--env NAME`` (the driver's value) as {name: value}."""
    environ = os.environ if environ is None else environ
    out = {}
    for spec in specs or ():
        name, has_value, value = spec.partition("=")
        if not name.isidentifier():
            raise UserError(f"--env {spec!r}: expected NAME=VALUE or NAME (a variable set here), "
                            "e.g. --env NCCL_DEBUG=INFO")
        if not has_value:
            if name not in environ:
                raise UserError(f"--env {name}: {name} is not set here; give its value with --env {name}=VALUE")
            value = environ[name]
        out[name] = value
    return out


def forwarded_env(extra: Dict[str, str], environ=None) -> Dict[str, str]:
    """Every variable the ranks get from the driver: the defaults that are set here, then ``extra``."""
    environ = os.environ if environ is None else environ
    picked = {k: v for k, v in environ.items() if k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES)}
    return {**picked, **extra}


def parse_mpirun_args(specs: Optional[List[str]]) -> List[str]:
    """Each ``--mpirun-arg`` split as a shell would: "--mca plm_rsh_agent 'ssh -F cfg'" is three words."""
    try:
        return [word for spec in specs or () for word in shlex.split(spec)]
    except ValueError as exc:
        raise UserError(f"--mpirun-arg: cannot split {specs!r} ({exc}); check its quotes") from None


class HostsLauncher(Launcher):
    mode = "hosts"

    def __init__(self, hostfile: str, network: Optional[str] = None, link=None,
                 env: Optional[Dict[str, str]] = None, mpirun_args: Optional[List[str]] = None,
                 firewall: bool = True):
        self.configure(read_hostfile(hostfile), network, link, env, mpirun_args, firewall)

    def configure(self, hosts: List[Tuple[str, int]], network: Optional[str], link,
                  env: Optional[Dict[str, str]], mpirun_args: Optional[List[str]], firewall: bool = True):
        """``hosts``: (name, slots) in placement order (a hostfile's; slurm.py: an allocation's);
        ``link``: the LinkSpec the user states for the real NICs (None: not stated); ``env``:
        the ``--env`` variables; ``mpirun_args``: extra words for mpirun, before the program;
        ``firewall``: close the run's ports to strangers while it goes (firewall.py)."""
        self.hosts = hosts
        self.network = network
        self.link = link
        # Fixed at start, so every launch forwards the same; mpirun runs with BASE_ENV on top.
        self.env = forwarded_env(env or {}, {**os.environ, **BASE_ENV})
        self.mpirun_args = list(mpirun_args or ())
        self.firewall = Firewall([h for h, _ in hosts], self.once_per_host, self.env) if firewall else None
        self._checks = link_probe.LinkChecks(lambda: ProbedHosts(self))

    def __enter__(self):
        if self.firewall:
            self.firewall.__enter__()
        return self

    def __exit__(self, *exc):
        if self.firewall:
            self.firewall.__exit__(*exc)
        return False

    def mpirun_argv(self, counts: List[int], program: List[str]) -> List[str]:
        """mpirun starting ``program`` ``counts[i]`` times on host i, as every launch of the run is started."""
        argv = [mpirun_path()] + self.placement_args([h for h, _ in self.hosts], counts) + ["--bind-to", "none"]
        for name in sorted(self.env):
            argv += ["-x", name]
        if self.network:
            argv += ["--mca", "btl_tcp_if_include", self.network, "--mca", "oob_tcp_if_include", self.network]
        if os.geteuid() == 0:
            argv.insert(1, "--allow-run-as-root")
        return argv + self.mpirun_args + program

    def calibration_spec(self, layout) -> Tuple[str, LaunchSpec]:
        """The first worker host of ``layout`` and the mpirun that starts one program there (its
        argv still to be appended), as that host's ranks are started: the cost model's compute is
        measured on a machine that runs workers, with its CPUs and the ranks' environment."""
        workers = worker_counts(layout, self.host_slots())
        first = next(i for i, n in enumerate(workers) if n)
        counts = [int(i == first) for i in range(len(self.hosts))]
        return self.hosts[first][0], LaunchSpec(self.mpirun_argv(counts, []), env=dict(self.env))

    def once_per_host(self, program: List[str]) -> List[str]:
        return self.mpirun_argv([1] * len(self.hosts), program)

    def workers_per_host(self, layout) -> Optional[int]:
        return max(worker_counts(layout, self.host_slots()))

    def spec(self, layout, rank_argv) -> LaunchSpec:
        counts = place_ranks(layout, self.host_slots())
        if self.network:
            rank_argv = rank_argv + ["--network", self.network]
        return LaunchSpec(self.mpirun_argv(counts, [sys.executable, "-m", "bench.run"] + rank_argv),
                          env=dict(self.env))

    @staticmethod
    def placement_args(names: List[str], counts: List[int]) -> List[str]:
        """mpirun options that put ``counts[i]`` ranks on host ``names[i]``, in rank order."""
        return ["-H", ",".join(f"{h}:{n}" for h, n in zip(names, counts) if n), "--map-by", "slot"]

    def measure_link(self):
        """Where no rate was stated (``--bandwidth``), the links' line rate measured from the first
        worker host to the PS host (link_probe.measure_line_rate: one TCP flow), so the cost model
        prices the NICs the run has, not a default, and the rows record it as measured; the same
        rate for every host and no added latency (the probe measures neither: state them with
        --ps-bandwidth and --latency). Called by the driver before the run starts; one host has
        no link to measure."""
        if self.link is not None or len(self.hosts) < 2:
            return
        try:
            rate = link_probe.measure_line_rate(ProbedHosts(self), 1, 0)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            raise UserError(f"could not measure the link from {self.hosts[1][0]} to {self.hosts[0][0]} "
                            f"({one_line(str(exc), 200)}); state it with --bandwidth") from None
        self.link = LinkSpec(rate, measured=True)

    def host_slots(self) -> List[int]:
        return [s for _, s in self.hosts]

    def link_checks(self):
        """The real NICs' check against the rate the user stated (``--bandwidth``; without it
        there is no line rate to compare with), its programs started by mpirun as the ranks are."""
        return self._checks if self.link is not None and len(self.hosts) >= 2 else None

    def cluster_fields(self) -> Dict:
        links = self.link.row_fields() if self.link else {"link_bps": None, "ps_link_bps": None, "latency_s": None}
        return {"cluster_mode": self.mode, "hosts": len(self.hosts), **links,
                "env_forwarded": ",".join(sorted(self.env)) or None}


@dataclass(frozen=True)
class ProbedHost:
    ip: str
    bandwidth_bps: float


class ProbedHosts:
    """A HostsLauncher's hosts as link_probe.py drives an emulated cluster: each host's address
    and stated line rate (host 0's: the PS link), a program started on one host, an mpirun over
    some of them."""

    def __init__(self, launcher: HostsLauncher):
        self.launcher = launcher
        link = launcher.link
        rates = (link.ps_link_bps, link.worker_bps) if link else (0.0, 0.0)  # no link yet: measure_link measures it
        self.hosts = [ProbedHost(_address(name, launcher.network), rates[0] if i == 0 else rates[1])
                      for i, (name, _) in enumerate(launcher.hosts)]
        self.subnet = launcher.network or ""

    def exec_argv(self, host_index: int, argv: List[str]) -> List[str]:
        return self.launcher.mpirun_argv([int(i == host_index) for i in range(len(self.hosts))], list(argv))

    def mpirun_prefix(self) -> List[str]:
        return []

    def mpirun_args(self, slots: List[int]) -> List[str]:
        return self.launcher.mpirun_argv(slots, [])[1:]


def _address(host: str, network: Optional[str]) -> str:
    """The IPv4 address ``host`` is reached at (in ``network`` where given)."""
    try:
        found = sorted({info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)})
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve host {host!r} ({exc}); fix the hostfile or /etc/hosts") from None
    if network:
        inside = [a for a in found if ipaddress.ip_address(a) in ipaddress.ip_network(network, strict=False)]
        found = inside or found
    return found[0]
