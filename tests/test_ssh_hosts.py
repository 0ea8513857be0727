"""Emulated hosts that behave like separate machines, and a driver that needs none of their files.

Issue 34: rank 0 wrote its result into the driver's /tmp, which only worked because emulated
hosts shared one filesystem. Here (root, network namespaces and OpenSSH needed, skipped
otherwise) each host of ``ralp-bench cluster up --ssh`` has its own hostname and /tmp and an
sshd; ``ralp-bench run --cluster hosts`` runs from the login host, outside the hostfile, over
plain ssh, and every row comes back through mpirun's output. The result channel and the
environment flags are also tested without root. Clusters here are named ssht*.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from bench.core.errors import UserError
from bench.launch import netns as nx
from bench.launch import ssh_hosts
from bench.rank.result import COPIES, ResultReceiver, result_lines
from tests.conftest import ROOT, failed_run, no_bring_up_meanwhile, ralp_bench

PY = sys.executable
NAME = "sshtest"
RUN_FLAGS = ["--model", "lenet_mnist", "--workers", "2", "--steps", "2", "--warmup-steps", "1", "--batch-size", "8"]


def _can_run_machines():
    if os.name != "posix":
        return False, "not POSIX"
    ok, why = nx.can_emulate()
    return (ssh_hosts.available() if ok else (ok, why))


MACHINES_OK, MACHINES_WHY = _can_run_machines()
needs_machines = pytest.mark.skipif(not MACHINES_OK, reason=f"no emulated ssh hosts here: {MACHINES_WHY}")


# ---- the result channel (no root) -------------------------------------------------------

def _big_result():
    rng = random.Random(7)
    return json.dumps({"step_times": [rng.random() for _ in range(20000)], "name": "x" * 3000})


def test_a_large_result_comes_back_whole_though_one_copy_of_every_chunk_is_damaged():
    text = _big_result()
    lines = result_lines(text)
    per_copy = len(lines) // COPIES
    assert per_copy > 50 and all(len(line) < 512 for line in lines)  # each line one atomic pipe write
    received = ResultReceiver()
    for i, line in enumerate(lines):
        if i < per_copy:  # the first copy arrives cut, with another rank's text inside
            cut = len(line) // 2
            line = line[:cut] + "[1,2]<stdout>: some other rank\n"
        received.feed(line)
    assert received.damaged == per_copy and received.complete and received.text() == text


def test_a_chunk_lost_in_both_copies_names_what_is_missing():
    lines = result_lines(_big_result())
    per_copy = len(lines) // COPIES
    received = ResultReceiver()
    for i, line in enumerate(lines):
        if i % per_copy != 4:  # chunk 5 never arrives intact
            received.feed(line)
        else:
            received.feed(line.replace(line.split()[3][:8], "AAAAAAAA", 1))
    assert not received.complete
    assert received.missing() == f"pieces 5 of {per_copy} missing (2 damaged lines)"
    with pytest.raises(ValueError, match="pieces 5 of"):
        received.text()


RANK_CODE = textwrap.dedent(r"""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from bench.rank.result import result_lines
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    print(f"RALP-PHASE {rank} talking", flush=True)
    if rank == 0:
        for line in result_lines(open(sys.argv[2]).read()):
            os.write(1, line.encode())
    else:
        for i in range(3000):  # chatter meant to land between rank 0's chunks
            os.write(1, (f"rank {rank} says {i} " + "y" * 150 + "\n").encode())
""")


def test_a_large_result_crosses_mpirun_while_other_ranks_talk(tmp_path):
    """The real path: Open MPI's output forwarding between rank 0 and the driver's reader."""
    from bench.launch.base import LaunchSpec, mpirun_path, run_mpirun
    from bench.core.roles import RankLayout

    text = _big_result()
    (tmp_path / "result.json").write_text(text)
    argv = [mpirun_path(), "-np", "3", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        argv.insert(1, "--allow-run-as-root")
    received = ResultReceiver()
    run_mpirun(LaunchSpec(argv + [PY, "-c", RANK_CODE, str(ROOT), str(tmp_path / "result.json")]), timeout_s=120,
               layout=RankLayout(3, 1, tf=False), result=received, log_label="test-result-channel")
    assert received.complete and received.text() == text


def test_a_users_own_mpirun_output_gives_the_json_back(tmp_path):
    text = _big_result()
    mixed = "".join(("[h1] noise " if i % 3 == 0 else "") + line for i, line in enumerate(result_lines(text)))
    (tmp_path / "out.txt").write_text("some rank's line\n" + mixed)
    with open(tmp_path / "out.txt") as fh:
        proc = subprocess.run([PY, "-m", "bench.rank.result"], stdin=fh, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == text
    proc = subprocess.run([PY, "-m", "bench.rank.result"], input="nothing here\n", capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 1 and "no result arrived" in proc.stderr


# ---- environment and mpirun flags (no root) ---------------------------------------------

def test_forwarded_variables_defaults_and_flags(tmp_path):
    from bench.launch.hosts import HostsLauncher, forwarded_env, parse_env, parse_mpirun_args
    from bench.core.roles import RankLayout

    env = {"PATH": "/bin", "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0", "HOROVOD_FUSION_THRESHOLD": "1",
           "RALP_STRATEGY_MODULES": "m", "UCX_TLS": "tcp", "SECRET_TOKEN": "s", "OMPI_MCA_x": "1", "HOME": "/root"}
    assert sorted(forwarded_env({"MY": "1"}, env)) == ["CUDA_VISIBLE_DEVICES", "HOROVOD_FUSION_THRESHOLD", "MY",
                                                       "NCCL_DEBUG", "PATH", "RALP_STRATEGY_MODULES", "UCX_TLS"]
    assert parse_env(["A=1=2", "HOME"], env) == {"A": "1=2", "HOME": "/root"}
    for bad, fix in ((["NOPE_UNSET"], "--env NOPE_UNSET=VALUE"), (["1X=2"], "NAME=VALUE")):
        with pytest.raises(UserError, match=re.escape(fix)):
            parse_env(bad, env)
    assert parse_mpirun_args(["--mca plm_rsh_agent 'ssh -F /c'", "-v"]) == ["--mca", "plm_rsh_agent", "ssh -F /c",
                                                                            "-v"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb\n")
    launcher = HostsLauncher(str(hostfile), env={"RALP_TEST_MARK": "1", "SECRET_TOKEN": "s"},
                             mpirun_args=["--mca", "x", "y"])
    spec = launcher.spec(RankLayout(1, 1), ["--strategy", "ps"])
    forwarded = [spec.argv[i + 1] for i, word in enumerate(spec.argv) if word == "-x"]
    assert {"RALP_TEST_MARK", "SECRET_TOKEN", "TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED"} <= set(forwarded)
    assert spec.env["RALP_TEST_MARK"] == "1"
    assert spec.argv[spec.argv.index(PY) - 3:spec.argv.index(PY)] == ["--mca", "x", "y"]
    row = launcher.cluster_fields()["env_forwarded"]
    assert "SECRET_TOKEN" in row.split(",") and "s" not in row.split(",")  # names, never values


def test_env_flags_are_refused_where_ranks_inherit_everything():
    proc = ralp_bench("run", "--cluster", "local", "--env", "A=1", *RUN_FLAGS, "--strategy", "ps", "--no-store")
    assert proc.returncode != 0 and "--env is for --cluster hosts" in proc.stderr, proc.stderr


# ---- machines (root) --------------------------------------------------------------------

def _gone(name):
    """What is left of cluster ``name``: namespaces, sshd processes, its directory."""
    sshd = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid).startswith("sshd")
            and f"/ralp-bench/{name}/" in _cmdline(pid)]
    return {"namespaces": [ns for ns in nx.netns_list() if ns.startswith(f"{name}-")], "sshd": sshd,
            "dir": os.path.exists(f"/run/ralp-bench/{name}")}


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


NOTHING = {"namespaces": [], "sshd": [], "dir": False}


@pytest.fixture(scope="module")
def cluster():
    from bench.launch.emulated_cluster import destroy_cluster
    from bench.launch.ssh_hosts import SshCluster

    up = ralp_bench("cluster", "up", "--hosts", "3", "--ssh", "--bandwidth", "1gbit", "--name", NAME,
                    "--no-link-check", timeout=120)
    assert up.returncode == 0, up.stderr
    print(up.stdout)
    try:
        yield SshCluster.attach(NAME)
    finally:
        destroy_cluster(NAME)
        assert _gone(NAME) == NOTHING


def on(cluster, machine, command, timeout=60):
    out = subprocess.run(cluster.enter_argv(machine, ["sh", "-c", command]), capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@needs_machines
def test_each_host_is_a_machine_with_its_own_hostname_tmp_and_cpu_group(cluster):
    marker = f"ssht-mark-{os.getpid()}"
    names = [m.name for m in cluster.machines]
    assert names == ["login", "h0", "h1", "h2"]
    for m in cluster.machines:
        assert on(cluster, m.name, "hostname") == m.name
    on(cluster, "h1", f"echo here > /tmp/{marker} && echo here > /dev/shm/{marker}")
    assert on(cluster, "h1", f"cat /tmp/{marker}") == "here"
    for other in ("h0", "h2", "login"):
        assert on(cluster, other, f"ls /tmp /dev/shm | grep -c {marker} || true") == "0", other
    assert not os.path.exists(f"/tmp/{marker}") and not os.path.exists(f"/dev/shm/{marker}")
    assert on(cluster, "h2", "ls /sys/class/net | tr '\\n' ' '") == "eth0 lo"
    assert on(cluster, "h2", "tr '\\0' ' ' < /proc/1/cmdline").startswith("sshd: /usr/sbin/sshd -D")  # its own pids
    # The project directory is shared, as NFS homes are.
    assert on(cluster, "h2", f"cd {ROOT} && ls pyproject.toml") == "pyproject.toml"
    # What sshd starts stays in the host's CPU group.
    group = os.path.basename(cluster.hosts[2].cpu_group or "")
    assert group and on(cluster, "login", "ssh h2 cat /proc/self/cgroup | grep ':cpu:'").endswith("/" + group)


@needs_machines
def test_ssh_with_the_clusters_config_is_what_reaches_the_hosts(cluster):
    config = cluster.files["config"]
    shown = on(cluster, "login", f"for h in h0 h1 h2; do ssh -F {config} $h hostname; done")
    assert shown.split() == ["h0", "h1", "h2"]
    # ...and what mpirun on the login host uses, with the cluster's known_hosts (no questions asked).
    assert "plm_rsh_agent = ssh -F " + config in on(cluster, "login", "cat /etc/openmpi/openmpi-mca-params.conf")
    assert sorted(on(cluster, "login", "mpirun --allow-run-as-root -H h1,h2 hostname").split()) == ["h1", "h2"]
    with open(cluster.files["hostfile"]) as fh:
        assert fh.read() == "h0 slots=1\nh1 slots=1\nh2 slots=1\n"
    # Root's own ssh files are neither read nor written.
    assert not os.path.exists(os.path.expanduser("~/.ssh/known_hosts")) or "10.213.0" not in open(
        os.path.expanduser("~/.ssh/known_hosts")).read()


@needs_machines
def test_forwarded_variables_reach_ranks_on_other_hosts(cluster, tmp_path):
    """A rank started over ssh sees what --env forwards, and nothing it does not."""
    from bench.launch.base import BASE_ENV
    from bench.launch.hosts import HostsLauncher
    from bench.core.roles import RankLayout

    spec = HostsLauncher(cluster.files["hostfile"], cluster.subnet, env={"RALP_TEST_MARK": "1"}).spec(
        RankLayout(2, 1, tf=False), [])
    program = spec.argv.index(PY)
    # One write per rank: print's separate writes of text and newline can interleave across ranks.
    argv = spec.argv[:program] + [PY, "-c", "import os, socket; os.write(1, f'MARK {socket.gethostname()} "
                                  "{os.environ.get(\"RALP_TEST_MARK\")} {os.environ.get(\"SSHT_NOT_FORWARDED\")}\\n'"
                                  ".encode())"]
    out = subprocess.run(cluster.enter_argv("login", argv), capture_output=True, text=True, timeout=120,
                         env={**os.environ, **BASE_ENV, **spec.env, "SSHT_NOT_FORWARDED": "1"})
    assert out.returncode == 0, out.stderr
    assert sorted(re.findall(r"MARK (\S+ \S+ \S+)", out.stdout)) == ["h1 1 None", "h2 1 None"], out.stdout


@needs_machines
def test_a_comparison_runs_from_a_login_host_outside_the_hostfile(cluster):
    """The issue's failing case: ps, horovod and ralp over ssh, driver on a host no rank uses."""
    results = tempfile.mkdtemp(prefix="ssht-results-", dir="/var/tmp")  # shared, unlike any machine's /tmp
    try:
        argv = [PY, "-m", "bench.cli", "run", "--cluster", "hosts", "--hostfile", cluster.files["hostfile"],
                "--network", cluster.subnet, "--strategy", "ps,horovod,ralp", *RUN_FLAGS,
                "--env", "RALP_TEST_MARK=1", "--results", results, "--quiet"]
        started = time.monotonic()
        proc = subprocess.run(cluster.enter_argv("login", argv), capture_output=True, text=True, timeout=540,
                              cwd=ROOT)
        assert proc.returncode == 0, failed_run(proc)
        from bench.store.results import ResultStore

        rows = ResultStore(results).load()
        assert list(rows["strategy"]) == ["ps", "horovod", "ralp"] and set(rows["status"]) == {"ok"}, rows
        assert set(rows["hostname"]) == {"login"} and set(rows["cluster_mode"]) == {"hosts"}
        for forwarded in rows["env_forwarded"]:
            assert {"RALP_TEST_MARK", "PATH", "TF_CPP_MIN_LOG_LEVEL"} <= set(forwarded.split(","))
        assert (rows["bytes_worker_measured"] > 0).all()
        # no --bandwidth: the links were measured (one flow, h1 to h0); `cluster up` shaped them to 1 Gbit/s
        assert set(rows["link_measured"]) == {True} and rows["link_bps"].nunique() == 1
        assert 0.85e9 <= rows["link_bps"].iloc[0] <= 1.1e9, rows["link_bps"].iloc[0]
        # the link check over ssh: fan-in apart, the all-reduce inside Horovod's own ranks on h1, h2
        checked = dict(zip(rows["strategy"], zip(rows["link_pattern"], rows["link_efficiency"])))
        assert checked["horovod"][0] == "all-reduce" and checked["ps"][0] == "fan-in", checked
        assert all(0.4 < efficiency < 1.3 for _, efficiency in checked.values()), checked  # of one flow's rate
        print(f"3 strategies from the login host in {time.monotonic() - started:.0f}s; "
              f"link measured at {rows['link_bps'].iloc[0] / 1e9:.3f} Gbit/s; link check {checked}")
    finally:
        shutil.rmtree(results, ignore_errors=True)


@needs_machines
def test_two_workers_per_host_under_every_strategy_bytes_per_host_against_the_model(cluster):
    """4 workers on 2 hosts (slots=2 each): every strategy ok, and each worker host's measured
    bytes (what its NIC counters saw: 2 workers' traffic, the ring's edges inside the host left
    out) beside the cost model's bytes per host (issue 34 item 5)."""
    shared = tempfile.mkdtemp(prefix="ssht-slots-", dir="/var/tmp")
    try:
        hostfile = os.path.join(shared, "hostfile")
        with open(hostfile, "w") as fh:
            fh.write("h0 slots=1\nh1 slots=2\nh2 slots=2\n")
        argv = [PY, "-m", "bench.cli", "run", "--cluster", "hosts", "--hostfile", hostfile, "--network",
                cluster.subnet, "--strategy", "ps,horovod,ralp,ralp-hybrid", "--model", "lenet_mnist",
                "--workers", "4", "--steps", "2", "--warmup-steps", "1", "--batch-size", "8",
                "--results", os.path.join(shared, "results"), "--quiet"]
        proc = subprocess.run(cluster.enter_argv("login", argv), capture_output=True, text=True, timeout=900,
                              cwd=ROOT)
        assert proc.returncode == 0, failed_run(proc)
        from bench.store.results import ResultStore

        rows = ResultStore(os.path.join(shared, "results")).load()
        assert set(rows["status"]) == {"ok"} and set(rows["workers_per_host"]) == {2}, rows
        for _, row in rows.iterrows():
            ratio = row["bytes_worker_measured"] / row["bytes_worker_predicted"]
            print(f"{row['strategy']}: per worker host measured {row['bytes_worker_measured']:.0f} B/step, "
                  f"model {row['bytes_worker_predicted']:.0f} ({ratio:.3f})")
            assert 0.95 <= ratio <= 1.25, (row["strategy"], ratio)  # TCP/IP and gRPC framing on top
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@needs_machines
def test_the_readmes_own_mpirun_writes_rank_0s_result_on_rank_0s_machine(cluster):
    """The README's "on a real cluster by hand" commands (skipped there: they name hosts ps0, gpu1,
    gpu2 and train VGG-16 on 8 workers), with this cluster's hosts and a small model: a user's
    mpirun from the login host, `--out` a path on rank 0's own machine (bench/rank/main.py
    ``_write``), which no other machine sees, written whole (no temporary file left beside it)."""
    from bench.rank.result import RankResult

    R = f"{PY} -m bench.run " + " ".join(RUN_FLAGS) + f" --network {cluster.subnet}"
    for hosts, strategy, first in (("h0:2,h1,h2", "ps", "h0"), ("h1,h2", "horovod", "h1")):
        out = f"/tmp/ssht-{strategy}.json"
        command = f"cd {ROOT} && mpirun -H {hosts} --map-by slot {R} --strategy {strategy} --out {out}"
        proc = subprocess.run(cluster.enter_argv("login", ["sh", "-c", command]), capture_output=True, text=True,
                              timeout=300, env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                                                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        assert proc.returncode == 0, failed_run(proc)
        result = RankResult.from_json(on(cluster, first, f"cat {out}"))
        assert result.timed_steps == 2 and len(result.step_times) == 2 and result.plan.startswith(strategy)
        assert on(cluster, first, f"ls -a /tmp | grep -c ssht-{strategy} || true") == "1"  # no temp file beside
        for other in {"login", "h0", "h1", "h2"} - {first}:
            assert on(cluster, other, f"ls /tmp | grep -c ssht-{strategy} || true") == "0", other


@needs_machines
def test_cluster_down_removes_sshd_namespaces_and_files(cluster):
    assert _gone(NAME)["sshd"] and _gone(NAME)["dir"]
    down = ralp_bench("cluster", "down", "--name", NAME, timeout=60)
    assert down.returncode == 0, down.stderr
    assert _gone(NAME) == NOTHING
    mounts = open("/proc/self/mountinfo").read()
    assert f"/ralp-bench/{NAME}" not in mounts and f"{NAME}-" not in mounts


@needs_machines
def test_a_cluster_directory_without_its_state_is_stale():
    """What a removal cut short between the state file and the directory leaves is removed next time."""
    from bench.launch.cluster_state import cluster_dir, destroy_cluster, find_stale

    try:
        with no_bring_up_meanwhile():
            os.makedirs(os.path.join(cluster_dir("sshto"), "ssh"))
            assert "sshto" in find_stale()  # what every bring-up removes (destroy_cluster: leave others' alone)
        destroy_cluster("sshto")
        assert not os.path.exists(cluster_dir("sshto")) and "sshto" not in find_stale()
    finally:
        shutil.rmtree(cluster_dir("sshto"), ignore_errors=True)


@needs_machines
def test_machines_of_a_killed_owner_are_removed_at_the_next_bring_up():
    from bench.launch.emulated_cluster import EmulatedCluster, destroy_cluster

    try:
        _kill_the_owner_then_bring_up_another(EmulatedCluster)
    finally:
        for name in ("sshtk", "sshtl"):
            destroy_cluster(name)


def _kill_the_owner_then_bring_up_another(EmulatedCluster):
    code = ("from bench.launch.ssh_hosts import SshCluster; import time; "
            "SshCluster(2, 100e6, name='sshtk').up(); print('up', flush=True); time.sleep(600)")
    owner = subprocess.Popen([PY, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "up"
        assert _gone("sshtk")["sshd"]
    finally:
        with no_bring_up_meanwhile():
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait()
            left = _gone("sshtk")
    assert left["sshd"] and left["namespaces"] and left["dir"]  # a SIGKILL leaves the machines running...
    with EmulatedCluster(1, 100e6, name="sshtl"):  # ...until the next bring-up (this one, or a neighbour's)
        pass
    assert _gone("sshtk") == NOTHING and _gone("sshtl") == NOTHING


@needs_machines
# Its ±35% compares a step measured on capped hosts with a prediction from figures calibrated there: a
# cap limits a host's share but guarantees none, and beside two other test processes on 2 cores the
# step once took 1.31 s against 0.695 s predicted (0.90 alone). It runs with no other test beside it.
@pytest.mark.machine_wide
def test_compute_is_calibrated_on_a_worker_host_and_predicts_the_step_from_the_login_host():
    """Issue 34: the login host is not capped like the hosts, so figures measured there priced
    steps several times too fast. The driver now measures on the first worker host (h1), started
    as its ranks are: the cache's new entries are h1's (its own key and CPU group, none of the
    login host's), rows say so, and ps's predicted step is within ±35% of the measured one
    (±20% is the target; this machine is shared and noisy)."""
    from bench.launch.emulated_cluster import destroy_cluster
    from bench.launch.ssh_hosts import SshCluster
    from bench.store.results import ResultStore

    name = "sshtc"
    shared = tempfile.mkdtemp(prefix="ssht-calib-", dir="/var/tmp")  # results and a private cache
    try:
        up = ralp_bench("cluster", "up", "--hosts", "3", "--ssh", "--bandwidth", "1gbit", "--name", name,
                        "--no-link-check", timeout=120)
        assert up.returncode == 0, up.stderr
        machines = SshCluster.attach(name)
        argv = [PY, "-m", "bench.cli", "run", "--cluster", "hosts", "--hostfile", machines.files["hostfile"],
                "--network", machines.subnet, "--bandwidth", "1gbit", "--strategy", "ps", "--model", "alexnet_cifar",
                "--workers", "2", "--steps", "6", "--batch-size", "32", "--results", os.path.join(shared, "results"),
                "--quiet"]
        env = {**{k: v for k, v in os.environ.items() if k != "RALP_CALIBRATION_CACHE"},  # the default path under it
               "RALP_CACHE": os.path.join(shared, "cache")}
        proc = subprocess.run(machines.enter_argv("login", argv), capture_output=True, text=True, timeout=600,
                              cwd=ROOT, env=env)
        assert proc.returncode == 0, failed_run(proc)
        with open(os.path.join(shared, "cache", "calibration.json")) as fh:
            entries = json.load(fh)
        # the cores a process started over ssh on h1 may use: its CPU group's cap (the login host has none)
        code = "from bench.launch.cgroups import usable_cores; print(usable_cores())"
        cap = float(on(machines, "login", f"ssh h1 'cd {ROOT} && {PY} -c \"{code}\"'").split()[-1])
        assert cap < os.cpu_count()
        assert sorted(k.split("|", 1)[0] for k in entries) == ["h1", "h1"], list(entries)  # hardware, model
        assert all(k.endswith(f"|{cap:.3f}") and v["machine"].startswith("h1|") for k, v in entries.items()), entries
        row = ResultStore(os.path.join(shared, "results")).load().iloc[0]
        assert (row["status"], row["hostname"], row["calibrated_on"]) == ("ok", "login", "h1"), row
        assert row["link_bps"] == 1e9 and bool(row["link_measured"]) is False  # stated, so not measured
        ratio = row["predicted_step_time_s"] / row["step_time_median_s"]
        print(f"ps from login, calibrated on h1: measured {row['step_time_median_s']:.3f} s, "
              f"predicted {row['predicted_step_time_s']:.3f} s ({ratio:.2f})")
        assert 0.65 <= ratio <= 1.35, ratio
    finally:
        destroy_cluster(name)
        shutil.rmtree(shared, ignore_errors=True)
