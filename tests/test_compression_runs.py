"""Codecs inside real distributed runs: the right numbers come out, and fewer bytes cross the wire.

Local runs (lenet_mnist on the shipped digits, 2 workers): each lossy run must end at the weights
of an independent NumPy emulation of its codec (per-worker gradients encoded, decoded and averaged,
top-k with error feedback), far from the uncompressed weights, so the codec demonstrably ran where
the gradients cross. Emulated cluster (alexnet_cifar, 1 Gbit/s links): the bytes measured on the PS
host's NIC drop as the cost model predicts, each within 10% of its prediction.
"""
import math

import numpy as np
import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.driver.harness import run_one
from bench.launch.local import LocalLauncher
from tests.test_distributed import BATCH, LR, MODEL, STEPS, WARMUP, reference_weights

UPDATES = WARMUP + STEPS


# ----------------------------------------------------------------------------- NumPy codecs

def fp16_scaled(g, key, residuals):
    unit = np.abs(g).max() / 2.0 ** 14
    if unit == 0:
        return np.zeros_like(g)
    return (g / unit).astype(np.float16).astype(np.float32) * unit


def int8(g, key, residuals):
    scale = np.abs(g).max() / 127.0
    if scale == 0:
        return np.zeros_like(g)
    return np.clip(np.round(g / scale), -127, 127) * scale  # np.round and tf.round: half to even


def topk_with_feedback(fraction):
    def codec(g, key, residuals):
        corrected = g + residuals.get(key, 0.0)
        flat = corrected.ravel()
        k = min(flat.size, max(1, math.ceil(fraction * flat.size)))
        sent = np.zeros_like(flat)
        keep = np.argsort(-np.abs(flat), kind="stable")[:k]
        sent[keep] = flat[keep]
        sent = sent.reshape(g.shape)
        residuals[key] = corrected - sent
        return sent
    return codec


EMULATIONS = {"fp16": fp16_scaled, "int8": int8, "topk:0.01": topk_with_feedback(0.01)}


def emulated_weights(codec, steps=UPDATES, workers=2):
    """Momentum SGD where each worker's gradient goes through ``codec`` before the average."""
    import tensorflow as tf

    from bench.data import global_batch, load_dataset
    from bench.models import get_model
    from strategies.optim import MomentumSGD
    from strategies.base import loss_fn

    data = load_dataset("mnist", seed=0, input_shape=(28, 28, 1), num_classes=10)
    model = get_model(MODEL, seed=0)
    variables = model.trainable_variables
    opt = MomentumSGD(variables, LR, 0.9)
    residuals = {}
    for step in range(steps):
        x, y = global_batch(step, data.train_x, data.train_y, BATCH, workers, 0)
        per_worker = []
        for w in range(workers):
            part = slice(w * BATCH, (w + 1) * BATCH)
            with tf.GradientTape() as tape:
                loss = loss_fn(tf.constant(y[part].astype(np.int32)), model(x[part], training=True))
            per_worker.append([g.numpy() for g in tape.gradient(loss, variables)])
        averaged = [np.mean([codec(g, (w, i), residuals) for w, g in enumerate(grads)], axis=0)
                    for i, grads in enumerate(zip(*per_worker))]
        opt.apply([tf.constant(a, tf.float32) for a in averaged])
    return [v.numpy() for v in variables]


# ----------------------------------------------------------------------------- helpers

def run_weights(strategy, compression, tmp_path):
    dump = str(tmp_path / f"{strategy}.npz")
    cfg = RunConfig(model=MODEL, strategy=strategy, workers=2, batch_size=BATCH, steps=STEPS,
                    warmup_steps=WARMUP, learning_rate=LR, dataset="mnist", compression=compression,
                    dump_weights=dump).validate()
    row = run_one(cfg, LocalLauncher())
    assert row["status"] == "ok", row["failure"]
    assert row["compression"] == compression
    got = np.load(dump)
    return [got[f"arr_{i}"] for i in range(len(got.files))]


def update_error(weights, reference, initial):
    """Largest relative difference of the updates (final - initial) over the tensors."""
    return max(np.linalg.norm(w - r) / np.linalg.norm(r - i) for w, r, i in zip(weights, reference, initial))


@pytest.fixture(scope="module")
def initial():
    from bench.models import get_model
    return [v.numpy() for v in get_model(MODEL, seed=0).trainable_variables]


@pytest.fixture(scope="module")
def uncompressed():
    return reference_weights(UPDATES)


# ----------------------------------------------------------------------------- pieces (fast)

def test_scaled_fp16_keeps_small_gradients_that_plain_fp16_flushes():
    import tensorflow as tf

    from strategies.codecs import Float16, ScaledFloat16

    x = (np.random.default_rng(0).normal(size=4000) * 1e-6).astype(np.float32)  # typical mean-loss grads
    scaled, plain = ScaledFloat16(), Float16()
    payload = scaled.encode(tf.constant(x))
    y = scaled.decode(payload, x.shape, tf.float32).numpy()
    assert np.max(np.abs(y - x) / np.abs(x)) <= 2.0 ** -11 * (1 + 1e-6)  # fp16's half ulp, everywhere
    assert scaled.wire_bytes(x.size) == sum(t.numpy().nbytes for t in payload) == 2 * x.size + 4
    flushed = plain.decode(plain.encode(tf.constant(x)), x.shape, tf.float32).numpy()
    assert np.max(np.abs(flushed - x) / np.abs(x)) > 0.1  # why the scale is there
    for t in (tf.zeros([5]), tf.zeros([0]), tf.constant([1e6, -3.0])):
        out = scaled.decode(scaled.encode(t), t.shape, tf.float32).numpy()
        np.testing.assert_allclose(out, t.numpy(), rtol=2.0 ** -11)  # no saturation, no NaN


TRANSPORT_SCRIPT = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from strategies.codecs import Transport
out = {}
for spec in ("none", "fp16", "int8", "topk:0.5"):
    transport = Transport(spec)
    @tf.function
    def send(x):
        return transport.send(x, "/CPU:1", "/CPU:0", key="k"), transport.send(x, "/CPU:1", "/CPU:0", sparse_ok=False)
    graph = send.get_concrete_function(tf.TensorSpec([4, 3])).graph
    ops = [(op.type, op.device[-5:]) for op in graph.get_operations() if op.type in ("Cast", "TopKV2", "Mul")]
    x = tf.reshape(tf.range(12, dtype=tf.float32) - 5.5, [4, 3])
    sent, dense = send(x)
    residual = transport.feedback.residual("k").device[-5:] if transport.feedback else None
    out[spec] = (ops, sent.numpy().tolist(), dense.numpy().tolist(), residual)
print(repr(out))
"""


def test_transport_encodes_on_the_sender_and_decodes_on_the_receiver():
    import ast
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "-c", TRANSPORT_SCRIPT], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    x = (np.arange(12, dtype=np.float32) - 5.5).reshape(4, 3)
    ops, sent, dense, _ = out["none"]
    assert ops == [] and sent == dense == x.tolist()  # identity: no op at all
    ops, sent, _, _ = out["fp16"]
    assert ("Cast", "CPU:1") in ops and ("Cast", "CPU:0") in ops  # to half on the sender, back on the receiver
    np.testing.assert_allclose(sent, x, rtol=2.0 ** -11)
    ops, sent, _, _ = out["int8"]
    assert ("Cast", "CPU:1") in ops and ("Mul", "CPU:0") in ops
    np.testing.assert_allclose(sent, x, atol=5.5 / 127 / 2 * 1.0001)
    ops, sent, dense, residual = out["topk:0.5"]
    assert ("TopKV2", "CPU:1") in ops and residual == "CPU:1"  # selection and error feedback on the sender
    kept = np.abs(x) >= 3.5  # the 6 largest magnitudes of -5.5 .. 5.5
    assert np.array_equal(np.array(sent)[kept], x[kept]) and not np.array(sent)[~kept].any()
    assert dense == x.tolist()  # activations (sparse_ok=False) travel uncompressed under top-k


def test_cost_model_charges_encode_and_decode_time():
    from ralp.cost_model import CODEC_PASSES, PASS_FLOPS, predict
    from ralp.hardware import Hardware
    from tests.test_cost_model import two_layer_profile

    hw = Hardware("slow-cpu", 1e9, 1e9, 2e9, 1e15, 1e15, 0.0)
    profile = two_layer_profile(1_000_000, 3_000_000, 1000, conv_flops=0, fc_flops=0)
    P, W, B = profile.params, 4, 8
    plain = predict(profile, "ps", workers=W, batch_size=B, hardware=hw)
    for spec, kind in (("fp16", "fp16"), ("int8", "int8"), ("topk:0.01", "topk")):
        enc, dec = CODEC_PASSES[kind]
        coded = predict(profile, "ps", workers=W, batch_size=B, hardware=hw, compression=spec)
        assert coded.breakdown["worker_codec_s"] == pytest.approx(P * enc * PASS_FLOPS / 1e9)
        assert coded.breakdown["ps_codec_s"] == pytest.approx(W * P * dec * PASS_FLOPS / 2e9)
        assert coded.compute_s == pytest.approx(plain.compute_s + coded.breakdown["worker_codec_s"]
                                                + coded.breakdown["ps_codec_s"])
    # RALP: fp16 codes activations both ways and tower gradients; top-k only the tower gradients
    ralp = predict(profile, "ralp", workers=W, batch_size=B, hardware=hw, compression="fp16")
    enc, dec = CODEC_PASSES["fp16"]
    acts = B * 1000
    assert ralp.breakdown["worker_codec_s"] == pytest.approx((acts * (enc + dec) + 1_000_000 * enc) * PASS_FLOPS / 1e9)
    ralp_topk = predict(profile, "ralp", workers=W, batch_size=B, hardware=hw, compression="topk:0.01")
    topk_encode = CODEC_PASSES["topk"][0]
    assert ralp_topk.breakdown["worker_codec_s"] == pytest.approx(1_000_000 * topk_encode * PASS_FLOPS / 1e9)
    assert ralp_topk.worker_tx_bytes == pytest.approx(4 * acts + 8 * 0.01 * 1_000_000)
    # Horovod int8 all-gathers: (W-1) payloads each way instead of the ring's 2(W-1)/W
    hvd = predict(profile, "horovod", workers=W, batch_size=B, hardware=hw, compression="int8")
    assert hvd.worker_tx_bytes == hvd.worker_rx_bytes == (W - 1) * (P + 4)


def test_analyzer_picks_a_codec_only_when_it_buys_time():
    from ralp.analyzer import MIN_CODEC_GAIN, analyze
    from ralp.hardware import Hardware
    from tests.test_cost_model import two_layer_profile

    profile = two_layer_profile(1_000_000, 30_000_000, 100_000, conv_flops=1e6, fc_flops=1e6)
    slow_link = Hardware("slow-link", 1e13, 1e13, 1e13, 1e8, 1e8, 0.0)
    plan = analyze(profile, batch_size=32, workers=4, hardware=slow_link, strategies=("ps",), compression="auto")
    assert plan.compression == "topk:0.01"  # bytes are all that matters here
    assert set(plan.by_compression) == {"none", "fp16", "int8", "topk:0.01"}
    assert "Compression: topk:0.01" in plan.reason
    fp16_only = analyze(profile, batch_size=32, workers=4, hardware=slow_link, strategies=("ps",),
                        compression=["none", "fp16"])
    assert fp16_only.compression == "fp16"
    # Fast links, slow CPU: encoding costs more than it saves, so no codec
    slow_cpu = Hardware("slow-cpu", 1e9, 1e9, 1e9, 1e12, 1e12, 0.0)
    plan = analyze(profile, batch_size=32, workers=4, hardware=slow_cpu, strategies=("ps",), compression="auto")
    assert plan.compression is None and "Compression: none" in plan.reason
    times = {c: p.predictions["ps"].step_time_s for c, p in plan.by_compression.items()}
    assert all(t >= times["none"] * (1 - MIN_CODEC_GAIN) for t in times.values())
    # a single codec behaves as before (no comparison, the plan says which codec it assumed)
    single = analyze(profile, batch_size=32, workers=4, hardware=slow_link, strategies=("ps",), compression="int8")
    assert single.compression == "int8" and single.by_compression == {} and "Compression" not in single.reason
    with pytest.raises(UserError, match="compression"):
        analyze(profile, batch_size=32, workers=4, hardware=slow_link, compression=["none", "zip"])


# ----------------------------------------------------------------------------- local runs

@pytest.mark.parametrize("strategy,compression,tolerance", [
    ("ps", "fp16", 1e-3),
    ("ps", "int8", 2e-3),
    ("horovod", "int8", 2e-3),          # all-gather of int8 payloads, decoded and averaged locally
    ("horovod", "topk:0.01", 2e-3),     # all-gather of (value, index) pairs, error feedback per rank
])
def test_gradient_codec_matches_numpy_emulation(strategy, compression, tolerance, initial, uncompressed,
                                                tmp_path):
    weights = run_weights(strategy, compression, tmp_path)
    expected = emulated_weights(EMULATIONS[compression])
    matched = update_error(weights, expected, initial)
    moved = update_error(weights, uncompressed, initial)
    print(f"{strategy} {compression}: vs emulation {matched:.2e}, vs uncompressed {moved:.2e}")
    assert matched <= tolerance
    assert moved >= 10 * max(matched, 1e-5)  # the codec really ran: far from fp32, close to its emulation


@pytest.mark.parametrize("strategy,tolerance", [("ralp", 2e-2), ("horovod", 1e-2)])
def test_fp16_stays_close_to_uncompressed(strategy, tolerance, initial, uncompressed, tmp_path):
    """Horovod all-reduces in fp16 (observed 2e-3 off fp32 after 4 updates). RALP also perturbs the
    forward pass (fp16 activations), so max-pool and ReLU choices flip and the 2e-4 per-step gradient
    error grows to ~8e-3 after 4 updates (an in-process emulation of the same codecs gives 7e-3).
    fp32 itself lands within 2e-6, so both are measurably compressed."""
    error = update_error(run_weights(strategy, "fp16", tmp_path), uncompressed, initial)
    print(f"{strategy} fp16: update error vs uncompressed {error:.2e}")
    assert 2e-5 <= error <= tolerance


def test_compression_auto_takes_the_analyzers_codec():
    """--compression auto: a fixed strategy keeps its strategy and gets the codec the analyzer
    picks for it; --strategy auto gets the analyzer's joint pick."""
    from bench.driver.planning import Resolved, hardware_for, model_profile, resolve
    from ralp.analyzer import analyze
    from ralp.cost_model import SPLIT_STRATEGIES, STRATEGIES

    for strategy in ("ps", "horovod", "ralp", "auto"):
        cfg = RunConfig(model="alexnet_cifar", strategy=strategy, workers=4, compression="auto",
                        bandwidth="100mbit", hardware="v100-10gbe").validate()
        plan = analyze(model_profile(cfg.model), batch_size=cfg.batch_size, workers=4, hardware=hardware_for(cfg),
                       strategies=[strategy] if strategy != "auto" else STRATEGIES,
                       compression="auto", micro_batches=cfg.micro_batches)  # a run's own, as plan_for passes
        got = resolve(cfg)
        assert got.strategy == plan.strategy == (strategy if strategy != "auto" else got.strategy)
        assert got.compression == (plan.compression or "none")
        assert got.compression != "none"  # 100 Mbit/s links: bytes dominate, a codec pays
        assert (got.cut is not None) == (got.strategy in SPLIT_STRATEGIES)
    fixed = resolve(RunConfig(model="alexnet_cifar", strategy="ps", compression="int8").validate())
    assert fixed == Resolved("ps", None, "int8")


def test_ps_async_refuses_compression():
    with pytest.raises(UserError, match="ps-async does not support --compression"):
        RunConfig(model=MODEL, strategy="ps-async", compression="fp16").validate()
    RunConfig(model=MODEL, strategy="ps-async", compression="none").validate()


# ----------------------------------------------------------------------------- emulated cluster

def _emulation_available():
    import os
    if os.name != "posix":
        return False, "not POSIX"
    from bench.launch.netns import can_emulate
    return can_emulate()


@pytest.fixture(scope="module")
def emulated_rows():
    ok, why = _emulation_available()
    if not ok:
        pytest.skip(f"emulated cluster unavailable: {why}")
    from bench.launch.emulated_launcher import EmulatedLauncher

    rows = {}
    with EmulatedLauncher(2, 1, 1e9) as launcher:
        for strategy, compression in [("ps", "none"), ("ps", "fp16"), ("ps", "int8"), ("ralp", "fp16"),
                                      ("ralp", "auto")]:
            cfg = RunConfig(model="alexnet_cifar", strategy=strategy, workers=2, steps=3, warmup_steps=1,
                            compression=compression, bandwidth="1gbit").validate()
            rows[strategy, compression] = run_one(cfg, launcher)
    return rows


def test_measured_bytes_drop_as_predicted(emulated_rows):
    from bench.driver.planning import model_profile

    P = model_profile("alexnet_cifar").params
    for (strategy, compression), row in emulated_rows.items():
        assert row["status"] == "ok", row["failure"]
        measured, predicted = row["bytes_ps_measured"], row["bytes_ps_predicted"]
        print(f"{strategy} {compression}: PS host {measured / 1e6:.2f} MB/step measured, "
              f"{predicted / 1e6:.2f} MB predicted")
        assert abs(measured - predicted) <= 0.10 * predicted
    none = emulated_rows["ps", "none"]["bytes_ps_measured"]
    # PS host, 2 workers: pulls 2 x 4P stay fp32, pushes 2 x 4P become 2 x 2P (fp16) or 2 x P (int8)
    assert 8 * P * 2 * 0.95 <= none <= 8 * P * 2 * 1.10
    for compression, push_bytes in (("fp16", 2), ("int8", 1)):
        ratio = emulated_rows["ps", compression]["bytes_ps_measured"] / none
        expected = (4 + push_bytes) / 8
        assert abs(ratio - expected) <= 0.10 * expected, (compression, ratio, expected)
    # RALP: tower pulls stay fp32; activations, their gradients and tower gradients travel in fp16
    picked = emulated_rows["ralp", "auto"]
    assert picked["compression"] == "auto" and picked["plan"].startswith("ralp+")  # the row names the codec
    ralp = emulated_rows["ralp", "fp16"]
    p_tower, _, floats, _, _ = model_profile("alexnet_cifar").split_sizes(ralp["cut_layer"])
    expected = 2 * (4 * p_tower + 2 * 32 * floats + 2 * 32 * floats + 2 * p_tower)  # 2 workers, B = 32
    assert abs(ralp["bytes_ps_measured"] - expected) <= 0.10 * expected
