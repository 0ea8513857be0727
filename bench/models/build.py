"""Build a registered model with TensorFlow (the registry itself, bench/models/registry.py,
is TF-free so settings can be validated without importing TensorFlow)."""
import importlib

from bench.models.registry import get_spec


def get_model(name: str, seed: int = None, num_classes: int = None):
    """Build a fresh model. With ``seed`` the initial weights are reproducible
    across processes, which is what lets every strategy start from the same point."""
    import tensorflow as tf

    spec = get_spec(name)
    if seed is not None:
        tf.keras.utils.set_random_seed(seed)
    module, function = spec.builder.split(":")
    builder = getattr(importlib.import_module(module), function)
    return builder(spec.input_shape, num_classes or spec.num_classes)
