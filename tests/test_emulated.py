"""The emulated cluster really shapes links, really isolates hosts, and always cleans up.

Needs root and network namespaces (skipped otherwise, with the reason). Every
cluster here is named rtest* so it never clashes with the suite's own runs,
and a fixture removes them whatever the outcome.
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bench.core.errors import UserError
from bench.launch import netns as nx
from bench.launch.emulated_cluster import (STATE_DIR, EmulatedCluster, cluster_namespaces, destroy_cluster,
                                           find_stale, read_states)
from bench.launch.nic import nic_counters
from tests.conftest import no_bring_up_meanwhile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
OK, WHY = nx.can_emulate() if os.name == "posix" else (False, "not POSIX")
pytestmark = pytest.mark.skipif(not OK, reason=f"emulated cluster unavailable: {WHY}")
NAMES = ("rtest", "rtestk", "rtesti", "rtestt", "rtestc", "rtestl")
MB = 1_000_000
TCP_GOODPUT = 1448 / 1514  # MSS over wire frame (MTU 1500 + 14 byte Ethernet header, TCP timestamps on)


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    for name in NAMES:
        if name in read_states() or cluster_namespaces(name):
            destroy_cluster(name)


def assert_gone(name):
    assert cluster_namespaces(name) == [], nx.netns_list()
    assert name not in read_states()
    assert not os.path.exists(os.path.join(STATE_DIR, f"{name}-rsh-agent.sh"))


def wait_for_pids(netns):
    """`ip netns exec` enters the namespace a moment after Popen returns."""
    deadline = time.monotonic() + 5
    while not nx.netns_pids(netns) and time.monotonic() < deadline:
        time.sleep(0.02)
    return nx.netns_pids(netns)


def pid_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def run_in(cluster, i, code, *args, timeout=30):
    out = subprocess.run(cluster.exec_argv(i, [PY, "-c", code, *map(str, args)]), cwd=REPO,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


PING = textwrap.dedent(r"""
    import os, socket, struct, sys, time
    dst = sys.argv[1]
    def csum(b):
        t = sum(struct.unpack("!%dH" % (len(b) // 2), b)); t = (t >> 16) + (t & 0xffff); t += t >> 16
        return ~t & 0xffff
    ident, payload = os.getpid() & 0xffff, b"ralp" * 8
    body = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + payload
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(2)
    t0 = time.perf_counter(); s.sendto(struct.pack("!BBHHH", 8, 0, csum(body), ident, 1) + payload, (dst, 0))
    while True:
        data, addr = s.recvfrom(2048); ihl = (data[0] & 15) * 4
        kind, _, _, rid, _ = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if kind == 0 and rid == ident and addr[0] == dst:
            break
    print((time.perf_counter() - t0) * 1e3)
""")

SERVER = textwrap.dedent("""
    import socket, sys
    ip, nbytes = sys.argv[1], int(sys.argv[2])
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((ip, 5301)); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept(); got = 0
    while got < nbytes:
        chunk = c.recv(1 << 20)
        if not chunk: break
        got += len(chunk)
    c.sendall(b"k"); c.close(); print(got)
""")

CLIENT = textwrap.dedent("""
    import socket, sys, time
    from bench.launch.nic import nic_counters
    ip, nbytes = sys.argv[1], int(sys.argv[2])
    before = nic_counters("eth0"); s = socket.create_connection((ip, 5301)); t0 = time.perf_counter()
    s.sendall(b"x" * nbytes); assert s.recv(1) == b"k"; dt = time.perf_counter() - t0
    after = nic_counters("eth0")
    print(dt, after[0] - before[0], after[1] - before[1])
""")


def transfer(cluster, src, dst, nbytes):
    """Send nbytes from host src to host dst over TCP: (bits/s, src tx delta, dst rx delta)."""
    dst_ip = cluster.hosts[dst].ip
    rx_before = int(run_in(cluster, dst, "from bench.launch.nic import nic_counters; print(nic_counters('eth0')[1])"))
    server = subprocess.Popen(cluster.exec_argv(dst, [PY, "-c", SERVER, dst_ip, str(nbytes)]),
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert server.stdout.readline().strip() == "ready"
        seconds, tx, _ = map(float, run_in(cluster, src, CLIENT, dst_ip, nbytes).split())
        assert int(server.stdout.readline()) == nbytes
    finally:
        server.kill()
        server.wait()
    rx_after = int(run_in(cluster, dst, "from bench.launch.nic import nic_counters; print(nic_counters('eth0')[1])"))
    return nbytes * 8 / seconds, tx, rx_after - rx_before


def test_links_are_shaped_both_ways_and_counted():
    rate = 100e6
    with EmulatedCluster(3, rate, ps_bandwidth_bps=200e6, name="rtest") as c:
        assert [h.ip for h in c.hosts] == ["10.213.0.10", "10.213.0.11", "10.213.0.12"]
        assert "rate 200Mbit" in " ".join(nx.qdisc_summary(c.hosts[0].netns, "eth0"))
        for i, h in enumerate(c.hosts):
            up, down = nx.qdisc_summary(h.netns, "eth0"), nx.qdisc_summary(c.switch_netns, h.name)
            expect = "200Mbit" if i == 0 else "100Mbit"
            assert f"rate {expect}" in up[0] and f"rate {expect}" in down[0], (up, down)
        rtt_ms = float(run_in(c, 0, PING, c.hosts[2].ip))
        assert rtt_ms < 50
        nbytes = 12 * MB  # ~1 s at the limit: TCP's start and one loss recovery weigh little
        expected_goodput = rate * TCP_GOODPUT
        # h0 (PS, 200 Mbit/s) -> h1: only h1's download qdisc (switch side) holds it to 100 Mbit/s;
        # h1 -> h0: h1's upload qdisc (host side) does.
        for src, dst in ((0, 1), (1, 0)):
            bps, tx, rx = transfer(c, src, dst, nbytes)
            print(f"h{src}->h{dst}: {bps / 1e6:.1f} Mbit/s at a 100 Mbit/s limit "
                  f"(TCP goodput bound {expected_goodput / 1e6:.1f}); tx {tx:.0f} B, rx {rx:.0f} B for {nbytes} B")
            assert abs(bps - rate) / rate < 0.15
            assert bps < rate * 1.02  # cannot beat the token bucket (its burst is two packets)
            # Counters see GSO super-packets (headers once per ~64 KB), the shaper sees every frame:
            # the payload is a floor, payload plus per-frame headers a ceiling.
            assert nbytes <= tx <= nbytes / TCP_GOODPUT * 1.01
            assert nbytes <= rx <= nbytes / TCP_GOODPUT * 1.01
        # The receiver's ACKs went through the ACK-first class, the data through the FIFO behind it.
        acks, data = (_class_sent(c.hosts[1].netns, "eth0", minor) for minor in ("10", "20"))
        assert acks[1] > 100 and acks[0] < acks[1] * 128, (acks, data)  # packets of < 128 bytes each
        assert data[0] >= nbytes  # h1 -> h0's payload


def _class_sent(ns, dev, minor):
    """(bytes, packets) an htb class ``1:minor`` has sent (`tc -s class show`)."""
    out = nx.run_cmd(["tc", "-n", ns, "-s", "class", "show", "dev", dev])
    block = out.split(f"class htb 1:{minor} ")[1]
    sent = re.search(r"Sent (\d+) bytes (\d+) pkt", block)
    return int(sent.group(1)), int(sent.group(2))


def test_hosts_are_isolated_and_routes_resolve():
    with EmulatedCluster(2, 1e9, name="rtest") as c:
        code = "import sys; from bench.launch.nic import route_iface; print(route_iface(sys.argv[1]))"
        assert run_in(c, 0, code, c.hosts[1].ip) == "eth0"
        assert run_in(c, 0, code, c.hosts[0].ip) == "lo"
        # No default route: nothing in a host can reach beyond the emulated subnet.
        out = subprocess.run(c.exec_argv(0, [PY, "-c", code, "192.0.2.1"]), cwd=REPO, capture_output=True, text=True)
        assert out.returncode != 0 and "no route to 192.0.2.1" in out.stderr
        netns_inodes = {run_in(c, i, "import os; print(os.stat('/proc/self/ns/net').st_ino)") for i in range(2)}
        assert len(netns_inodes) == 2
    with pytest.raises(UserError, match="no network interface"):
        nic_counters("no-such-nic0")


MPI_PROBE = textwrap.dedent("""
    import json, os, subprocess
    import numpy as np
    from mpi4py import MPI
    from bench.launch.nic import nic_counters
    comm = MPI.COMM_WORLD; rank = comm.Get_rank(); n = 3 * 1000 * 1000
    ip = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "eth0"], capture_output=True,
                        text=True).stdout.split()[3].split("/")[0]
    comm.Barrier(); before = nic_counters("eth0")
    if rank == 0:
        comm.Send(np.full(n, 7, np.uint8), dest=2)
    elif rank == 2:
        buf = np.empty(n, np.uint8); comm.Recv(buf, source=0); assert buf.sum() == 7 * n
    comm.Barrier(); after = nic_counters("eth0")
    print(json.dumps({"rank": rank, "ip": ip, "netns": os.stat("/proc/self/ns/net").st_ino,
                      "cpus": len(os.sched_getaffinity(0)), "tx": after[0] - before[0],
                      "rx": after[1] - before[1]}), flush=True)
""")


def test_mpirun_places_one_rank_per_host_over_the_wire(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(MPI_PROBE)
    with EmulatedCluster(3, 1e9, name="rtest") as c:
        argv = c.mpirun_prefix() + ["mpirun"] + c.mpirun_args([1, 1, 1]) + ["-x", "PYTHONPATH", PY, str(script)]
        out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=90,
                             env={**os.environ, "PYTHONPATH": REPO})
        assert out.returncode == 0, out.stderr[-3000:]
        # Open MPI forwards each rank's output in chunks that may meet on one line: find the objects.
        ranks = sorted((json.loads(obj) for obj in re.findall(r"\{[^{}]*\}", out.stdout)), key=lambda r: r["rank"])
        print("\n".join(map(str, ranks)))
        assert [r["ip"] for r in ranks] == [h.ip for h in c.hosts]
        assert len({r["netns"] for r in ranks}) == 3
        assert all(r["cpus"] == len(os.sched_getaffinity(0)) for r in ranks)  # --bind-to none
        n = 3 * MB
        assert n <= ranks[0]["tx"] < n * 1.1 and n <= ranks[2]["rx"] < n * 1.1
        assert ranks[1]["tx"] < 100_000 and ranks[1]["rx"] < 100_000  # only barrier chatter
    assert_gone("rtest")


def test_down_after_exception_kills_processes_inside():
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with pytest.raises(RuntimeError, match="boom"):
        with EmulatedCluster(2, 1e9, name="rtest") as c:
            sleeper = subprocess.Popen(c.exec_argv(1, ["sleep", "300"]))
            assert wait_for_pids(c.hosts[1].netns)
            raise RuntimeError("boom")
    assert sleeper.wait(timeout=10) != 0
    assert_gone("rtest")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_failed_bring_up_leaves_nothing():
    if nx.netem_available():
        with EmulatedCluster(2, 1e9, latency_s=0.004, name="rtestl") as c:
            rtt_ms = float(run_in(c, 0, PING, c.hosts[1].ip))
            assert rtt_ms >= 2 * 4 * 0.95
        return
    with pytest.raises(UserError, match="netem"):
        EmulatedCluster(2, 1e9, latency_s=0.001, name="rtestl").up()
    assert_gone("rtestl")


HOLDER = textwrap.dedent("""
    import subprocess, sys, time
    from bench.launch.emulated_cluster import EmulatedCluster
    name, mode = sys.argv[1], sys.argv[2]
    c = EmulatedCluster(2, 1e9, name=name)
    if mode == "plain":
        c.up()
        p = subprocess.Popen(c.exec_argv(1, ["sleep", "300"]))
        while not subprocess.run(["ip", "netns", "pids", c.hosts[1].netns], capture_output=True).stdout:
            time.sleep(0.02)
        print("ready", p.pid, flush=True); time.sleep(300)
    with c:
        p = subprocess.Popen(c.exec_argv(1, ["sleep", "300"]))
        while not subprocess.run(["ip", "netns", "pids", c.hosts[1].netns], capture_output=True).stdout:
            time.sleep(0.02)
        print("ready", p.pid, flush=True); time.sleep(300)
""")


def start_holder(name, mode):
    proc = subprocess.Popen([PY, "-c", HOLDER, name, mode], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    word, pid = proc.stdout.readline().split()
    assert word == "ready" and len(cluster_namespaces(name)) == 3
    return proc, int(pid)


def test_sigkilled_owner_is_cleaned_at_next_bring_up():
    proc, sleeper = start_holder("rtestk", "plain")
    with no_bring_up_meanwhile():
        proc.kill()
        proc.wait()
        assert "rtestk" in find_stale()
    with EmulatedCluster(1, 1e9, name="rtest"):  # the next bring-up: this one, or another test process's
        assert_gone("rtestk")
    assert pid_gone(sleeper)


@pytest.mark.parametrize("sig,name", [(signal.SIGINT, "rtesti"), (signal.SIGTERM, "rtestt")])
def test_signal_to_owner_tears_down(sig, name):
    proc, sleeper = start_holder(name, "with")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT)
    assert_gone(name)
    assert pid_gone(sleeper)


def cli(*args):
    """The real `ralp-bench cluster ...` in a fresh process (what a user runs)."""
    return subprocess.run([PY, "-m", "bench.cli", "cluster", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def cluster_command(capsys, *args):
    """The same sub-command in this process, parsed by its own register() (skips loading every command)."""
    import argparse
    from bench.commands import cluster
    parser = argparse.ArgumentParser(prog="ralp-bench")
    cluster.register(parser.add_subparsers())
    parsed = parser.parse_args(["cluster", *args])
    code = parsed.func(parsed)
    return code, capsys.readouterr().out


def test_cli_round_trip_and_manual_cluster_survives_stale_cleanup(capsys):
    bad = cli("up", "--hosts", "2", "--bandwidth", "fast", "--name", "rtestc")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "fast" in bad.stderr
    assert cluster_namespaces("rtestc") == []
    up = cli("up", "--hosts", "2", "--bandwidth", "100mbit", "--ps-bandwidth", "1.5gbit", "--name", "rtestc")
    assert up.returncode == 0, up.stderr
    assert sorted(cluster_namespaces("rtestc")) == ["rtestc-h0", "rtestc-h1", "rtestc-sw"]
    assert "rtestc" not in find_stale()  # manual: its owner (the CLI) has exited, yet it is not stale
    code, status = cluster_command(capsys, "status", "--name", "rtestc")
    assert code == 0 and "owner manual" in status
    assert "up: 1500Mbit  down: 1500Mbit" in status and "up: 100Mbit  down: 100Mbit" in status
    code, down = cluster_command(capsys, "down", "--name", "rtestc")
    assert code == 0 and "removed: rtestc" in down
    assert_gone("rtestc")


def test_parsers():
    from ralp.hardware import parse_bandwidth, parse_latency
    assert parse_bandwidth("1gbit") == 1e9
    assert parse_bandwidth("100mbit") == 1e8
    assert parse_bandwidth("1.5gbit") == 1.5e9
    assert parse_bandwidth("2500000") == 2.5e6
    for bad in ("fast", "0", "-1gbit", "0mbit"):
        with pytest.raises(UserError):
            parse_bandwidth(bad)
    assert parse_latency("0.1ms") == pytest.approx(1e-4)
    assert parse_latency("2ms") == pytest.approx(2e-3)
    assert parse_latency("0") == 0
    with pytest.raises(UserError):
        parse_latency("soon")
    with pytest.raises(UserError, match="hosts"):
        EmulatedCluster(0, 1e9, name="rtest")
    with pytest.raises(UserError, match="name"):
        EmulatedCluster(2, 1e9, name="Bad-Name")
