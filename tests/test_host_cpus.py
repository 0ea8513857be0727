"""Each emulated host is capped at its own share of the CPU, and the caps go with the cluster.

Needs root, namespaces and a cgroup CPU controller (skipped otherwise, with the reason).
Clusters here are named rtestq* and removed whatever the outcome.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bench.core.errors import UserError
from bench.launch import cgroups as cg
from bench.launch import link_probe
from bench.launch import netns as nx
from bench.launch.emulated_cluster import EmulatedCluster, cluster_namespaces, destroy_cluster, read_states
from tests.conftest import no_bring_up_meanwhile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
OK, WHY = nx.can_emulate() if os.name == "posix" else (False, "not POSIX")
CG_OK, CG_WHY = cg.available()
pytestmark = pytest.mark.skipif(not (OK and CG_OK), reason=f"no emulated cluster with CPU quotas: {WHY or CG_WHY}")
NAMES = ("rtestq", "rtestqk", "rtestql")

# Spins for a fixed wall time; prints CPU seconds used, the quota this process sees, hostname.
BUSY = textwrap.dedent("""
    import os, socket, time
    from bench.launch.cgroups import own_quota_cores, usable_cores
    end = time.monotonic() + float(os.environ.get("SPIN_S", "1.5"))
    while time.monotonic() < end:
        pass
    print(time.process_time(), own_quota_cores(), usable_cores(), socket.gethostname())
""")


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    for name in NAMES:
        if name in read_states() or cluster_namespaces(name) or cg.groups_of(name):
            destroy_cluster(name)


def test_quota_caps_each_host_and_is_visible_inside():
    with EmulatedCluster(3, 100e6, name="rtestq", cpus_per_host=0.25) as c:
        assert c.cpus_per_host == 0.25
        out = subprocess.run(c.exec_argv(1, [PY, "-c", BUSY]), cwd=REPO, capture_output=True, text=True,
                             timeout=60, env={**os.environ, "SPIN_S": "2"})
        assert out.returncode == 0, out.stderr
        cpu_s, quota, usable, hostname = out.stdout.split()
        # 2 s of wall time at a quarter of a core: 0.5 s of CPU (start-up included, so a margin).
        assert float(cpu_s) < 0.75, out.stdout
        assert float(quota) == pytest.approx(0.25) and float(usable) == pytest.approx(0.25)
        assert hostname == c.hosts[1].ip  # each host its own hostname: its address
        assert cg.read_cpu_stat(c.hosts[1].cpu_group)["nr_throttled"] > 0


def test_default_quota_shares_the_machine_and_groups_go_with_the_cluster():
    with EmulatedCluster(4, 100e6, name="rtestq") as c:
        assert c.cpus_per_host == pytest.approx(cg.usable_cores() / 4)
        groups = cg.groups_of("rtestq")
        assert len(groups) == 4 and all(os.path.isdir(g) for g in groups)
    assert cg.groups_of("rtestq") == [] and cluster_namespaces("rtestq") == []


def test_mpirun_daemons_and_ranks_run_inside_their_hosts_groups(tmp_path):
    code = ("import os, sys; open(os.path.join(sys.argv[1], os.environ['OMPI_COMM_WORLD_RANK']), 'w')"
            ".write(open('/proc/self/cgroup').read())")
    with EmulatedCluster(3, 100e6, name="rtestq", cpus_per_host=0.5) as c:
        argv = c.mpirun_prefix() + ["mpirun"] + c.mpirun_args([1, 1, 1]) + [PY, "-c", code, str(tmp_path)]
        out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        assert out.returncode == 0, out.stdout + out.stderr
        for rank, host in enumerate(c.hosts):
            groups = (tmp_path / str(rank)).read_text().split()
            assert f"1:cpu:/{os.path.basename(host.cpu_group)}" in groups or any(
                g.endswith(f":cpu:/{os.path.basename(host.cpu_group)}") for g in groups), groups


def test_cpus_per_host_zero_means_no_cap_and_bad_values_are_refused():
    with EmulatedCluster(2, 100e6, name="rtestq", cpus_per_host=0) as c:
        assert all(h.cpu_group is None for h in c.hosts) and cg.groups_of("rtestq") == []
    for bad in (-1, True, "x"):
        with pytest.raises(UserError, match="cpus-per-host"):
            EmulatedCluster(2, 100e6, name="rtestq", cpus_per_host=bad)


def test_groups_of_a_sigkilled_owner_are_removed_at_the_next_bring_up():
    code = ("import time; from bench.launch.emulated_cluster import EmulatedCluster; "
            "c = EmulatedCluster(2, 100e6, name='rtestqk', cpus_per_host=0.5).up(); print('up', flush=True); "
            "time.sleep(60)")
    owner = subprocess.Popen([PY, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "up"
        assert len(cg.groups_of("rtestqk")) == 2
        with no_bring_up_meanwhile():
            owner.send_signal(signal.SIGKILL)
            owner.wait(10)
            assert len(cg.groups_of("rtestqk")) == 2  # nobody tore it down...
    finally:
        owner.kill()
    with EmulatedCluster(2, 100e6, name="rtestql", cpus_per_host=0.5):
        pass  # ...until the next bring-up (this one, or another test process's), which removes stale clusters
    assert cg.groups_of("rtestqk") == [] and cluster_namespaces("rtestqk") == []


def test_link_probe_patterns_measure_against_line_rate():
    with EmulatedCluster(4, 50e6, name="rtestq", cpus_per_host=0.5) as c:
        for pattern in ("one flow", "both ways", "fan-in", "all-to-all"):
            r = link_probe.measure_pattern(c, pattern, seconds=0.5)
            assert r.pattern == pattern and r.seconds > 0
            # the time at line rate is a floor: the shaper never lets more than its burst above the rate
            assert 0.3 < r.efficiency < 1.15, r
    assert r.hosts == 3  # all-to-all: the three worker hosts, each sending to both others


def _gso_max_segs(ns, dev):
    out = subprocess.run(["ip", "-n", ns, "-d", "link", "show", "dev", dev], capture_output=True, text=True).stdout
    return int(out.split("gso_max_segs", 1)[1].split()[0])


def test_a_scaled_link_carries_the_packets_of_the_nic_it_stands_for_at_line_rate():
    """29.7 Mbit/s standing for 10 Gbit/s (--scale-to): 64-segment GSO packets on both ends of
    every link, as a 10 Gbit/s NIC's; a link that stands for itself keeps 2. Both directions at
    once still reach the line rate: the opposite flow's ACKs pass the 64 KB packets."""
    with EmulatedCluster(2, 29.7e6, name="rtestq", cpus_per_host=0.5, nic_bps=10e9) as c:
        assert [_gso_max_segs(h.netns, h.iface) for h in c.hosts] == [64, 64]
        assert [_gso_max_segs(c.switch_netns, h.name) for h in c.hosts] == [64, 64]
        r = link_probe.measure_pattern(c, "both ways", seconds=2.0)
        assert 0.9 < r.efficiency < 1.15, r
        assert EmulatedCluster.attach("rtestq").nic_bps == 10e9
    with EmulatedCluster(2, 29.7e6, name="rtestq", cpus_per_host=0.5) as c:
        assert _gso_max_segs(c.hosts[0].netns, c.hosts[0].iface) == 2


def test_each_strategy_names_the_pattern_its_traffic_follows():
    from bench.core.strategy_specs import spec_of

    assert spec_of("horovod").pattern_for() == "all-reduce"
    assert spec_of("ralp").pattern_for("colocated") == "fan-in"  # RALP's head stays on the PS host
    assert spec_of("ps").pattern_for("dedicated") == "fan-in"
    assert spec_of("ps").pattern_for("colocated") == "all-to-all"
    assert spec_of("single").pattern_for() is None


def test_gso_and_bucket_follow_the_rate():
    assert nx.gso_segments(24e6) == 2 and nx.gso_segments(1e9) == 64 and nx.gso_segments(1e6) == 1
    burst, limit = nx.bucket_sizes(24e6)
    assert burst == 65536 and limit == 150_000  # the 64 KiB floor; 50 ms of queue
    assert nx.bucket_sizes(100e6, sender_bps=1e9)[0] == 2 * 64 * 1024  # a 1 Gbit/s sender's 64 KiB packets
    # a link scaled to 29.7 Mbit/s that carries a 10 Gbit/s NIC's 64 KiB packets queues 16 of them, not 50 ms (4)
    assert nx.bucket_sizes(29.7e6, sender_bps=10e9) == (2 * 64 * 1024, 16 * 64 * 1024)
    burst, limit = nx.bucket_sizes(10e9)
    assert burst == 1_250_000 and limit == 62_500_000


def test_threads_follow_the_quota():
    assert cg.threads_for(0.25) == 1 and cg.threads_for(1.0) == 1 and cg.threads_for(1.5) == 2


@pytest.mark.machine_wide  # the uncapped figure is this machine's whole, and a "calib" group is anybody's
def test_calibration_is_measured_under_the_quota():
    from bench.driver.calibration import run_capped

    capped = run_capped(0.25, ["hardware"])
    whole = run_capped(None, ["hardware"])
    assert capped["worker_conv_flops"] < 0.6 * whole["worker_conv_flops"], (capped, whole)
    assert capped["pass_s"] > whole["pass_s"]
    assert not [g for g in cg.groups_of() if "calib" in g]


def test_a_daemon_that_cannot_start_fails_the_launch_at_once():
    """Open MPI's daemons stay attached: one that dies before reporting back ends mpirun with an
    error instead of leaving it waiting (the old cold-start stalls)."""
    with EmulatedCluster(3, 100e6, name="rtestq", cpus_per_host=0.5) as c:
        subprocess.run(["ip", "netns", "delete", c.hosts[2].netns], check=True)  # host 2's daemon cannot start
        argv = c.mpirun_prefix() + ["mpirun"] + c.mpirun_args([1, 1, 1]) + ["sleep", "30"]
        start = time.monotonic()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        assert out.returncode != 0
        assert time.monotonic() - start < 25, out.stdout + out.stderr  # not the ranks' 30 s, not forever
