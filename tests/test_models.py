"""The zoo: published parameter counts, FC-heavy vs global-pooling shape, one step each."""
import numpy as np
import pytest
import tensorflow as tf

from bench.core.errors import UserError
from bench.models import MODELS, get_model
from strategies.base import loss_fn
from strategies.optim import MomentumSGD

PUBLISHED = {
    "alexnet": 61_100_840,     # torchvision layout
    "vgg16": 138_357_544,      # Keras applications / torchvision
    "resnet50": 25_636_712,    # Keras applications layout (torchvision: 25,557,032)
    "inception3": 23_851_784,  # Keras applications, no auxiliary head
}


def parameter_split(model):
    """(total parameters, parameters in Dense layers), walking nested models: Keras' own count,
    independent of the profiler's."""
    def dense_params(layer):
        if isinstance(layer, tf.keras.Model):
            return sum(dense_params(inner) for inner in layer.layers)
        return layer.count_params() if isinstance(layer, tf.keras.layers.Dense) else 0

    return model.count_params(), dense_params(model)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_imagenet_parameter_counts_match_published(name):
    model = get_model(name)
    assert model.count_params() == PUBLISHED[name]
    assert model.input_shape[1:] == MODELS[name].input_shape
    assert model.output_shape[-1] == 1000


def test_vgg16_matches_keras_applications_layer_by_layer():
    ours = get_model("vgg16")
    theirs = tf.keras.applications.VGG16(weights=None)
    assert [w.shape for w in ours.weights] == [w.shape for w in theirs.weights]


@pytest.mark.parametrize("name", [n for n, s in MODELS.items() if s.cpu_sized])
def test_cpu_models_keep_the_property_and_train_one_step(name):
    model = get_model(name, seed=1)
    total, fc = parameter_split(model)
    share = fc / total
    if name == "resnet_cifar":
        assert share < 0.10
    else:
        assert share >= 0.80
    spec = MODELS[name]
    rng = np.random.default_rng(0)
    x = rng.random((4, *spec.input_shape), dtype=np.float32)
    y = rng.integers(0, spec.num_classes, 4).astype(np.int32)
    opt = MomentumSGD(model.trainable_variables, 0.05, 0.9)
    before = [v.numpy().copy() for v in model.trainable_variables]
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    opt.apply(tape.gradient(loss, model.trainable_variables))
    assert np.isfinite(float(loss))
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables)]
    assert all(changed)


def test_same_seed_same_weights():
    a, b = get_model("lenet_mnist", seed=7), get_model("lenet_mnist", seed=7)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


def test_unknown_model_lists_valid_names():
    with pytest.raises(UserError) as err:
        get_model("resnet9000")
    for name in MODELS:
        assert name in str(err.value)


def test_cli_unknown_model_exits_nonzero(cli):
    proc = cli("models", "nope")
    assert proc.returncode == 2
    assert "unknown model 'nope'" in proc.stderr and "vgg16" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_models_lists_every_model(cli):
    proc = cli("models")
    assert proc.returncode == 0, proc.stderr
    for name in MODELS:
        assert name in proc.stdout
    assert "138,357,544" in proc.stdout
