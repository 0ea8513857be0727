"""Role dispatch for one MPI rank: serve, drive, or train with Horovod.

Order of events (every rank):
 1. rank 0 resolves the plan (auto/ralp) and loads nothing else; all ranks learn it;
 2. addresses and free ports are exchanged (bench/tf_cluster.rendezvous);
 3. PS and worker ranks start a TF server; everyone waits until all are up;
 4. the chief (or every Horovod worker) trains through bench/rank/trainer.py while
    serving ranks answer traffic-meter rounds until the chief says stop;
 5. rank 0 (the chief, or Horovod rank 0) hands over the result (``_write``).
Every exit path calls MPI_Finalize, then leaves with os._exit: TF's gRPC
threads can keep a process alive after Python's main thread is done.
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.core.horovod_settings import tuning_env
from bench.core.roles import RankLayout, Role, role_of
from bench.core.strategy_specs import spec_of
from bench.launch.cpu_steal import measure_quietly
from bench.rank.gpu import choose_gpu, host_gpus
from bench.rank.hvd_init import gloo_timeout_s, init_horovod
from bench.rank import scratch
from bench.rank.link_probe import time_allreduce
from bench.rank.result import result_lines
from bench.rank.tf_cluster import (TrafficMeter, device_for, follow_until_stopped, polite_allgather, rendezvous,
                                   start_server, thread_counts)
from bench.rank.trainer import Watchdog, train
from bench.store.atomic import write_text_atomic
from strategies.base import StrategyContext, strategy_class


def phase(rank: int, what: str):
    """Tell the launcher where this rank is; a hung run's error then names the stuck phase."""
    print(f"RALP-PHASE {rank} {what}", flush=True)


def _ranks_on_my_host(info) -> int:
    me = info.addresses[info.rank]
    return sum(1 for a in info.addresses if a == me)


def _finish(code: int = 0):
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    scratch.remove()  # no atexit handler runs after os._exit
    os._exit(code)


def run_rank(cfg: RunConfig, resolve_plan, load_shards) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()

    watchdog = Watchdog(comm, cfg.step_timeout)
    watchdog.arm("start-up (plan, rendezvous, TF servers)", timeout_s=max(300.0, cfg.step_timeout))
    phase(rank, "planning")
    plan = polite_allgather(comm, resolve_plan(cfg) if rank == 0 else None)[0]
    strategy_name = plan.strategy
    cfg = plan.applied_to(cfg)  # 'auto' is resolved on rank 0
    spec = spec_of(strategy_name)
    if spec.layout == "single":
        return _single(comm, cfg, plan, load_shards, watchdog)
    layout = RankLayout.for_run(cfg, strategy_name)
    ps_tasks = layout.ps
    roles = [role_of(r, world, cfg.workers, ps_tasks, layout.colocated) for r in range(world)]
    role = roles[rank]
    cls = strategy_class(strategy_name)
    if spec.layout == "tf" and all(r.job == "worker" for r in roles):
        raise UserError(f"{strategy_name} needs 1 chief + {ps_tasks} ps + {cfg.workers} worker ranks "
                        f"(mpirun -np {1 + ps_tasks + cfg.workers}); got {world}")
    phase(rank, "rendezvous")
    info = rendezvous(comm, roles, cfg.network)
    phase(rank, "importing TensorFlow")
    meter = TrafficMeter(comm, info)
    intra, inter = thread_counts(cfg.intra_threads, cfg.inter_threads, _ranks_on_my_host(info))

    import tensorflow as tf  # only now: thread settings must precede TF's first op

    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    gpu = _select_gpu(tf, spec, roles, info)  # before any op, server or Horovod start

    if spec.layout == "workers":
        return _workers(comm, info, cfg, cls, plan, roles, meter, load_shards, watchdog)
    if role.job != "chief":
        _serve(comm, info, role, intra, inter, gpu, watchdog)
    _drive(comm, info, cfg, cls, plan, roles, ps_tasks, meter, load_shards, watchdog)


def _workers(comm, info, cfg, cls, plan, roles, meter, load_shards, watchdog):
    """The workers layout (the spec's ``layout``, not the strategy's class, decides): every
    worker rank trains its own replica of ``cls`` in lockstep; worker 0 writes the result.
    Horovod is started only for a strategy that uses it (``cls.uses_horovod``). Ranks a TF
    layout launched beside them (an ``auto`` run that picked this plan) sit the run out."""
    rank = comm.Get_rank()
    info.release_port()  # no TF server in this layout
    worker_ranks = [r for r, ro in enumerate(roles) if ro.job == "worker"]
    hvd = None
    if cls.uses_horovod:
        phase(rank, "horovod init")
        hvd = init_horovod(comm, worker_ranks, info.addresses, cfg.horovod_ops,
                           tuning_env(cfg.horovod_fusion_mb, cfg.horovod_cycle_ms, cfg.horovod_autotune,
                                      cfg.horovod_hierarchical),
                           timeout_s=gloo_timeout_s(max(cfg.setup_window_s, cfg.warmup_window_s)))
    probe = None
    if hvd is not None and cfg.link_probe_floats:
        phase(rank, "link check (all-reduce)")
        probe = _link_probe(hvd, cfg.link_probe_floats)
    watchdog.disarm()
    if roles[rank].job != "worker":
        follow_until_stopped(comm, info)
        _finish()
    phase(rank, "training")
    index = worker_ranks.index(rank)
    ctx = StrategyContext(cfg, load_shards(cfg), extra={"worker_index": index, "comm": comm})
    leader = index == 0
    result = _train_and_report(comm, cfg, cls(ctx), meter, plan, leader, watchdog, lockstep=True)
    result.ps_hosts, result.link_probe = [], probe
    result.worker_hosts = sorted({info.addresses[r] for r in worker_ranks})
    if leader:
        _write(cfg, result)
    if hvd is not None:
        hvd.shutdown()  # Horovod's background thread must leave MPI before MPI_Finalize
    _finish()


def _link_probe(hvd, floats: int) -> dict:
    """The link check's all-reduce (bench/launch/link_probe.py ``LinkChecks``) in this run's own
    ranks, before training: Horovod is up already, so the check costs no launch of its own
    (another mpirun, TensorFlow and Horovod imported again on every worker host: ~15 s on the
    emulated cluster, more over ssh). Measured once, with the machine's steal beside it: the
    driver measures apart where that steal is too high (``measure_quietly``'s rule)."""
    (seconds, _), steal = measure_quietly(lambda: time_allreduce(hvd, floats), max_steal=None)
    return {"floats": floats, "seconds": seconds, "steal": steal}


def _serve(comm, info, role, intra, inter, gpu, watchdog):
    """A PS or worker task: run the TF server and answer traffic samples until the chief stops."""
    rank = comm.Get_rank()
    phase(rank, "starting TF server")
    server = start_server(info, role, intra, inter, gpu)
    info.release_port()  # the server holds it now
    phase(rank, "TF server up, waiting for all servers")
    polite_allgather(comm, "up")
    phase(rank, "serving")
    watchdog.disarm()
    follow_until_stopped(comm, info)
    del server
    _finish()


def _drive(comm, info, cfg, cls, plan, roles, ps_tasks, meter, load_shards, watchdog):
    """The chief: connect to every task, train through the strategy, write the result."""
    import tensorflow as tf

    rank = comm.Get_rank()
    phase(rank, "waiting for all TF servers")
    polite_allgather(comm, "up")
    watchdog.disarm()
    phase(rank, "connecting to the cluster")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(info.spec), task_type="chief", task_id=0, rpc_layer="grpc")
    if cls.connects_to_cluster:
        tf.config.experimental_connect_to_cluster(resolver, job_name="chief", task_index=0,
                                                  make_master_device_default=False)
    info.release_port()  # the chief's own server (connect_to_cluster's) holds it now, or none will
    phase(rank, "training")
    ctx = StrategyContext(cfg, load_shards(cfg),
                          worker_devices=[device_for("worker", i) for i in range(cfg.workers)],
                          ps_devices=[device_for("ps", i) for i in range(ps_tasks)],
                          cut=plan.cut, extra={"resolver": resolver})
    result = _train_and_report(comm, cfg, cls(ctx), meter, plan, True, watchdog)
    result.ps_hosts = sorted({info.addresses[r] for r, ro in enumerate(roles) if ro.job in ("chief", "ps")})
    result.worker_hosts = sorted({info.addresses[r] for r, ro in enumerate(roles) if ro.job == "worker"})
    _write(cfg, result)
    _finish()


def _single(comm, cfg, plan, load_shards, watchdog):
    """The one-process reference: one rank, nothing to connect to."""
    if comm.Get_size() != 1:
        raise UserError(f"single is one process (mpirun -np 1); got {comm.Get_size()}")
    info = rendezvous(comm, [Role("worker", 0)], cfg.network)
    info.release_port()  # no server
    intra, inter = thread_counts(cfg.intra_threads, cfg.inter_threads, 1)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    _select_gpu(tf, spec_of(plan.strategy), [Role("worker", 0)], info)
    watchdog.disarm()
    phase(0, "training")
    strategy = strategy_class(plan.strategy)(StrategyContext(cfg, load_shards(cfg)))
    result = _train_and_report(comm, cfg, strategy, TrafficMeter(comm, info), plan, True, watchdog)
    result.ps_hosts, result.worker_hosts = [], [info.addresses[0]]
    _write(cfg, result)
    _finish()


def _train_and_report(comm, cfg, strategy, meter, plan, leader, watchdog, lockstep=False):
    started = time.time()
    result = train(strategy, cfg, meter, watchdog, leader, lockstep=lockstep)
    result.strategy_requested, result.plan_reason, result.started_unix, result.world = (
        cfg.strategy, plan.reason, started, comm.Get_size())
    watchdog.arm("finishing (weights, last traffic sample)", timeout_s=max(120.0, cfg.step_timeout))
    if cfg.dump_weights and leader:
        np.savez(cfg.dump_weights, *strategy.trainable_weights())
    meter.sample("stop")
    return result


def _select_gpu(tf, spec, roles, info):
    """This rank's GPU (bench/rank/gpu.py decides), applied to the eager context before TensorFlow
    initialises its GPUs: only the chosen GPU visible, its memory grown on demand. A server
    process gets the same choice through its ConfigProto too (start_server), so the eager
    context and the server never map one device id to two GPUs. A CPU host: nothing changes."""
    physical = tf.config.list_physical_devices("GPU")
    choice = choose_gpu(info.rank, roles, info.addresses, spec, host_gpus(len(physical)))
    if choice.cpu_host:
        return choice
    chosen = [] if choice.index is None else [physical[choice.index]]
    tf.config.set_visible_devices(chosen, "GPU")
    for device in chosen:
        tf.config.experimental.set_memory_growth(device, True)
    return choice


def _write(cfg, result):
    """Rank 0's result: to --out FILE on this rank's host (a user's own mpirun), else as
    RALP-RESULT lines on stdout, which mpirun brings to the driver wherever it runs: the
    driver's /tmp is not this host's (bench/rank/result.py)."""
    if not cfg.out:
        sys.stdout.flush()
        for line in result_lines(result.to_json()):
            os.write(1, line.encode())  # one write per line: never split by this process
        return
    write_text_atomic(Path(cfg.out), result.to_json())
