"""Distributed runs on this machine (loopback, real mpirun + TF servers + Horovod).

Correctness, not speed: with the same seed and data, sync PS, Horovod and RALP
at 2 workers must end at the parameters that single-process SGD on the global
batch reaches; a worker that dies must end the run with an error naming it.
"""
import re
import signal
import time

import numpy as np
import pytest

from bench.core.config import RunConfig
from bench.driver.harness import run_one
from bench.launch.local import LocalLauncher
from tests.conftest import our_processes, signal_and_wait, start_cli, wait_for_rank

MODEL, STEPS, WARMUP, BATCH, LR = "lenet_mnist", 3, 1, 16, 0.05


def reference_weights(steps, model=MODEL):
    """Single-process momentum SGD over the global batch each step (2 workers x BATCH);
    ``model``: any --model spelling or ModelSpec."""
    import tensorflow as tf

    from bench.data import global_batch, load_dataset
    from bench.models import get_model
    from bench.models.build import settled_spec
    from bench.models.registry import ModelSpec
    from bench.models.sources import get_spec
    from strategies.optim import MomentumSGD
    from strategies.base import loss_fn

    spec = settled_spec(model if isinstance(model, ModelSpec) else get_spec(model))
    data = load_dataset("mnist", seed=0, input_shape=spec.input_shape, num_classes=spec.num_classes)
    model = get_model(spec, seed=0)
    opt = MomentumSGD(model.trainable_variables, LR, 0.9)
    for step in range(steps):
        x, y = global_batch(step, data.train_x, data.train_y, BATCH, 2, 0)
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.constant(y.astype(np.int32)), model(x, training=True))
        opt.apply(tape.gradient(loss, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


def assert_same_weights(dump, reference, label):
    """The weights a run dumped equal ``reference`` within 1e-4 relative, tensor by tensor."""
    got = np.load(dump)
    weights = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(weights) == len(reference)
    for ours, ref in zip(weights, reference):
        assert ours.shape == ref.shape
        rel = np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-12)
        assert rel <= 1e-4, f"{label}: relative difference {rel:.2e}"
    return weights


@pytest.fixture(scope="module")
def reference():
    return reference_weights(WARMUP + STEPS)


# Variants beyond the strategy's defaults: the hybrid's head sharded over 2 PS tasks, its
# batches pipelined in 4 micro-batches, both (strategies/sharded_head.py, strategies/ralp_hybrid.py).
VARIANTS = {"ps-colocated": dict(strategy="ps", ps_placement="colocated"),
            "hybrid-sharded": dict(strategy="ralp-hybrid", ps=2),
            "hybrid-pipelined": dict(strategy="ralp-hybrid", micro_batches=4),
            "hybrid-sharded-pipelined": dict(strategy="ralp-hybrid", ps=2, micro_batches=2)}


def ranks_tmpdir(tmp_path, monkeypatch):
    """A temporary directory of the test's own for every rank it starts ($TMPDIR, inherited)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def left_by_ranks(tmp):
    """What ranks left in ``tmp``: TensorFlow's autograph files, rank scratch directories, Python's temporaries."""
    return [p.name for p in tmp.rglob("*") if p.name.startswith(("__autograph", "ralp-rank-", "tmp"))]


@pytest.mark.parametrize("strategy", ["ps", "ps-colocated", "horovod", "ralp", "ralp-hybrid", "hybrid-sharded",
                                      "hybrid-pipelined", "hybrid-sharded-pipelined"])
def test_strategies_match_single_process_sgd(strategy, reference, tmp_path, monkeypatch):
    dump = str(tmp_path / "weights.npz")
    settings = VARIANTS.get(strategy, dict(strategy=strategy))
    cfg = RunConfig(model=MODEL, workers=2, batch_size=BATCH, steps=STEPS, warmup_steps=WARMUP, learning_rate=LR,
                    dataset="mnist", dump_weights=dump, **settings).validate()
    tmp = ranks_tmpdir(tmp_path, monkeypatch)
    row = run_one(cfg, LocalLauncher())
    assert row["status"] == "ok", row["failure"]
    # Ranks leave by os._exit, past every atexit handler: their temporary files went with them
    # (bench/rank/scratch.py; before it, TensorFlow's autograph files stayed, ~10 per rank).
    assert not left_by_ranks(tmp), left_by_ranks(tmp)
    weights = assert_same_weights(dump, reference, strategy)
    # and training moved the weights at all (the comparison is not vacuous)
    from bench.models import get_model
    initial = [v.numpy() for v in get_model(MODEL, seed=0).trainable_variables]
    assert max(np.abs(w - i).max() for w, i in zip(weights, initial)) > 1e-3
    if strategy.startswith(("ralp", "hybrid")):
        assert row["cut_layer"] == "flatten"
    assert (row["ps"], row["micro_batches"]) == (cfg.ps, cfg.micro_batches)


def run_plugin(strategy, spec_module, monkeypatch, tmp_path):
    """Train the plugin ``strategy`` (registered by ``spec_module``, named in RALP_STRATEGY_MODULES
    as a user would) at 2 workers; return its row and the weights it dumped."""
    import importlib

    from bench.core.strategy_specs import SPECS

    monkeypatch.setenv("RALP_STRATEGY_MODULES", spec_module)  # for the ranks
    importlib.reload(importlib.import_module(spec_module))  # for this process
    dump = str(tmp_path / "weights.npz")
    try:
        cfg = RunConfig(model=MODEL, strategy=strategy, workers=2, batch_size=BATCH, steps=STEPS,
                        warmup_steps=WARMUP, learning_rate=LR, dataset="mnist", dump_weights=dump).validate()
        row = run_one(cfg, LocalLauncher())
    finally:
        SPECS.pop(strategy, None)
    assert row["status"] == "ok", row["failure"]
    assert row["plan"] == strategy and row["images_per_sec"] > 0
    return row, dump


def test_a_new_strategy_is_one_module_and_one_spec_entry(reference, tmp_path, monkeypatch):
    """tests/demo_strategy.py + the register() call in tests/demo_strategy_spec.py, nothing else:
    it validates, launches in the TF layout, trains to the same weights as SGD, and gets a row."""
    _, dump = run_plugin("ps-reduce0", "tests.demo_strategy_spec", monkeypatch, tmp_path)
    assert_same_weights(dump, reference, "ps-reduce0")


def test_a_workers_layout_strategy_runs_its_own_class(reference, tmp_path, monkeypatch):
    """The spec's layout decides the rank entry: a strategy registered with the workers layout
    runs its own class (here MPI_Allreduce through mpi4py, no Horovod), not Horovod's, and an
    unpriced strategy gets a row without a prediction rather than an error."""
    row, dump = run_plugin("mpi-allreduce", "tests.demo_workers_spec", monkeypatch, tmp_path)
    assert row["horovod_settings"] is None and row["predicted_step_time_s"] is None
    assert_same_weights(dump, reference, "mpi-allreduce")


def test_killed_worker_ends_run_with_named_rank(tmp_path, monkeypatch):
    tmp = ranks_tmpdir(tmp_path, monkeypatch)
    proc = start_cli("run", "--cluster", "local", "--model", MODEL, "--strategy", "ps", "--workers", "2",
                     "--batch-size", "8", "--steps", "100000", "--step-timeout", "60", "--quiet",
                     "--results", tmp_path / "results")
    victim = wait_for_rank(3, proc)  # rank 3 = worker 1 (chief, ps, worker 0, worker 1)
    time.sleep(25)  # let training get going
    _, err = signal_and_wait(proc, victim[0], signal.SIGKILL)
    assert proc.returncode == 3, err
    # "is gone": Open MPI lost its own notice of the death, which the chief's error names instead
    assert re.search(r"rank 3 \(worker 1\) (died \(SIGKILL\)|is gone)", err), err
    assert "Traceback" not in err
    time.sleep(1)
    assert our_processes() == []
    # no rank ran its own cleanup (one was killed, mpirun killed the rest): Open MPI removed their
    # directories with its session directory (bench/rank/scratch.py)
    assert not left_by_ranks(tmp), left_by_ranks(tmp)
    # the failure is recorded as a row, not dropped
    from bench.store.results import ResultStore
    df = ResultStore(str(tmp_path / "results")).load()
    assert list(df["status"]) == ["failed"] and "worker 1" in df["failure"].iloc[0]


def test_terminated_run_stops_every_rank(tmp_path):
    """`kill` (SIGTERM) on the CLI unwinds like Ctrl-C: mpirun's process group is stopped, exit 143,
    no result file half-written. Started with SIGINT ignored, as a background job is, Ctrl-C still works."""
    proc = start_cli("run", "--cluster", "local", "--model", MODEL, "--strategy", "ps", "--workers", "2",
                     "--batch-size", "8", "--steps", "100000", "--quiet", "--results", tmp_path / "results")
    wait_for_rank(3, proc)
    _, err = signal_and_wait(proc, proc.pid, signal.SIGTERM)
    assert proc.returncode == 143 and "terminated" in err, err
    time.sleep(1)
    assert our_processes() == []
    assert not (tmp_path / "results" / "runs").exists()

    proc = start_cli("run", "--cluster", "local", "--model", MODEL, "--strategy", "ps", "--workers", "2",
                     "--batch-size", "8", "--steps", "100000", "--quiet", "--results", tmp_path / "results",
                     ignore_sigint=True)
    wait_for_rank(3, proc)
    _, err = signal_and_wait(proc, proc.pid, signal.SIGINT)
    assert proc.returncode == 130 and "interrupted" in err, err
    time.sleep(1)
    assert our_processes() == []
