"""The hybrid placement's in-graph ring all-reduce (strategies/ralp_hybrid.py): the sum on every device,
bitwise identical everywhere (the replicas must not drift apart), for any W and lengths that do
not divide evenly."""
import numpy as np
import pytest

from tests.graph_walk import ancestors


@pytest.mark.parametrize("workers, length", [(1, 5), (2, 7), (3, 10), (4, 4), (5, 3), (4, 1001)])
def test_ring_allreduce_sums_on_every_device_identically(workers, length):
    import tensorflow as tf

    from strategies.ring import ring_allreduce

    rng = np.random.default_rng(workers * 100 + length)
    vectors = [rng.standard_normal(length).astype(np.float32) for _ in range(workers)]
    out = ring_allreduce([tf.constant(v) for v in vectors], ["/cpu:0"] * workers)
    expected = np.sum(np.stack(vectors).astype(np.float64), axis=0)
    assert len(out) == workers
    for result in out:
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(result.numpy(), out[0].numpy())


def test_the_hybrid_is_priced_with_activations_only_on_the_ps_link():
    from bench.driver.planning import model_profile
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


# ----------------------------------------------------------------------------- buckets

@pytest.mark.parametrize("sizes, cap, expected", [
    ([1, 5, 2, 2, 9, 1], 4, [[5], [4], [2, 3], [1], [0]]),  # backward order; 9 > cap alone; 2+2 fits
    ([1, 5, 2, 2, 9, 1], 10, [[4, 5], [0, 1, 2, 3]]),        # a bucket may fill the cap exactly
    ([1, 5, 2, 2, 9, 1], 0, [[0, 1, 2, 3, 4, 5]]),           # 0: one fused ring
    ([3, 0, 3], 3, [[1, 2], [0]]),                             # a layer without bytes joins the open bucket
    ([], 4, []),
])
def test_buckets_take_whole_layers_in_backward_order_up_to_the_cap(sizes, cap, expected):
    from ralp.buckets import buckets

    assert buckets(sizes, cap) == expected


@pytest.mark.parametrize("cap_mib", [0, 1e-9, 0.5, 4, 1e6])
def test_vgg_tower_buckets_cover_every_variable_once_and_never_split_a_layer(cap_mib):
    from bench.models import get_model
    from ralp.cut import split_model
    from strategies.ralp_hybrid import gradient_buckets
    from ralp.buckets import MIB

    tower, _ = split_model(get_model("vgg_cifar", seed=0), "flatten")
    variables = tower.trainable_variables
    groups = gradient_buckets(tower, cap_mib * MIB)
    # every variable exactly once, buckets contiguous and last layers first
    assert [i for g in reversed(groups) for i in g] == list(range(len(variables)))
    bucket_of = {id(variables[i]): b for b, g in enumerate(groups) for i in g}
    for layer in tower.layers:
        owned = {bucket_of[id(v)] for v in layer.trainable_variables}
        assert len(owned) <= 1, f"{layer.name} split over buckets {owned}"
    size = [sum(4 * int(np.prod(variables[i].shape)) for i in g) for g in groups]
    layers_in = [len({v.name.split("/")[0] for v in (variables[i] for i in g)}) for g in groups]
    assert all(s <= cap_mib * MIB or n == 1 for s, n in zip(size, layers_in)) or cap_mib == 0
    # by hand: block3_conv2 2.25 MiB + block3_conv1 1.13 + block2_conv2 0.56 = 3.94 <= 4; + block2_conv1 0.28 > 4
    expected = {0: 1, 1e-9: 6, 0.5: 4, 4: 2, 1e6: 1}[cap_mib]  # 0.5: the last three alone, then 0.43 MiB
    assert len(groups) == expected
    if cap_mib == 4:
        assert groups == [list(range(6, 12)), list(range(0, 6))]


# ----------------------------------------------------------------------------- the ring's codecs

def _emulated_ring(vectors, codec):
    """NumPy: chunk c starts on worker c; each hop the receiver adds its own fp32 chunk to the
    decoded payload; the finished chunk is encoded once and every worker decodes that payload."""
    from strategies.ring import near_equal_sizes

    W = len(vectors)
    bounds = np.cumsum([0] + near_equal_sizes(len(vectors[0]), W))
    out = []
    for c in range(W):
        part = slice(bounds[c], bounds[c + 1])
        partial = vectors[c][part]
        for k in range(1, W):
            partial = vectors[(c + k) % W][part] + codec(partial)
        out.append(codec(partial))
    return np.concatenate(out)


def _np_fp16(x):
    unit = np.float32(np.abs(x).max() / np.float32(2.0 ** 14)) if x.size else np.float32(0)
    return x * 0 if unit == 0 else ((x / unit).astype(np.float16).astype(np.float32) * unit).astype(np.float32)


def _np_int8(x):
    scale = np.float32(np.abs(x).max() / np.float32(127.0)) if x.size else np.float32(0)
    return x * 0 if scale == 0 else (np.clip(np.round(x / scale), -127, 127) * scale).astype(np.float32)


@pytest.mark.parametrize("spec", ["fp16", "int8"])
@pytest.mark.parametrize("workers, length", [(2, 9), (3, 10), (4, 1001)])
def test_a_ring_with_a_codec_sums_as_its_numpy_emulation_and_identically_everywhere(spec, workers, length):
    import tensorflow as tf

    from strategies.codecs import Transport
    from strategies.ring import ring_allreduce

    rng = np.random.default_rng(workers * 10 + length)
    vectors = [(rng.standard_normal(length) * 1e-5).astype(np.float32) for _ in range(workers)]  # gradient-sized
    codec = Transport(spec).codec
    out = ring_allreduce([tf.constant(v) for v in vectors], ["/cpu:0"] * workers, codec)
    emulated = _emulated_ring(vectors, {"fp16": _np_fp16, "int8": _np_int8}[spec])
    exact = np.sum(np.stack(vectors).astype(np.float64), axis=0)
    for result in out:
        np.testing.assert_array_equal(result.numpy(), out[0].numpy())
        np.testing.assert_allclose(result.numpy(), emulated, rtol=1e-6, atol=1e-12)
    # lossy, as the codec says: fp16 within a few 2^-11 of the largest entry, int8 a few 1/254
    error = np.abs(out[0].numpy() - exact).max() / np.abs(exact).max()
    assert 0 < error < {"fp16": 4 * 2.0 ** -11, "int8": workers / 127}[spec]


# ----------------------------------------------------------------------------- the hybrid in one process

def _hybrid(workers=2, steps=4, **settings):
    """The hybrid (lenet_mnist, the distributed tests' batch and rate) with every task on this
    process's CPU: the same graph as a cluster run, less the transfers. Returns the strategy
    after ``steps`` steps and their losses."""
    from bench.core.config import RunConfig
    from bench.run import load_shards
    from strategies.base import StrategyContext
    from strategies.ralp_hybrid import HybridPlacement
    from tests.test_distributed import BATCH, LR, MODEL

    cfg = RunConfig(model=MODEL, workers=workers, batch_size=BATCH, learning_rate=LR, dataset="mnist", **settings)
    ctx = StrategyContext(cfg, load_shards(cfg), worker_devices=["/cpu:0"] * workers,
                          ps_devices=["/cpu:0"] * cfg.ps, cut="flatten")
    strategy = HybridPlacement(ctx)
    strategy.setup()
    return strategy, [strategy.train_step(step) for step in range(steps)]


def _replicas_identical(strategy):
    first = [v.numpy() for v in strategy.replicas[0].trainable_variables]
    for replica in strategy.replicas[1:]:
        for a, b in zip(first, replica.trainable_variables):
            np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_bucketed_hybrid_equals_the_fused_one_and_single_process_sgd(micro_batches, tmp_path):
    from tests.test_distributed import assert_same_weights, reference_weights

    fused, _ = _hybrid(hybrid_bucket_mb=0, micro_batches=micro_batches)
    bucketed, _ = _hybrid(hybrid_bucket_mb=0.001, micro_batches=micro_batches)  # conv1 and conv2 each alone
    assert (len(fused.buckets), len(bucketed.buckets)) == (1, 2)
    for a, b in zip(fused.trainable_weights(), bucketed.trainable_weights()):
        np.testing.assert_array_equal(a, b)  # 2 workers: every sum is a + b, whatever the bucket
    _replicas_identical(bucketed)
    np.savez(tmp_path / "w.npz", *bucketed.trainable_weights())
    assert_same_weights(tmp_path / "w.npz", reference_weights(4), f"bucketed, m={micro_batches}")


def test_three_workers_bucketed_stays_within_rounding_of_fused():
    fused, _ = _hybrid(workers=3, hybrid_bucket_mb=0)
    bucketed, _ = _hybrid(workers=3, hybrid_bucket_mb=0.001)
    _replicas_identical(bucketed)
    for a, b in zip(fused.trainable_weights(), bucketed.trainable_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)  # only the ring's order of additions differs


@pytest.mark.parametrize("spec, bound, ps", [("fp16", 2e-3, 1), ("int8", 0.2, 1), ("fp16", 2e-3, 2)])
def test_a_compressed_hybrid_trains_within_its_codecs_rounding_of_sgd(spec, bound, ps):
    """One step's update against single-process SGD's, tensor by tensor: fp16 rounds each value a
    few times by at most 2^-11 (activations up, their gradients down, each ring hop), so the
    update is within 2e-3; int8 (1/254 of the largest entry per hop) within 0.2. Not equal either:
    the codec ran. Then ten steps train (the loss falls as much as in fp32, within 0.02), the
    replicas identical. ``ps`` 2: the head sharded, its feature slices through the codec."""
    from bench.models import get_model
    from tests.test_distributed import reference_weights

    initial = [v.numpy() for v in get_model("lenet_mnist", seed=0).trainable_variables]
    ours, _ = _hybrid(steps=1, compression=spec, ps=ps)
    for got, want, start in zip(ours.trainable_weights(), reference_weights(1), initial):
        step = np.linalg.norm(want - start)
        assert np.linalg.norm(got - want) <= bound * step
    tower = ours.trainable_weights()[:4]
    assert any(not np.array_equal(a, b) for a, b in zip(tower, reference_weights(1)[:4]))
    trained, losses = _hybrid(steps=10, compression=spec, hybrid_bucket_mb=0.001, ps=ps)
    _, fp32 = _hybrid(steps=10, hybrid_bucket_mb=0.001, ps=ps)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.05
    assert abs(np.mean(losses[-3:]) - np.mean(fp32[-3:])) < 0.02
    _replicas_identical(trained)


def _graph(strategy):
    import tensorflow as tf

    specs = [tf.TensorSpec([strategy.config.batch_size], tf.int32)] * strategy.config.workers
    return strategy._step.get_concrete_function(specs).graph


def test_the_last_layers_ring_does_not_wait_for_the_first_layers_gradients():
    """What lets the executor overlap: the ring of bucket 0 (conv2, the last layer) has no path
    from the gradient ops of bucket 1 (conv1, the first layer), data or control; fp16 travels
    on its hops. It does climb through the whole backward into the head's loss (the walk is
    not vacuous), and the fused ring does wait for conv1's gradients."""
    strategy, _ = _hybrid(steps=0, hybrid_bucket_mb=0.001, compression="fp16", micro_batches=2)
    ops = _graph(strategy).get_operations()
    ring = {b: [op for op in ops if op.name.startswith(f"ring_bucket{b}/")] for b in (0, 1)}
    # what bucket 1's ring reads: conv1's gradients summed over the 2 micro-batches
    feeding_1 = {t.op for op in ring[1] for t in op.inputs if not t.op.name.startswith("ring_bucket")
                 and t.op.type != "Const"}
    upstream = ancestors(ring[0])
    assert feeding_1 and not upstream & feeding_1
    assert _gradient_ops(ops, "conv1") and not upstream & _gradient_ops(ops, "conv1")
    assert not any(op.name.startswith("ring_bucket1/") for op in upstream)
    assert _gradient_ops(ops, "conv2") <= upstream
    assert "SparseSoftmaxCrossEntropyWithLogits" in {op.type for op in upstream}
    assert any(op.type == "Identity" and op.outputs[0].dtype.name == "float16" for op in ring[0])

    fused, _ = _hybrid(steps=0, hybrid_bucket_mb=0)
    ops = _graph(fused).get_operations()
    assert _gradient_ops(ops, "conv1") <= ancestors([op for op in ops if op.name.startswith("ring_bucket0/")])


def _gradient_ops(ops, layer):
    """The tower layer's weight-gradient ops (every micro-batch's)."""
    return {op for op in ops if op.type in ("Conv2DBackpropFilter", "BiasAddGrad") and f"_tower/{layer}/" in op.name}


def test_the_ring_takes_stateless_codecs_only_and_a_bucket_size_of_at_least_zero(monkeypatch):
    from dataclasses import replace

    from bench.core.config import RunConfig
    from bench.core.errors import UserError
    from bench.core.strategy_specs import SPECS

    for bad in (-1, "lots"):
        with pytest.raises(UserError, match="--hybrid-bucket-mb must be MiB >= 0 .* or auto, got"):
            RunConfig(strategy="ralp-hybrid", hybrid_bucket_mb=bad).validate()
    monkeypatch.setitem(SPECS, "ralp-hybrid", replace(SPECS["ralp-hybrid"], codecs=True))  # as it will be
    with pytest.raises(UserError, match="use --compression fp16 or int8"):
        RunConfig(strategy="ralp-hybrid", compression="topk:0.1").validate()
    for spec in ("none", "fp16", "int8"):
        RunConfig(strategy="ralp-hybrid", compression=spec).validate()


def test_auto_buckets_and_micro_batches_are_the_analyzers_and_numbers_ask_it_nothing(monkeypatch):
    """--hybrid-bucket-mb auto and --micro-batches auto: the hybrid runs with the buckets and the
    micro-batches ``ralp-bench analyze`` chooses (its search, ralp/analyzer.py), which the ranks,
    the row and the prediction then get as numbers; numbers, or a strategy without a ring or a
    pipeline, resolve without the analyzer."""
    import argparse

    from bench.core.config import RunConfig, add_setting_arguments
    from bench.core.errors import UserError
    from bench.driver import planning
    from ralp.analyzer import analyze
    from ralp.cost_model import STRATEGIES

    parser = argparse.ArgumentParser()
    add_setting_arguments(parser, "run")
    assert parser.parse_args(["--hybrid-bucket-mb", "AUTO"]).hybrid_bucket_mb == "auto"
    assert parser.parse_args(["--hybrid-bucket-mb", "16"]).hybrid_bucket_mb == 16.0
    assert parser.parse_args(["--micro-batches", "auto"]).micro_batches == "auto"
    for flag in ("--hybrid-bucket-mb", "--micro-batches"):
        with pytest.raises(SystemExit):
            parser.parse_args([flag, "lots"])
    with pytest.raises(UserError, match="--micro-batches must be at least 1 or auto, got 0"):
        RunConfig(strategy="ralp-hybrid", micro_batches=0).validate()
    # VGG-16 at 8 workers on V100s and 10 GbE: the search prefers buckets to the default's 4 MiB
    for strategy in ("ralp-hybrid", "auto"):
        cfg = RunConfig(model="vgg16", strategy=strategy, workers=8, hybrid_bucket_mb="auto",
                        hardware="v100-10gbe").validate()
        plan = analyze(planning.model_profile(cfg.model), batch_size=cfg.batch_size, workers=8,
                       hardware=planning.hardware_for(cfg), strategies=STRATEGIES, micro_batches=1,
                       hybrid_bucket_mb=None)
        got = planning.resolve(cfg)
        assert got.strategy == "ralp-hybrid" and plan.strategy == "ralp-hybrid"
        assert got.hybrid_bucket_mb == plan.predictions["ralp-hybrid"].hybrid_bucket_mb == 16.0

    def no_analyzer(cfg):
        raise AssertionError("resolved without the analyzer")

    monkeypatch.setattr(planning, "plan_for", no_analyzer)
    fixed = RunConfig(model="vgg16", strategy="ralp-hybrid", hybrid_bucket_mb=1).validate()
    assert planning.resolve(fixed).hybrid_bucket_mb == 1
    ps = RunConfig(model="vgg16", strategy="ps", hybrid_bucket_mb="auto").validate()
    assert planning.resolve(ps) == planning.Resolved("ps", None, "none")  # no ring: the default, as every row had
    monkeypatch.undo()
    # VGG-16 at 64 workers: the search pipelines the hybrid (README's analyzer table: 1 PS, m=8)
    cfg = RunConfig(model="vgg16", strategy="ralp-hybrid", workers=64, micro_batches="auto",
                    hardware="v100-10gbe").validate()
    plan = analyze(planning.model_profile(cfg.model), batch_size=cfg.batch_size, workers=64,
                   hardware=planning.hardware_for(cfg), strategies=STRATEGIES, micro_batches=None)
    got = planning.resolve(cfg)
    assert got.micro_batches == plan.predictions["ralp-hybrid"].micro_batches == 8
    assert got.hybrid_bucket_mb == 4.0  # the run's own: a pipelined ring runs once, after the pipeline
    assert got.applied_to(cfg).micro_batches == 8 and got.applied_to(cfg).validate()


def test_a_bucketed_pipelined_hybrid_cluster_run_matches_single_process_sgd(tmp_path):
    """The same across real processes (mpirun, TF servers, gRPC between the workers): each hop
    a transfer, each bucket's ring its own."""
    from bench.core.config import RunConfig
    from bench.driver.harness import run_one
    from bench.launch.local import LocalLauncher
    from tests.test_distributed import BATCH, LR, MODEL, STEPS, WARMUP, assert_same_weights, reference_weights

    dump = str(tmp_path / "weights.npz")
    cfg = RunConfig(model=MODEL, strategy="ralp-hybrid", workers=2, batch_size=BATCH, steps=STEPS,
                    warmup_steps=WARMUP, learning_rate=LR, dataset="mnist", dump_weights=dump,
                    micro_batches=2, hybrid_bucket_mb=0.001).validate()
    row = run_one(cfg, LocalLauncher())
    assert row["status"] == "ok", row["failure"]
    assert_same_weights(dump, reference_weights(WARMUP + STEPS), "bucketed cluster run")


# ----------------------------------------------------------------------------- its pricing

def test_the_hybrid_is_priced_with_its_codec_on_the_ring_and_the_activations():
    """fp16: every byte of the ring and of the activations halves (ScaledFloat16's 4-byte scale
    per tensor aside); int8 quarters them; top-k is no candidate (its ring would need error
    feedback per hop)."""
    from bench.core.errors import UserError
    from bench.driver.planning import model_profile
    from ralp.cost_model import predict
    from ralp.hardware import load_hardware

    profile = model_profile("vgg_cifar")
    hw = load_hardware("v100-10gbe", bandwidth="1gbit")
    p_tower, _, floats, _, _ = profile.split_sizes(profile.first_dense_cut())
    for W in (2, 4):
        priced = {c: predict(profile, "ralp-hybrid", workers=W, batch_size=32, hardware=hw, compression=c)
                  for c in (None, "fp16", "int8")}
        ring = 2 * (W - 1) / W * p_tower
        assert priced[None].worker_tx_bytes == pytest.approx(4 * 32 * floats + 4 * ring)
        assert priced["fp16"].worker_tx_bytes == pytest.approx(2 * 32 * floats + 2 * ring)
        assert priced["int8"].worker_tx_bytes == pytest.approx(1 * 32 * floats + 1 * ring, abs=16)
        assert priced["fp16"].ps_rx_bytes == pytest.approx(priced[None].ps_rx_bytes / 2)
        assert priced["fp16"].breakdown["worker_codec_s"] > 0
    with pytest.raises(UserError, match="fp16 or int8"):
        predict(profile, "ralp-hybrid", workers=2, batch_size=32, hardware=hw, compression="topk:0.01")


def test_bucketed_rings_are_priced_under_the_backward():
    """One bucket: the ring after the whole backward (the fused step). Buckets: each ring leaves
    as the backward passes its layers (ralp/step_cost.py ``Setting.streamed``), so the step is
    shorter, by at most the ring's own time, and never below the backward alone."""
    from bench.driver.planning import model_profile
    from ralp.cost_model import predict
    from ralp.hardware import load_hardware

    profile = model_profile("vgg_cifar")
    hw = load_hardware("v100-10gbe", bandwidth="1gbit")
    step = {mb: predict(profile, "ralp-hybrid", workers=4, batch_size=32, hardware=hw, hybrid_bucket_mb=mb)
            for mb in (0, 1e6, 1, 0.25)}
    assert step[0].step_time_s == step[1e6].step_time_s  # one bucket either way
    ring = step[0].breakdown["ring_all-reduce_tower_gradients_s"]
    fused = step[0].breakdown  # nothing under the backward: the backward, then the whole ring
    assert fused["backward_and_push_s"] == pytest.approx(fused["worker_backward_s"] + ring, rel=1e-12)
    for mb in (1, 0.25):
        assert step[0].step_time_s - ring <= step[mb].step_time_s < step[0].step_time_s
        assert step[mb].breakdown["backward_and_push_s"] >= step[mb].breakdown["worker_backward_s"]


def test_the_heads_weight_gradients_wait_for_its_input_gradient():
    """The PS's order (strategies/ralp_placement.py ``chain_backward``): the gradient of the head's
    input, which the workers wait for, comes first, and every weight gradient of the head waits
    for it (a control edge; without it the executor runs both at once on the PS's cores); the
    gradients equal the tape's over the whole head, bit for bit. A head that branches is no chain
    (it is differentiated whole)."""
    import tensorflow as tf

    from ralp.cut import layer_chain, split_model
    from strategies.base import loss_fn
    from strategies.ralp_placement import chain_backward
    from tests.bn_head_model import build

    _, head = split_model(build(), "flatten")
    layers = layer_chain(head)
    assert [layer.name for layer in layers] == ["fc1", "fc1_bn", "logits"]
    variables = head.trainable_variables
    x = tf.random.stateless_normal([4, int(head.inputs[0].shape[1])], seed=[1, 2])
    y = tf.constant([0, 3, 7, 9])
    traced = tf.function(lambda: chain_backward(layers, x, y, variables)).get_concrete_function()
    made = [out.op.inputs[0].op if out.op.type == "Identity" else out.op for out in traced.outputs]
    input_gradient, weight_gradients = made[-1], made[1:-1]
    assert len(weight_gradients) == len(variables) == 6
    assert all(input_gradient in ancestors([op]) for op in weight_gradients)

    loss, grads, x_grad = chain_backward(layers, x, y, variables)
    with tf.GradientTape() as tape:
        tape.watch(x)
        whole = loss_fn(y, head(x, training=True))
    expected, expected_x = tape.gradient(whole, [variables, x])
    np.testing.assert_array_equal(loss.numpy(), whole.numpy())
    np.testing.assert_array_equal(x_grad.numpy(), expected_x.numpy())
    for a, b in zip(grads, expected):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    inputs = tf.keras.Input((8,))
    first = tf.keras.layers.Dense(8)(inputs)
    branching = tf.keras.Model(inputs, tf.keras.layers.Add()([first, tf.keras.layers.Dense(8)(first)]))
    assert layer_chain(branching) is None
