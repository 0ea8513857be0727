"""A rank's TF port is its own from the rendezvous until its server has bound it.

The port is picked at the rendezvous and the server binds it seconds later, after TensorFlow is
imported. Let go of in between, an outgoing connection on the host can take it and the server
dies ("Could not start gRPC server", seen once in CI with two workers on one host). The real
rendezvous and the real server, in a subprocess (TF servers cannot be stopped)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_HELD = """
import errno, json, os, socket, sys
from mpi4py import MPI
from bench.core.roles import Role
from bench.rank.tf_cluster import REUSE_PORT_ENV, rendezvous, start_server
with_env = sys.argv[1] == "1"
info = rendezvous(MPI.COMM_SELF, [Role("worker", 0)], None)
port = int(info.spec["worker"][0].rsplit(":", 1)[1])
out = {"port_is_the_reserved_one": info.reserved.getsockname()[1] == port}
stranger = socket.socket()  # on another address of the host: the server's wildcard bind needs them all
try:
    stranger.bind(("127.0.0.2", port)); out["stranger"] = "bound"
except OSError as e:
    out["stranger"] = errno.errorcode[e.errno]
stranger.close()
if not with_env:
    del os.environ[REUSE_PORT_ENV]
try:
    server = start_server(info, Role("worker", 0), 1, 1)
    out["server"] = "up"
except Exception as e:
    out["server"] = str(e).strip()
info.release_port()
if out["server"] == "up":
    with socket.create_connection((info.addresses[0], port), timeout=10):
        out["reached"] = True
print(json.dumps(out)); sys.stdout.flush(); os._exit(0)
"""


def _held(with_env: bool) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", _HELD, "1" if with_env else "0"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_reserved_port_is_closed_to_others_and_open_to_the_ranks_server():
    pytest.importorskip("tensorflow")
    assert _held(True) == {"port_is_the_reserved_one": True, "stranger": "EADDRINUSE", "server": "up",
                           "reached": True}


def test_without_the_reuse_setting_the_server_could_not_bind_a_held_port():
    """The control: what the rank's server met when the port was taken under it."""
    pytest.importorskip("tensorflow")
    got = _held(False)
    assert got["stranger"] == "EADDRINUSE" and got["server"] == "Could not start gRPC server", got
