"""Servers closed to strangers (issue 34 item 6): per-run nftables rules on hosts/Slurm runs and
a loopback-only namespace for local runs.

With root, namespaces, OpenSSH and nft (skipped otherwise): an ssh cluster of four machines
(``fwtest``), a hostfile of h0..h2 and h3 outside it as the stranger. While a run goes, h3 cannot
open any port the run listens on, a port opened during the run takes h2's connections and
refuses h3's, and the run itself is ok (its hosts reach each other); no rule is left after a
normal end, a failed rank, Ctrl-C, and ``kill -9`` of the driver followed by the next run.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.launch import firewall as fw
from bench.launch import netns as nx
from bench.launch import ssh_hosts
from tests.conftest import ROOT, our_processes, ralp_bench

PY = sys.executable
NAME = "fwtest"
RUN = ["--model", "lenet_mnist", "--workers", "2", "--warmup-steps", "1", "--batch-size", "8", "--quiet"]


# ---- the rules and the port table (no root) -------------------------------------------------

def test_the_ruleset_resets_strangers_on_the_runs_ports_only():
    text = fw.ruleset(["10.0.0.3", "10.0.0.1", "10.0.0.3"], [22, 5432, 40000])
    assert "elements = { 10.0.0.1, 10.0.0.3 }" in text  # sorted, once each
    assert "elements = { 5432, 40000 }" in text  # ports listening before the run stay as they were; 22 < 1024 anyway
    assert "tcp dport 1024-65535 tcp dport != @kept tcp flags & (syn | ack) == syn ip saddr != @cluster" in text
    assert text.startswith(f"add table inet {fw.TABLE}\ndelete table inet {fw.TABLE}\n")  # replaces a stale one
    assert "@kept" not in fw.ruleset(["10.0.0.1"], [22])
    with pytest.raises(ValueError):
        fw.ruleset([], [])
    with pytest.raises(ValueError):
        fw.ruleset(["not-an-address"], [])


def test_listening_ports_are_read_from_the_kernels_socket_tables(tmp_path):
    (tmp_path / "net").mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (tmp_path / "net" / "tcp").write_text(header +
        "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"   # 22 listen
        "   1: 0100007F:9C40 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2\n")  # estab.
    (tmp_path / "net" / "tcp6").write_text(header +
        "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 3\n")
    assert fw.listening_ports(str(tmp_path)) == [22, 8080]
    # The sockets a process holds (the install program's daemon) are left out: socket inode 3 is 8080's.
    (tmp_path / "4242" / "fd").mkdir(parents=True)
    os.symlink("socket:[3]", tmp_path / "4242" / "fd" / "7")
    os.symlink("/dev/null", tmp_path / "4242" / "fd" / "0")
    assert fw.listening_ports(str(tmp_path), exclude_pids=[4242, 999999]) == [22]


def test_each_hosts_answer_is_read_from_mpiruns_output():
    out = ("[1,0]<stdout>:RALP-FIREWALL h0 installed 4 addresses, 1 ports kept\n"
           "RALP-FIREWALL h1 no-nft\nnoise\n")
    assert fw.reports(out) == {"h0": ("installed", "4 addresses, 1 ports kept"), "h1": ("no-nft", "")}
    met = "RALP-FIREWALL h0 installed 4 addresses, 4 ports keptRALP-FIREWALL h1 installed 4 addresses, 1 ports kept\n"
    assert fw.reports(met) == {"h0": ("installed", "4 addresses, 4 ports kept"),
                               "h1": ("installed", "4 addresses, 1 ports kept")}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft"), reason="nft -c needs root and nftables")
def test_nft_accepts_the_ruleset():
    script = fw.ruleset(["10.1.2.3"], [40000])
    check = subprocess.run(["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_no_firewall_is_refused_where_it_means_nothing():
    proc = ralp_bench("run", "--cluster", "local", "--no-firewall", *RUN, "--strategy", "ps", "--steps", "2",
                      "--no-store")
    assert proc.returncode != 0 and "--no-firewall is for --cluster hosts or slurm" in proc.stderr, proc.stderr


# ---- local: loopback only (root) ------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the loopback-only namespace needs root")
def test_local_ranks_listen_where_nobody_else_can_reach():
    """While a local run goes, no new listening port appears in this machine's own namespace:
    the ranks' servers live in a namespace with nothing but loopback."""
    before = set(fw.listening_ports())
    cli = subprocess.Popen([PY, "-m", "bench.cli", "run", "--cluster", "local", *RUN, "--strategy", "ps,horovod",
                            "--steps", "40", "--no-store"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    seen_ranks, ours = False, set()
    while cli.poll() is None:
        seen_ranks = seen_ranks or _ranks_running()
        ours |= {port for port in set(fw.listening_ports()) - before if _owner_is_rank(port)}
        time.sleep(0.2)
    out, err = cli.communicate()
    assert cli.returncode == 0, err[-2000:]
    assert seen_ranks, "no rank was seen running: the check looked at nothing"
    assert not ours, f"ports of the run reachable from this namespace: {sorted(ours)}"


def _ranks_running():
    return bool(our_processes((b"bench.run",)))


def _owner_is_rank(port):
    """Does a rank, mpirun or its daemon hold a socket listening on ``port`` in this namespace?
    (Other processes of this machine may open ports meanwhile; only the run's count.)"""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return "python" in out or "mpirun" in out or "orted" in out


# ---- hosts over ssh (root) ------------------------------------------------------------------

def _can():
    ok, why = nx.can_emulate()
    if ok:
        ok, why = ssh_hosts.available()
    if ok and not shutil.which("nft"):
        ok, why = False, "nft not found (apt-get install -y nftables)"
    return ok, why


OK, WHY = _can()
needs_hosts = pytest.mark.skipif(not OK, reason=f"no emulated ssh hosts with nftables here: {WHY}")


@pytest.fixture(scope="module")
def cluster():
    from bench.launch.emulated_cluster import destroy_cluster
    from bench.launch.ssh_hosts import SshCluster

    up = ralp_bench("cluster", "up", "--hosts", "4", "--ssh", "--bandwidth", "1gbit", "--name", NAME,
                    "--no-link-check", timeout=120)
    assert up.returncode == 0, up.stderr
    shared = tempfile.mkdtemp(prefix="fwtest-", dir="/var/tmp")  # outside every machine's private /tmp
    try:
        c = SshCluster.attach(NAME)
        c.shared = shared
        c.hostfile_path = os.path.join(shared, "hostfile")
        with open(c.hostfile_path, "w") as fh:
            fh.write("h0 slots=1\nh1 slots=1\nh2 slots=1\n")  # h3 is the stranger
        yield c
    finally:
        destroy_cluster(NAME)
        shutil.rmtree(shared, ignore_errors=True)


def on(cluster, machine, command, timeout=60, check=True):
    out = subprocess.run(cluster.enter_argv(machine, ["sh", "-c", command]), capture_output=True, text=True,
                         timeout=timeout)
    assert not check or out.returncode == 0, out.stderr
    return out.stdout.strip()


def tables(cluster):
    """The machines that hold the run's table now."""
    return [m.name for m in cluster.machines if f"inet {fw.TABLE}" in on(cluster, m.name, "nft list tables")]


def listening(cluster, machine):
    code = "from bench.launch.firewall import listening_ports as l; print(*l())"
    return set(map(int, on(cluster, machine, f"cd {ROOT} && {PY} -c '{code}'").split()))


def rank_ports(cluster, machine):
    """The ports the run's ranks (``bench.run``) listen on in ``machine``: the TF servers. Not any new
    port: before the ranks start, the run's link probes (bench/launch/link_probe.py: an orted and a
    ``serve`` on each probed host) listen for a few seconds and are gone (a suite under load once
    counted those two as the ranks', and then found no port at all)."""
    code = ("import os; from bench.launch.firewall import listening_ports as l\n"
            "def rank(p):\n"
            "    try: return b'bench.run' in open(f'/proc/{p}/cmdline', 'rb').read()\n"
            "    except OSError: return False\n"
            "ranks = [int(p) for p in os.listdir('/proc') if p.isdigit() and rank(p)]\n"
            "print(*sorted(set(l()) - set(l(exclude_pids=ranks))))")
    return set(map(int, on(cluster, machine, f"cd {ROOT} && {PY} -c \"{code}\"").split()))


def connects(cluster, machine, ip, port):
    """Can ``machine`` open a TCP connection to ip:port? (a reset or silence: no)"""
    code = (f"import socket; s = socket.socket(); s.settimeout(3); "
            f"print(s.connect_ex(('{ip}', {port})) == 0)")
    return on(cluster, machine, f"{PY} -c \"{code}\"") == "True"


def driver(cluster, *args, env=None):
    """The CLI on the login host (outside the hostfile), in its own process group."""
    argv = [PY, "-m", "bench.cli", "run", "--cluster", "hosts", "--hostfile", cluster.hostfile_path,
            "--network", cluster.subnet, "--results", os.path.join(cluster.shared, "results"), *RUN, *args]
    return subprocess.Popen(cluster.enter_argv("login", argv), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})


def wait_for(predicate, timeout=180, what="it"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"waited {timeout}s for {what}")


def ip_of(cluster, name):
    return next(m.ip for m in cluster.machines if m.name == name)


@needs_hosts
def test_a_stranger_reaches_no_port_of_a_running_run_and_nothing_is_left_after(cluster):
    before = {h: listening(cluster, h) for h in ("h0", "h1")}
    # 80 steps (~20 s here) outlast the probing (~2 s after the servers are up, measured) tenfold; a run
    # over before the probes end fails the test, not passes it: its rules are gone, h3 reaches the server below.
    cli = driver(cluster, "--strategy", "ps", "--steps", "80")
    try:
        wait_for(lambda: tables(cluster) == ["h0", "h1", "h2"] or cli.poll() is not None, what="the rules")
        assert tables(cluster) == ["h0", "h1", "h2"], cli.communicate()[1][-2000:]
        # Every port the run listens on (mpirun's daemons, TF's servers), once the TF servers are up.
        wait_for(lambda: all(rank_ports(cluster, h) for h in ("h0", "h1")) or cli.poll() is not None,
                 what="the ranks' servers")
        ports = [(host, port) for host in ("h0", "h1") for port in sorted(listening(cluster, host) - before[host])]
        assert cli.poll() is None and len(ports) >= 3, (ports, cli.poll() is None or cli.communicate()[1][-2000:])
        # At once: a dropped connection waits out its timeout, and the run must still be going.
        with ThreadPoolExecutor(len(ports)) as pool:
            opened = list(pool.map(lambda hp: connects(cluster, "h3", ip_of(cluster, hp[0]), hp[1]), ports))
        assert not any(opened), f"h3 opened {[hp for hp, ok in zip(ports, opened) if ok]}"
        # A port opened during the run: a cluster host gets in, the stranger does not.
        server = subprocess.Popen(cluster.enter_argv("h0", [PY, "-c", (
            "import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(); "
            "print(s.getsockname()[1], flush=True); time.sleep(120)")]), stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline())
            assert connects(cluster, "h2", ip_of(cluster, "h0"), port)
            assert not connects(cluster, "h3", ip_of(cluster, "h0"), port)
            assert connects(cluster, "h0", "127.0.0.1", port)  # loopback untouched
        finally:
            server.kill()
            server.wait()
        out, err = cli.communicate(timeout=600)
        assert cli.returncode == 0, err[-3000:]
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert tables(cluster) == []
    assert connects(cluster, "h3", ip_of(cluster, "h0"), 22)  # sshd, listening before, always reachable


@needs_hosts
def test_no_rule_is_left_after_a_failed_rank_or_ctrl_c(cluster):
    failed = driver(cluster, "--strategy", "broken", "--steps", "2", "--no-store",
                    env={"RALP_STRATEGY_MODULES": "tests.demo_broken_spec"})
    out, err = failed.communicate(timeout=300)
    assert failed.returncode != 0 and "this strategy always fails in setup" in out + err, err[-2000:]
    assert tables(cluster) == []
    interrupted = driver(cluster, "--strategy", "ps", "--steps", "400", "--no-store")
    try:
        wait_for(lambda: tables(cluster) == ["h0", "h1", "h2"], what="the rules")
        os.killpg(interrupted.pid, signal.SIGINT)
        out, err = interrupted.communicate(timeout=120)
    finally:
        if interrupted.poll() is None:
            os.killpg(interrupted.pid, signal.SIGKILL)
    assert tables(cluster) == [], err[-3000:]


@needs_hosts
def test_rules_left_by_a_killed_driver_go_with_the_next_run(cluster):
    killed = driver(cluster, "--strategy", "ps", "--steps", "400", "--no-store")
    try:
        wait_for(lambda: tables(cluster) == ["h0", "h1", "h2"], what="the rules")
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        # its output ends once mpirun, told by the kernel that its driver died, has ended the ranks
        killed.communicate(timeout=120)
    assert tables(cluster) == ["h0", "h1", "h2"]  # nobody was left to remove them...
    wait_for(lambda: not our_processes((b"bench.run",)), timeout=120,
             what="the killed run's ranks to end")
    nxt = driver(cluster, "--strategy", "ps", "--steps", "2", "--no-store")
    out, err = nxt.communicate(timeout=300)
    assert nxt.returncode == 0, err[-2000:]
    assert tables(cluster) == []  # ...until the next run replaced them and removed its own

