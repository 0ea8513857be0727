"""Emulated hosts that behave like separate machines: their own hostname, /tmp and sshd.

Why: on a real cluster every host has its own hostname and its own /tmp and is reached over
ssh, while the project directory is shared (NFS homes). Hosts that are only network
namespaces share one filesystem and one hostname, which hid a whole class of bugs (rank 0's
result written to a path in the driver's /tmp: issue 34). ``SshCluster`` (``ralp-bench
cluster up --ssh``) is an EmulatedCluster (emulated_cluster.py) whose hosts are such
machines, plus one more, ``login``, outside the hostfile, where the driver runs:

- a *machine* is the host's network namespace plus its own UTS, mount and PID namespaces
  (``nsenter --net`` then ``unshare --uts --mount --pid --kill-child --propagation slave``; slave
  propagation keeps its mounts out of the root namespace), started inside the host's CPU
  group, so everything that runs on it, sshd's sessions included, stays under its CPU cap;
- inside: its hostname (``h0``, ``h1``, ..., ``login``), a fresh /proc, a fresh sysfs (only
  its own NICs; the real cgroup tree bound back into it), tmpfs on /tmp, /dev/shm and /run;
- the directories that must stay shared (the project, the Python environment) are bound back
  where they sit under /tmp, /dev/shm or /run (a clone in /tmp; ``shared_paths``);
- the cluster's directory ``/run/ralp-bench/<cluster>/`` is bound back at the same path,
  the way a site deploys /etc/ssh and its MPI settings to every node, and from it: the
  machine's /etc/hosts (every machine's name and address), /etc/ssh/ssh_config (so a plain
  ``ssh h1`` works inside), and /etc/openmpi/openmpi-mca-params.conf with
  ``plm_rsh_agent = ssh -F <cluster>/ssh/config``, so any mpirun started on a machine
  reaches the others over ssh with the cluster's key and known_hosts (root's ~/.ssh is
  never read or written);
- its PID 1 is ``sshd -D`` on port 22 (root, key login only, its own host key);
- with ``slurm=True`` (``cluster up --slurm``) a real Slurm too: before its sshd each machine
  runs the cluster's ``slurm/start.sh`` (slurm.py), which starts ``munged`` (one key for all)
  and ``slurmctld`` on the login host or ``slurmd -D -N <host>`` on a host; bring-up returns
  once ``sinfo`` shows every host idle. The daemons live in the machines' namespaces, so they
  end with the machines.

The login machine's link is not shaped: it carries the driver's mpirun control traffic only.
Everything is removed with the cluster's namespaces: killing a namespace's processes ends
its machine, and a mount namespace goes with its last process.
"""
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import List, Optional

import bench
from bench.core.errors import UserError
from bench.launch import netns as nx, slurm as sl
from bench.launch.cluster_state import cluster_dir, read_states
from bench.launch.emulated_cluster import SUBNET_PREFIX, EmulatedCluster

LOGIN = "login"
LOGIN_OCTET = 2
SSH_PORT = 22
MCA_PARAMS = "/etc/openmpi/openmpi-mca-params.conf"
SSH_CLIENT_CONFIG = "/etc/ssh/ssh_config"
SSHD = "/usr/sbin/sshd"
PRIVATE_MOUNTS = ("/tmp", "/dev/shm", "/run")  # what a machine does not share with the root namespace


@dataclass(frozen=True)
class Machine:
    """One machine of an ssh cluster: a host of the hostfile, or the login host."""

    name: str  # its hostname
    netns: str
    ip: str
    cpu_group: Optional[str] = None


def paths(directory: str) -> dict:
    """Where the cluster's files live (the same path inside every machine)."""
    ssh = os.path.join(directory, "ssh")
    return {"dir": directory, "ssh": ssh, "config": os.path.join(ssh, "config"),
            "key": os.path.join(ssh, "id_ed25519"), "known_hosts": os.path.join(ssh, "known_hosts"),
            "authorized_keys": os.path.join(ssh, "authorized_keys"), "sshd_config": os.path.join(ssh, "sshd_config"),
            "hosts": os.path.join(directory, "etc", "hosts"), "mca": os.path.join(directory, "etc", "mca-params.conf"),
            "hostfile": os.path.join(directory, "hostfile"), "init": os.path.join(directory, "machine-init.sh"),
            "shared": os.path.join(directory, "shared-paths"), "staging": os.path.join(directory, "shared")}


def shared_paths() -> List[str]:
    """The directories every machine must see as the root namespace does (NFS homes on a real
    cluster): where the cluster is started from (the project, its results), this Python
    environment and the project's code. Only those under a machine's private mounts (/tmp,
    /dev/shm, /run: a clone in /tmp, a test's scratch copy) need binding back; nested ones
    come with their parent."""
    here = (os.getcwd(), sys.prefix, os.path.dirname(os.path.dirname(bench.__file__)))
    candidates = {os.path.realpath(c) for c in here}
    private = sorted(c for c in candidates if _under(c, PRIVATE_MOUNTS))
    return [c for c in private if not _under(c, [o for o in private if o != c])]


def _under(path: str, tops) -> bool:
    """``path`` is one of ``tops`` or inside one."""
    return any(path == top or path.startswith(top + "/") for top in tops)


def available() -> tuple:
    """(True, "") when sshd, ssh and ssh-keygen are installed, else (False, the fix)."""
    missing = [tool for tool, found in (("sshd", os.access(SSHD, os.X_OK)), ("ssh", shutil.which("ssh")),
                                        ("ssh-keygen", shutil.which("ssh-keygen"))) if not found]
    if missing:
        return False, (f"{', '.join(missing)} not found; install OpenSSH "
                       "(apt-get install -y --no-install-recommends openssh-server) or run ci/setup.sh")
    return True, ""


# ---- files ------------------------------------------------------------------------

def _keygen(path: str, comment: str):
    nx.run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path])


def _write(path: str, text: str, mode: int = 0o644):
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)


def client_config(p: dict) -> str:
    """The cluster's ssh client settings: its key, its known_hosts, no questions asked."""
    return (f"# Generated by ralp-bench for this emulated cluster; use with ssh -F {p['config']}\n"
            "Host *\n  User root\n"
            f"  IdentityFile {p['key']}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {p['known_hosts']}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10\n  LogLevel ERROR\n")


def sshd_config(p: dict) -> str:
    """Root by key only, nothing else: no passwords, PAM, forwarding or user environment."""
    return (f"Port {SSH_PORT}\nListenAddress 0.0.0.0\nPidFile none\n"
            "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            f"AuthorizedKeysFile {p['authorized_keys']}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "X11Forwarding no\nAllowTcpForwarding no\nPermitUserEnvironment no\nPrintMotd no\n"
            "UseDNS no\nLogLevel ERROR\n")


def mca_params(p: dict) -> str:
    """This machine's Open MPI site settings plus the cluster's ssh as mpirun's rsh agent."""
    try:
        with open(MCA_PARAMS) as fh:
            site = fh.read()
    except OSError:
        site = ""
    ours = f"# ralp-bench: reach the emulated hosts over ssh\nplm_rsh_agent = ssh -F {p['config']}\n"
    return site.rstrip("\n") + "\n" + ours


def write_files(directory: str, cluster: str, machines: List[Machine], hostfile_hosts: List[Machine]):
    """Keys, known_hosts, ssh/sshd configs, /etc/hosts, MPI settings and the hostfile."""
    p = paths(directory)
    os.makedirs(os.path.join(directory, "etc"), exist_ok=True)
    os.makedirs(p["ssh"], mode=0o700, exist_ok=True)
    os.chmod(directory, 0o755)
    _keygen(p["key"], f"ralp-bench@{cluster}")
    with open(p["key"] + ".pub") as fh:
        _write(p["authorized_keys"], fh.read(), 0o600)
    known = []
    for m in machines:
        host_key = os.path.join(p["ssh"], f"host_{m.name}")
        _keygen(host_key, f"{m.name}@{cluster}")
        with open(host_key + ".pub") as fh:
            kind, blob = fh.read().split()[:2]
        known.append(f"{m.name},{m.ip} {kind} {blob}\n")
    _write(p["known_hosts"], "".join(known))
    _write(p["config"], client_config(p))
    _write(p["sshd_config"], sshd_config(p), 0o600)
    _write(p["hosts"], "127.0.0.1 localhost\n" + "".join(f"{m.ip} {m.name}\n" for m in machines))
    _write(p["mca"], mca_params(p))
    _write(p["hostfile"], "".join(f"{m.name} slots=1\n" for m in hostfile_hosts))
    _write(p["init"], _SETUP, 0o755)
    _write(p["shared"], "".join(f"{path}\n" for path in shared_paths()))


# ---- machines ---------------------------------------------------------------------

# machine-init.sh DIR NAME: runs as PID 1 of the machine's new PID namespace, in its own mount
# and UTS namespaces. Mounts go to staging points under the new /tmp first and are moved into
# place, because a tmpfs on /run (or a sysfs on /sys) hides what must be bound from underneath.
# mount -n: /run/mount/utab (util-linux's table) is not there to update once /run is replaced.
_SETUP = r"""#!/bin/sh
# Generated by ralp-bench: turns an emulated host into a machine (bench/launch/ssh_hosts.py).
set -e
d=$1; host=$2
echo "$host" > /proc/sys/kernel/hostname
mount -n -t proc proc /proc
# Shared directories under a private mount (shared-paths): staged before the tmpfs hides them.
i=0; while IFS= read -r path; do
  i=$((i+1)); mkdir -p "$d/shared/$i"; mount -n --bind "$path" "$d/shared/$i"
done < "$d/shared-paths"
mount -n -t tmpfs -o mode=1777 tmpfs /tmp
mount -n -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir /tmp/.sys; mount -n -t sysfs sysfs /tmp/.sys
[ ! -d /sys/fs/cgroup ] || mount -n --rbind /sys/fs/cgroup /tmp/.sys/fs/cgroup
mount -n --move /tmp/.sys /sys; rmdir /tmp/.sys
mkdir /tmp/.run; mount -n -t tmpfs -o mode=755 tmpfs /tmp/.run
mkdir -p /tmp/.run/sshd "/tmp/.run${d#/run}"; mount -n --rbind "$d" "/tmp/.run${d#/run}"
mount -n --move /tmp/.run /run; rmdir /tmp/.run
i=0; while IFS= read -r path; do
  i=$((i+1)); mkdir -p "$path"; mount -n --bind "$d/shared/$i" "$path"
done < "$d/shared-paths"
mount -n --bind "$d/etc/hosts" /etc/hosts
mca=""" + MCA_PARAMS + r"""; ssh=""" + SSH_CLIENT_CONFIG + r"""
[ ! -f $mca ] || mount -n --bind "$d/etc/mca-params.conf" $mca
[ ! -f $ssh ] || mount -n --bind "$d/ssh/config" $ssh
cd /
[ ! -x "$d/slurm/start.sh" ] || "$d/slurm/start.sh" "$d" "$host"
exec """ + SSHD + r""" -D -e -f "$d/ssh/sshd_config" -h "$d/ssh/host_$host"
"""

# Joins the CPU group ('' for none), then enters the network namespace and makes the rest.
_START = ('[ -z "$0" ] || echo $$ > "$0" || exit 126; ns=$1; shift; '
          'exec nsenter --net=/run/netns/"$ns" unshare --uts --mount --pid --kill-child --propagation slave "$@"')


def _procs_file(m: Machine) -> str:
    return os.path.join(m.cpu_group, "cgroup.procs") if m.cpu_group else ""


def _pid_file(directory: str, m: Machine) -> str:
    return os.path.join(directory, f"{m.name}.pid")


def start(directory: str, machines: List[Machine], timeout_s: float = 20.0):
    """Start every machine (its sshd is its PID 1); return once each answers ssh from the login host."""
    started = {}
    for m in machines:
        with open(_log_file(directory, m), "w") as log:
            argv = ["sh", "-c", _START, _procs_file(m), m.netns, "sh", paths(directory)["init"], directory, m.name]
            started[m] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, cwd="/")
        _write(_pid_file(directory, m), str(started[m].pid))  # unshare's pid; the machine's init is its child
    login = next(m for m in machines if m.name == LOGIN)
    for m in machines:
        _wait_for_ssh(directory, login, m, started[m], timeout_s)


def _log_file(directory: str, m: Machine) -> str:
    return os.path.join(directory, f"{m.name}.log")


def _wait_for_ssh(directory: str, login: Machine, m: Machine, proc, timeout_s: float):
    """`ssh <address> true` from the login host's network namespace until it works; a machine
    whose start failed (its process ended) fails at once with its own error."""
    p = paths(directory)
    argv = ["nsenter", f"--net=/run/netns/{login.netns}", "ssh", "-F", p["config"], "-o", "ConnectTimeout=2",
            m.ip, "true"]
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s + 5)
        if out.returncode == 0:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            try:
                with open(_log_file(directory, m)) as fh:
                    log = " ".join(fh.read().split())[-300:]
            except OSError:
                log = ""
            what = "did not start" if proc.poll() is not None else f"did not answer ssh within {timeout_s:.0f}s"
            raise nx.NetnsError(f"emulated host {m.name} ({m.ip}) {what}: {out.stderr.strip() or out.returncode}; "
                                f"its log: {log or 'empty'}")
        time.sleep(0.2)


def machine_pid(directory: str, m: Machine) -> int:
    """The global pid of the machine's PID 1 (the child of the unshare recorded at start)."""
    try:
        with open(_pid_file(directory, m)) as fh:
            parent = int(fh.read())
    except (OSError, ValueError):
        raise nx.NetnsError(f"emulated host {m.name} was not started (no {_pid_file(directory, m)})") from None
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == parent:
                        return int(entry)
            except (OSError, ValueError, IndexError):
                continue
    raise nx.NetnsError(f"emulated host {m.name} is not running (its start process {parent} has no child)")


def enter_argv(directory: str, m: Machine, argv: List[str], cwd: Optional[str] = None) -> List[str]:
    """``argv`` run on machine ``m``: in its CPU group and all of its namespaces, as a login would.

    The working directory is kept where it is shared (the project), else it is /."""
    cwd = os.path.abspath(cwd or os.getcwd())
    try:
        with open(paths(directory)["shared"]) as fh:
            shared = [line.strip() for line in fh if line.strip()]
    except OSError:
        shared = []
    if _under(cwd, PRIVATE_MOUNTS) and not _under(cwd, shared):
        cwd = "/"
    enter = (f'[ -z "$0" ] || echo $$ > "$0" || exit 126; exec nsenter --target {machine_pid(directory, m)} '
             f'--net --uts --mount --pid --wd={shlex.quote(cwd)} "$@"')
    return ["sh", "-c", enter, _procs_file(m)] + list(argv)


# ---- the cluster ------------------------------------------------------------------------

class SshCluster(EmulatedCluster):
    """An EmulatedCluster whose hosts are machines, plus a login host; ``hostfile`` for the driver."""

    def __init__(self, *args, slurm=False, **kwargs):
        """``slurm``: also run a real Slurm on the machines (munged, slurmctld, slurmd)."""
        ok, reason = available()
        if ok and slurm:
            ok, reason = sl.available()
        if not ok:
            raise UserError(reason)
        super().__init__(*args, **kwargs)
        self.slurm = slurm
        self.ssh_dir = cluster_dir(self.name)  # cluster_state removes it with the cluster

    @classmethod
    def attach(cls, name="ralp"):
        state = read_states().get(name, {})
        if not state.get("ssh"):
            raise UserError(f"no emulated cluster named {name!r} with ssh hosts is up; run "
                            f"`ralp-bench cluster up --ssh --name {name} --hosts N --bandwidth RATE`")
        cluster = super().attach(name)
        cluster.slurm = bool(state.get("slurm"))
        return cluster

    @property
    def login(self) -> Machine:
        """The login host: on the cluster network, not in the hostfile; the driver runs there."""
        return Machine(LOGIN, f"{self.name}-{LOGIN}", f"{SUBNET_PREFIX}{LOGIN_OCTET}")

    @property
    def machines(self) -> List[Machine]:
        """The login host first, then every host."""
        return [self.login] + [Machine(h.name, h.netns, h.ip, h.cpu_group) for h in self.hosts]

    @property
    def files(self) -> dict:
        """hostfile, ssh config, key, known_hosts...: see ``paths``."""
        return paths(self.ssh_dir)

    def _state(self):
        state = super()._state()
        state["ssh"] = True
        state["slurm"] = self.slurm
        state["namespaces"].append(self.login.netns)
        return state

    def _create(self):
        super()._create()
        login = self.login
        self._plug(login.netns, login.name, login.ip)  # unshaped: the driver's control traffic only
        write_files(self.ssh_dir, self.name, self.machines, self.machines[1:])
        if self.slurm:
            sl.write_emulated_files(self.ssh_dir, self.name, (login.name, login.ip),
                                    [(h.name, h.ip) for h in self.hosts])
        start(self.ssh_dir, self.machines)
        if self.slurm:
            sl.wait_until_idle(self.ssh_dir, self._on_login, [h.name for h in self.hosts])

    def _on_login(self, argv: List[str]) -> subprocess.CompletedProcess:
        return subprocess.run(enter_argv(self.ssh_dir, self.login, argv), capture_output=True, text=True,
                              timeout=60)

    def enter_argv(self, machine: str, argv: List[str]) -> List[str]:
        """``argv`` run on machine ``machine`` (login, or a host name such as h1)."""
        found = [m for m in self.machines if m.name == machine]
        if not found:
            raise UserError(f"cluster {self.name!r} has no machine {machine!r} "
                            f"(machines: {', '.join(m.name for m in self.machines)})")
        try:
            return enter_argv(self.ssh_dir, found[0], argv)
        except nx.NetnsError as exc:
            raise UserError(f"{exc}; run `ralp-bench cluster down --name {self.name}` and bring it up again") from None

    def exec_argv(self, host_index, argv):
        """On host ``host_index``'s machine: its CPU group and all its namespaces (its /tmp too)."""
        return self.enter_argv(self.hosts[host_index].name, argv)
