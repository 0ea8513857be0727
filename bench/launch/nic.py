"""Bytes on the wire, per source, from inside whichever network namespace a rank runs in.

Why: the benchmark's traffic claims (sync PS vs ring vs RALP) are checked
against what the kernel and the adapters actually sent, not against what the
framework says it sent. Each rank reads its host's counters before and after a
phase. A host counts every source that can carry the run's traffic:

- every network interface that routes to a peer of the run (a host with two
  NICs toward two groups of peers counts both), from /proc/self/net/dev;
- every RDMA port under /sys/class/infiniband (NCCL over InfiniBand or RoCE,
  GPUDirect): that traffic bypasses the kernel's network stack, so no interface
  counter sees it.

Namespaces: /proc/self/net/dev is per network namespace, so a rank of the
emulated cluster (its own namespace holding lo and eth0) counts its own eth0.
/sys is not: sysfs shows the namespace it was mounted in, and RDMA devices in
the kernel's default "shared" mode are visible from every namespace. The
emulated cluster enters its namespaces with ``nsenter --net`` and keeps the
machine's /sys, so there /sys/class/infiniband would show the machine's HCAs
to every emulated host. RDMA ports are therefore counted only when the sysfs
view belongs to the rank's own namespace (``sysfs_is_mine``); under the
emulated cluster they never are, and it counts exactly the one eth0 it always did.
"""
import ipaddress
import os
import subprocess
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from bench.core.errors import UserError

PROC_ROOT = "/proc"
SYS_ROOT = "/sys"
LOOPBACK_IFACE = "lo"
ARPHRD_INFINIBAND = 32  # /sys/class/net/IFACE/type of an IPoIB interface (include/uapi/linux/if_arp.h)

# Where an RDMA port's (tx, rx) data counters live, best first: (folder under the port, tx file,
# rx file, bytes per unit). PortXmitData/PortRcvData count 4-byte words (IB spec, PortCounters).
# - counters_ext/*_64: older kernels, which showed the 64-bit PortCountersExtended apart;
# - counters/port_{xmit,rcv}_data: today's kernels (drivers/infiniband/core/sysfs.c,
#   get_counter_table) fill `counters` from PortCountersExtended, 64-bit, whenever the port's
#   ClassPortInfo has IB_PMA_CLASS_CAP_EXT_WIDTH(_NOIETF); only otherwise the 32-bit
#   PortCounters, which stop at 2^32 - 1 words (16 GiB) until reset: such a port under-counts;
# - hw_counters/{tx,rx}_bytes: driver counters in bytes, for adapters without PMA data counters
#   (AWS EFA, Broadcom bnxt_re).
PORT_COUNTERS = (
    ("counters_ext", "port_xmit_data_64", "port_rcv_data_64", 4),
    ("counters", "port_xmit_data", "port_rcv_data", 4),
    ("hw_counters", "tx_bytes", "rx_bytes", 1),
)
RDMA_PREFIX = "ib:"


def interface_bytes(proc_root: str = PROC_ROOT) -> Dict[str, Tuple[int, int]]:
    """{iface: (tx_bytes, rx_bytes)} of every interface in the current network namespace.

    Reads /proc/self/net/dev, the same counters as /sys/class/net/IFACE/statistics, but always
    those of the calling thread's namespace (sysfs shows the namespace it was mounted in).
    """
    with open(os.path.join(proc_root, "self", "net", "dev")) as fh:
        lines = fh.read().splitlines()[2:]
    found = {}
    for line in lines:
        name, _, fields = line.partition(":")
        values = fields.split()
        # Receive: bytes packets errs drop fifo frame compressed multicast; then transmit.
        found[name.strip()] = (int(values[8]), int(values[0]))
    return found


def nic_counters(iface: str, proc_root: str = PROC_ROOT) -> Tuple[int, int]:
    """(tx_bytes, rx_bytes) of ``iface`` in the current network namespace."""
    return _pick({iface}, interface_bytes(proc_root))[iface]


def _pick(ifaces: Iterable[str], found: Dict[str, Tuple[int, int]]) -> Dict[str, Tuple[int, int]]:
    """``found`` narrowed to ``ifaces``; a UserError naming the interfaces there are when one is missing."""
    missing = sorted(set(ifaces) - set(found))
    if missing:
        raise UserError(f"no network interface {missing[0]!r} here (have: {', '.join(found)}); "
                        "pass the interface that carries the cluster traffic")
    return {name: found[name] for name in ifaces}


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _port_bytes(port_dir: str) -> Optional[Tuple[int, int]]:
    """(tx_bytes, rx_bytes) of one RDMA port from the first PORT_COUNTERS pair it has, else None."""
    for group, tx_name, rx_name, unit in PORT_COUNTERS:
        tx = _read_int(os.path.join(port_dir, group, tx_name))
        rx = _read_int(os.path.join(port_dir, group, rx_name))
        if tx is not None and rx is not None:
            return tx * unit, rx * unit
    return None


def rdma_ports(sys_root: str = SYS_ROOT) -> Tuple[str, ...]:
    """"HCA/PORT" of every RDMA port with data counters; none without /sys/class/infiniband.
    Every port, not only those the run's library picks (NCCL_IB_HCA is the library's
    business): a port that carries nothing adds nothing between two reads."""
    base = os.path.join(sys_root, "class", "infiniband")
    found = []
    for hca in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        ports = os.path.join(base, hca, "ports")
        for port in sorted(os.listdir(ports) if os.path.isdir(ports) else [], key=lambda p: (len(p), p)):
            if _port_bytes(_port_dir(sys_root, f"{hca}/{port}")) is not None:
                found.append(f"{hca}/{port}")
    return tuple(found)


def _port_dir(sys_root: str, port: str) -> str:
    hca, number = port.split("/")
    return os.path.join(sys_root, "class", "infiniband", hca, "ports", number)


def rdma_port_bytes(ports: Iterable[str], sys_root: str = SYS_ROOT) -> Dict[str, Tuple[int, int]]:
    """{"ib:HCA/PORT": (tx_bytes, rx_bytes)} of ``ports`` (from rdma_ports)."""
    found = {}
    for port in ports:
        counts = _port_bytes(_port_dir(sys_root, port))
        if counts is None:
            raise UserError(f"RDMA port {port} lost its data counters under {sys_root}/class/infiniband; "
                            "rerun once the adapter is back")
        found[RDMA_PREFIX + port] = counts
    return found


def sysfs_is_mine(proc_root: str = PROC_ROOT, sys_root: str = SYS_ROOT) -> bool:
    """Whether the sysfs at ``sys_root`` was mounted in this process's network namespace: its
    /sys/class/net lists exactly the interfaces /proc/self/net/dev does (folders, or links to
    them, only; bonding_masters is a plain file). Under ``nsenter --net`` it lists the machine's."""
    net = os.path.join(sys_root, "class", "net")
    if not os.path.isdir(net):
        return False
    listed = {n for n in os.listdir(net) if os.path.isdir(os.path.join(net, n))}
    return listed == set(interface_bytes(proc_root))


def _is_ipoib(iface: str, sys_root: str) -> bool:
    return _read_int(os.path.join(sys_root, "class", "net", iface, "type")) == ARPHRD_INFINIBAND


@dataclass(frozen=True)
class Fabric:
    """What one host counts, decided once per run so every read covers the same sources: the
    interfaces routing to its peers and its RDMA ports ("HCA/PORT"). Paths are parameters so
    that tests can pass a fake tree."""
    ifaces: Tuple[str, ...]
    ports: Tuple[str, ...] = ()
    proc_root: str = PROC_ROOT
    sys_root: str = SYS_ROOT


def fabric_of(peers: Iterable[str], proc_root: str = PROC_ROOT, sys_root: str = SYS_ROOT,
              route: Optional[Callable[[str], str]] = None) -> Fabric:
    """The sources that carry this host's traffic to ``peers`` (addresses other than its own).

    - the interfaces the kernel routes the peers over (``route``: route_iface), each once;
    - loopback only when every peer is local: then it carries the run, else the bytes it
      counts never reach a wire;
    - RDMA ports when sysfs is this namespace's (``sysfs_is_mine``); with any, an IPoIB
      interface is left out, as its packets are inside its port's data counters already.
    """
    ifaces = {(route or route_iface)(p) for p in peers}
    if ifaces != {LOOPBACK_IFACE}:
        ifaces.discard(LOOPBACK_IFACE)
    ports = rdma_ports(sys_root) if sysfs_is_mine(proc_root, sys_root) else ()
    if ports:
        ifaces = {i for i in ifaces if not _is_ipoib(i, sys_root)}
    return Fabric(tuple(sorted(ifaces)), ports, proc_root, sys_root)


def fabric_bytes(fabric: Fabric) -> Dict[str, Tuple[int, int]]:
    """{source: (tx_bytes, rx_bytes)} of every source ``fabric`` counts, read now: interfaces by
    name, RDMA ports as "ib:HCA/PORT". The one read a rank makes before and after a phase."""
    counts = _pick(fabric.ifaces, interface_bytes(fabric.proc_root))
    counts.update(rdma_port_bytes(fabric.ports, fabric.sys_root))
    return counts


def total_bytes(by_source: Dict[str, Tuple[int, int]]) -> Tuple[int, int]:
    """(tx, rx) summed over the sources."""
    return sum(tx for tx, _ in by_source.values()), sum(rx for _, rx in by_source.values())


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


def ipv4_interfaces() -> List[tuple]:
    """(iface, ip_interface) for each IPv4 address of this network namespace."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            found.append((parts[1], ipaddress.ip_interface(parts[parts.index("inet") + 1])))
    return found
