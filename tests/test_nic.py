"""Bytes on real fabric (bench/launch/nic.py): every NIC routing to a peer plus every RDMA port,
read from a fake /proc and a fake /sys tree whose numbers are summed here by hand."""
import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from bench.core.errors import UserError
from bench.launch.nic import (Fabric, fabric_bytes, fabric_of, nic_counters, rdma_ports,
                              sysfs_is_mine, total_bytes)
from tests.conftest import ROOT

HEADER = ("Inter-|   Receive                                                |  Transmit\n"
          " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
          "colls carrier compressed\n")

# name: (rx_bytes, tx_bytes) as /proc/net/dev lists them (receive first)
NET_DEV = {"lo": (5000, 5000), "eth0": (1_000_000, 2_000_000), "eth1": (30_000, 40_000), "ib0": (700, 900)}
NET_TYPE = {"lo": 772, "eth0": 1, "eth1": 1, "ib0": 32}
# "HCA/PORT": (port_xmit_data, port_rcv_data) in 4-byte words
PORTS = {"mlx5_0/1": (1000, 2000), "mlx5_0/2": (3, 5), "mlx5_1/1": (250_000_000_000, 7), "mlx5_1/2": (0, 0)}
ROUTES = {"10.0.0.2": "eth0", "10.0.0.3": "eth0", "10.1.0.2": "eth1", "10.0.0.1": "lo", "10.2.0.2": "ib0"}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def net_dev(proc, counters):
    lines = "".join(f"{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0\n" for name, (rx, tx) in counters.items())
    write(os.path.join(proc, "self", "net", "dev"), HEADER + lines)


def port_counters(sys, ports, group="counters", names=("port_xmit_data", "port_rcv_data")):
    for port, (xmit, rcv) in ports.items():
        hca, number = port.split("/")
        base = os.path.join(sys, "class", "infiniband", hca, "ports", number, group)
        write(os.path.join(base, names[0]), f"{xmit}\n")
        write(os.path.join(base, names[1]), f"{rcv}\n")


@pytest.fixture
def tree(tmp_path):
    """A host with two NICs (eth0, eth1), an IPoIB interface and two HCAs of two ports each."""
    proc, sys = str(tmp_path / "proc"), str(tmp_path / "sys")
    net_dev(proc, NET_DEV)
    for name, kind in NET_TYPE.items():
        write(os.path.join(sys, "class", "net", name, "type"), f"{kind}\n")
    write(os.path.join(sys, "class", "net", "bonding_masters"), "\n")  # a file, not an interface
    port_counters(sys, PORTS)
    return proc, sys


def test_every_nic_and_every_rdma_port_is_counted_in_bytes(tree):
    proc, sys = tree
    fabric = fabric_of(["10.0.0.2", "10.0.0.3", "10.1.0.2"], proc, sys, route=ROUTES.__getitem__)
    assert fabric == Fabric(("eth0", "eth1"), ("mlx5_0/1", "mlx5_0/2", "mlx5_1/1", "mlx5_1/2"), proc, sys)
    counts = fabric_bytes(fabric)
    assert counts == {"eth0": (2_000_000, 1_000_000), "eth1": (40_000, 30_000),
                      "ib:mlx5_0/1": (4000, 8000), "ib:mlx5_0/2": (12, 20),
                      "ib:mlx5_1/1": (1_000_000_000_000, 28), "ib:mlx5_1/2": (0, 0)}
    # tx: 2,000,000 + 40,000 + 4,000 + 12 + 1,000,000,000,000 ; rx: 1,000,000 + 30,000 + 8,000 + 20 + 28
    assert total_bytes(counts) == (1_000_002_044_012, 1_038_048)


def test_a_phase_counts_what_every_source_moved_in_between(tree):
    proc, sys = tree
    fabric = fabric_of(["10.0.0.2", "10.1.0.2"], proc, sys, route=ROUTES.__getitem__)
    before = total_bytes(fabric_bytes(fabric))
    net_dev(proc, {**NET_DEV, "eth0": (1_000_100, 2_000_300), "eth1": (30_005, 40_007)})
    port_counters(sys, {"mlx5_0/1": (1010, 2020), "mlx5_1/2": (1, 2)})
    after = total_bytes(fabric_bytes(fabric))
    # tx: 300 (eth0) + 7 (eth1) + 10 words * 4 (mlx5_0/1) + 1 word * 4 (mlx5_1/2); rx: 100 + 5 + 80 + 8
    assert (after[0] - before[0], after[1] - before[1]) == (351, 193)


def test_a_missing_interface_is_a_one_line_error_naming_those_there_are(tree):
    proc, _ = tree
    for read in (lambda: fabric_bytes(Fabric(("eth0", "eth9"), (), proc)), lambda: nic_counters("eth9", proc)):
        with pytest.raises(UserError) as err:
            read()
        assert "\n" not in str(err.value)
        assert str(err.value).startswith("no network interface 'eth9' here (have: lo, eth0, eth1, ib0)")


def test_no_rdma_tree_means_no_rdma_source(tmp_path):
    proc, sys = str(tmp_path / "proc"), str(tmp_path / "sys")
    net_dev(proc, NET_DEV)
    for name in NET_DEV:
        os.makedirs(os.path.join(sys, "class", "net", name))
    assert rdma_ports(sys) == ()
    fabric = fabric_of(["10.0.0.2", "10.2.0.2"], proc, sys, route=ROUTES.__getitem__)
    assert fabric.ports == ()
    assert fabric_bytes(fabric) == {"eth0": (2_000_000, 1_000_000), "ib0": (900, 700)}  # IPoIB is all there is


def test_ipoib_is_left_out_when_its_ports_are_counted(tree):
    proc, sys = tree
    fabric = fabric_of(["10.0.0.2", "10.2.0.2"], proc, sys, route=ROUTES.__getitem__)
    assert fabric.ifaces == ("eth0",) and len(fabric.ports) == 4


def test_loopback_counts_only_when_every_peer_is_local(tree):
    proc, sys = tree
    assert fabric_of(["10.0.0.1", "10.0.0.2"], proc, sys, route=ROUTES.__getitem__).ifaces == ("eth0",)
    assert fabric_of(["10.0.0.1"], proc, sys, route=ROUTES.__getitem__).ifaces == ("lo",)
    assert fabric_of(["127.0.0.2"], proc, sys).ifaces == ("lo",)  # the kernel's own route


def test_a_namespace_that_does_not_own_sysfs_counts_its_eth0_alone(tree):
    """The emulated cluster: a namespace with lo and eth0 (nsenter --net keeps the machine's /sys,
    which lists eth1 and ib0 and shows the HCAs): the same one interface as before, no RDMA."""
    proc, sys = tree
    net_dev(proc, {"lo": (1, 1), "eth0": (123, 456)})
    assert not sysfs_is_mine(proc, sys)
    fabric = fabric_of(["10.0.0.2", "10.0.0.3"], proc, sys, route=ROUTES.__getitem__)
    assert fabric == Fabric(("eth0",), (), proc, sys)
    assert fabric_bytes(fabric) == {"eth0": nic_counters("eth0", proc)} == {"eth0": (456, 123)}


def test_port_counters_prefer_64_bit_and_hw_counters_are_bytes(tmp_path):
    proc, sys = str(tmp_path / "proc"), str(tmp_path / "sys")
    net_dev(proc, {"eth0": (0, 0)})
    os.makedirs(os.path.join(sys, "class", "net", "eth0"))
    port_counters(sys, {"old_0/1": (4294967295, 4294967295)})  # a 32-bit counter, saturated
    port_counters(sys, {"old_0/1": (5_000_000_000, 6)}, "counters_ext", ("port_xmit_data_64", "port_rcv_data_64"))
    port_counters(sys, {"efa_0/1": (1234, 5678)}, "hw_counters", ("tx_bytes", "rx_bytes"))
    os.makedirs(os.path.join(sys, "class", "infiniband", "bare_0", "ports", "1"))  # no data counters
    fabric = fabric_of(["10.0.0.2"], proc, sys, route=ROUTES.__getitem__)
    assert fabric_bytes(fabric) == {"eth0": (0, 0), "ib:efa_0/1": (1234, 5678), "ib:old_0/1": (20_000_000_000, 24)}


def test_the_meter_sums_the_sources_and_hands_each_back_by_name():
    """Real counters of this machine through the rank-side wiring (bench/rank/tf_cluster.py), over
    MPI's own-process communicator: a peer on loopback makes lo the one source. In a child
    process: MPI initialised inside pytest would leave Open MPI's singleton daemon running for
    the rest of the session, which the tests that count leftover processes see."""
    code = textwrap.dedent("""
        from mpi4py import MPI
        from bench.launch.nic import route_iface
        from bench.rank.tf_cluster import ClusterInfo, TrafficMeter
        from tests.test_nic import _send_over_loopback

        assert route_iface("127.0.0.2") == "lo"
        meter = TrafficMeter(MPI.COMM_SELF, ClusterInfo(0, 1, ["10.9.9.9", "127.0.0.2"], {}, loopback=False))
        before = meter.sample()
        _send_over_loopback(1 << 20)
        after = meter.sample()
        moved = TrafficMeter.delta(before, after)["10.9.9.9"]
        by_source = meter.by_source({"10.9.9.9": moved})
        assert list(by_source["10.9.9.9"]) == ["lo"], by_source
        assert by_source["10.9.9.9"]["lo"] == list(moved[:2]) and moved[0] >= 1 << 20, (by_source, moved)
        print("ok")
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def _send_over_loopback(size):
    server = socket.create_server(("127.0.0.2", 0))
    got = []
    reader = threading.Thread(target=lambda: got.append(_drain(server.accept()[0])))
    reader.start()
    with socket.create_connection(server.getsockname()) as out:
        out.sendall(b"x" * size)
    reader.join(10)
    server.close()
    assert got == [size]


def _drain(conn):
    total = 0
    with conn:
        while chunk := conn.recv(1 << 16):
            total += len(chunk)
    return total
