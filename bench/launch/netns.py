"""Thin wrappers around `ip` and `tc` for the emulated cluster.

Why a separate module: ``emulated_cluster.py`` decides *what* a cluster looks like
(hosts, addresses, rates, state); this module only knows *how* to ask the
kernel for namespaces, veths and qdiscs, how to find and stop processes inside
a namespace, and how to probe whether this machine can do any of it. Every
command runs with an explicit namespace (``ip -n NS`` / ``tc -n NS``), so the
root namespace's interfaces and routes are never touched.
"""
import os
import shutil
import subprocess

from bench.launch import processes


class NetnsError(RuntimeError):
    """An `ip`/`tc` command failed; the message carries the command and stderr."""


def run_cmd(argv, check=True, timeout=30):
    """Run one command, return its stdout; raise NetnsError with stderr on failure."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise NetnsError(f"{argv[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise NetnsError(f"`{' '.join(argv)}` timed out after {timeout}s") from exc
    if check and proc.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


# ---- namespaces -------------------------------------------------------------

def netns_list():
    """Names of all named network namespaces (`ip netns list`)."""
    out = run_cmd(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def add_netns(ns):
    run_cmd(["ip", "netns", "add", ns])


def netns_pids(ns):
    """Processes whose network namespace is ``ns`` (empty if the namespace is gone)."""
    out = run_cmd(["ip", "netns", "pids", ns], check=False)
    return [int(tok) for tok in out.split() if tok.isdigit()]


def kill_netns_processes(ns, grace_s=2.0):
    """SIGTERM every process inside ``ns``, then SIGKILL whatever is left after ``grace_s``;
    the pids that would not die. Our own pid is never signalled (a process that entered the
    namespace itself may be the one tearing it down)."""
    me = os.getpid()
    return processes.stop(lambda: [p for p in netns_pids(ns) if p != me], grace_s=grace_s)


def delete_netns(ns):
    """Kill processes inside ``ns`` and delete it; deleting it removes its veth ends and qdiscs.

    Returns the pids that would not die (normally none). A namespace already
    gone is not an error.
    """
    survivors = kill_netns_processes(ns)
    if ns in netns_list():
        run_cmd(["ip", "netns", "delete", ns], check=False)
    return survivors


def link_names(ns):
    """Interface names inside ``ns``."""
    out = run_cmd(["ip", "-n", ns, "-o", "link", "show"], check=False)
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


# ---- shaping ------------------------------------------------------------------

def bucket_sizes(rate_bps, sender_bps=None):
    """(burst, limit) in bytes for the shaper's token buckets at ``rate_bps`` and its data FIFO.

    burst: 64 KiB, or two of the largest packets that reach this queue, or 1 ms of traffic,
    whichever is most. The largest packet is a GSO packet sized for the fastest link that
    feeds the queue (``sender_bps``: a switch port receives packets other hosts built for
    their own rate), see ``gso_segments``. The 64 KiB floor keeps a single 100 Mbit/s flow at
    89-94% in the shaping test (tests/test_emulated.py) on this VM (75-88% with a bucket of two
    packets). limit: 50 ms of queue, at least two bursts and ``QUEUE_PACKETS`` of the largest
    packets: a link scaled to 29.7 Mbit/s that carries a 10 Gbit/s NIC's 64 KB packets
    (``shape_link``'s ``packet_bps``) held only 4 of them in 50 ms, and 8 hosts sending to one
    lost whole packets at once: 0.47 and 0.64 of line rate in 2 of 3 trials (link_probe fan-in,
    0.22 cores per host, 2026-12-07); with 16, 1.02-1.04 in 7 of 7 (packets sized for the rate:
    1.03-1.04, their 50 ms already held 64).
    """
    rate_bytes = rate_bps / 8.0
    largest = min(64 * 1024, 1514 * gso_segments(max(rate_bps, sender_bps or 0)))
    burst = max(64 * 1024, 2 * largest, int(rate_bytes * 0.001))
    limit = max(2 * burst, int(rate_bytes * 0.050), QUEUE_PACKETS * largest)
    return burst, limit


QUEUE_PACKETS = 16  # the fewest of its largest packets a link's queue holds (``bucket_sizes``)


GSO_HOLD_S = 0.001  # longest a queued (super-)packet may hold the emulated wire


def gso_segments(rate_bps):
    """Segments per GSO packet so one queue entry holds a NIC of ``rate_bps`` for at most ~1 ms.

    A veth hands the qdisc GSO super-packets of up to 64 KB (45 segments). At 48 Mbit/s
    one of them holds the link for 11 ms and, under one FIFO (a tbf, as this emulation first
    shaped), the ACKs of the opposite flow waited behind it: two hosts sending to each other at
    once got 78% of the rate (95% with MTU-sized entries). At 1 Gbit/s 64 KB last 0.5 ms, and
    splitting them would only multiply the per-packet CPU cost, which a capped host pays (one
    flow fell to 37% of 1 Gbit/s with 0.67 cores per host). A NIC with TSO is in the same place:
    its bursts are short at its own rate. Measured with bench/launch/link_probe.py.

    ``rate_bps`` is the NIC's the link stands for (``shape_link``'s ``packet_bps``): a link
    scaled down to keep a faster cluster's compute/network ratio carries that cluster's packets.
    """
    return max(1, min(64, int(rate_bps / 8 * GSO_HOLD_S / 1448)))


def shape_link(ns, dev, rate_bps, delay_s=0.0, sender_bps=None, packet_bps=None):
    """Limit egress of ``dev`` in ``ns`` to ``rate_bps``, optionally delayed by ``delay_s``.

    ``packet_bps``: the rate of the NIC the link stands for, when faster than ``rate_bps`` (a
    link scaled by ``--scale-to``: 29.7 Mbit/s standing for 10 Gbit/s): its GSO packets are sized
    for that NIC (``gso_segments``), as the time-scaled picture of the real one, whose TSO sends
    and GRO receives 64 KB at a time. Sized for the slow rate instead (2 segments at 29.7 Mbit/s),
    every 2.9 KB wakes the receiving process: TensorFlow's transport spent 6.4-8.6 ns of the
    host's CPU per byte received, 3.1-3.8 with 64 KB packets (2.1-2.3x per pair, 4 pairs at 0.22
    cores; at 54.1 Mbit/s and 0.40 cores 4.7-4.8 and 2.1-2.7; 0.92 at 1 Gbit/s; the sender 0.8-0.9
    and 0.4-0.5; tools/transport_cpu.py, 2026-12-07): CPU a scaled host's quota pays and the GPU
    host it stands for would not. Every link_probe pattern stays at line rate with the large
    packets and a queue of 16 of them (``bucket_sizes``): 0.985-1.05 on 9 hosts at 29.7 Mbit/s
    and 0.22 cores (two trials; 0.90-1.04 with packets sized for the rate), 0.99-1.02 on 5 at
    54.1 Mbit/s and 0.40 cores. The ACK class below lets the opposite flow's ACKs pass them.

    The shaper is an htb class at the line rate with two children that may each use all of it:
    pure TCP ACKs (``PURE_ACK_MATCH``) first, everything else behind them in a byte FIFO. Why not
    one FIFO (a tbf, as before): a host that sends and receives at once queues the ACKs of the
    flow it receives behind tens of ms of its own data, the sender's window stalls, and both
    directions lose rate. A Linux host's default qdisc (fq_codel) serves such sparse flows first,
    which this kernel lacks (no fq_codel, sfq or prio; htb and u32 it has). Measured side by side
    on one machine (`link_probe.measure_pattern`, 2 s per pattern, alexnet_cifar-sized Gloo
    all-reduce, 24/48 Mbit/s and 1 Gbit/s, 2 and 4 worker hosts): both directions at once 84-99.8%
    of line rate under one tbf FIFO, 99-100% here; Horovod's all-reduce 87.5-94% -> 93-99%; one flow
    and fan-in unchanged (100-104%).

    Without delay the htb is the root qdisc. With delay: netem as root with the htb as its child
    (the rate-control layout of tc-netem(8)); needs a kernel with sch_netem.
    """
    burst, limit = bucket_sizes(rate_bps, max(packet_bps or 0, sender_bps or 0))
    run_cmd(["ip", "-n", ns, "link", "set", "dev", dev, "gso_max_segs",
             str(gso_segments(max(rate_bps, packet_bps or 0)))])
    if delay_s <= 0:
        _shape_htb(ns, dev, rate_bps, burst, limit, ["root", "handle", "1:"], "1")
        return
    # netem holds packets in flight for delay_s: size its queue for that, in packets.
    in_flight = int(rate_bps / 8.0 * delay_s / 1500) * 2 + 1000
    delay_us = max(1, int(round(delay_s * 1e6)))
    run_cmd(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:",
             "netem", "delay", f"{delay_us}us", "limit", str(in_flight)])
    _shape_htb(ns, dev, rate_bps, burst, limit, ["parent", "1:1", "handle", "10:"], "10")


# A TCP segment that carries no data: IPv4 without options (IHL 5), total length < 128 bytes (room for
# timestamps and SACK blocks), TCP flags byte (offset 20 + 13) exactly ACK.
PURE_ACK_MATCH = ["match", "ip", "protocol", "6", "0xff", "match", "u8", "0x05", "0x0f", "at", "0",
                  "match", "u16", "0x0000", "0xff80", "at", "2", "match", "u8", "0x10", "0xff", "at", "33"]


def _shape_htb(ns, dev, rate_bps, burst, limit, where, major):
    """htb ``major``: at ``where``; class :1 at the line rate; :10 (ACKs, prio 0) and :20 (the rest,
    prio 1, a ``limit``-byte FIFO) each guaranteed a share and allowed the whole rate."""
    tc, rate = ["tc", "-n", ns], f"{int(rate_bps)}bit"
    buckets = ["burst", str(burst), "cburst", str(burst)]
    run_cmd(tc + ["qdisc", "replace", "dev", dev] + where + ["htb", "default", "20"])
    run_cmd(tc + ["class", "add", "dev", dev, "parent", f"{major}:", "classid", f"{major}:1", "htb",
                  "rate", rate, "ceil", rate] + buckets)
    for minor, share, prio in (("10", 0.05, "0"), ("20", 0.95, "1")):
        run_cmd(tc + ["class", "add", "dev", dev, "parent", f"{major}:1", "classid", f"{major}:{minor}", "htb",
                      "rate", f"{int(rate_bps * share)}bit", "ceil", rate, "prio", prio, "quantum", "60000"]
                + buckets)
    run_cmd(tc + ["qdisc", "add", "dev", dev, "parent", f"{major}:20", "bfifo", "limit", str(limit)])
    run_cmd(tc + ["qdisc", "add", "dev", dev, "parent", f"{major}:10", "pfifo", "limit", "1000"])
    run_cmd(tc + ["filter", "add", "dev", dev, "parent", f"{major}:", "protocol", "ip", "prio", "1", "u32"]
            + PURE_ACK_MATCH + ["flowid", f"{major}:10"])


def qdisc_summary(ns, dev):
    """The line-rate class first (``rate 100Mbit ...``), then one line per qdisc on ``dev`` in ``ns``
    (for `cluster status`)."""
    classes = run_cmd(["tc", "-n", ns, "class", "show", "dev", dev], check=False)
    qdiscs = run_cmd(["tc", "-n", ns, "qdisc", "show", "dev", dev], check=False)
    lines = [line.strip() for line in classes.splitlines() if ":1 root" in line]
    return lines + [line.strip() for line in qdiscs.splitlines() if line.strip()]


# ---- probing --------------------------------------------------------------------

def _probe(build_steps):
    """Create a throwaway namespace, run ``build_steps(ns)``, always delete it."""
    ns = f"ralpprobe{os.getpid()}"
    try:
        add_netns(ns)
        build_steps(ns)
        return True, ""
    except NetnsError as exc:
        return False, str(exc)
    finally:
        if ns in netns_list():
            run_cmd(["ip", "netns", "delete", ns], check=False)


def _build_probe_link(ns):
    run_cmd(["ip", "-n", ns, "link", "add", "pbr", "type", "bridge"])
    run_cmd(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
    run_cmd(["ip", "-n", ns, "link", "set", "pa", "master", "pbr"])
    shape_link(ns, "pb", 1e9)


def can_emulate():
    """(True, "") when this machine can run an emulated cluster, else (False, reason naming the fix).

    The only reliable check is doing it: create a namespace with a bridge, a
    veth pair and its htb shaper with the ACK filter, then remove it (tens of milliseconds).
    """
    if os.name != "posix" or not os.path.exists("/proc/self/ns/net"):
        return False, "no network namespaces on this OS; use --cluster local"
    if os.geteuid() != 0:
        return False, "network namespaces need root; run as root (sudo) or use --cluster local"
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2")):
        if not shutil.which(tool):
            return False, f"`{tool}` not found; install {pkg} (apt-get install -y {pkg}) or use --cluster local"
    ok, err = _probe(_build_probe_link)
    if not ok:
        return False, (f"cannot create namespaces/veth/bridge/htb here ({err}); run as root on a "
                       "kernel with netns, veth, bridge, sch_htb and cls_u32, or use --cluster local")
    return True, ""


def netem_available():
    """True when the kernel has sch_netem (needed only for --latency > 0)."""
    ok, _ = _probe(lambda ns: shape_link(ns, "lo", 1e9, delay_s=1e-4))
    return ok
