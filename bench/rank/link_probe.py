"""The programs the link probe (bench/launch/link_probe.py) runs on the emulated hosts.

``serve``/``send``: raw TCP, the receiver times first byte to last byte; ``allreduce``:
Horovod's all-reduce of a model-sized buffer inside a tf.function, started the way runs
start Horovod. They live with the rank-side code, not with the launchers, because they
import TensorFlow and Horovod.
"""
import json
import selectors
import socket
import statistics
import sys
import time
from bench.core.roles import Role
from bench.rank.hvd_init import init_horovod
from bench.rank.tf_cluster import rendezvous

CHUNK = 1 << 20


# ---- the probe processes (run inside a host) -----------------------------------

def _serve(port: int, senders: int, expect: int):
    """Accept ``senders`` connections, read ``expect`` bytes from each; print first/last byte times."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(senders)
    print("ready", flush=True)
    conns = [srv.accept()[0] for _ in range(senders)]

    sel = selectors.DefaultSelector()
    left = {}
    for c in conns:
        sel.register(c, selectors.EVENT_READ)
        left[c] = expect
    buf = bytearray(CHUNK)
    first = last = None
    while any(left.values()):
        for key, _ in sel.select():
            n = key.fileobj.recv_into(buf)
            now = time.perf_counter()
            first = first or now
            last = now
            left[key.fileobj] -= n
            if n == 0 or left[key.fileobj] <= 0:
                sel.unregister(key.fileobj)
                left[key.fileobj] = 0
    print(json.dumps({"seconds": last - first}), flush=True)


def _send(ip: str, port: int, total: int):
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection((ip, port), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    payload = b"\0" * CHUNK
    sent = 0
    while sent < total:
        sent += s.send(payload[:min(CHUNK, total - sent)])
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()


def _allreduce(floats: int, repeats: int, ops: str = "gloo", network: str = None):
    """Horovod's all-reduce of ``floats`` fp32 values inside a tf.function, as a training step
    runs it, started the way runs start Horovod (bench/rank/hvd_init.py)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    info = rendezvous(comm, [Role("worker", r) for r in range(comm.Get_size())], network)
    info.release_port()  # the probe runs no TF server
    hvd = init_horovod(comm, list(range(comm.Get_size())), info.addresses, ops)
    seconds, times = time_allreduce(hvd, floats, repeats)
    if hvd.rank() == 0:
        print(json.dumps({"seconds": seconds, "all": times}), flush=True)
    hvd.shutdown()


def time_allreduce(hvd, floats: int, repeats: int = 3):
    """(median, every time) of ``repeats`` all-reduces of ``floats`` fp32 values after one
    untimed (tracing, Horovod's first negotiation): this program's measurement, and the one a
    Horovod run makes in its own ranks before training (bench/rank/main.py), which spares the
    link check a launch of its own."""
    import tensorflow as tf

    buf = tf.ones([floats], tf.float32)

    @tf.function
    def reduce(x):
        return hvd.allreduce(x, op=hvd.Sum, name="link_probe")

    reduce(buf).numpy()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        reduce(buf)[0].numpy()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    what = argv[0]
    if what == "serve":
        _serve(int(argv[1]), int(argv[2]), int(argv[3]))
    elif what == "send":
        _send(argv[1], int(argv[2]), int(argv[3]))
    elif what == "allreduce":
        _allreduce(int(argv[1]), int(argv[2]), argv[3], argv[4] or None)  # "": no --network
    else:
        raise SystemExit(f"usage: python -m bench.rank.link_probe serve|send|allreduce ...; got {what!r}")


if __name__ == "__main__":
    main()
