"""Bytes on the wire, per NIC, from inside whichever network namespace a rank runs in.

Why: the benchmark's traffic claims (sync PS vs ring vs RALP) are checked
against what the kernel actually sent, not against what the framework says it
sent. Each rank reads its NIC's counters before and after a phase; the NIC is
the one that routes to its peer. Works the same on real hosts and on emulated
ones, because both read the counters of the *current* network namespace.
"""
import subprocess

from bench.errors import UserError


def nic_counters(iface):
    """(tx_bytes, rx_bytes) of ``iface`` in the current network namespace.

    Reads /proc/self/net/dev, the same counters as
    /sys/class/net/IFACE/statistics, but always those of the calling thread's
    namespace (sysfs shows the namespace it was mounted in, which is only
    right under `ip netns exec`).
    """
    with open("/proc/self/net/dev") as fh:
        lines = fh.read().splitlines()[2:]
    names = []
    for line in lines:
        name, _, fields = line.partition(":")
        name = name.strip()
        names.append(name)
        if name == iface:
            values = fields.split()
            # Receive: bytes packets errs drop fifo frame compressed multicast; then transmit.
            return int(values[8]), int(values[0])
    raise UserError(f"no network interface {iface!r} here (have: {', '.join(names)}); "
                    "pass the interface that carries the cluster traffic")


def tcp_counters():
    """(segments sent, segments retransmitted, retransmission timeouts) of the current network
    namespace's TCP stack, from /proc/self/net/snmp and /proc/self/net/netstat (the kernel's
    own counters, as `nstat` reads them); zeros where a counter is missing."""
    found = {}
    for path in ("/proc/self/net/snmp", "/proc/self/net/netstat"):
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        for names, values in zip(lines[::2], lines[1::2]):
            prefix, _, keys = names.partition(":")
            for key, value in zip(keys.split(), values.partition(":")[2].split()):
                found[f"{prefix}.{key}"] = int(value)
    return (found.get("Tcp.OutSegs", 0), found.get("Tcp.RetransSegs", 0), found.get("TcpExt.TCPTimeouts", 0))


def route_iface(peer_ip):
    """Name of the interface the kernel uses to reach ``peer_ip`` (`ip -o route get PEER`)."""
    try:
        proc = subprocess.run(["ip", "-o", "route", "get", str(peer_ip)],
                              capture_output=True, text=True, timeout=10)
    except FileNotFoundError as exc:
        raise UserError("`ip` not found; install iproute2 (apt-get install -y iproute2)") from exc
    tokens = proc.stdout.split()
    if proc.returncode != 0 or "dev" not in tokens:
        raise UserError(f"no route to {peer_ip}: {proc.stderr.strip() or proc.stdout.strip()}; "
                        "check the host address")
    return tokens[tokens.index("dev") + 1]
