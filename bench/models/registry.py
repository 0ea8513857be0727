"""Models registered by name, as tf_cnn_benchmarks' model_config does.

Every model is built so a placement engine can cut it at a layer boundary:
the chain models are ``tf.keras.Sequential`` stacks of named layers (every
boundary is a cut point), and the models with branches (ResNet, Inception)
are functional graphs whose cut points the profiler finds from the topology.
Nothing is downloaded: Keras applications are built with ``weights=None``.
All models output logits (no softmax layer), so every strategy uses the same
``from_logits`` loss.
"""
from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class ModelSpec:
    """A model as every layer sees it: the zoo's entries, and any spelling --model accepts
    (bench/models/sources.py). ``input_shape``/``num_classes`` are None when only building the
    model tells them (a Keras application at its default size, a saved file, a function)."""
    name: str             # the spelling, exactly as given: what the row records
    builder: str          # zoo: "module:function", imported only when a model is built
    input_shape: Optional[Tuple[int, int, int]]
    num_classes: Optional[int]
    cpu_sized: bool
    description: str
    kind: str = "zoo"     # zoo | keras (tf.keras.applications) | file (.keras/.h5) | function
    source: str = ""      # keras: the application's name; file: its path; function: "target:function"


def _spec(name, builder, input_shape, num_classes, cpu_sized, description):
    return name, ModelSpec(name, builder, input_shape, num_classes, cpu_sized, description)


MODELS = dict([
    _spec("alexnet", "bench.models.imagenet:alexnet", (224, 224, 3), 1000, False,
          "AlexNet, torchvision layout (conv 64-192-384-256-256, FC 4096-4096-1000)"),
    _spec("vgg16", "bench.models.imagenet:vgg16", (224, 224, 3), 1000, False, "VGG-16 (Keras applications layout)"),
    _spec("vgg19", "bench.models.imagenet:vgg19", (224, 224, 3), 1000, False, "VGG-19 (Keras applications layout)"),
    _spec("resnet50", "bench.models.imagenet:resnet50", (224, 224, 3), 1000, False,
          "ResNet-50, Keras applications layout (global average pooling + FC 1000)"),
    _spec("inception3", "bench.models.imagenet:inception3", (299, 299, 3), 1000, False,
          "Inception-v3 without the auxiliary head (Keras applications layout)"),
    _spec("alexnet_cifar", "bench.models.small:alexnet_cifar", (32, 32, 3), 10, True,
          "AlexNet-like for 32x32 inputs; FC head holds ~90% of the parameters"),
    _spec("vgg_cifar", "bench.models.small:vgg_cifar", (32, 32, 3), 10, True,
          "VGG-like for 32x32 inputs; FC head holds ~82% of the parameters"),
    _spec("resnet_cifar", "bench.models.small:resnet_cifar", (32, 32, 3), 10, True,
          "small ResNet (3 residual stages, global pooling); FC share under 1%"),
    _spec("lenet_mnist", "bench.models.small:lenet_mnist", (28, 28, 1), 10, True,
          "LeNet-like for 28x28 MNIST; FC head holds ~97% of the parameters"),
])


def model_names():
    return list(MODELS)
