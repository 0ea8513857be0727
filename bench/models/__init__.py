"""The models every strategy trains: the CNN zoo registered by name (``registry``: AlexNet, VGG,
ResNet, Inception, and small CIFAR/MNIST nets), built by ``build``, and ``sources``, which reads
any ``--model`` spelling (a zoo name, keras:NAME, a saved .keras/.h5 file, module:function) into
one ModelSpec. Part of the core layer: the driver profiles these models, the ranks build them."""
from bench.models.build import get_model
from bench.models.registry import MODELS, ModelSpec, model_names

__all__ = ["MODELS", "ModelSpec", "get_model", "model_names"]
