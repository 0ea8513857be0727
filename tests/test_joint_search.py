"""The hybrid's sharded head and pipelined micro-batches, priced and searched.

Bytes are checked against hand formulas from the layers' published widths (not from the
profile's own helper); the pipeline, run as stages by the evaluator, against its schedule
worked by hand on a two-layer toy; today's hybrid (one PS, no micro-batches) against step times pinned from
the cost model before either feature existed (commit 77b7dcf).
"""
import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from bench.core.errors import UserError  # noqa: E402
from ralp.analyzer import BUCKET_SIZES_MB, MIN_VARIANT_GAIN, _pick_bucket, _pick_split, _pick_variant, analyze  # noqa: E402
from ralp.cost_model import Prediction, predict  # noqa: E402
from ralp.hardware import Hardware, load_hardware  # noqa: E402
from test_cost_model import two_layer_profile  # noqa: E402
from test_profile import zoo_profile  # noqa: E402  (profiles built once per session)

# CIFAR zoo heads (bench/models/small.py): floats at the flatten cut, head Dense widths.
CIFAR = {"vgg_cifar": (4096, (1024, 1024, 10)), "alexnet_cifar": (2048, (1024, 1024, 10))}
ONE_GBIT = load_hardware("v100-10gbe", bandwidth="1gbit")


# ----------------------------------------------------------------------------- the chain

def test_head_chain_of_zoo_models():
    vgg = zoo_profile("vgg_cifar")
    assert vgg.head_chain("flatten") == [1024, 1024, 10]
    assert vgg.head_chain("block3_pool") == [1024, 1024, 10]  # Flatten before the first Dense
    assert vgg.head_chain("fc1") == [1024, 10]
    assert vgg.head_chain("block3_conv2") is None             # a MaxPooling2D in the head
    assert zoo_profile("alexnet_cifar").head_chain("flatten") == [1024, 1024, 10]
    assert zoo_profile("lenet_mnist").head_chain("flatten") == [512, 10]


def _keras_profile(middle, softmax=False):
    """conv -> flatten -> Dense(32) -> ``middle`` -> Dense(10) [-> Softmax layer], profiled."""
    import tensorflow as tf

    from ralp.profile import profile_model

    L = tf.keras.layers
    inputs = tf.keras.Input((8, 8, 3))
    x = L.Flatten(name="flatten")(L.Conv2D(4, 3, name="conv")(inputs))
    x = L.Dense(32, activation="relu", name="fc1")(x)
    x = L.Dense(10, name="logits")(middle(x))
    if softmax:
        x = L.Activation("softmax", name="probabilities")(x)
    return profile_model(tf.keras.Model(inputs, x, name="tiny"))


@pytest.mark.parametrize("middle,kind", [
    ("batchnorm", "BatchNormalization"), ("dropout", "Dropout"), ("branch", "Add")])
def test_a_head_that_is_not_a_dense_chain_cannot_be_sharded(middle, kind):
    import tensorflow as tf

    L = tf.keras.layers
    build = {"batchnorm": lambda x: L.BatchNormalization(name="bn")(x),
             "dropout": lambda x: L.Dropout(0.5, name="drop")(x),
             "branch": lambda x: L.Add(name="add")([L.Dense(32, name="a")(x), L.Dense(32, name="b")(x)])}[middle]
    profile = _keras_profile(build)
    cut = profile.first_dense_cut()
    assert profile.head_chain(cut) is None
    settings = dict(workers=4, batch_size=8, hardware=ONE_GBIT, cut=cut)
    predict(profile, "ralp-hybrid", ps=1, **settings)  # one PS: today's hybrid, any head
    with pytest.raises(UserError, match=f"cannot shard tiny's head over 2 PS tasks: .*{kind}"):
        predict(profile, "ralp-hybrid", ps=2, **settings)
    # the analyzer tries S > 1 only at cuts whose head is a chain (here: after the odd layer)
    searched = analyze(profile, batch_size=8, workers=4, ps=3, hardware=ONE_GBIT, search_layouts=True)
    sharded = [p for (S, _), p in searched.hybrid_variants.items() if S > 1]
    assert sharded and all(p.cut != cut and profile.head_chain(p.cut) == [10] for p in sharded)


def test_without_a_chain_at_any_cut_a_sharded_hybrid_is_no_candidate():
    profile = _keras_profile(lambda x: x, softmax=True)  # a Softmax layer after the logits
    assert all(profile.head_chain(c) is None for c in profile.cut_points)
    held = analyze(profile, batch_size=8, workers=4, ps=2, hardware=ONE_GBIT)
    assert "ralp-hybrid" not in held.predictions and "not a candidate with 2 PS tasks" in held.reason
    assert "Activation layer ('probabilities')" in held.reason
    searched = analyze(profile, batch_size=8, workers=4, ps=2, hardware=ONE_GBIT, search_layouts=True)
    assert {S for S, _ in searched.hybrid_variants} == {1}


def test_a_dense_layer_on_an_unflattened_tensor_is_not_a_chain():
    profile = two_layer_profile(1_000, 25_000, 1000)  # the toy's 'fc' is no 1000 x 10 matrix
    assert profile.head_chain("conv") is None


# ----------------------------------------------------------------------------- sharded head bytes

def _sharded_bytes(W, B, A, widths, S):
    """PS task 0's bytes each way per step, by hand (the module docstring's formulas)."""
    N, last = W * B, len(widths) - 1
    total = 4 * N * A / S                                  # its feature slice of the activations
    for i in range(0, last, 2):                            # row-split layers before the last
        total += 2 * (2 * (S - 1) / S * 4 * N * widths[i])  # outputs forward, input grads backward
    C = widths[last]
    total += (S - 1) * 4 * N * C if last % 2 == 0 else (S - 1) / S * 4 * N * C
    return total


@pytest.mark.parametrize("model", ["vgg_cifar", "alexnet_cifar"])
@pytest.mark.parametrize("S", [2, 3])
@pytest.mark.parametrize("cut", ["flatten", "fc"])
def test_sharded_head_ps_bytes_match_hand_formulas(model, S, cut):
    profile = zoo_profile(model)
    A, widths = CIFAR[model]
    W, B = 4, 32
    if cut == "fc":  # cut after the first FC layer: head = [1024, 10], the logits column-split
        cut, A, widths = profile.layer_names()[profile.layer_names().index("flatten") + 1], 1024, widths[1:]
    N = W * B
    sharded = predict(profile, "ralp-hybrid", workers=W, batch_size=B, hardware=ONE_GBIT, ps=S, cut=cut)
    plain = predict(profile, "ralp-hybrid", workers=W, batch_size=B, hardware=ONE_GBIT, ps=1, cut=cut)
    expected = _sharded_bytes(W, B, A, widths, S)
    assert sharded.ps_rx_bytes == pytest.approx(expected, rel=1e-12)
    assert sharded.ps_tx_bytes == pytest.approx(expected, rel=1e-12)
    if len(widths) == 3:  # spelled out once: 4NA/S + 2 x 2(S-1)/S x 4N x 1024 + (S-1) x 4N x 10
        assert expected == 4 * N * A / S + 4 * (S - 1) / S * 4 * N * 1024 + (S - 1) * 4 * N * 10
    else:                 # 4NA/S + 2 x 2(S-1)/S x 4N x 1024 + (S-1)/S x 4N x 10
        assert expected == 4 * N * 1024 / S + 4 * (S - 1) / S * 4 * N * 1024 + (S - 1) / S * 4 * N * 10
    # the workers' side does not change: 4BA each way plus the tower's ring
    assert (sharded.worker_tx_bytes, sharded.worker_rx_bytes) == (plain.worker_tx_bytes, plain.worker_rx_bytes)
    assert plain.ps_rx_bytes == 4 * N * A
    # head compute and its update divide by S (plus the PS tasks' sums)
    assert sharded.breakdown["ps_compute_s"] < plain.breakdown["ps_compute_s"] / S * 1.5


# ----------------------------------------------------------------------------- today's hybrid

# The unpipelined figures are the pre-pipeline formula's less the head's weight gradients and
# update that the PS runs beside the workers' backward (ralp/strategy_costs.py head_beside_backward),
# with memory-bound passes at the V100's datasheet 900 GB/s (issue 37) and the bound (overlap) counting
# one latency per link direction (issue 35).
@pytest.mark.parametrize("model,W,B,bandwidth,overlap,step", [
    ("vgg_cifar", 4, 32, "1gbit", False, 0.09309273260704884),
    ("vgg_cifar", 4, 32, "1gbit", True, 0.059223888),
    ("alexnet_cifar", 3, 16, "100mbit", False, 0.21661310481211607),
    ("alexnet_cifar", 3, 16, "100mbit", True, 0.16301618666666665),
])
def test_one_ps_and_one_micro_batch_is_todays_hybrid_exactly(model, W, B, bandwidth, overlap, step):
    hardware = load_hardware("v100-10gbe", bandwidth=bandwidth)
    # today's hybrid: one fused ring after the backward (--hybrid-bucket-mb 0)
    settings = dict(workers=W, batch_size=B, hardware=hardware, overlap=overlap, hybrid_bucket_mb=0)
    default = predict(zoo_profile(model), "ralp-hybrid", **settings)
    explicit = predict(zoo_profile(model), "ralp-hybrid", ps=1, micro_batches=1, **settings)
    assert default.step_time_s == explicit.step_time_s == pytest.approx(step, rel=1e-12)
    assert (default.ps, default.micro_batches) == (1, 1)


# ----------------------------------------------------------------------------- the pipeline

def _toy(latency=0.0):
    """A two-layer profile on links slow enough that every resource matters."""
    profile = two_layer_profile(2_000_000, 5_000_000, 4096, conv_flops=2e9, fc_flops=1e8)
    hardware = Hardware("toy", 4e12, 4e12, 2e12, 1e9, 2e9, latency)
    return profile, hardware


def test_pipelined_step_is_the_schedule_worked_by_hand():
    """The toy is bound by the workers' CPU (tower 48 ms against trips of 8 ms up, 1.9 ms of head
    and 8 ms down), so m micro-batches keep the CPU busy from the first forward to the last
    backward but for one gap: the first micro-batch's round trip (up, head, down, each 1/m) not
    covered by the other m-1 forwards. So the pipelined part takes the tower plus
    max(0, trip/m - (m-1)/m x forward), what follows it (codec, updates, ring) is the same for
    every m > 1, and at m = 8 the gap is gone."""
    profile, hw = _toy()
    W, B, A = 4, 32, 4096
    tower = 3 * B * 2e9 / 4e12                 # the toy's tower: conv FLOPs at the conv rate
    head = 3 * W * B * 1e8 / 2e12              # the head for W x B images on the PS
    up_worker, up_ps = 4 * B * A / (1e9 / 8), 4 * W * B * A / (2e9 / 8)
    trip = 2 * max(up_worker, up_ps) + head    # activations up, the head, gradients down
    assert tower > trip
    steps = {m: predict(profile, "ralp-hybrid", workers=W, batch_size=B, hardware=hw, micro_batches=m)
             for m in (1, 2, 4, 8)}
    gap = {m: max(0.0, trip / m - (m - 1) / m * tower / 3) for m in (2, 4, 8)}
    assert gap[2] > 0 and gap[8] == 0
    for m in (2, 4):
        assert steps[m].step_time_s - steps[8].step_time_s == pytest.approx(gap[m], rel=1e-9, abs=1e-15)
    unpipelined = steps[1].step_time_s
    for m, p in steps.items():
        if m > 1:
            assert p.step_time_s < unpipelined and p.breakdown["micro_batches"] == m
        for key in ("worker_tx_bytes", "worker_rx_bytes", "ps_tx_bytes", "ps_rx_bytes"):
            assert getattr(p, key) == getattr(steps[1], key)  # bytes do not depend on m
        assert p.micro_batches == m
    # What the PS hides behind the workers' backward and ring (head_beside_backward): the head's
    # weight gradients and update at m = 1, its update alone at m > 1.
    hidden = {m: p.breakdown["ps_beside_backward_s"] for m, p in steps.items()}
    update = 2 * 5_000_000 * hw.pass_seconds(1, 1)
    assert hidden[1] == pytest.approx(head / 3 + update, rel=1e-9) and hidden[8] == pytest.approx(update, rel=1e-9)


def test_each_micro_batch_pays_its_own_latency():
    """Every micro-batch's trips up and down wait out their own latency (a transfer holds its link
    for it), the ring's 2(W-1) hops come once, after the pipeline: unpipelined, latency adds the
    two trips and the ring's hops; pipelined, at least the ring's (the trips' may hide under the
    other micro-batches' compute, as in this CPU-bound toy at m = 8), at most every micro-batch's
    trips in a row and the ring's."""
    W, B = 4, 32
    for m in (1, 2, 8):
        fast, slow = (predict(_toy(lat)[0], "ralp-hybrid", workers=W, batch_size=B, hardware=_toy(lat)[1],
                              micro_batches=m) for lat in (0.0, 1e-3))
        added = slow.step_time_s - fast.step_time_s
        if m == 1:
            assert added == pytest.approx((2 + 2 * (W - 1)) * 1e-3, rel=1e-9)
        assert 2 * (W - 1) * 1e-3 * (1 - 1e-9) <= added <= (2 * m + 2 * (W - 1)) * 1e-3 * (1 + 1e-9), (m, added)
        assert slow.breakdown["send_activations_s"] - fast.breakdown["send_activations_s"] == pytest.approx(m * 1e-3)
    # so on a high-latency link more micro-batches can be slower, and the analyzer keeps m = 1
    profile, hw = _toy(latency=0.05)
    plan = analyze(profile, batch_size=32, workers=4, hardware=hw, strategies=("ralp-hybrid",))
    assert plan.micro_batches == 1 and {m for _, m in plan.hybrid_variants} == {1, 2, 4, 8}


def test_micro_batches_must_divide_the_batch_and_apply_to_the_hybrid_only():
    profile, hw = _toy()
    with pytest.raises(UserError, match="batch size 30 does not split into 4 equal micro-batches"):
        predict(profile, "ralp-hybrid", workers=2, batch_size=30, hardware=hw, micro_batches=4)
    with pytest.raises(UserError, match="batch size 30 does not split into 4"):
        analyze(profile, batch_size=30, workers=2, hardware=hw, micro_batches=4)
    with pytest.raises(UserError, match="ps has no micro-batches"):
        predict(profile, "ps", workers=2, batch_size=32, hardware=hw, micro_batches=2)
    with pytest.raises(UserError, match="micro-batches must be a positive integer"):
        predict(profile, "ralp-hybrid", workers=2, batch_size=32, hardware=hw, micro_batches=0)
    searched = analyze(profile, batch_size=12, workers=2, hardware=hw)  # 8 does not divide 12
    assert {m for _, m in searched.hybrid_variants} == {1, 2, 4}


# ----------------------------------------------------------------------------- the search

def _fake(S, m, t):
    return Prediction("ralp-hybrid", "flatten", 4, 32, t, 0.0, 0.0, "PS link", 0, 0, 0, 0, ps=S, micro_batches=m)


def test_variant_rule_wants_a_clear_gain_and_then_the_fewest_moving_parts():
    plain = _fake(1, 1, 1.0)
    # 2% faster is not worth pipelining
    assert _pick_variant({(1, 1): plain, (1, 2): _fake(1, 2, 0.98)}) is plain
    # a clear gain: of the variants within 5% of the fastest, the one with fewer PS tasks
    one_ps = _fake(1, 8, 0.90)
    assert _pick_variant({(1, 1): plain, (1, 8): one_ps, (2, 8): _fake(2, 8, 0.89)}) is one_ps
    # exact ties go to fewer PS tasks, then fewer micro-batches
    fewer = _fake(1, 4, 0.5)
    assert _pick_variant({(1, 1): plain, (2, 4): _fake(2, 4, 0.5), (1, 8): _fake(1, 8, 0.5), (1, 4): fewer}) is fewer
    # a simpler variant 6% behind the fastest does not hold it back
    fastest = _fake(2, 8, 0.50)
    assert _pick_variant({(1, 1): plain, (1, 8): _fake(1, 8, 0.50 / (1 - MIN_VARIANT_GAIN) * 1.01),
                          (2, 8): fastest}) is fastest


def test_the_hybrid_must_clearly_beat_ralps_own_placement_to_be_chosen():
    """RALP's FC-on-PS stays unless the hybrid (a ring and a tower replica more) is predicted
    MIN_VARIANT_GAIN faster: 3% is a tie, 6% a gain; without ralp among the splits, the hybrid."""
    ralp = dataclasses.replace(_fake(1, 1, 1.0), strategy="ralp")
    assert _pick_split([ralp, _fake(1, 1, 0.97)]) is ralp
    clear = _fake(1, 1, 0.94)
    assert _pick_split([ralp, clear]) is clear and _pick_split([clear]) is clear
    assert _pick_split([ralp, _fake(1, 1, 1.2)]) is ralp and _pick_split([]) is None
    # The analyzer's own case: alexnet_cifar on CPU-like hosts (20 GFLOP/s) at 1 Gbit/s, 2 workers,
    # unpipelined (a run's plan), where the hybrid is priced a little faster than FC-on-PS.
    hardware = dataclasses.replace(load_hardware("v100-10gbe"), worker_conv_flops=2e10, worker_dense_flops=2e10,
                                   ps_flops=2e10, pass_s=2.5e-9, memory_bandwidth=None, host_device_bandwidth=None,
                                   worker_bandwidth=1e9, ps_bandwidth=1e9, latency_s=0.0)
    plan = analyze(zoo_profile("alexnet_cifar"), batch_size=32, workers=2, hardware=hardware, micro_batches=1)
    fc_on_ps, hybrid = plan.predictions["ralp"], plan.predictions["ralp-hybrid"]
    assert hybrid.step_time_s < fc_on_ps.step_time_s < hybrid.step_time_s / (1 - MIN_VARIANT_GAIN)
    assert plan.strategy == "ralp" and plan.cut == fc_on_ps.cut
    assert f"predicted only {1 - hybrid.step_time_s / fc_on_ps.step_time_s:.0%} faster" in plan.reason, plan.reason
    assert "FC-on-PS (RALP) is kept" in plan.reason, plan.reason


def _bucketed(mb, t):
    return dataclasses.replace(_fake(1, 1, t), hybrid_bucket_mb=mb)


def test_ring_buckets_must_clearly_beat_one_fused_ring_and_then_the_fewest_rings_win():
    fused = _bucketed(0.0, 1.0)
    assert _pick_bucket({0.0: fused, 1.0: _bucketed(1.0, 0.96)}) is fused  # 4%: not worth its rings
    four = _bucketed(4.0, 0.83)
    # 1 MiB is fastest; 4 MiB is within 5% of it with fewer rings; 16 MiB is not
    assert _pick_bucket({0.0: fused, 1.0: _bucketed(1.0, 0.80), 4.0: four, 16.0: _bucketed(16.0, 0.90)}) is four
    assert _pick_bucket({0.0: fused, 4.0: _bucketed(4.0, 1.0)}) is fused  # a tie: one ring


def test_the_search_prices_the_hybrids_ring_buckets_and_a_run_prices_its_own():
    """VGG-16 at 8 workers on V100 + 10 GbE: the fused ring waits for the whole backward; buckets
    overlap it (16 MiB is within 5% of 4 MiB with fewer rings). A run's plan prices the buckets the
    run has (bench/driver/planning.py passes --hybrid-bucket-mb), and searches nothing."""
    profile, hardware = zoo_profile("vgg16"), load_hardware("v100-10gbe")
    plan = analyze(profile, batch_size=32, workers=8, hardware=hardware, micro_batches=1, hybrid_bucket_mb=None)
    hybrid, tried = plan.predictions["ralp-hybrid"], plan.hybrid_buckets
    assert set(tried) == set(BUCKET_SIZES_MB) and hybrid is _pick_bucket(tried)
    assert hybrid.hybrid_bucket_mb == 16.0 and hybrid.step_time_s < tried[0.0].step_time_s * (1 - MIN_VARIANT_GAIN)
    assert tried[4.0].step_time_s <= hybrid.step_time_s < tried[4.0].step_time_s / (1 - MIN_VARIANT_GAIN)
    assert "Hybrid's ring: 16 MiB buckets" in plan.reason and "--hybrid-bucket-mb 16" in plan.reason, plan.reason
    fused = analyze(profile, batch_size=32, workers=8, hardware=hardware, micro_batches=1, hybrid_bucket_mb=0.0)
    assert fused.hybrid_buckets == {} and "Hybrid's ring" not in fused.reason
    assert fused.predictions["ralp-hybrid"].hybrid_bucket_mb == 0.0
    assert fused.predictions["ralp-hybrid"].step_time_s == pytest.approx(tried[0.0].step_time_s)

    from bench.core.config import RunConfig
    from bench.driver.planning import plan_for

    for mb in (0.0, 4.0):
        cfg = RunConfig(model="vgg16", strategy="auto", workers=8, batch_size=32, hardware="v100-10gbe",
                        hybrid_bucket_mb=mb).validate()
        assert plan_for(cfg).predictions["ralp-hybrid"].hybrid_bucket_mb == mb


def test_the_search_shards_and_pipelines_vgg16_where_it_pays_and_says_why():
    """VGG-16 on V100 + 10 GbE, up to 4 PS hosts: at 128 workers the head's 411 MB of
    activations each way bound one PS link; 8 micro-batches overlap the trips up and down (the
    link is full duplex) and three PS hosts cut them to a third (four gain too little more)."""
    profile, hardware = zoo_profile("vgg16"), load_hardware("v100-10gbe")
    plan = analyze(profile, batch_size=32, workers=128, ps=4, hardware=hardware, search_layouts=True)
    hybrid = plan.predictions["ralp-hybrid"]
    assert (plan.strategy, plan.ps, plan.micro_batches, plan.ps_placement) == ("ralp-hybrid", 3, 8, "dedicated")
    assert (hybrid.ps, hybrid.micro_batches) == (3, 8) and len(plan.hybrid_variants) == 4 * 4
    plain = plan.hybrid_variants[1, 1]
    assert hybrid.step_time_s < plain.step_time_s * (1 - MIN_VARIANT_GAIN)
    for text in ("head over 3 PS, 8 micro-batches", f"{hybrid.step_time_s:.3g} s",
                 f"{plain.step_time_s:.3g} s head on 1 PS, unpipelined", f"{plan.predictions['horovod'].step_time_s:.3g} s",
                 "Sync PS:", "colocated", "dedicated"):
        assert text in plan.reason, (text, plan.reason)
    assert set(plan.ps_layouts) == {"dedicated", "colocated"}


@pytest.mark.parametrize("workers,strategy", [(8, "ralp-hybrid"), (128, "ralp-hybrid"), (256, "ralp-hybrid"),
                                              (512, "ralp-hybrid"), (1024, "horovod")])
def test_micro_batches_move_vgg16s_crossover_to_the_ring(workers, strategy):
    """With one PS (a run's own launch) but micro-batches searched, the hybrid beats the ring
    up to 512 workers (unpipelined: 64, tests/test_analyzer.py)."""
    plan = analyze(zoo_profile("vgg16"), batch_size=32, workers=workers, hardware=load_hardware("v100-10gbe"))
    assert plan.strategy == strategy, plan.reason
    assert {S for S, _ in plan.hybrid_variants} == {1}


def test_without_search_layouts_a_plan_keeps_the_runs_ps_count_and_layout():
    """What bench/driver/planning.py asks: its one launch has exactly --ps PS tasks in --ps-placement."""
    profile = zoo_profile("vgg_cifar")
    plan = analyze(profile, batch_size=32, workers=4, ps=2, hardware=ONE_GBIT, ps_placement="dedicated")
    assert {S for S, _ in plan.hybrid_variants} == {2} and set(plan.ps_layouts) == {"dedicated"}
    assert plan.predictions["ps"].ps == 2 and plan.predictions["ralp"].ps == 2
    colocated = analyze(profile, batch_size=32, workers=4, hardware=ONE_GBIT, ps_placement="colocated",
                        strategies=("ps", "horovod"))
    assert set(colocated.ps_layouts) == {"colocated"} and colocated.predictions["ps"].ps_placement == "colocated"
    fixed = analyze(profile, batch_size=32, workers=4, hardware=ONE_GBIT, micro_batches=1)
    assert set(fixed.hybrid_variants) == {(1, 1)}


def test_the_search_picks_the_faster_sync_ps_layout():
    """alexnet_cifar at 1 Gbit/s: one dedicated PS link carries W x 4P each way, colocated PS
    tasks spread it over every host (measured in results/: 0.36 vs 0.67 s at 2 workers, 0.70 vs
    1.31 s at 4)."""
    profile = zoo_profile("alexnet_cifar")
    for workers in (2, 4, 8):
        plan = analyze(profile, batch_size=32, workers=workers, hardware=ONE_GBIT, strategies=("ps",),
                       search_layouts=True)
        times = {layout: p.step_time_s for layout, p in plan.ps_layouts.items()}
        assert (plan.strategy, plan.ps_placement) == ("ps", "colocated") and plan.ps == workers
        assert times["colocated"] < times["dedicated"] and plan.predictions["ps"].step_time_s == times["colocated"]
        assert all(f"{t:.3g} s {layout}" in plan.reason for layout, t in times.items())
        assert plan.reason.startswith("sync PS, colocated is predicted fastest")


# ----------------------------------------------------------------------------- the CLI's plot

def test_plot_overlays_the_measured_medians_from_the_result_store(tmp_path):
    from bench.commands.analyze_plot import measured_points, plot
    from bench.store.results import ResultStore

    store = ResultStore(tmp_path / "results")
    base = dict(model="toy", batch_size=32, link_bps=1e9, status="ok", ps=1, ps_placement="dedicated")
    rows = [dict(base, strategy="ralp-hybrid", plan="ralp-hybrid", workers=4, step_time_median_s=t)
            for t in (0.9, 1.0, 1.3)]
    rows += [dict(base, strategy="auto", plan="horovod", workers=2, step_time_median_s=0.5),  # auto: what ran
             dict(base, strategy="ps", plan="ps", workers=4, ps_placement="colocated", step_time_median_s=2.0),
             dict(base, strategy="ps", plan="ps", workers=4, step_time_median_s=3.0),
             dict(base, strategy="ralp-hybrid", plan="ralp-hybrid", workers=8, ps=2, step_time_median_s=1.5),
             # none of these: other links, another batch, a failed run, a strategy without a line
             dict(base, strategy="horovod", plan="horovod", workers=2, link_bps=1e8, step_time_median_s=9.0),
             dict(base, strategy="horovod", plan="horovod", workers=2, batch_size=64, step_time_median_s=9.0),
             dict(base, strategy="horovod", plan="horovod", workers=2, status="failed", step_time_median_s=9.0),
             dict(base, strategy="single", plan="single", workers=2, step_time_median_s=0.1)]
    store.write_run(rows)
    points = measured_points(store.root, "toy", 32, 1e9)
    assert points == {"ralp-hybrid": [(4, 1.0)], "ralp-hybrid:2 PS": [(8, 1.5)], "horovod": [(2, 0.5)],
                      "ps:colocated": [(4, 2.0)], "ps:dedicated": [(4, 3.0)]}
    assert measured_points(tmp_path / "nowhere", "toy", 32, 1e9) == {}
    assert measured_points(store.root, "toy", 32, 10e9) == {}

    profile, hardware = _toy()
    settings = dict(batch_size=32, workers=4, ps=2, hardware=hardware, compression=None, overlap=False,
                    all_cuts=False, search_layouts=True, micro_batches=None)
    png = tmp_path / "scaling.png"
    labels = plot(profile, settings, png, points)
    for label in ("measured: hybrid (median)", "measured: hybrid, 2 PS (median)", "measured: sync PS, colocated (median)",
                  "predicted: sync PS, dedicated", "predicted: sync PS, colocated",
                  "predicted: hybrid (analyzer's PS x micro-batches)"):
        assert label in labels, labels
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
