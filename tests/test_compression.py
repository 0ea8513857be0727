"""Codecs: round trips, error bounds, exact top-k selection, error feedback and wire sizes."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from bench.core.errors import UserError  # noqa: E402
from strategies.codecs import ErrorFeedback, get_codec  # noqa: E402

SPECS = ["none", "fp16", "int8", "topk:0.1", "topk:1"]
SHAPES = [(), (0,), (7,), (3, 4), (2, 0, 3), (4, 5, 6), (2, 3, 3, 8)]


def payload_bytes(payload):
    return sum(t.numpy().nbytes for t in payload)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_shape_dtype_and_wire_bytes(spec, shape):
    codec = get_codec(spec)
    n = int(np.prod(shape))
    x = tf.constant(np.random.default_rng(1).normal(size=shape).astype(np.float32))
    payload = codec.encode(x)
    assert isinstance(payload, tuple)
    for dtype in (tf.float32, tf.float64):
        y = codec.decode(payload, x.shape, dtype)
        assert y.shape == x.shape and y.dtype == dtype
    assert codec.wire_bytes(n) == payload_bytes(payload)


@pytest.mark.parametrize("spec", SPECS)
def test_all_zero_tensor_decodes_to_zeros(spec):
    codec = get_codec(spec)
    y = codec.decode(codec.encode(tf.zeros([5, 6])), [5, 6], tf.float32).numpy()
    assert np.all(np.isfinite(y)) and not y.any()


def test_wire_bytes_formulas():
    n = 1_000_003
    assert get_codec("none").wire_bytes(n) == 4 * n
    assert get_codec("fp16").wire_bytes(n) == 2 * n
    assert get_codec("int8").wire_bytes(n) == n + 4
    assert get_codec("topk:0.01").wire_bytes(n) == 8 * 10001  # ceil(10000.03)
    assert get_codec("topk:0.1").wire_bytes(30) == 8 * 3  # exact, not ceil(3.0000000000000004)
    assert get_codec("topk:0.001").wire_bytes(10) == 8  # at least one entry
    for spec, ratio in [("none", 1.0), ("fp16", 0.5), ("int8", 0.25), ("topk:0.05", 0.1)]:
        codec = get_codec(spec)
        assert codec.ratio == pytest.approx(ratio)
        assert codec.wire_bytes(10**8) / (4 * 10**8) == pytest.approx(ratio, rel=1e-6)


def test_fp16_relative_error():
    rng = np.random.default_rng(2)
    x = (rng.uniform(1e-3, 1e3, 10_000) * rng.choice([-1, 1], 10_000)).astype(np.float32)
    codec = get_codec("fp16")
    y = codec.decode(codec.encode(tf.constant(x)), x.shape, tf.float32).numpy()
    assert np.max(np.abs(y - x) / np.abs(x)) <= 1e-3
    big = codec.decode(codec.encode(tf.constant([1e6, -1e6])), [2], tf.float32).numpy()
    assert np.array_equal(big, [65504.0, -65504.0])  # saturates instead of inf


def test_int8_absolute_error_within_half_scale():
    x = np.random.default_rng(3).normal(0, 3, (64, 33)).astype(np.float32)
    codec = get_codec("int8")
    q, scale = codec.encode(tf.constant(x))
    assert q.dtype == tf.int8 and scale.dtype == tf.float32 and scale.shape == ()
    expected_scale = np.max(np.abs(x)) / 127
    assert scale.numpy() == pytest.approx(expected_scale, rel=1e-6)
    assert np.max(np.abs(q.numpy())) == 127
    y = codec.decode((q, scale), x.shape, tf.float32).numpy()
    assert np.max(np.abs(y - x)) <= expected_scale / 2 * (1 + 1e-5)


def test_topk_keeps_exactly_the_largest_magnitudes():
    rng = np.random.default_rng(4)
    n = 1000
    magnitudes = rng.permutation(np.arange(1, n + 1)).astype(np.float32)  # distinct magnitudes
    x = (magnitudes * rng.choice([-1, 1], n)).reshape(10, 100)
    codec = get_codec("topk:0.05")
    k = 50
    values, indices = codec.encode(tf.constant(x))
    assert values.shape == (k,) and indices.shape == (k,) and indices.dtype == tf.int32
    expected = np.flatnonzero(np.abs(x.ravel()) > n - k)
    assert np.array_equal(np.sort(indices.numpy()), expected)
    y = codec.decode((values, indices), x.shape, tf.float32).numpy()
    kept = np.abs(x) > n - k
    assert np.array_equal(y[kept], x[kept]) and not y[~kept].any()


def test_topk_with_unknown_static_shape_inside_tf_function():
    codec = get_codec("topk:0.3")
    round_trip = tf.function(lambda t: codec.decode(codec.encode(t), tf.shape(t), tf.float32),
                             input_signature=[tf.TensorSpec([None])])
    x = np.array([1, -5, 2, 3, 0.5, 0, 0, 0, 0, 0.1], dtype=np.float32)
    assert np.array_equal(round_trip(tf.constant(x)).numpy(), [0, -5, 2, 3, 0, 0, 0, 0, 0, 0])
    assert round_trip(tf.zeros([0])).shape == (0,)


@pytest.mark.parametrize("spec", ["topk:0.1", "int8"])
def test_error_feedback_sums_to_the_input_sum(spec):
    x = np.random.default_rng(5).normal(size=(8, 25)).astype(np.float32)
    feedback = ErrorFeedback(get_codec(spec))
    step = tf.function(lambda t: feedback.decode(feedback.encode(t, "layer"), t.shape, tf.float32))
    total, residual_norms, steps = np.zeros_like(x, dtype=np.float64), [], 300
    for _ in range(steps):
        total += step(tf.constant(x)).numpy()
        residual_norms.append(np.abs(feedback.residual("layer").numpy()).max())
    residual = feedback.residual("layer").numpy()
    # telescoping: decoded sum = input sum - final residual
    np.testing.assert_allclose(total + residual, steps * x.astype(np.float64), rtol=1e-4, atol=1e-2)
    n, k = x.size, math.ceil(0.1 * x.size)
    bound = (n / k + 1) * np.abs(x).max()  # an entry waits at most ~n/k steps before it is sent
    assert max(residual_norms) <= bound
    assert np.abs(total / steps - x).max() <= bound / steps
    feedback.reset()
    assert not feedback.residual("layer").numpy().any()


def test_error_feedback_without_feedback_loses_mass():
    """Plain top-k of a constant input never sends the small entries; feedback does."""
    x = tf.constant(np.linspace(1, 2, 20, dtype=np.float32))
    codec = get_codec("topk:0.1")
    plain = codec.decode(codec.encode(x), x.shape, tf.float32).numpy()
    feedback = ErrorFeedback(codec)
    sent = sum(feedback.decode(feedback.encode(x, "a"), x.shape, tf.float32).numpy() for _ in range(20))
    assert np.count_nonzero(plain) == 2 and np.count_nonzero(sent) == 20


def test_error_feedback_residual_lives_on_the_encoding_device():
    script = textwrap.dedent("""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from strategies.codecs import ErrorFeedback, get_codec
        feedback = ErrorFeedback(get_codec("topk:0.25"))

        @tf.function
        def step(x):
            with tf.device("/CPU:1"):
                payload = feedback.encode(x, "inside")
            with tf.device("/CPU:0"):
                return feedback.decode(payload, x.shape, tf.float32)

        step(tf.ones([8]))
        with tf.device("/CPU:1"):
            eager = tf.ones([3])
        feedback.encode(eager, "eager")
        print(feedback.residual("inside").device, feedback.residual("eager").device)
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    devices = out.stdout.split()
    assert devices and all(d.endswith("CPU:1") for d in devices), out.stdout


@pytest.mark.parametrize("bad", ["gzip", "topk", "topk:", "topk:0", "topk:-0.1", "topk:1.5", "topk:x", "int4"])
def test_bad_spec_lists_valid_forms(bad):
    with pytest.raises(UserError, match=r"none, fp16, int8, topk:"):
        get_codec(bad)


def test_spec_parsing_is_forgiving_about_case_and_space():
    assert get_codec(" FP16 ").name == "fp16"
    assert get_codec("topk:1/100").wire_bytes(1000) == 80
