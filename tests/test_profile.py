"""Profiler and model cutting: exact parameter counts, analytic FLOPs, cut points, split equality.

ImageNet models are built once per test session (``zoo_profile`` caches the
profile, not the model) and never run forward; only small models run.
"""
import functools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.core.errors import UserError  # noqa: E402
from bench.models import get_model  # noqa: E402
from ralp.cut import split_model  # noqa: E402
from ralp.profile import profile_model  # noqa: E402

L = tf.keras.layers


@functools.lru_cache(maxsize=None)
def zoo_profile(name):
    """Profile of a zoo model, built once per session (other test modules import this)."""
    return profile_model(get_model(name))


# Published counts (shared/notes/anchors.md): total, conv/other, floats into the first FC layer.
ANCHORS = {
    "alexnet": (61_100_840, 2_469_696, 9_216),
    "vgg16": (138_357_544, 14_714_688, 25_088),
    "resnet50": (25_636_712, 25_636_712 - 2_049_000, 2_048),  # Keras layout (torchvision: 25,557,032)
    "inception3": (23_851_784, 21_802_784, 2_048),
}


@pytest.mark.parametrize("name", list(ANCHORS))
def test_parameter_counts_and_first_fc_input_match_anchors(name):
    total, conv, floats = ANCHORS[name]
    profile = zoo_profile(name)
    assert profile.params == total
    cut = profile.first_dense_cut()
    p_tower, p_head, a, f_tower, f_head = profile.split_sizes(cut)
    assert (p_tower, p_head, a) == (conv, total - conv, floats)
    assert f_tower + f_head == profile.flops
    assert profile.layers[profile.layer_names().index(cut) + 1].is_dense


def test_non_trainable_batchnorm_statistics_are_counted_separately():
    profile = zoo_profile("inception3")
    assert profile.params - profile.trainable_params == 34_432  # BN moving mean/variance


def test_vgg16_flops_match_hand_computed_layers():
    profile = zoo_profile("vgg16")
    layer = {l.name: l for l in profile.layers}
    # block1_conv1: 3x3x3 -> 64 channels at 224x224: 2 FLOPs per MAC, + bias + ReLU per output.
    out = 224 * 224 * 64
    assert layer["block1_conv1"].flops == 2 * 3 * 3 * 3 * 64 * 224 * 224 + 2 * out
    assert layer["block1_conv1"].out_floats == out
    assert layer["block1_pool"].flops == 4 * 112 * 112 * 64  # 2x2 window per output
    assert layer["fc1"].flops == 2 * 25_088 * 4096 + 2 * 4096
    assert layer["logits"].flops == 2 * 4096 * 1000 + 1000  # no activation (logits)
    # Whole-model multiply-adds: the published 15.47 GMACs for VGG-16 (conv 15.35 G + FC 0.12 G).
    macs = sum(l.flops for l in profile.layers if l.type in ("Conv2D", "Dense")) / 2
    assert macs == pytest.approx(15.47e9, rel=0.01)


def test_alexnet_conv1_flops():
    conv1 = zoo_profile("alexnet").layer("conv1")
    assert conv1.out_floats == 55 * 55 * 64
    assert conv1.flops == 2 * 11 * 11 * 3 * 64 * 55 * 55 + 2 * 55 * 55 * 64


def test_sequential_cut_points_are_every_boundary():
    profile = zoo_profile("alexnet")
    assert profile.cut_points == profile.layer_names()[:-1]
    assert profile.first_dense_cut() == "flatten"


def test_resnet50_cut_points_lie_between_residual_blocks():
    profile = zoo_profile("resnet50")
    assert profile.first_dense_cut() == "avg_pool"
    assert "conv5_block3_out" in profile.cut_points
    inside_blocks = [c for c in profile.cut_points if "_block" in c and not c.endswith(("_out", "_add"))]
    assert inside_blocks == []


def _skip_model():
    """Not in the zoo: conv -> [conv -> conv] + skip -> add -> pool -> dense."""
    inputs = tf.keras.Input((8, 8, 3), name="x")
    stem = L.Conv2D(4, 3, padding="same", activation="relu", name="stem")(inputs)
    y = L.Conv2D(4, 3, padding="same", activation="relu", name="inner1")(stem)
    y = L.Conv2D(4, 3, padding="same", name="inner2")(y)
    merged = L.Add(name="merge")([stem, y])
    pooled = L.GlobalAveragePooling2D(name="pool")(merged)
    logits = L.Dense(3, name="fc")(pooled)
    return tf.keras.Model(inputs, logits, name="skipnet")


def test_functional_skip_model_cut_points_exclude_the_skip():
    profile = profile_model(_skip_model())
    assert profile.cut_points == ["stem", "merge", "pool"]
    assert profile.first_dense_cut() == "pool"
    by_name = {l.name: l for l in profile.layers}
    assert by_name["inner1"].flops == 2 * 9 * 4 * 4 * 64 + 2 * 256
    assert by_name["merge"].flops == 256
    assert by_name["pool"].flops == 256 and by_name["pool"].out_floats == 4
    assert profile.split_sizes("pool") == (112 + 148 + 148, 15, 4, profile.flops - 27, 27)


def test_parallel_branches_have_no_cut_inside():
    inputs = tf.keras.Input((10,))
    a = L.Dense(5, name="a")(inputs)
    b = L.Dense(5, name="b")(inputs)
    joined = L.Concatenate(name="join")([a, b])
    out = L.Dense(2, name="out")(joined)
    profile = profile_model(tf.keras.Model(inputs, out))
    assert profile.cut_points == ["join"]


def test_nested_model_with_unknown_spatial_dims_is_recursed():
    inp = tf.keras.Input((None, None, 3))
    y = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    z = L.Conv2D(8, 3, padding="same")(y)
    y = L.GlobalAveragePooling2D()(L.Add()([y, z]))
    backbone = tf.keras.Model(inp, y, name="backbone")
    model = tf.keras.Sequential([L.InputLayer((16, 16, 3)), backbone, L.Dense(10, name="fc")])
    profile = profile_model(model)
    pixels = 16 * 16
    expected = (2 * 27 * 8 * pixels + 2 * 8 * pixels) + (2 * 72 * 8 * pixels + 8 * pixels) \
        + 8 * pixels + 8 * pixels  # conv1 (+bias+relu), conv2 (+bias), add, global pool
    assert profile.layer("backbone").flops == expected
    assert profile.layer("backbone").params == backbone.count_params()
    assert profile.cut_points == ["backbone"] and profile.first_dense_cut() == "backbone"
    tower, head = split_model(model, "backbone", profile)
    x = np.random.RandomState(0).rand(2, 16, 16, 3).astype("float32")
    np.testing.assert_allclose(head(tower(x)).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6)


def test_model_without_dense_layer_has_no_fc_split():
    inputs = tf.keras.Input((8, 8, 3))
    out = L.GlobalAveragePooling2D(name="gap")(L.Conv2D(4, 3, name="conv")(inputs))
    profile = profile_model(tf.keras.Model(inputs, out))
    assert profile.first_dense_cut() is None
    assert profile.cut_points == ["conv"]


def test_subclassed_model_is_a_user_error():
    class Tiny(tf.keras.Model):
        def call(self, x):
            return x

    with pytest.raises(UserError, match="Sequential/functional"):
        profile_model(Tiny())


@pytest.mark.parametrize("name", ["lenet_mnist", "resnet_cifar"])
def test_split_model_reproduces_outputs_at_every_cut(name):
    model = get_model(name, seed=3)
    profile = profile_model(model)
    x = np.random.RandomState(1).rand(3, *model.input_shape[1:]).astype("float32")
    expected = model(x).numpy()
    for cut in profile.cut_points:
        tower, head = split_model(model, cut, profile)
        np.testing.assert_allclose(head(tower(x)).numpy(), expected, rtol=1e-5, atol=1e-5, err_msg=cut)
        # Same variables, not copies: each original weight appears in exactly one half.
        ids = sorted(id(v) for v in tower.weights + head.weights)
        assert ids == sorted(id(v) for v in model.weights), cut
    assert profile_model(model).cut_points == profile.cut_points  # re-calling layers left the model alone


def test_split_skip_model_and_bad_cut():
    model = _skip_model()
    tower, head = split_model(model, "stem")
    x = np.random.RandomState(2).rand(2, 8, 8, 3).astype("float32")
    np.testing.assert_allclose(head(tower(x)).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(UserError, match="valid cut points"):
        split_model(model, "inner1")
