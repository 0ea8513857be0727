"""Cost model and hardware: bytes against the anchor formulas, timing units, parsing.

Most checks use small hand-built profiles whose numbers are the anchor table's
(no TensorFlow model needed); one checks the zoo models' own profiles.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from bench.core.errors import UserError  # noqa: E402
from ralp.cost_model import predict  # noqa: E402
from ralp.hardware import PRESETS, Hardware, load_hardware, parse_bandwidth, parse_latency  # noqa: E402
from ralp.profile import LayerProfile, ModelProfile  # noqa: E402
from ralp.step_cost import LAST_CONV_SHARE  # noqa: E402

MB = 1e6
# model: (P_conv, P_fc, A floats at the split), torchvision/Keras counts from anchors.md.
ANCHOR_MODELS = {
    "alexnet": (2_469_696, 58_631_144, 9_216),
    "vgg16": (14_714_688, 123_642_856, 25_088),
    "resnet50_torchvision": (23_508_032, 2_049_000, 2_048),
    "inception3": (21_802_784, 2_049_000, 2_048),
}
# (model, B, sync PS MB, FC-on-PS MB) per worker per step, pull + push.
ANCHOR_TABLE = [
    ("alexnet", 128, 488.8, 29.2),
    ("vgg16", 32, 1106.9, 124.1),
    ("vgg16", 64, 1106.9, 130.6),
    ("resnet50_torchvision", 32, 204.5, 188.6),
    ("inception3", 32, 190.8, 174.9),
]
FAST = Hardware("fast", 1e30, 1e30, 1e30, 10e9, 10e9, 0.0)  # compute takes no time


def two_layer_profile(p_conv, p_fc, floats, conv_flops=1e9, fc_flops=1e8, name="toy"):
    layers = [LayerProfile("conv", "Conv2D", p_conv, p_conv, int(conv_flops), floats, False, 0),
              LayerProfile("fc", "Dense", p_fc, p_fc, int(fc_flops), 10, True, int(fc_flops))]
    return ModelProfile(name, (1,), layers, ["conv"], _tower_layers={"conv": frozenset({"conv"})})


@pytest.mark.parametrize("model,batch,ps_mb,ralp_mb", ANCHOR_TABLE)
def test_bytes_match_anchor_table(model, batch, ps_mb, ralp_mb):
    profile = two_layer_profile(*ANCHOR_MODELS[model])
    sync = predict(profile, "ps", workers=4, batch_size=batch, hardware=FAST)
    ralp = predict(profile, "ralp", workers=4, batch_size=batch, hardware=FAST)
    assert sync.worker_bytes / MB == pytest.approx(ps_mb, rel=1e-3)
    assert ralp.worker_bytes / MB == pytest.approx(ralp_mb, rel=1e-3)
    assert sync.worker_tx_bytes == sync.worker_rx_bytes  # pull 4P, push 4P


@pytest.mark.parametrize("workers,shards", [(1, 1), (4, 1), (8, 2), (16, 4)])
def test_ps_link_formulas(workers, shards):
    p_conv, p_fc, floats = ANCHOR_MODELS["vgg16"]
    profile, P, B = two_layer_profile(p_conv, p_fc, floats), p_conv + p_fc, 32
    sync = predict(profile, "ps", workers=workers, batch_size=B, hardware=FAST, ps=shards)
    assert (sync.ps_tx_bytes + sync.ps_rx_bytes) * shards == pytest.approx(8 * P * workers)
    ralp = predict(profile, "ralp", workers=workers, batch_size=B, hardware=FAST, ps=1)
    assert ralp.ps_tx_bytes + ralp.ps_rx_bytes == pytest.approx(8 * workers * (p_conv + B * floats))
    assert ralp.worker_tx_bytes == pytest.approx(4 * p_conv + 4 * B * floats)


@pytest.mark.parametrize("workers", [1, 2, 3, 8, 64])
def test_ring_allreduce_bytes(workers):
    profile = two_layer_profile(*ANCHOR_MODELS["alexnet"])
    P = profile.params
    ring = predict(profile, "horovod", workers=workers, batch_size=128, hardware=FAST)
    expected = 2 * (workers - 1) / workers * 4 * P
    assert ring.worker_tx_bytes == pytest.approx(expected) and ring.worker_rx_bytes == pytest.approx(expected)
    assert ring.ps_tx_bytes == ring.ps_rx_bytes == 0


def test_zoo_profiles_give_anchor_bytes():
    from test_profile import zoo_profile

    for model, batch, ps_mb, ralp_mb in ANCHOR_TABLE:
        if model == "resnet50_torchvision":
            model = "resnet50"  # Keras layout: check the formula with its own count instead
            profile = zoo_profile(model)
            p_conv, _, floats, _, _ = profile.split_sizes(profile.first_dense_cut())
            ps_mb, ralp_mb = 8 * profile.params / MB, (8 * p_conv + 8 * batch * floats) / MB
            assert ps_mb == pytest.approx(205.09, abs=0.01)  # 25,636,712 params
        profile = zoo_profile(model)
        sync = predict(profile, "ps", workers=2, batch_size=batch, hardware=FAST)
        ralp = predict(profile, "ralp", workers=2, batch_size=batch, hardware=FAST)
        assert sync.worker_bytes / MB == pytest.approx(ps_mb, rel=1e-3), model
        assert ralp.worker_bytes / MB == pytest.approx(ralp_mb, rel=1e-3), model
        assert ralp.cut == profile.first_dense_cut()


def test_step_time_uses_bits_per_second_and_latency():
    P = 1_000_000
    profile = two_layer_profile(P // 2, P // 2, 100)
    hw = Hardware("slow", 1e30, 1e30, 1e30, 8e6, 8e6, 0.01)  # 8 Mbit/s = 1 MB/s
    sync = predict(profile, "ps", workers=1, batch_size=1, hardware=hw)
    # pull 4 MB + push 4 MB at 1 MB/s, one latency each.
    assert sync.step_time_s == pytest.approx(8.0 + 2 * 0.01, rel=1e-6)
    assert sync.bottleneck == "PS link" or sync.bottleneck == "worker link"
    ring = predict(profile, "horovod", workers=4, batch_size=1, hardware=hw)
    assert ring.step_time_s == pytest.approx(2 * 3 / 4 * 4.0 + 2 * 3 * 0.01, rel=1e-6)
    assert ring.bottleneck == "worker link"
    overlapped = predict(profile, "ps", workers=1, batch_size=1, hardware=hw, overlap=True)
    # duplex: pull and push together; the bound pays one latency (the last byte's flight)
    assert overlapped.step_time_s == pytest.approx(4.0 + 0.01, rel=1e-6)


def test_compute_time_and_ps_compute_for_the_head():
    profile = two_layer_profile(1000, 1000, 10, conv_flops=2e9, fc_flops=1e9)
    hw = Hardware("compute", 1e12, 2e12, 2e12, 1e15, 1e15, 0.0)
    ring = predict(profile, "horovod", workers=1, batch_size=10, hardware=hw)
    # 3x forward: conv 3*10*2e9 at 1e12 FLOP/s + dense 3*10*1e9 at 2e12 FLOP/s; plus the
    # update, 2 memory-bound passes over the 2000 parameters, a pass priced at 80 conv FLOPs.
    one_pass = 80 / 1e12
    assert ring.compute_s == pytest.approx(0.06 + 0.015 + 2 * 2000 * one_pass, rel=1e-9)
    assert ring.bottleneck == "worker compute"
    ralp = predict(profile, "ralp", workers=8, batch_size=10, hardware=hw)
    head_s = 3 * 8 * 10 * 1e9 / 2e12  # the PS runs the head for all W*B images
    # PS: sum 8 tower gradients + update the tower (10 passes over 1000), update the head (2 over 1000)
    assert ralp.breakdown["ps_compute_s"] == pytest.approx(head_s + (10 * 1000 + 2 * 1000) * one_pass)
    assert ralp.breakdown["worker_forward_s"] + ralp.breakdown["worker_backward_s"] == pytest.approx(0.06)
    assert ralp.bottleneck == "PS compute"


@pytest.mark.parametrize("fc_params,forward", [(750_000, 2 / 3), (5_000_000, 20.0)])
def test_sync_ps_overlaps_conv_forward_with_fc_pulls_and_fc_pushes_with_conv_backward(fc_params, forward):
    # 1 MB of conv parameters; 3 MB or 20 MB of FC ones, LAST_CONV_SHARE of which arrive before
    # the last conv tensor (one PS task serves them all at once); 1 MB/s links; compute only in
    # the conv layers, the forward a third of it.
    profile = two_layer_profile(250_000, fc_params, 100, conv_flops=1e9, fc_flops=0)
    hw = Hardware("link", 1e9 * 3 * 4 / 3 / forward, 1e30, 1e30, 8e6, 8e6, 0.0, pass_s=1e-30)
    step = predict(profile, "ps", workers=1, batch_size=4, hardware=hw)
    fc = 4.0 * fc_params / 1e6                          # seconds of FC bytes on the link
    conv_params_in = 1.0 + LAST_CONV_SHARE * fc
    forward_done = max(1.0 + fc, conv_params_in + forward)   # the FC forward waits for the whole pull
    fc_pushed = forward_done + fc                       # FC gradients first
    conv_ready = forward_done + 2 * forward
    assert step.step_time_s == pytest.approx(max(fc_pushed, conv_ready) + 1.0, rel=1e-6)


def test_sync_ps_without_fc_layers_adds_its_phases_up():
    # no FC layers to stream: nothing to overlap, the phases add up
    hw = Hardware("link", 1e9 * 3 * 4 / 2.0, 1e30, 1e30, 8e6, 8e6, 0.0, pass_s=1e-30)
    convonly = ModelProfile("c", (1,), [LayerProfile("c", "Conv2D", 250_000, 250_000, int(1e9), 1000, False)], [])
    plain = predict(convonly, "ps", workers=1, batch_size=4, hardware=hw)
    assert plain.step_time_s == pytest.approx(1.0 + 1.0 + 2.0, rel=1e-6)


@pytest.mark.parametrize("link_bits,saved", [(8e6, 0.9), (0.8e6, 1.0)])
def test_ralp_pushes_each_tower_layer_as_its_backward_finishes(link_bits, saved):
    # Two conv layers of equal FLOPs: conv1 holds 0.1 MB of parameters, conv2 0.9 MB. Tower
    # training 3 s (backward 2 s); conv2's backward finishes first, after 1 s, conv1's after 2 s.
    # 8 Mbit/s (push 1 s): the link drains conv2's 0.9 MB from 1 s, conv1's 0.1 MB at 2 s
    # -> last byte at max(1 + 1.0, 2 + 0.1) = 2.1 s instead of 2 + 1 = 3 s: 0.9 s saved.
    # 0.8 Mbit/s (push 10 s): max(1 + 10, 2 + 1) = 11 s instead of 12 s: 1 s saved.
    def tower(*convs):
        layers = [LayerProfile(name, "Conv2D", p, p, int(f), 100, False, 0) for name, p, f in convs]
        layers.append(LayerProfile("fc", "Dense", 1000, 1000, 0, 10, True, 0))
        names = frozenset(name for name, _, _ in convs)
        return ModelProfile("t", (1,), layers, [convs[-1][0]], _tower_layers={convs[-1][0]: names})

    hw = Hardware("link", 2e9, 1e30, 1e30, link_bits, link_bits, 0.0, pass_s=1e-30)
    two = predict(tower(("conv1", 25_000, 1e9), ("conv2", 225_000, 1e9)), "ralp", workers=1, batch_size=1, hardware=hw)
    one = predict(tower(("conv2", 250_000, 2e9)), "ralp", workers=1, batch_size=1, hardware=hw)
    push = 1e6 * 8 / link_bits
    assert one.breakdown["push_tower_gradients_s"] == pytest.approx(push)
    assert one.breakdown["backward_and_push_s"] == pytest.approx(2.0 + push)  # one layer: nothing streams
    assert two.breakdown["backward_and_push_s"] == pytest.approx(2.0 + push - saved)
    assert one.step_time_s - two.step_time_s == pytest.approx(saved)
    assert two.worker_tx_bytes == one.worker_tx_bytes  # the same bytes, earlier


def test_sync_ps_pushes_each_layers_gradients_as_its_backward_finishes():
    # The tower of the RALP test above under a dedicated sync PS, with a parameter-less FC layer:
    # at 8 Mbit/s the conv gradients (1 MB) take 1 s; conv2's 0.9 MB leave from 1 s into the 2 s
    # backward, conv1's 0.1 MB at 2 s: 2.1 s from the backward's start, not 2 + 1 = 3 s.
    def model(*convs):
        layers = [LayerProfile(name, "Conv2D", p, p, int(f), 100, False, 0) for name, p, f in convs]
        layers.append(LayerProfile("fc", "Dense", 0, 0, 0, 10, True, 0))
        names = frozenset(name for name, _, _ in convs)
        return ModelProfile("t", (1,), layers, [convs[-1][0]], _tower_layers={convs[-1][0]: names})

    hw = Hardware("link", 2e9, 1e30, 1e30, 8e6, 8e6, 0.0, pass_s=1e-30)
    two = predict(model(("conv1", 25_000, 1e9), ("conv2", 225_000, 1e9)), "ps", workers=1, batch_size=1, hardware=hw)
    one = predict(model(("conv2", 250_000, 2e9)), "ps", workers=1, batch_size=1, hardware=hw)
    # pull 1 s, then the forward (1 s); the backward and the push as above
    assert one.step_time_s == pytest.approx(1.0 + 1.0 + 3.0, rel=1e-6)
    assert two.step_time_s == pytest.approx(1.0 + 1.0 + 2.1, rel=1e-6)


@pytest.mark.parametrize("conv_rate", [1e9, 1e12])
@pytest.mark.parametrize("strategy", ["ralp", "ralp-hybrid"])
def test_the_heads_weight_gradients_and_update_run_beside_the_towers_backward(strategy, conv_rate):
    # Tower: 1e9 FLOPs forward, so 3e9 to train; head: 1e9 forward, 3e9 to train at 3e9 FLOP/s
    # on the PS (1 s), a third of it weight gradients; its 1e6 parameters' momentum update is 2
    # passes of 1e-8 s each. Links fast enough not to matter. At 1 GFLOP/s the tower's backward
    # (2 s) hides all of it; at 1 TFLOP/s (2 ms) only 2 ms of it.
    profile = two_layer_profile(100_000, 1_000_000, 100, conv_flops=1e9, fc_flops=1e9)
    hw = Hardware("t", conv_rate, conv_rate, 3e9, 1e15, 1e15, 0.0, pass_s=1e-8)
    p = predict(profile, strategy, workers=1, batch_size=1, hardware=hw)
    beside = 1.0 / 3 + 2 * 1_000_000 * 1e-8
    backward = 2 * 1e9 / conv_rate + (2 * 100_000 * 1e-8 if strategy == "ralp-hybrid" else 0.0)
    assert p.breakdown["ps_beside_backward_s"] == pytest.approx(min(beside, backward), rel=1e-4)
    busy = p.breakdown["worker_forward_s"] + p.breakdown["worker_backward_s"] + p.breakdown["ps_compute_s"]
    assert p.step_time_s == pytest.approx(busy - min(beside, backward), rel=1e-4)


def test_compression_scales_gradient_bytes():
    profile = two_layer_profile(1_000_000, 3_000_000, 1000)
    P = profile.params
    base = dict(workers=4, batch_size=8, hardware=FAST)
    assert predict(profile, "ps", compression="fp16", **base).worker_tx_bytes == 2 * P
    assert predict(profile, "ps", compression="fp16", **base).worker_rx_bytes == 4 * P  # pulls stay fp32
    assert predict(profile, "ps", compression="int8", **base).worker_tx_bytes == P + 4
    assert predict(profile, "ps", compression="topk:0.01", **base).worker_tx_bytes == pytest.approx(0.01 * P * 8)
    ralp = predict(profile, "ralp", compression="fp16", **base)
    assert ralp.worker_tx_bytes == 2 * 1_000_000 + 2 * 8 * 1000
    with pytest.raises(UserError, match="compression"):
        predict(profile, "ps", compression="zip", **base)


@pytest.mark.parametrize("kwargs,match", [
    (dict(workers=0, batch_size=8), "workers"),
    (dict(workers=-2, batch_size=8), "workers"),
    (dict(workers=2, batch_size=0), "batch size"),
    (dict(workers=2, batch_size=8, ps=0), "ps"),
])
def test_invalid_run_parameters(kwargs, match):
    with pytest.raises(UserError, match=match):
        predict(two_layer_profile(10, 10, 1), "ps", hardware=FAST, **kwargs)


def test_ralp_needs_a_dense_layer():
    profile = ModelProfile("convonly", (1,), [LayerProfile("c", "Conv2D", 10, 10, 100, 5, False)], [])
    with pytest.raises(UserError, match="no split possible"):
        predict(profile, "ralp", workers=2, batch_size=2, hardware=FAST)


# ----------------------------------------------------------------------------- hardware

@pytest.mark.parametrize("text,bits", [("10gbit", 10e9), ("100mbit", 100e6), ("1.5Gbit", 1.5e9),
                                       ("400gbps", 400e9), ("1e9", 1e9), ("25G", 25e9), (5e8, 5e8)])
def test_parse_bandwidth(text, bits):
    assert parse_bandwidth(text) == pytest.approx(bits)


@pytest.mark.parametrize("text", ["fast", "0", "-1gbit", "", "10 gigabytes"])
def test_parse_bandwidth_rejects(text):
    with pytest.raises(UserError, match="bandwidth"):
        parse_bandwidth(text)


def test_parse_latency():
    assert parse_latency("0.1ms") == pytest.approx(1e-4)
    assert parse_latency("50us") == pytest.approx(5e-5)
    assert parse_latency("1e-4") == pytest.approx(1e-4)
    with pytest.raises(UserError):
        parse_latency("soon")


def test_presets_are_labelled_and_overridable():
    for name in PRESETS:
        hw = load_hardware(name)
        assert hw.is_preset and "50%" in hw.description and hw.worker_conv_flops > 1e12
    assert PRESETS["v100-10gbe"].worker_conv_flops == pytest.approx(15.7e12 / 2)
    hw = load_hardware("v100-10gbe", bandwidth="1gbit", latency="0.1ms")
    assert (hw.worker_bandwidth, hw.ps_bandwidth, hw.latency_s) == (1e9, 1e9, pytest.approx(1e-4))
    assert load_hardware("v100-10gbe", bandwidth="1gbit", ps_bandwidth="40gbit").ps_bandwidth == 40e9
    assert load_hardware(None).name == "v100-10gbe"
    with pytest.raises(UserError, match=r"v100-10gbe, a100-ib100, h100-400g, p100x4-25g, .*h100x8-ib400, local"):
        load_hardware("tpu-v9")


def test_hardware_json_file(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker_conv_flops": 2e12, "worker_bandwidth": "25gbit", "latency_s": "20us"}))
    hw = load_hardware(str(path))
    assert (hw.name, hw.worker_dense_flops, hw.ps_flops, hw.ps_bandwidth) == ("cluster", 2e12, 2e12, 25e9)
    assert not hw.is_preset and hw.latency_s == pytest.approx(2e-5)
    path.write_text(json.dumps({"worker_conv_flops": 2e12, "worker_bandwidth": "fast"}))
    with pytest.raises(UserError, match="bandwidth"):
        load_hardware(str(path))


def test_the_engine_refuses_to_measure_local_hardware_itself():
    """'local' is measured and cached by the driver alone (bench/driver/calibration.py, tests/test_calibration.py):
    the engine names the fix in one line instead of writing a cache of its own."""
    with pytest.raises(UserError, match=r"measured by the driver.*resolve_hardware\('local'\)"):
        load_hardware("local")


def test_ps_link_rate_and_latency_reach_the_analyzer():
    from bench.core.config import RunConfig
    from bench.driver.planning import hardware_for

    cfg = RunConfig(hardware="v100-10gbe", bandwidth="1gbit", ps_bandwidth="10gbit", latency="1ms")
    hw = hardware_for(cfg)
    assert (hw.worker_bandwidth, hw.ps_bandwidth, hw.latency_s) == (1e9, 10e9, pytest.approx(1e-3))
    profile = two_layer_profile(1_000_000, 3_000_000, 1000)
    slow_ps = predict(profile, "ps", workers=4, batch_size=8, hardware=hardware_for(
        RunConfig(hardware="v100-10gbe", bandwidth="1gbit")))
    fast_ps = predict(profile, "ps", workers=4, batch_size=8, hardware=hw)
    assert fast_ps.step_time_s < slow_ps.step_time_s


def test_the_transport_costs_the_busiest_colocated_host_cpu_beside_its_compute():
    # Two hosts; the FC matrix (3e6 floats) is host 1's shard, the conv one (1e6) host 0's.
    # Host 1 in the pull: serves 12 MB to worker 0, reads 4 MB from host 0 and its own 12 MB
    # through loopback (both ends on its CPU); in the push it sends worker 1's 4 MB of conv
    # gradients and receives worker 0's 12 MB of FC ones, its own 12 MB again through loopback.
    # At 1 ns per pass a sent float costs 1 pass, a received one 3.5 (TRANSPORT_PASSES).
    profile = two_layer_profile(1_000_000, 3_000_000, 1000, conv_flops=1e9, fc_flops=0)
    hw = Hardware("t", 1e12, 1e12, 1e12, 1e15, 1e15, 0.0, pass_s=1e-9)
    p = predict(profile, "ps", workers=2, batch_size=1, hardware=hw, ps_placement="colocated")
    pull = (3e6 + 3e6) * 1.0e-9 + (1e6 + 3e6) * 3.5e-9
    push = (1e6 + 3e6) * 1.0e-9 + (3e6 + 3e6) * 3.5e-9
    assert p.breakdown["transport_pull_cpu_s"] == pytest.approx(pull)
    assert p.breakdown["transport_push_cpu_s"] == pytest.approx(push)
    # links free, all FLOPs in the conv layer: forward 1 ms and backward 2 ms, each with the
    # transport's CPU of its phase, then the largest shard's sum of 2 gradients and its update
    assert p.step_time_s == pytest.approx(1e-3 + pull + 2e-3 + push + 3e6 * (2 + 2) * 1e-9, rel=1e-4)
    # a dedicated PS's worker pays only its own reads and pushes: 4e6 floats each way
    d = predict(profile, "ps", workers=2, batch_size=1, hardware=hw)
    assert (d.breakdown["transport_pull_cpu_s"], d.breakdown["transport_push_cpu_s"]) == pytest.approx(
        (4e6 * 3.5e-9, 4e6 * 1.0e-9))


def colocated_schedule(profile, workers, hw, train_s):
    """The colocated PS's stages (ralp/colocated_ps_cost.py) through the evaluator, one image a step."""
    from ralp.colocated_ps_cost import colocated_ps_cost
    from ralp.evaluator import evaluate
    from ralp.step_cost import Setting

    setting = Setting(profile, workers, 1, 1, (None, None), hw, train_s, ps_placement="colocated")
    return evaluate(colocated_ps_cost(setting).stages)


@pytest.mark.parametrize("train_s,arrives", [(0.0, 4.0), (4.5, 3.75), (6.0, 3.75), (9.0, 3.0)])
def test_the_busiest_colocated_hosts_push_shares_the_link_with_the_pulls_it_serves(train_s, arrives):
    # Two hosts on 1 MB/s links: host 1 holds the FC matrix (3 MB), host 0 the conv one (1 MB).
    # Host 1 serves its 3 MB to worker 0 (3 s alone). Its own worker reads the conv quarter of its
    # 1 MB pull in 0.25 s, runs its conv forward (a third of the training step), then its FC layers
    # (no FLOPs, and the rest of its pull has arrived at 1 s), and pushes the FC quarters of its
    # gradients (0.75 MB: a host's pull and push split by the model's conv/FC shares) on the link
    # still serving the FC matrix. Two flows: each moves at half the rate while both do.
    # No compute: the push starts at 1 s with 2 MB left: both move 0.75 MB in 1.5 s, then 1.25 MB
    # alone (4 s). 4.5 s of training: at 1.75 s with 1.25 MB left (1.5 s shared, 0.5 MB alone:
    # 3.75 s). 6 s: at 2.25 s with 0.75 MB left, as much as the push: both end at 3.75 s. 9 s: at
    # 3.25 s, after the serving ended (3 s).
    profile = two_layer_profile(250_000, 750_000, 100, conv_flops=1e9, fc_flops=0)
    hw = Hardware("t", 3e9 / max(train_s, 1e-30), 1e30, 1e30, 8e6, 8e6, 0.0, pass_s=1e-30)
    schedule = colocated_schedule(profile, 2, hw, train_s)
    assert schedule.end["serve FC parameters"] == pytest.approx(arrives, rel=1e-9)
    # the pulling host (host 0) runs its FC layers once that last parameter is in
    assert schedule.start["pulling host: forward FC"] == pytest.approx(max(arrives, 0.75 + train_s / 3), rel=1e-9)
    p = predict(profile, "ps", workers=2, batch_size=1, hardware=hw, ps_placement="colocated")
    assert p.step_time_s == pytest.approx(schedule.step_s, rel=1e-12)
    assert p.worker_bytes == pytest.approx(8e6)  # the bytes on the wire stay 8(W-1)P/W per host


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_colocated_ps_moves_ring_sized_bytes_per_host_and_times_the_busiest_host(workers):
    """One PS task per worker host (tf_cnn_benchmarks' layout): summed over hosts, 8(W-1)P bytes
    go out and as many come in, whatever the sharding (the local shard never crosses a wire).
    With AlexNet's two variables the FC matrix sits whole on one host, which serves it to the
    W-1 others: that host's 4(W-1)P_fc, or a host with no shard pulling all 4P, sets each phase."""
    p_conv, p_fc, floats = ANCHOR_MODELS["alexnet"]
    profile, P = two_layer_profile(p_conv, p_fc, floats), p_conv + p_fc
    colocated = predict(profile, "ps", workers=workers, batch_size=32, hardware=FAST, ps_placement="colocated")
    dedicated = predict(profile, "ps", workers=workers, batch_size=32, hardware=FAST)
    assert colocated.worker_bytes == pytest.approx(16 * (workers - 1) * P / workers)
    assert colocated.ps_tx_bytes == colocated.ps_rx_bytes == 0
    shards = [p_conv, p_fc] + [0] * (workers - 2) if workers > 1 else [P]
    if workers > 1:
        # Compute takes no time, so the FC host's worker pushes its 4P_conv of gradients as soon as
        # its own pull (4P_conv) is in, on the link still serving the FC matrix: two flows at half
        # the rate each while both move (the test above), so the last byte of the FC matrix leaves
        # when the serving's bytes and min(what was left of them, the push) have.
        rate = FAST.worker_bandwidth / 8
        serving, own = 4 * (workers - 1) * max(shards), 4 * (P - max(shards))
        left = max(0.0, serving - own)
        schedule = colocated_schedule(profile, workers, FAST, 0.0)
        assert schedule.end["serve FC parameters"] == pytest.approx((own + left + min(left, own)) / rate, rel=1e-9)
    if workers > 2:  # the dedicated PS link carries 4PW each way; colocated spreads it
        assert colocated.step_time_s < dedicated.step_time_s
    with pytest.raises(UserError, match="unknown PS placement"):
        predict(profile, "ps", workers=2, batch_size=32, hardware=FAST, ps_placement="sideways")
