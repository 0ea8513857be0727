"""A cluster of emulated hosts on one machine: network namespaces, a bridge, tc-shaped links.

Why: RALP's claim is about bytes on a constrained network, so the benchmark
needs links of a chosen bandwidth even on a laptop. Each host is a network
namespace ``<name>-h<i>`` with one NIC (``eth0``, address 10.213.0.(10+i)/24);
the other end of its veth sits in a switch namespace ``<name>-sw`` on a
bridge. A tbf qdisc on *both* ends limits the host's upload and download
(host 0, the PS, may get its own rate). Nothing is created in the root
namespace and the subnet never leaves the namespaces we create.

Lifecycle: a state file (``/run/ralp-bench/<name>.json``) is written before
anything is created and removed after everything is gone, recording the owner
pid (or ``manual`` for `ralp-bench cluster up`). Every bring-up first removes
clusters whose owner died (SIGKILL, crash); a failed bring-up removes what it
made; the context manager tears down on exceptions, SIGINT and SIGTERM.

Compute: each host also gets a CPU cgroup capped at ``cpus_per_host`` cores
(default: this machine's cores / hosts, so the hosts together never
oversubscribe it; see bench/launch/cgroups.py). Everything that runs on a
host enters its namespace *and* its group: mpirun on host 0, the daemons the
rsh agent starts elsewhere, and ``exec_argv`` commands. The groups are made,
recorded and removed with the namespaces.
"""
import fcntl
import json
import os
import subprocess
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Optional

from bench.errors import UserError
from bench.launch import cgroups as cg
from bench.launch import netns as nx

STATE_DIR = "/run/ralp-bench"
SUBNET = "10.213.0.0/24"
SUBNET_PREFIX = "10.213.0."
FIRST_HOST_OCTET = 10
HOST_IFACE = "eth0"
BRIDGE = "ralpbr"  # also the signature that marks a switch namespace as ours
MAX_HOSTS = 240
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


@dataclass(frozen=True)
class Host:
    """One emulated host: its namespace, address and NIC name inside that namespace."""

    name: str
    netns: str
    ip: str
    iface: str
    bandwidth_bps: float = 0.0
    cpu_group: Optional[str] = None  # cgroup directory capping this host's CPU (None: uncapped)


def _state_path(name):
    return os.path.join(STATE_DIR, f"{name}.json")


def _agent_path(name):
    return os.path.join(STATE_DIR, f"{name}-rsh-agent.sh")


@contextmanager
def _state_lock():
    """Serialise bring-up and cleanup across processes (one flock on the state dir)."""
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(os.path.join(STATE_DIR, ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _process_start_time(pid):
    """Kernel start time of ``pid`` (clock ticks since boot), None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_alive(state):
    """True for manual clusters and for clusters whose owner process still runs."""
    if state.get("manual"):
        return True
    pid = state.get("owner_pid")
    return pid is not None and _process_start_time(pid) == state.get("owner_start")


def read_states():
    """All recorded clusters: {name: state dict}."""
    states = {}
    if not os.path.isdir(STATE_DIR):
        return states
    for fname in sorted(os.listdir(STATE_DIR)):
        if fname.endswith(".json"):
            try:
                with open(os.path.join(STATE_DIR, fname)) as fh:
                    states[fname[:-5]] = json.load(fh)
            except (OSError, ValueError):
                states[fname[:-5]] = {"name": fname[:-5], "namespaces": []}
    return states


def cluster_namespaces(name, all_ns=None):
    """Existing namespaces that belong to cluster ``name`` (``name-sw``, ``name-h<i>``)."""
    pattern = re.compile(rf"^{re.escape(name)}-(sw|h\d+)$")
    return [ns for ns in (nx.netns_list() if all_ns is None else all_ns) if pattern.match(ns)]


def find_stale(names=()):
    """Names of clusters to remove: owner dead, or namespaces of ours with no state file.

    Namespaces are listed *before* state files are read: a cluster writes its
    state before creating namespaces, so one being built is never taken for
    an orphan. A namespace set without state counts as ours when its switch
    namespace holds our bridge, or when its name is in ``names``.
    """
    all_ns = nx.netns_list()
    states = read_states()
    stale = [n for n, st in states.items() if not owner_alive(st)]
    for ns in all_ns:
        match = re.match(r"^([a-z][a-z0-9]*)-(sw|h\d+)$", ns)
        if not match or match.group(1) in states or match.group(1) in stale:
            continue
        cname = match.group(1)
        if cname in names or (f"{cname}-sw" in all_ns and BRIDGE in nx.link_names(f"{cname}-sw")):
            stale.append(cname)
    for path in cg.groups_of():  # a group outlives its namespaces only if teardown was cut short
        cname = cg.cluster_of(path)
        if (cname and cname not in states and cname not in stale and not cluster_namespaces(cname, all_ns)
                and (cname in names or not cg.pids_in(path))):  # a calibration's group is busy
            stale.append(cname)
    return stale


def remove_cluster(name):
    """Kill processes in, and delete, every namespace of ``name``; then drop its state and agent."""
    state = read_states().get(name, {})
    namespaces = set(state.get("namespaces", [])) | set(cluster_namespaces(name))
    survivors = []
    # Hosts first (that is where processes run), switch last.
    for ns in sorted(namespaces, key=lambda n: n.endswith("-sw")):
        survivors += nx.delete_netns(ns)
    groups = {h.get("cpu_group") for h in state.get("hosts", [])} | set(cg.groups_of(name))
    for path in sorted(g for g in groups if g):
        survivors += cg.remove(path)
    for path in (_state_path(name), state.get("rsh_agent"), _agent_path(name)):
        if path and os.path.exists(path):
            os.remove(path)
    return survivors


def destroy_cluster(name):
    """remove_cluster under the cross-process lock (for `cluster down`)."""
    with _state_lock():
        return remove_cluster(name)


def cleanup_stale(names=()):
    """Remove every stale cluster (see find_stale); returns their names."""
    with _state_lock():
        stale = find_stale(names)
        for name in stale:
            remove_cluster(name)
    return stale


def _agent_script(hosts):
    """An rsh agent for mpirun: `AGENT [opts] ADDR CMD...` runs CMD inside ADDR's namespace and CPU group."""
    cases = "\n".join(f"  {h.ip}) ns={h.netns}; cg={h.cpu_group or ''} ;;" for h in hosts)
    return f"""#!/bin/sh
# Generated by ralp-bench: mpirun's rsh agent for an emulated cluster.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "ralp-bench rsh agent: $host is not a host of this emulated cluster" >&2; exit 255 ;;
esac
[ -z "$cg" ] || echo $$ > "$cg/cgroup.procs" || exit 255
exec nsenter --net=/run/netns/"$ns" unshare --uts sh -c "echo $host > /proc/sys/kernel/hostname && $*"
"""


# Joins a CPU group (its cgroup.procs file, or '' for none), enters a network namespace and a
# UTS namespace whose hostname is the host's address: sh -c ENTER PROCS NS ADDR ARGV...
# - nsenter --net, not `ip netns exec`: the latter also makes a mount namespace with a fresh
#   /sys, where /sys/fs/cgroup is gone, so mpirun inside host 0 could not put the daemons it
#   starts on other hosts into their groups;
# - a hostname per host, as real hosts have: software that binds to "this host's address" by
#   resolving its hostname (Gloo's device for Horovod's process sets in 0.28.1 ignores
#   HOROVOD_GLOO_IFACE) would otherwise get the machine's 127.0.x.1 on every host.
_ENTER = ('[ -z "$0" ] || echo $$ > "$0" || exit 126; ns=$1; addr=$2; shift 2; '
          'exec nsenter --net=/run/netns/"$ns" unshare --uts sh -c \'echo "$0" > /proc/sys/kernel/hostname && '
          'exec "$@"\' "$addr" "$@"')


def default_cpus_per_host(hosts):
    """This machine's cores shared evenly: together the hosts never oversubscribe it.
    0 (no cap) where this machine offers no CPU cgroups."""
    if not cg.available()[0]:
        return 0.0
    return cg.usable_cores() / max(1, hosts)


class EmulatedCluster:
    """N emulated hosts with shaped links; use as ``with EmulatedCluster(3, 1e9) as c:``.

    ``latency_s`` is the one-way host-to-host delay (half on each veth end;
    needs sch_netem). ``cpus_per_host``: each host's CPU cap in cores (None:
    cores / hosts; 0: no cap). ``manual=True`` records no owner, so the
    cluster outlives this process until `ralp-bench cluster down`.
    """

    def __init__(self, hosts, bandwidth_bps, latency_s=0.0, ps_bandwidth_bps=None, name="ralp",
                 *, manual=False, cpus_per_host=None):
        if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
            raise UserError(f"--hosts must be an integer from 1 to {MAX_HOSTS}, got {hosts!r}")
        for label, value in (("bandwidth", bandwidth_bps), ("ps bandwidth", ps_bandwidth_bps)):
            if value is not None and not value > 0:
                raise UserError(f"{label} must be positive, e.g. 1gbit; got {value!r}")
        if latency_s < 0:
            raise UserError(f"latency must be >= 0, e.g. 0.1ms; got {latency_s!r}")
        if cpus_per_host is not None and (not isinstance(cpus_per_host, (int, float)) or isinstance(cpus_per_host, bool)
                                          or not cpus_per_host >= 0):
            raise UserError(f"--cpus-per-host must be a number of cores >= 0 (0: no cap), got {cpus_per_host!r}")
        if not _NAME_RE.match(name):
            raise UserError(f"cluster name {name!r} must be 1-12 lowercase letters/digits starting with a letter")
        self.name = name
        self.bandwidth_bps = float(bandwidth_bps)
        self.ps_bandwidth_bps = float(ps_bandwidth_bps) if ps_bandwidth_bps else None
        self.latency_s = float(latency_s)
        self.manual = manual
        self.cpus_per_host = default_cpus_per_host(hosts) if cpus_per_host is None else float(cpus_per_host)
        if self.cpus_per_host:
            ok, reason = cg.available()
            if not ok:
                raise UserError(f"per-host CPU quotas unavailable: {reason}")
        self.subnet = SUBNET
        self.switch_netns = f"{name}-sw"
        self.state_file = _state_path(name)
        self.rsh_agent = _agent_path(name)
        self.hosts = [
            Host(name=f"h{i}", netns=f"{name}-h{i}", ip=f"{SUBNET_PREFIX}{FIRST_HOST_OCTET + i}",
                 iface=HOST_IFACE,
                 bandwidth_bps=self.ps_bandwidth_bps if (i == 0 and self.ps_bandwidth_bps) else self.bandwidth_bps,
                 cpu_group=(os.path.join(cg.hierarchy()[1], cg.group_name(name, f"h{i}"))
                            if self.cpus_per_host else None))
            for i in range(hosts)
        ]
        self.is_up = False
        self._saved_handlers = None
        self._pending_signal = None

    @classmethod
    def attach(cls, name="ralp"):
        """The cluster ``name`` that is already up (e.g. from `cluster up`), for running on it."""
        state = read_states().get(name)
        if not state or not state.get("hosts"):
            raise UserError(f"no emulated cluster named {name!r} is up; run `ralp-bench cluster up --name {name}`")
        c = cls(len(state["hosts"]), state["bandwidth_bps"], state.get("latency_s", 0.0),
                state.get("ps_bandwidth_bps"), name, manual=state.get("manual", False),
                cpus_per_host=state.get("cpus_per_host") or 0)
        c.is_up = True
        return c

    # ---- bring-up / teardown --------------------------------------------------

    def up(self):
        """Create namespaces, bridge, veths, addresses and qdiscs; all or nothing."""
        ok, reason = nx.can_emulate()
        if not ok:
            raise UserError(reason)
        with _state_lock():
            for stale in find_stale(names=(self.name,)):
                remove_cluster(stale)
            existing = read_states().get(self.name)
            if existing:
                owner = "manual" if existing.get("manual") else f"pid {existing.get('owner_pid')}"
                raise UserError(f"emulated cluster {self.name!r} is already up (owner {owner}); "
                                f"run `ralp-bench cluster down --name {self.name}` or choose another name")
            self._write_state()
            try:
                self._create()
            except BaseException as exc:
                with self._signals_deferred():
                    remove_cluster(self.name)
                if isinstance(exc, nx.NetnsError):
                    raise UserError(f"emulated cluster bring-up failed ({exc}); everything created was "
                                    "removed; check `ralp-bench doctor`") from exc
                raise
        self.is_up = True
        return self

    def _create(self):
        sw = self.switch_netns
        nx.add_netns(sw)
        nx.run_cmd(["ip", "-n", sw, "link", "set", "lo", "up"])
        nx.run_cmd(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge",
                    "stp_state", "0", "forward_delay", "0"])
        nx.run_cmd(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
        if self.latency_s > 0 and not nx.netem_available():
            raise UserError("--latency needs the kernel's netem qdisc (sch_netem), which this kernel "
                            "lacks; use --latency 0 or load it (modprobe sch_netem)")
        for host in self.hosts:
            port = host.name  # switch-side veth end, e.g. h0
            nx.add_netns(host.netns)
            nx.run_cmd(["ip", "-n", sw, "link", "add", port, "type", "veth",
                        "peer", "name", host.iface, "netns", host.netns])
            nx.run_cmd(["ip", "-n", sw, "link", "set", port, "master", BRIDGE, "up"])
            nx.run_cmd(["ip", "-n", host.netns, "link", "set", "lo", "up"])
            # No IPv6 link-local address: keeps router solicitations off the byte counters.
            nx.run_cmd(["ip", "-n", host.netns, "link", "set", host.iface, "addrgenmode", "none"])
            nx.run_cmd(["ip", "-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", host.iface])
            nx.run_cmd(["ip", "-n", host.netns, "link", "set", host.iface, "up"])
            half_delay = self.latency_s / 2
            nx.shape_link(host.netns, host.iface, host.bandwidth_bps, half_delay)  # host upload
            nx.shape_link(sw, port, host.bandwidth_bps, half_delay)  # host download
            if host.cpu_group:
                try:
                    cg.create(os.path.basename(host.cpu_group), self.cpus_per_host)
                except cg.CgroupError as exc:
                    raise nx.NetnsError(str(exc)) from exc
        with open(self.rsh_agent, "w") as fh:
            fh.write(_agent_script(self.hosts))
        os.chmod(self.rsh_agent, 0o755)
        self._wait_until_reachable()

    def _wait_until_reachable(self, timeout_s=20.0):
        """Return once host 0 reaches every other host and back.

        Right after creation a bridge port may drop the first packets; an MPI
        daemon whose first connection is lost dies silently and leaves mpirun
        waiting forever, so nothing is launched before the links carry traffic.
        """
        deadline = time.monotonic() + timeout_s
        for host in self.hosts[1:]:
            while True:
                ok = subprocess.run(["ip", "netns", "exec", self.hosts[0].netns, "ping", "-c", "1", "-W", "1",
                                     host.ip], capture_output=True).returncode == 0
                back = ok and subprocess.run(["ip", "netns", "exec", host.netns, "ping", "-c", "1", "-W", "1",
                                              self.hosts[0].ip], capture_output=True).returncode == 0
                if back:
                    break
                if time.monotonic() > deadline:
                    raise nx.NetnsError(f"emulated host {host.ip} unreachable from {self.hosts[0].ip} "
                                        f"after {timeout_s:.0f}s")
                time.sleep(0.2)

    def _write_state(self):
        state = {
            "name": self.name,
            "manual": self.manual,
            "owner_pid": None if self.manual else os.getpid(),
            "owner_start": None if self.manual else _process_start_time(os.getpid()),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "namespaces": [self.switch_netns] + [h.netns for h in self.hosts],
            "subnet": self.subnet,
            "bandwidth_bps": self.bandwidth_bps,
            "ps_bandwidth_bps": self.ps_bandwidth_bps,
            "latency_s": self.latency_s,
            "cpus_per_host": self.cpus_per_host,
            "rsh_agent": self.rsh_agent,
            "hosts": [asdict(h) for h in self.hosts],
        }
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=1)
        os.replace(tmp, self.state_file)

    def down(self):
        """Kill processes inside the hosts and delete every namespace (and with them veths, qdiscs)."""
        with self._signals_deferred(), _state_lock():
            survivors = remove_cluster(self.name)
        self.is_up = False
        if survivors:
            raise UserError(f"processes {survivors} in cluster {self.name!r} would not die; kill them and "
                            f"run `ralp-bench cluster down --name {self.name}`")

    # ---- context manager with signal-safe teardown ------------------------------

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._saved_handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            signal.signal(signal.SIGINT, self._raise_on_signal)
            signal.signal(signal.SIGTERM, self._raise_on_signal)
        try:
            return self.up()
        except BaseException:
            self._restore_handlers()
            raise

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.is_up:
                self.down()
        finally:
            self._restore_handlers()
        if self._pending_signal is not None and exc_type is None:
            self._raise_for(self._pending_signal)
        return False

    @staticmethod
    def _raise_for(signum):
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def _raise_on_signal(self, signum, frame):
        self._raise_for(signum)

    def _restore_handlers(self):
        if self._saved_handlers:
            for sig, handler in self._saved_handlers.items():
                signal.signal(sig, handler)
            self._saved_handlers = None

    @contextmanager
    def _signals_deferred(self):
        """Hold SIGINT/SIGTERM during teardown so a second Ctrl-C cannot leave half a cluster."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def remember(signum, frame):
            self._pending_signal = signum

        for sig in previous:
            signal.signal(sig, remember)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # ---- running things on the hosts ---------------------------------------------

    def exec_argv(self, host_index, argv):
        """``argv`` prefixed so that it runs inside host ``host_index``'s namespace and CPU group."""
        host = self.hosts[host_index]
        procs = os.path.join(host.cpu_group, "cgroup.procs") if host.cpu_group else ""
        return ["sh", "-c", _ENTER, procs, host.netns, host.ip] + list(argv)

    def mpirun_prefix(self):
        """mpirun itself must run inside host 0 (it then launches host 0's ranks locally)."""
        return self.exec_argv(0, [])

    def mpirun_args(self, slots):
        """mpirun options placing ``slots[i]`` ranks on host i, all traffic over the emulated links.

        Ranks fill hosts in order (host 0's slots first). Without ``-np`` mpirun
        starts sum(slots) ranks. Why each option:
        - plm_rsh_agent: our agent enters the target host's namespace;
        - plm_rsh_no_tree_spawn: mpirun starts every daemon itself (no hop through a daemon);
        - pml ob1 + btl tcp,self: UCX and shared memory would see one machine and bypass the links;
        - btl/oob_tcp_if_include SUBNET: only the emulated NICs, never a real interface;
        - bind-to none: every namespace sees the same cores; binding would pile ranks onto core 0;
        - allow-run-as-root (as root) and oversubscribe: more ranks than cores is normal here;
        - leave-session-attached: daemons stay children of the rsh agent instead of
          daemonizing; measured: 5 of 65 daemonized launches on 4 hosts lost a daemon silently
          and mpirun waited forever, 0 of 100 attached ones did (a failing daemon's error then
          reaches mpirun's output instead of /dev/null);
        - mpi_yield_when_idle: a rank waiting in MPI yields its core instead of spinning; Open MPI
          turns this on by itself only when it sees more ranks than slots, but a host capped at a
          fraction of a core is oversubscribed even with one rank.
        """
        if len(slots) > len(self.hosts) or any((not isinstance(n, int)) or n < 0 for n in slots) or sum(slots) < 1:
            raise UserError(f"slots {slots} do not fit {len(self.hosts)} emulated hosts "
                            "(one non-negative count per host, at least one rank)")
        placement = ",".join(f"{h.ip}:{n}" for h, n in zip(self.hosts, slots) if n > 0)
        args = ["--mca", "plm_rsh_agent", self.rsh_agent, "--mca", "plm_rsh_no_tree_spawn", "1",
                "--leave-session-attached",
                "-H", placement, "--map-by", "slot", "--bind-to", "none", "--oversubscribe",
                "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1",
                "--mca", "btl_tcp_if_include", self.subnet, "--mca", "oob_tcp_if_include", self.subnet]
        if os.geteuid() == 0:
            args.insert(0, "--allow-run-as-root")
        return args

    def cpu_stats(self):
        """{host name: cpu.stat of its group} (throttling), empty without quotas."""
        return {h.name: cg.read_cpu_stat(h.cpu_group) for h in self.hosts if h.cpu_group}

    def __repr__(self):
        return (f"EmulatedCluster(name={self.name!r}, hosts={len(self.hosts)}, "
                f"bandwidth_bps={self.bandwidth_bps:g}, ps_bandwidth_bps={self.ps_bandwidth_bps}, "
                f"latency_s={self.latency_s:g}, cpus_per_host={self.cpus_per_host:g}, up={self.is_up})")
