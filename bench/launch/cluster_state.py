"""Which emulated clusters exist, who owns them, and removing them: the lifecycle half of emulated_cluster.py.

A cluster writes its state file (``/run/ralp-bench/<name>.json``: owner pid and
start time, namespaces, hosts with their CPU groups) before it creates anything
and removes it after everything is gone, its directory ``/run/ralp-bench/<name>/``
(an ssh cluster's keys, configs and hostfile) last. Bring-up and cleanup hold one flock, so
a cluster being built is never taken for an orphan. A cluster is stale when its
owner died (SIGKILL, crash), or when namespaces or CPU groups of ours have no
state file at all; every bring-up removes stale clusters first. An ssh cluster's machines
(sshd and whatever runs on them) live in its network namespaces, so removing those ends them
and, with their last process, their mounts.
"""
import json
import os
import re
import shutil

from bench.launch import cgroups as cg
from bench.launch import netns as nx
from bench.store.dirlock import dir_lock

STATE_DIR = "/run/ralp-bench"
BRIDGE = "ralpbr"  # also the signature that marks a switch namespace as ours
_ROLE = r"(sw|h\d+|login)"  # what follows "<cluster>-" in a namespace's name


def _state_path(name):
    return os.path.join(STATE_DIR, f"{name}.json")


def cluster_dir(name):
    """An ssh cluster's keys, configs and hostfile (bench/launch/ssh_hosts.py)."""
    return os.path.join(STATE_DIR, name)


def _agent_path(name):
    return os.path.join(STATE_DIR, f"{name}-rsh-agent.sh")


def state_lock():
    """Serialise bring-up and cleanup across processes (one flock on the state dir)."""
    return dir_lock(STATE_DIR)


def _process_start_time(pid):
    """Kernel start time of ``pid`` (clock ticks since boot), None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_alive(state):
    """True for manual clusters and for clusters whose owner process still runs."""
    if state.get("manual"):
        return True
    pid = state.get("owner_pid")
    return pid is not None and _process_start_time(pid) == state.get("owner_start")


def read_states():
    """All recorded clusters: {name: state dict}."""
    states = {}
    if not os.path.isdir(STATE_DIR):
        return states
    for fname in sorted(os.listdir(STATE_DIR)):
        if fname.endswith(".json"):
            try:
                with open(os.path.join(STATE_DIR, fname)) as fh:
                    states[fname[:-5]] = json.load(fh)
            except (OSError, ValueError):
                states[fname[:-5]] = {"name": fname[:-5], "namespaces": []}
    return states


def cluster_namespaces(name, all_ns=None):
    """Existing namespaces that belong to cluster ``name`` (``name-sw``, ``name-h<i>``, ``name-login``)."""
    pattern = re.compile(rf"^{re.escape(name)}-{_ROLE}$")
    return [ns for ns in (nx.netns_list() if all_ns is None else all_ns) if pattern.match(ns)]


def find_stale(names=()):
    """Names of clusters to remove: owner dead, or namespaces of ours with no state file.

    Namespaces are listed *before* state files are read: a cluster writes its
    state before creating namespaces, so one being built is never taken for
    an orphan. A namespace set without state counts as ours when its switch
    namespace holds our bridge, or when its name is in ``names``.
    """
    all_ns = nx.netns_list()
    states = read_states()
    stale = [n for n, st in states.items() if not owner_alive(st)]
    for ns in all_ns:
        match = re.match(rf"^([a-z][a-z0-9]*)-{_ROLE}$", ns)
        if not match or match.group(1) in states or match.group(1) in stale:
            continue
        cname = match.group(1)
        if cname in names or (f"{cname}-sw" in all_ns and BRIDGE in nx.link_names(f"{cname}-sw")):
            stale.append(cname)
    for path in cg.groups_of():  # a group outlives its namespaces only if teardown was cut short
        cname = cg.cluster_of(path)
        if (cname and cname not in states and cname not in stale and not cluster_namespaces(cname, all_ns)
                and (cname in names or not cg.pids_in(path))):  # a calibration's group is busy
            stale.append(cname)
    for entry in sorted(os.listdir(STATE_DIR)) if os.path.isdir(STATE_DIR) else []:
        # A cluster directory whose state file is gone: a removal cut short after the namespaces went.
        if (os.path.isdir(cluster_dir(entry)) and entry not in states and entry not in stale
                and not cluster_namespaces(entry, all_ns)):
            stale.append(entry)
    return stale


def remove_cluster(name):
    """Kill processes in, and delete, every namespace of ``name``; then drop its state and agent."""
    state = read_states().get(name, {})
    namespaces = set(state.get("namespaces", [])) | set(cluster_namespaces(name))
    survivors = []
    # Hosts first (that is where processes run), switch last.
    for ns in sorted(namespaces, key=lambda n: n.endswith("-sw")):
        survivors += nx.delete_netns(ns)
    groups = {h.get("cpu_group") for h in state.get("hosts", [])} | set(cg.groups_of(name))
    for path in sorted(g for g in groups if g):
        survivors += cg.remove(path)
    for path in (_state_path(name), state.get("rsh_agent"), _agent_path(name)):
        if path and os.path.exists(path):
            os.remove(path)
    if os.path.isdir(cluster_dir(name)):
        shutil.rmtree(cluster_dir(name), ignore_errors=True)
    return survivors


def destroy_cluster(name):
    """remove_cluster under the cross-process lock (for `cluster down`)."""
    with state_lock():
        return remove_cluster(name)


def cleanup_stale(names=()):
    """Remove every stale cluster (see find_stale); returns their names."""
    with state_lock():
        stale = find_stale(names)
        for name in stale:
            remove_cluster(name)
    return stale
