"""The hybrid placement's in-graph ring all-reduce (ralp/hybrid.py): the sum on every device,
bitwise identical everywhere (the replicas must not drift apart), for any W and lengths that do
not divide evenly."""
import numpy as np
import pytest


@pytest.mark.parametrize("workers, length", [(1, 5), (2, 7), (3, 10), (4, 4), (5, 3), (4, 1001)])
def test_ring_allreduce_sums_on_every_device_identically(workers, length):
    import tensorflow as tf

    from ralp.ring import ring_allreduce

    rng = np.random.default_rng(workers * 100 + length)
    vectors = [rng.standard_normal(length).astype(np.float32) for _ in range(workers)]
    out = ring_allreduce([tf.constant(v) for v in vectors], ["/cpu:0"] * workers)
    expected = np.sum(np.stack(vectors).astype(np.float64), axis=0)
    assert len(out) == workers
    for result in out:
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(result.numpy(), out[0].numpy())


def test_the_hybrid_is_priced_with_activations_only_on_the_ps_link():
    from bench.planning import model_profile
    from ralp.cost_model import predict
    from ralp.hardware import load_hardware

    profile = model_profile("vgg_cifar")
    hw = load_hardware("v100-10gbe", bandwidth="1gbit")
    for workers in (2, 4, 8):
        hybrid = predict(profile, "ralp-hybrid", workers=workers, batch_size=32, hardware=hw)
        ralp = predict(profile, "ralp", workers=workers, batch_size=32, hardware=hw)
        p_tower, _, floats, _, _ = profile.split_sizes(hybrid.cut)
        assert hybrid.ps_rx_bytes == ralp.ps_rx_bytes - 4 * p_tower * workers == 4 * 32 * floats * workers
        assert hybrid.worker_tx_bytes == 4 * 32 * floats + 2 * (workers - 1) / workers * 4 * p_tower
