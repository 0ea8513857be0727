"""Per-host CPU and link timeline of a running emulated cluster, sampled from outside (a diagnostic).

Why: a row says how long a step took, and the cost model says which stages it should take; when
the two disagree, this shows which stage is late. Every DT seconds it reads, for each emulated
host, the CPU time of the processes in its cgroup (utime + stime, so the rank's compute and its
transport alike) and the bytes its link carried each way (the switch namespace's counters), without
touching the ranks; `plot` draws them per host with the CPU cap and the line rate, and prints a
window's seconds by which resources were busy.

    python tools/host_timeline.py record OUT.jsonl [--dt 0.25] [--cluster NAME]
        (waits for a cluster's switch namespace, records until it is gone or Ctrl-C)
    python tools/host_timeline.py plot OUT.jsonl --cap CORES --link MBIT [--window T0 T1] [--ps h0]
        (OUT.png beside it; times in seconds since the first sample)

Run as root with the project's Python (it reads the cluster through bench/launch/), beside a sweep
or run (`ralp-bench sweep ...` keeps one cluster for all its launches). Sampling costs well under 1%
of one core at DT 0.25 s. Results/bound.md's 8-worker breakdown came from it.
"""
import argparse
import ctypes
import json
import os
import sys
import time
import warnings
from collections import Counter

from bench.launch import cgroups, netns, nic

NETNS_DIR = "/var/run/netns"  # where `ip netns` keeps the namespaces it names
CLONE_NEWNET = 0x40000000
TICKS = os.sysconf("SC_CLK_TCK")


def _cluster(name):
    switches = sorted(ns[:-3] for ns in netns.netns_list() if ns.endswith("-sw"))
    return next((c for c in switches if name in (None, c)), None)


def record(out, dt, name):
    while (cluster := _cluster(name)) is None:
        time.sleep(0.5)
    fd = os.open(os.path.join(NETNS_DIR, f"{cluster}-sw"), os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
        sys.exit(f"host_timeline: error: cannot enter {cluster}-sw (errno {ctypes.get_errno()}); run as root")
    print(f"recording {cluster} every {dt} s into {out}", file=sys.stderr)
    with open(out, "w") as f:
        try:
            while os.path.exists(os.path.join(NETNS_DIR, f"{cluster}-sw")):
                t = time.time()
                # listed at each sample: the switch comes up before the hosts' groups do
                groups = {os.path.basename(g).rsplit("-", 1)[1]: g for g in cgroups.groups_of(cluster)}
                # a switch port's (tx, rx) is its host's (download, upload); stored as (upload, download)
                ports = {port: (rx, tx) for port, (tx, rx) in nic.interface_bytes().items()}
                f.write(json.dumps({"t": t, "hosts": {h: {"ticks": cgroups.process_cpu_ticks(g), "net": ports.get(h)}
                                                       for h, g in groups.items()}}) + "\n")
                f.flush()
                time.sleep(max(0.0, dt - (time.time() - t)))
        except KeyboardInterrupt:
            pass


def rates(path):
    """(times, {host: (cores, upload Mbit/s, download Mbit/s)}) per interval between samples; an
    interval where a host's processes changed (a launch ended) has no CPU figure."""
    import numpy as np
    samples = [json.loads(line) for line in open(path)]
    t = np.array([s["t"] for s in samples])
    dt = np.diff(t)
    hosts = sorted({h for s in samples for h in s["hosts"]}, key=lambda h: (len(h), h))
    out = {}
    for h in hosts:
        ticks = np.array([(s["hosts"].get(h) or {}).get("ticks") or np.nan for s in samples], dtype=float)
        net = np.array([(s["hosts"].get(h) or {}).get("net") or (np.nan, np.nan) for s in samples], dtype=float)
        cores = np.diff(ticks) / TICKS / dt
        cores[(cores < 0) | (cores > os.cpu_count())] = np.nan
        out[h] = (cores, np.diff(net[:, 0]) * 8 / dt / 1e6, np.diff(net[:, 1]) * 8 / dt / 1e6)
    return (t[1:] + t[:-1]) / 2 - t[0], dt, out


def plot(path, cap, link, window, ps):
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mid, dt, by_host = rates(path)
    workers = [h for h in by_host if h != ps]
    t0, t1 = window or (mid[0], mid[-1])
    sel = (mid >= t0) & (mid <= t1)
    with warnings.catch_warnings():  # an interval where no worker has a CPU figure is nan, as it should be
        warnings.simplefilter("ignore", RuntimeWarning)
        cpu, up, down = (np.nanmean([by_host[h][k] for h in workers], axis=0) for k in range(3))
    busy = Counter()
    for i in np.where(sel)[0]:
        state = [name for name, on in (("worker CPU", cpu[i] > 0.6 * cap), ("PS CPU", by_host[ps][0][i] > 0.6 * cap),
                                       ("worker links", max(up[i], down[i]) > 0.5 * link),
                                       ("PS link", max(by_host[ps][1][i], by_host[ps][2][i]) > 0.5 * link)) if on]
        busy[" + ".join(state) or "nothing busy"] += dt[i]
    total = dt[sel].sum()
    print(f"{t0:.1f}-{t1:.1f} s: busy (over 60% of the cap, 50% of the line rate), seconds and share")
    for state, seconds in busy.most_common():
        print(f"  {state:40s} {seconds:7.1f} s  {seconds / total:5.1%}")
    fig, ax = plt.subplots(3, 1, figsize=(12, 7.5), sharex=True)
    for h in workers:
        ax[0].plot(mid, by_host[h][0], lw=0.7, alpha=0.7)
        ax[1].plot(mid, np.maximum(by_host[h][1], by_host[h][2]), lw=0.7, alpha=0.7)
    ax[0].plot(mid, by_host[ps][0], "k", lw=1.5, label=f"PS host ({ps})")
    ax[2].plot(mid, by_host[ps][2], lw=1.5, label="PS host, download")
    ax[2].plot(mid, by_host[ps][1], lw=1.5, label="PS host, upload")
    for a, level, label in ((ax[0], cap, "cores"), (ax[1], link, "worker hosts' link, Mbit/s\n(busier direction)"),
                            (ax[2], link, "PS host's link, Mbit/s")):
        a.axhline(level, ls=":", c="gray")
        a.set_ylabel(label)
    ax[0].set_title(f"CPU per host (cap {cap:g} cores; colours: worker hosts)")
    ax[0].legend(loc="upper right")
    ax[2].legend(loc="upper right")
    ax[2].set_xlabel("seconds since the first sample")
    ax[2].set_xlim(t0, t1)
    fig.tight_layout()
    png = os.path.splitext(path)[0] + ".png"
    fig.savefig(png, dpi=90)
    print(f"plot: {png}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--dt", type=float, default=0.25)
    r.add_argument("--cluster", default=None, help="cluster name (default: the first one found)")
    g = sub.add_parser("plot")
    g.add_argument("path")
    g.add_argument("--cap", type=float, required=True, help="each host's CPU cap in cores")
    g.add_argument("--link", type=float, required=True, help="line rate in Mbit/s")
    g.add_argument("--window", type=float, nargs=2, default=None, metavar=("T0", "T1"))
    g.add_argument("--ps", default="h0", help="the PS host (default h0)")
    a = p.parse_args(argv)
    if a.action == "record":
        record(a.out, a.dt, a.cluster)
    else:
        plot(a.path, a.cap, a.link, a.window, a.ps)


if __name__ == "__main__":
    main()
