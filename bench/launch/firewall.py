"""Servers closed to strangers: per-run nftables rules on every host of a hosts or Slurm run.

Why: a run's servers cannot be told to authenticate. TensorFlow's gRPC servers bind every
interface and run any graph they are sent (file reads and writes: code execution as the ranks'
user); Horovod's Gloo rendezvous is an unauthenticated HTTP key-value store; Open MPI's daemons
and transport listen too. Every one of them binds port 0 or an unprivileged port the library
picks (TF: bench/rank/tf_cluster.reserve_port; Horovod's RendezvousServer and Gloo's pairs; Open
MPI's oob and btl_tcp), so for as long as a run goes, on each of its hosts:

- a new TCP connection (a SYN) to a port >= 1024 that was not listening when the run began is
  accepted only from the cluster: every IPv4 address of every host of the run, and the
  driver's (mpirun's daemons connect back to it); from anywhere else it is reset;
- ports listening before the run (sshd, a site's own services) and established connections
  are untouched, IPv6 connections to the run's ports are refused (ranks use IPv4 only).

Not covered: RDMA traffic (InfiniBand verbs bypass netfilter; NCCL's TCP bootstrap is
covered), UDP (nothing of the run listens on it), and a server another user starts on a host
during the run (closed to strangers too, until the run ends).

The rules are one nftables table, ``inet ralp_bench``, installed by one mpirun over the run's
hosts (the way the run itself reaches them: ssh or Slurm) before the first rank starts and
removed by another when the run ends: normally, on a failure, on Ctrl-C or SIGTERM (the CLI
turns both into exceptions that unwind through the launcher's ``with``). After ``kill -9`` of
the driver the table stays until the next run on those hosts replaces it and removes it at its
end; ``python -m bench.launch.firewall remove`` run on a host removes it by hand.

Needs root and ``nft`` on every host. Without root the run goes on and one line names the
exposed ports and how to close them; as root without ``nft`` the run stops before it starts.
"""
import argparse
import ipaddress
import os
import shutil
import socket
import subprocess
import sys
from typing import Iterable, List, Sequence

from bench.core.errors import UserError
from bench.launch import processes
from bench.launch.base import BASE_ENV
from bench.launch.nic import ipv4_interfaces

TABLE = "ralp_bench"
FIRST_PORT = 1024
REPORT = "RALP-FIREWALL"  # each host's one line in mpirun's output: RALP-FIREWALL <host> <status> [detail]
NOT_ROOT_HINT = ("the run's TensorFlow, Horovod (Gloo) and Open MPI servers listen on TCP ports >= 1024 of every "
                 "host, open to anyone who can reach them; run as root for per-run nftables rules, or keep the "
                 "hosts behind a firewall that accepts those ports only from the cluster")


def ruleset(allowed: Iterable[str], kept_ports: Iterable[int]) -> str:
    """The nftables script that replaces the run's table: new TCP connections to unprivileged
    ports not in ``kept_ports`` are reset unless they come from an ``allowed`` IPv4 address."""
    addresses = sorted({str(ipaddress.ip_address(a)) for a in allowed}, key=ipaddress.ip_address)
    if not addresses:
        raise ValueError("a firewall with no cluster address would cut the run off")
    kept = sorted({int(p) for p in kept_ports if int(p) >= FIRST_PORT})
    kept_set = f"\n    set kept {{ type inet_service; elements = {{ {', '.join(map(str, kept))} }} }}" if kept else ""
    not_kept = " tcp dport != @kept" if kept else ""
    new = f"tcp dport {FIRST_PORT}-65535{not_kept} tcp flags & (syn | ack) == syn"
    return f"""add table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
    set cluster {{ type ipv4_addr; elements = {{ {', '.join(addresses)} }} }}{kept_set}
    chain input {{
        type filter hook input priority filter - 10; policy accept;
        iif "lo" accept
        meta nfproto ipv4 {new} ip saddr != @cluster counter reject with tcp reset
        meta nfproto ipv6 {new} counter reject with tcp reset
    }}
}}
"""


def removal() -> str:
    """The nftables script that removes the run's table whether or not it is there."""
    return f"add table inet {TABLE}\ndelete table inet {TABLE}\n"


def listening_ports(proc: str = "/proc", exclude_pids: Iterable[int] = ()) -> List[int]:
    """TCP ports in LISTEN state in this network namespace (IPv4 and IPv6), from the kernel's
    socket tables (what ``ss -ltn`` reads), less those of the sockets ``exclude_pids`` hold."""
    excluded = _socket_inodes(proc, exclude_pids)
    ports = set()
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name)) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] not in excluded:  # TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def _socket_inodes(proc: str, pids: Iterable[int]) -> set:
    """The inodes of the sockets the processes ``pids`` hold open."""
    found = set()
    for pid in pids:
        fd_dir = os.path.join(proc, str(pid), "fd")
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in names:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[len("socket:["):-1])
    return found


def own_addresses() -> List[str]:
    """This network namespace's IPv4 addresses, loopback left out."""
    return sorted({str(i.ip) for _, i in ipv4_interfaces() if not i.ip.is_loopback})


def table_present() -> bool:
    """Is the run's table installed in this network namespace (root only)?"""
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
    return f"inet {TABLE}" in out.stdout


def _nft(script: str):
    out = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"nft exited {out.returncode}")


# ---- on each host (one rank per host, under mpirun) ----------------------------------------

def host_main(argv: Sequence[str] = None) -> int:
    """``install --allow ADDR...``: gather every host's addresses (MPI), replace the table;
    ``remove``: remove it. Prints one RALP-FIREWALL line; exit 0 unless nft failed."""
    p = argparse.ArgumentParser(prog="python -m bench.launch.firewall")
    p.add_argument("action", choices=["install", "remove"])
    p.add_argument("--allow", nargs="*", default=[], help="addresses allowed besides the hosts' (the driver's)")
    args = p.parse_args(argv)

    host = socket.gethostname()
    addresses = own_addresses()
    if args.action == "install" and os.environ.get("OMPI_COMM_WORLD_SIZE", "1") != "1":
        from mpi4py import MPI

        addresses = sorted({a for mine in MPI.COMM_WORLD.allgather(addresses) for a in mine})
    if os.geteuid() != 0:
        print(f"{REPORT} {host} not-root", flush=True)
        return 0
    if not shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
        print(f"{REPORT} {host} no-nft", flush=True)
        return 0
    try:
        if args.action == "install":
            # The daemon mpirun started this program under listens too, only while it runs: keeping
            # its port open would leave a hole a rank of the run could later bind (measured: a
            # stranger reached such a port in 1 of 3 runs).
            kept = [port for port in listening_ports(exclude_pids=(os.getpid(), os.getppid())) if port >= FIRST_PORT]
            _nft(ruleset(addresses + list(args.allow), kept))
            print(f"{REPORT} {host} installed {len(addresses) + len(args.allow)} addresses, "
                  f"{len(kept)} ports kept", flush=True)
        else:
            _nft(removal())
            print(f"{REPORT} {host} removed", flush=True)
    except RuntimeError as exc:
        print(f"{REPORT} {host} failed {exc}", flush=True)
        return 1
    return 0


# ---- on the driver -------------------------------------------------------------------------

def reports(output: str) -> dict:
    """{host: (status, detail)} from the RALP-FIREWALL reports in one mpirun's output, wherever they
    start: mpirun forwards each host's output in chunks, and two hosts' reports can meet on one
    line (measured under Slurm: "...4 ports keptRALP-FIREWALL h1 installed ...")."""
    found = {}
    for line in output.splitlines():
        for report in line.split(REPORT + " ")[1:]:
            words = report.strip().split(" ", 2)
            if len(words) >= 2:
                found[words[0]] = (words[1], words[2] if len(words) > 2 else "")
    return found


class Firewall:
    """The run's rules on its hosts, for as long as a ``with`` lasts (HostsLauncher, SlurmLauncher).

    ``launch_argv(program)``: the mpirun command that starts ``program`` once on every host of
    the run, the way its ranks are started (placement, forwarded variables, the user's mpirun
    words)."""

    def __init__(self, hosts: List[str], launch_argv, env: dict, timeout_s: float = 120.0):
        self.hosts = hosts
        self.launch_argv = launch_argv
        self.env = env
        self.timeout_s = timeout_s
        self.active = False

    def _on_hosts(self, action: str, allow: List[str]) -> dict:
        program = [sys.executable, "-m", "bench.launch.firewall", action] + (["--allow", *allow] if allow else [])
        try:
            out = processes.run(self.launch_argv(program), timeout=self.timeout_s,
                                env={**os.environ, **BASE_ENV, **self.env})
        except subprocess.TimeoutExpired:
            raise UserError(f"firewall {action}: mpirun did not reach every host within {self.timeout_s:.0f}s; "
                            "check that the hosts are reachable (ssh, Slurm)") from None
        found = reports(out.stdout)
        missing = [h for h in self.hosts if h not in found and h.split(".")[0] not in found]
        if len(found) < len(self.hosts) and missing:
            tail = " | ".join([line for line in (out.stdout + out.stderr).splitlines() if line.strip()][-3:])
            raise UserError(f"firewall {action}: no answer from {', '.join(missing)} ({tail}); "
                            "pass --no-firewall to run without per-run rules")
        return found

    def __enter__(self):
        if os.geteuid() != 0:
            print(f"ralp-bench: warning: not root: {NOT_ROOT_HINT}", file=sys.stderr)
            return self
        try:
            found = self._on_hosts("install", own_addresses())  # the driver's: mpirun's daemons connect back to it
        except BaseException:
            # Ctrl-C (or a host that did not answer) while mpirun was installing: some hosts may hold the
            # rules already, and no `with` body will run to remove them (measured: the rules were left).
            self.active = True
            self.__exit__()
            raise
        self.active = any(status == "installed" for status, _ in found.values())
        bad = {h: s for h, (s, _) in found.items() if s != "installed"}
        if bad:
            self.__exit__()
            if "no-nft" in bad.values():
                hosts = ", ".join(h for h, s in bad.items() if s == "no-nft")
                raise UserError(f"nft not found on {hosts}; install nftables there (apt-get install -y nftables) "
                                "or pass --no-firewall (the run's ports then stay open to the network)")
            if "not-root" in bad.values():
                hosts = ", ".join(h for h, s in bad.items() if s == "not-root")
                raise UserError(f"the ranks do not run as root on {hosts}, so no per-run firewall there; pass "
                                "--no-firewall (the run's ports then stay open to the network)")
            detail = "; ".join(f"{h}: {found[h][1]}" for h in bad)
            raise UserError(f"nft could not install the run's rules ({detail}); pass --no-firewall to run without")
        return self

    def __exit__(self, *exc):
        if self.active:
            self.active = False
            try:
                self._on_hosts("remove", [])
            except UserError as err:  # never hide why the run ended; say what is left and how to remove it
                print(f"ralp-bench: warning: {err}; the table inet {TABLE} may be left on the hosts: "
                      "run 'python -m bench.launch.firewall remove' there as root", file=sys.stderr)
        return False


if __name__ == "__main__":
    sys.exit(host_main())
