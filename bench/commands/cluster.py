"""`ralp-bench cluster up|status|exec|down`: manage an emulated cluster by hand.

Why: a cluster brought up here persists after the command exits (its owner
is "manual"), so several runs, or a user's own mpirun, can share it; stale
cleanup never removes a manual cluster, only `cluster down` does. With
``--ssh`` its hosts are machines reached over ssh (bench/launch/ssh_hosts.py)
and ``cluster exec`` runs a command on one of them, the login host by default;
``--slurm`` adds a real Slurm on those machines (bench/launch/slurm.py).
"""
import argparse
import os
import re

from bench.core.errors import UserError
from bench.core.strategy_specs import SPECS
from bench.launch import link_probe
from bench.launch import netns as nx
from bench.launch.cluster_state import cluster_dir
from bench.launch.cpu_steal import PROBE_MAX_STEAL, too_stolen
from bench.launch.emulated_cluster import (EmulatedCluster, cleanup_stale, cluster_namespaces, destroy_cluster,
                                           find_stale, owner_alive, read_states)
from bench.launch.slurm import PARTITION
from bench.launch.slurm import paths as slurm_paths
from bench.launch.ssh_hosts import SshCluster, paths
from ralp.hardware import format_bandwidth
from ralp.links import LinkSpec  # one parser for the whole suite


def register(subparsers):
    p = subparsers.add_parser("cluster", help="bring an emulated cluster (network namespaces + tc) up or down")
    sub = p.add_subparsers(dest="cluster_action", metavar="ACTION")
    up = sub.add_parser("up", help="create emulated hosts with shaped links (persists until `cluster down`)")
    up.add_argument("--hosts", type=int, required=True, help="number of hosts (host 0 is the PS)")
    up.add_argument("--bandwidth", required=True, help="per-host link rate, e.g. 1gbit, 100mbit")
    up.add_argument("--latency", default="0", help="one-way host-to-host delay, e.g. 0.1ms (needs sch_netem)")
    up.add_argument("--ps-bandwidth", default=None, help="host 0's link rate if different, e.g. 10gbit")
    up.add_argument("--name", default="ralp", help="cluster name: namespaces NAME-sw, NAME-h0.. (default ralp)")
    up.add_argument("--cpus-per-host", type=float, default=None,
                    help="CPU cores each host may use (cgroup cap; default: this machine's cores / hosts; 0: none)")
    up.add_argument("--no-link-check", action="store_true",
                    help="skip measuring each traffic pattern's share of the line rate")
    up.add_argument("--ssh", action="store_true",
                    help="hosts behave like separate machines: own hostname, /tmp and sshd, a login host for the "
                         "driver; prints a hostfile for --cluster hosts")
    up.add_argument("--slurm", action="store_true",
                    help="also a real Slurm on those machines (implies --ssh): munged everywhere, slurmctld on the "
                         "login host, slurmd on every host; submit with cluster exec -- sbatch")
    st = sub.add_parser("status", help="show emulated clusters: namespaces, addresses, rates, owner")
    st.add_argument("--name", default=None, help="only this cluster")
    ex = sub.add_parser("exec", help="run a command on a machine of an --ssh cluster (default: its login host)")
    ex.add_argument("--name", default="ralp", help="the cluster (default ralp)")
    ex.add_argument("--on", default="login", help="the machine: login (default) or a host name such as h1")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    down = sub.add_parser("down", help="remove a cluster (and any stale ones)")
    down.add_argument("--name", default="ralp", help="cluster to remove (default ralp)")
    p.set_defaults(func=run, cluster_parser=p)


def run(args):
    action = getattr(args, "cluster_action", None)
    if action == "up":
        return _up(args)
    if action == "status":
        return _status(args)
    if action == "exec":
        return _exec(args)
    if action == "down":
        return _down(args)
    args.cluster_parser.print_help()
    return 2


def _up(args):
    link = LinkSpec.parse(args.bandwidth, args.ps_bandwidth, args.latency)
    machines = args.ssh or args.slurm
    extra = {"slurm": True} if args.slurm else {}
    kind = SshCluster if machines else EmulatedCluster
    cluster = kind(args.hosts, link.worker_bps, link.latency_s, link.ps_bps,
                   name=args.name, manual=True, cpus_per_host=args.cpus_per_host, **extra)
    cluster.up()
    cpus = f"{cluster.cpus_per_host:.2f} cores each (cgroup cap)" if cluster.cpus_per_host else "no CPU cap"
    print(f"emulated cluster {cluster.name!r} up: {len(cluster.hosts)} hosts on {cluster.subnet}, {cpus}")
    for host in cluster.hosts:
        role = " (PS)" if host is cluster.hosts[0] else ""
        print(f"  {host.netns:<14} {host.ip:<13} {host.iface}  {format_bandwidth(host.bandwidth_bps, flag=True)}{role}")
    if not args.no_link_check and len(cluster.hosts) >= 2:
        print_link_table(cluster)
    if machines:
        print_ssh_usage(cluster)
    if args.slurm:
        print_slurm_usage(cluster)
    if not machines:
        print(f"run on a host:  ip netns exec {cluster.hosts[0].netns} CMD   (network only; runs of ralp-bench "
              "also enter the host's CPU group)")
    print(f"remove it:      ralp-bench cluster down --name {cluster.name}")
    return 0


def print_ssh_usage(cluster):
    """Where an ssh cluster's hostfile and ssh config are, and how to run on it."""
    files, login, name = cluster.files, cluster.login, cluster.name
    with open(files["hostfile"]) as fh:
        hostfile = ", ".join(line.strip() for line in fh if line.strip())
    print("machines: every host has its own hostname, /tmp, /dev/shm, /run and sshd (root, key only); "
          "the project directory is shared")
    print(f"  login host  {login.name} {login.ip}: not in the hostfile; the driver runs there")
    print(f"  hostfile    {files['hostfile']}   ({hostfile})")
    print(f"  ssh config  {files['config']}   (ssh -F CONFIG h1 hostname; inside the machines plain ssh h1, "
          f"and mpirun's plm_rsh_agent is \"ssh -F CONFIG\")")
    print("run a comparison from the login host:")
    print(f"  ralp-bench cluster exec --name {name} -- ralp-bench run --cluster hosts --hostfile {files['hostfile']} "
          f"--network {cluster.subnet} --model lenet_mnist --strategy ps,horovod,ralp "
          f"--workers {len(cluster.hosts) - 1}")
    print(f"a shell on a host:  ralp-bench cluster exec --name {name} --on {cluster.hosts[-1].name} -- bash")


def print_slurm_usage(cluster):
    """Where the emulated Slurm's files are, and how to submit the example comparison."""
    files, name, hosts = slurm_paths(cluster.ssh_dir), cluster.name, cluster.hosts
    print(f"slurm: slurmctld on {cluster.login.name}, slurmd on {' '.join(h.name for h in hosts)} (all idle), "
          f"partition {PARTITION}; munged on every machine with one key")
    print(f"  slurm.conf  {files['conf']}   (/etc/slurm/slurm.conf on every machine); logs in {files['log']}")
    print("submit the example comparison from the login host (ralp-bench must be on PATH):")
    print(f"  ralp-bench cluster exec --name {name} -- sbatch -N {len(hosts)} --wait examples/slurm/compare.sbatch")
    print(f"  ralp-bench cluster exec --name {name} -- sinfo")


def print_link_table(cluster, patterns=None, seconds=1.0):
    """Each traffic pattern's measured time against line rate (bench/launch/link_probe.py)."""
    relies = "; ".join(f"{s.name} -> {s.link_pattern}" for s in SPECS.values() if s.link_pattern)
    print(f"link efficiency (time at line rate / measured time; strategies rely on: {relies}; "
          "colocated ps -> all-to-all):")
    print(f"  {'pattern':<11} {'hosts':>5} {'rate':>10} {'measured':>9} {'line rate':>9} {'efficiency':>10} "
          f"{'cpu steal':>9}")
    for pattern in patterns or link_probe.PATTERNS:
        r = link_probe.measure_pattern(cluster, pattern, seconds)
        flag = "  ⚠ below 90%" if r.efficiency < 0.9 else ""
        if too_stolen(r.steal, PROBE_MAX_STEAL):
            flag += f" (the hypervisor took {r.steal:.0%} of the CPU in all 3 tries)"
        steal = "—" if r.steal is None else f"{r.steal:.0%}"
        print(f"  {r.pattern:<11} {r.hosts:>5} {format_bandwidth(r.rate_bps, flag=True):>10} {r.seconds:>8.3f}s "
              f"{r.line_seconds:>8.3f}s {r.efficiency:>10.0%} {steal:>9}{flag}", flush=True)


def _status(args):
    states = read_states()
    stale = set(find_stale())
    names = [args.name] if args.name else sorted(set(states) | stale)
    if not names or (args.name and args.name not in states and not cluster_namespaces(args.name)):
        print("no emulated clusters" + (f" named {args.name!r}" if args.name else ""))
        return 0
    all_ns = nx.netns_list()
    for name in names:
        state = states.get(name, {})
        if not state:
            owner = "no state file (orphan)"
        elif state.get("manual"):
            owner = "manual"
        else:
            alive = "alive" if owner_alive(state) else "dead"
            owner = f"pid {state.get('owner_pid')} ({alive})"
        flag = "  STALE: `ralp-bench cluster down --name %s` removes it" % name if name in stale else ""
        print(f"cluster {name}: owner {owner}, subnet {state.get('subnet', '?')}{flag}")
        hosts = state.get("hosts") or [{"netns": ns, "ip": "?", "iface": "eth0", "name": ns.rsplit("-", 1)[1]}
                                       for ns in cluster_namespaces(name, all_ns) if not ns.endswith("-sw")]
        for host in hosts:
            present = host["netns"] in all_ns
            up_rate = nx.qdisc_summary(host["netns"], host["iface"]) if present else []
            down_rate = nx.qdisc_summary(f"{name}-sw", host["name"]) if present else []
            print(f"  {host['netns']:<14} {host['ip']:<13} {'present' if present else 'MISSING':<8}"
                  f" up: {_rate_of(up_rate)}  down: {_rate_of(down_rate)}")
        if state.get("ssh"):
            files = paths(cluster_dir(name))
            print(f"  ssh machines (login host {name}-login): hostfile {files['hostfile']}, "
                  f"ssh config {files['config']}" + ("; Slurm: slurmctld on login, slurmd on every host"
                                                     if state.get("slurm") else ""))
    return 0


def _rate_of(qdisc_lines):
    """'100Mbit' (+ ' delay 50us') out of `tc qdisc show` lines, '-' when unshaped."""
    text = " ".join(qdisc_lines)
    rate = re.search(r"\brate (\S+)", text)
    delay = re.search(r"\bdelay (\S+)", text)
    if not rate:
        return "-"
    return rate.group(1) + (f" delay {delay.group(1)}" if delay else "")


def _exec(args):
    """Replace this process with the command, run on the machine: its exit status is the command's."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("give the command after --, e.g. ralp-bench cluster exec --name ralp -- hostname")
    argv = SshCluster.attach(args.name).enter_argv(args.on, command)
    os.execvp(argv[0], argv)


def _down(args):
    if os.geteuid() != 0:
        raise UserError("removing network namespaces needs root; run as root (sudo)")
    removed = []
    if args.name in read_states() or cluster_namespaces(args.name):
        survivors = destroy_cluster(args.name)
        if survivors:
            raise UserError(f"processes {survivors} in cluster {args.name!r} would not die; kill them and retry")
        removed.append(args.name)
    removed += [n for n in cleanup_stale() if n not in removed]
    print("removed: " + (", ".join(removed) if removed else f"nothing (no cluster named {args.name!r})"))
    return 0
