"""Slurm: `--cluster slurm` inside an allocation, against a real Slurm started here.

Issue 34 item 3. `ralp-bench cluster up --slurm` runs Debian's slurmctld on the login host and
one slurmd per emulated host (bench/launch/ssh_hosts.py machines), each machine with its own
munged and one shared key; `sbatch -N 3 --wait examples/slurm/compare.sbatch` then runs the
comparison as a user would on a real cluster, and its rows must be stored and ok. Root,
network namespaces, OpenSSH, Slurm and munge are needed for that part (ci/setup.sh installs
them); the allocation parsing and the error outside an allocation are tested without.
Clusters here are named slurmt*.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from bench.core.errors import UserError
from bench.launch import netns as nx
from bench.launch import slurm, ssh_hosts
from tests.conftest import ROOT, failed_run, no_bring_up_meanwhile, ralp_bench

PY = sys.executable
NAME = "slurmt"
SCRIPT = "examples/slurm/compare.sbatch"
RUN_FLAGS = ["--steps", "2", "--warmup-steps", "1", "--batch-size", "8"]
SLURM_COMMS = ("munged", "slurmctld", "slurmscriptd", "slurmd", "slurmstepd")
# What the emulated Slurm must never write to: the root namespace's Slurm and munge places.
SYSTEM_PLACES = ("/etc/slurm", "/etc/munge", "/var/lib/slurm", "/var/log/slurm", "/var/lib/munge", "/var/log/munge",
                 "/var/spool/slurm", "/var/spool/slurmd", "/var/spool/slurmctld", "/run/munge", "/run/slurm",
                 "/run/slurmd", "/run/slurmctld")


def _can_run_slurm():
    if os.name != "posix":
        return False, "not POSIX"
    for check in (nx.can_emulate, ssh_hosts.available, slurm.available):
        ok, why = check()
        if not ok:
            return ok, why
    return True, ""


SLURM_OK, SLURM_WHY = _can_run_slurm()
needs_slurm = pytest.mark.skipif(not SLURM_OK, reason=f"no emulated Slurm here: {SLURM_WHY}")
needs_scontrol = pytest.mark.skipif(not shutil.which("scontrol"), reason="Slurm's scontrol is not installed")


# ---- the allocation (no root) -----------------------------------------------------------

def test_per_node_counts_expand_as_slurm_writes_them():
    assert slurm.expand_counts("2(x3),1") == [2, 2, 2, 1]
    assert slurm.expand_counts("1") == [1] and slurm.expand_counts("") == []
    with pytest.raises(UserError, match="expected e.g. '2\\(x3\\),1'"):
        slurm.expand_counts("2x3")


def test_outside_an_allocation_slurm_mode_is_one_line_naming_the_fix():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    with pytest.raises(UserError, match="SLURM_JOB_ID is not set.*sbatch examples/slurm/compare.sbatch"):
        slurm.SlurmLauncher(environ=env)
    proc = subprocess.run([PY, "-m", "bench.cli", "run", "--cluster", "slurm", "--model", "lenet_mnist",
                           "--strategy", "ps", "--workers", "2", "--no-store"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "sbatch examples/slurm/compare.sbatch" in errors[0], proc.stderr


def _allocation(tmp_path, nodelist, tasks):
    """A job's environment as Slurm sets it, with a slurm.conf scontrol can read (no daemon)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=c\nNodeName=n[0-9] CPUs=1\nPartitionName=p Nodes=ALL\n")
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(conf), "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": nodelist}
    if tasks is not None:
        env["SLURM_TASKS_PER_NODE"] = tasks
    return env


@needs_scontrol
def test_the_allocations_nodes_and_tasks_place_the_ranks(tmp_path):
    from bench.core.roles import RankLayout

    env = _allocation(tmp_path, "n[1-3],n7", "1(x3),2")
    launcher = slurm.SlurmLauncher(environ=env, env={"RALP_TEST_MARK": "1"})
    assert launcher.hosts == [("n1", 1), ("n2", 1), ("n3", 1), ("n7", 2)]
    spec = launcher.spec(RankLayout(4, 1), ["--strategy", "ps"])
    # chief + PS 0 on the first node, then the worker nodes' tasks in order: 1, 1, 2; each rank's
    # node named in rank order (mpirun in an allocation ignores host:N counts).
    assert spec.argv[spec.argv.index("-H") + 1] == "n1,n1,n2,n3,n7,n7"
    assert spec.argv[spec.argv.index("-np") + 1] == "6" and spec.argv[spec.argv.index("--map-by") + 1] == "seq"
    assert "RALP_TEST_MARK" in spec.argv
    fields = launcher.cluster_fields()
    assert fields["cluster_mode"] == "slurm" and fields["hosts"] == 4
    assert "RALP_TEST_MARK" in fields["env_forwarded"].split(",")
    assert slurm.SlurmLauncher(environ=_allocation(tmp_path, "n[1-2]", None)).hosts == [("n1", 1), ("n2", 1)]
    with pytest.raises(UserError, match="does not list the 2 nodes"):
        slurm.SlurmLauncher(environ=_allocation(tmp_path, "n[1-2]", "1(x3)"))


def test_auto_inside_a_job_says_it_uses_the_allocation(monkeypatch, capsys):
    from bench.driver.clusters import resolve_auto

    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert resolve_auto("auto") == "slurm"
    assert capsys.readouterr().err.strip() == ("ralp-bench: note: inside Slurm job 77; running on its nodes "
                                               "(--cluster slurm)")
    assert resolve_auto("local") == "local"


# ---- a real Slurm (root) ----------------------------------------------------------------

def _slurm_pids(name=None):
    """Every process running a Slurm or munge daemon (or a job step), by command name; with
    ``name``, only cluster ``name``'s: the machines' mounts name its directory (start.sh binds its
    /etc/slurm from there), and another test's cluster may run beside this one (tests/conftest.py)."""
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().strip() not in SLURM_COMMS:
                        continue
                if name is not None:
                    with open(f"/proc/{pid}/mountinfo") as fh:
                        if f"/ralp-bench/{name}/" not in fh.read():
                            continue
                found.add(int(pid))
            except OSError:
                continue
    return found


def _system_files():
    """What the root namespace holds in Slurm's and munge's places (paths, recursively)."""
    seen = {top for top in SYSTEM_PLACES if os.path.lexists(top)}
    for top in SYSTEM_PLACES:
        for dirpath, dirnames, filenames in os.walk(top):
            seen.update(os.path.join(dirpath, n) for n in dirnames + filenames)
    return seen


def _left(name, before_pids):
    """What is left of cluster ``name``: namespaces, Slurm/munge processes, its directory, mounts."""
    with open("/proc/self/mountinfo") as fh:
        mounts = fh.read()
    return {"namespaces": [ns for ns in nx.netns_list() if ns.startswith(f"{name}-")],
            "daemons": sorted(_slurm_pids(name) - before_pids), "dir": os.path.exists(f"/run/ralp-bench/{name}"),
            "mounts": f"/ralp-bench/{name}/" in mounts}


NOTHING = {"namespaces": [], "daemons": [], "dir": False, "mounts": False}


@pytest.fixture(scope="module")
def cluster():
    from bench.launch.emulated_cluster import destroy_cluster
    from bench.launch.ssh_hosts import SshCluster

    before = {"pids": _slurm_pids(), "files": _system_files()}
    started = time.monotonic()
    up = ralp_bench("cluster", "up", "--hosts", "3", "--slurm", "--bandwidth", "1gbit", "--name", NAME,
                    "--no-link-check", timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr
    print(up.stdout, f"up in {time.monotonic() - started:.1f}s")
    try:
        yield SshCluster.attach(NAME), before
    finally:
        destroy_cluster(NAME)
        assert _left(NAME, before["pids"]) == NOTHING


def on(cluster, machine, command, timeout=60, env=None):
    out = subprocess.run(cluster.enter_argv(machine, ["sh", "-c", command]), capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


@needs_slurm
def test_sinfo_shows_every_host_idle_and_srun_reaches_each(cluster):
    c, _ = cluster
    assert c.slurm
    shown = on(c, "login", "sinfo -h -N -o '%N %T %P'")
    assert sorted(shown.splitlines()) == [f"h{i} idle {slurm.PARTITION}*" for i in range(3)], shown
    assert on(c, "h1", "sinfo -h -o %D") == "3"  # every machine reads the cluster's slurm.conf
    assert sorted(on(c, "login", "srun -N 3 hostname").split()) == ["h0", "h1", "h2"]


@needs_slurm
def test_sbatch_runs_the_example_comparison_and_its_rows_are_stored(cluster):
    """The example script as a user submits it: the job's own mpirun reaches the nodes through Slurm."""
    c, _ = cluster
    os.makedirs(ROOT / "build", exist_ok=True)
    results = tempfile.mkdtemp(prefix="slurmt-", dir=ROOT / "build")  # shared, unlike any machine's /tmp
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{os.path.dirname(PY)}:{env.get('PATH', '/usr/bin:/bin')}"  # ralp-bench for the job
    try:
        started = time.monotonic()
        submit = (f"cd {ROOT} && sbatch -N 3 --wait -o {results}/job-%j.out {SCRIPT} {' '.join(RUN_FLAGS)} "
                  f"--env RALP_TEST_MARK=1 --results {results}")
        out = subprocess.run(c.enter_argv("login", ["sh", "-c", submit]), capture_output=True, text=True,
                             timeout=420, env=env)
        logs = "".join(open(os.path.join(results, f)).read() for f in os.listdir(results) if f.endswith(".out"))
        assert out.returncode == 0, failed_run(out) + logs[-4000:]
        job = re.search(r"Submitted batch job (\d+)", out.stdout).group(1)
        assert f"job {job} on h0 h1 h2 -> 2 workers" in logs, logs[-2000:]
        from bench.store.results import ResultStore

        rows = ResultStore(results).load()
        assert list(rows["strategy"]) == ["ps", "horovod", "ralp"] and set(rows["status"]) == {"ok"}, rows
        assert set(rows["cluster_mode"]) == {"slurm"} and set(rows["hosts"]) == {3}
        assert set(rows["hostname"]) == {"h0"}  # the driver ran in the batch step, on the job's first node
        for forwarded in rows["env_forwarded"]:
            assert {"RALP_TEST_MARK", "PATH"} <= set(forwarded.split(","))
        assert (rows["bytes_worker_measured"] > 0).all()
        print(f"sbatch comparison in {time.monotonic() - started:.0f}s")
        deadline = time.monotonic() + 30
        while on(c, "login", "sinfo -h -o %T") != "idle" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert on(c, "login", "sinfo -h -o %T") == "idle"  # the job released its nodes
    finally:
        shutil.rmtree(results, ignore_errors=True)


@needs_slurm
def test_cluster_down_leaves_no_daemon_namespace_or_file(cluster):
    c, before = cluster
    assert len(_slurm_pids(NAME) - before["pids"]) >= 8  # munged x4, slurmctld + its slurmscriptd, slurmd x3
    down = ralp_bench("cluster", "down", "--name", NAME, timeout=60)
    assert down.returncode == 0, down.stderr
    assert _left(NAME, before["pids"]) == NOTHING
    assert _system_files() == before["files"]


@needs_slurm
def test_the_daemons_of_a_killed_owner_are_removed_at_the_next_bring_up():
    from bench.launch.emulated_cluster import EmulatedCluster, destroy_cluster

    before = _slurm_pids()
    code = ("from bench.launch.ssh_hosts import SshCluster; import time; "
            "SshCluster(2, 100e6, name='slurmtk', slurm=True).up(); print('up', flush=True); time.sleep(600)")
    owner = subprocess.Popen([PY, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        try:
            assert owner.stdout.readline().strip() == "up"
        finally:
            with no_bring_up_meanwhile():
                os.kill(owner.pid, signal.SIGKILL)
                owner.wait()
                left = _left("slurmtk", before)
        assert len(left["daemons"]) >= 5  # a SIGKILL leaves the daemons running...
        with EmulatedCluster(1, 100e6, name="slurmtl"):  # ...until the next bring-up (this one, or a neighbour's)
            pass
        assert _left("slurmtk", before) == NOTHING and _left("slurmtl", before) == NOTHING
    finally:
        for name in ("slurmtk", "slurmtl"):
            destroy_cluster(name)
