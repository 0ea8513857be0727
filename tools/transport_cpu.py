"""CPU that TensorFlow's transport spends per byte across one emulated link (a diagnostic).

Why: on a CPU-capped emulated host the transport's CPU comes out of the same quota as the
model's compute, so a transport that costs more per byte on a slow link stretches the step
(results/bound.md: the hybrid's ring under the backward). This brings up a 2-host emulated
cluster at RATE with CORES per host, starts a TensorFlow server on host 1 holding an MB-sized
variable and, on host 0, a session that reads it into a reduction there, in a loop for SECONDS;
it prints the CPU seconds per byte each host's processes spent (utime + stime, read from
outside), and the rate the reads reached. ``--nic`` sizes the link's packets for the NIC it
stands for (bench/launch/netns.py ``shape_link``), as a run scaled with --scale-to does.

    python tools/transport_cpu.py --rate 29.7mbit --cores 0.22 [--nic 10gbit] [--seconds 20] [--mb 8]

Run as root with the project's Python. One line of JSON: rate_mbit, nic_mbit, gso_segments,
reached_mbit, recv_ns_per_byte (host 0: the reader), send_ns_per_byte (host 1: the server).
"""
import argparse
import json
import os
import subprocess
import sys
import time

from bench.launch import cgroups, netns
from bench.launch.emulated_cluster import EmulatedCluster
from ralp.hardware import parse_bandwidth

PORTS = (47_100, 47_101)


def serve(role, addresses, mb, seconds):
    """One end, inside its host: ``server`` holds the variable until killed; ``reader`` reads
    it in a loop and prints START, then DONE <reads> once ``seconds`` have passed."""
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    spec = tf.train.ClusterSpec({"reader": [addresses[0]], "server": [addresses[1]]})
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
    server = tf.distribute.Server(spec, job_name=role, task_index=0, config=config)
    if role == "server":
        server.join()
    with tf.device("/job:server/task:0"):
        v = tf.compat.v1.get_variable("v", [int(mb * 2 ** 20 / 4)], initializer=tf.compat.v1.ones_initializer())
        value = tf.identity(v)
    with tf.device("/job:reader/task:0"):
        total = tf.reduce_sum(value)  # the bytes cross the link to be summed here
    with tf.compat.v1.Session(server.target, config=config) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(total)  # connections up, buffers allocated
        print("START", flush=True)
        start, reads = time.monotonic(), 0
        while time.monotonic() - start < seconds:
            sess.run(total)
            reads += 1
        print("DONE", reads, flush=True)


def measure(rate_bps, cores, nic_bps, seconds, mb):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here), TF_CPP_MIN_LOG_LEVEL="2")
    with EmulatedCluster(2, rate_bps, name="rtcpu", cpus_per_host=cores, nic_bps=nic_bps) as c:
        addresses = [f"{h.ip}:{port}" for h, port in zip(c.hosts, PORTS)]

        def start(index, role, **kw):
            argv = [sys.executable, os.path.abspath(__file__), "--role", role, "--addresses", *addresses,
                    "--mb", str(mb), "--seconds", str(seconds)]
            return subprocess.Popen(c.exec_argv(index, argv), env=env, **kw)

        server = start(1, "server")
        reader = start(0, "reader", stdout=subprocess.PIPE, text=True)
        groups = [h.cpu_group for h in c.hosts]
        try:
            for line in reader.stdout:
                if line.startswith("START"):
                    before, t0 = [cgroups.process_cpu_ticks(g) for g in groups], time.monotonic()
                elif line.startswith("DONE"):
                    after, t1 = [cgroups.process_cpu_ticks(g) for g in groups], time.monotonic()
                    reads = int(line.split()[1])
                    break
            else:
                raise SystemExit(f"the reader ended without a result (exit {reader.wait()})")
        finally:
            for p in (reader, server):
                p.kill()
                p.wait()
    moved = reads * mb * 2 ** 20
    per_byte = [(a - b) / os.sysconf("SC_CLK_TCK") / moved * 1e9 for a, b in zip(after, before)]
    packets = max(rate_bps, nic_bps or 0)
    return {"rate_mbit": rate_bps / 1e6, "nic_mbit": packets / 1e6, "cores": cores,
            "gso_segments": netns.gso_segments(packets), "reached_mbit": round(moved * 8 / (t1 - t0) / 1e6, 2),
            "recv_ns_per_byte": round(per_byte[0], 2), "send_ns_per_byte": round(per_byte[1], 2)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", help="the link's rate, e.g. 29.7mbit (required)")
    p.add_argument("--cores", type=float, help="each host's CPU cap in cores (required)")
    p.add_argument("--nic", default=None, help="the NIC the link stands for, e.g. 10gbit (default: the link's rate)")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--mb", type=float, default=8.0, help="MiB per read")
    p.add_argument("--role", choices=("reader", "server"), help=argparse.SUPPRESS)
    p.add_argument("--addresses", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.role:
        serve(a.role, a.addresses, a.mb, a.seconds)
        return
    if a.rate is None or a.cores is None:
        p.error("--rate and --cores are required, e.g. --rate 29.7mbit --cores 0.22")
    nic = parse_bandwidth(a.nic) if a.nic else None
    print(json.dumps(measure(parse_bandwidth(a.rate), a.cores, nic, a.seconds, a.mb)))


if __name__ == "__main__":
    main()
