"""CIFAR-10 from the user's directory, in either official layout.

* python format: ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch`` (pickled dicts with
  ``data`` uint8 [N, 3072] channel-major and ``labels``);
* binary format: ``cifar-10-batches-bin/data_batch_1..5.bin`` and ``test_batch.bin`` (3,073-byte
  records: one label byte, then 1,024 red, 1,024 green and 1,024 blue bytes).

``--data-dir`` may point at the batches folder itself or at its parent. Pickles are loaded with an
unpickler that only rebuilds arrays, so a foreign file cannot run code.
"""
import os

import numpy as np

from bench.core.errors import UserError
from bench.data.files import describe_source, load_pickle, read_bytes, require_dir, to_unit_float

TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
RECORD_BYTES = 1 + 32 * 32 * 3
LAYOUTS = {"python": ("cifar-10-batches-py", ""), "binary": ("cifar-10-batches-bin", ".bin")}
ARCHIVES = ("cifar-10-python.tar.gz", "cifar-10-binary.tar.gz")


def locate(data_dir):
    """(layout, folder) of the CIFAR-10 batches under ``data_dir``; UserError listing what was expected."""
    data_dir = require_dir(data_dir, "CIFAR-10")
    for layout, (subdir, ext) in LAYOUTS.items():
        for folder in (data_dir, os.path.join(data_dir, subdir)):
            if os.path.isfile(os.path.join(folder, "data_batch_1" + ext)):
                missing = [n + ext for n in TRAIN_BATCHES + [TEST_BATCH]
                           if not os.path.isfile(os.path.join(folder, n + ext))]
                if missing:
                    raise UserError(f"{folder} has data_batch_1{ext} but lacks {', '.join(missing)}; "
                                    "copy the complete CIFAR-10 batches folder")
                return layout, folder
    for archive in ARCHIVES:
        if os.path.isfile(os.path.join(data_dir, archive)):
            raise UserError(f"{os.path.join(data_dir, archive)} is still packed; run "
                            f"`tar xzf {archive}` in {data_dir} and pass the same --data-dir")
    raise UserError(f"{data_dir} holds no CIFAR-10 batches: expected data_batch_1..5 and test_batch "
                    "(python format, cifar-10-batches-py/) or data_batch_1..5.bin and test_batch.bin "
                    "(binary format, cifar-10-batches-bin/)")


def read_python_batch(path):
    batch = load_pickle(path)
    if not isinstance(batch, dict):
        raise UserError(f"{path} unpickles to {type(batch).__name__}, not a CIFAR-10 batch dict; "
                        "use the files from cifar-10-python.tar.gz")
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if data is None or labels is None:
        raise UserError(f"{path} lacks the 'data' and 'labels' entries of a CIFAR-10 batch; "
                        "use the files from cifar-10-python.tar.gz (not CIFAR-100)")
    data = np.asarray(data)
    labels = np.asarray(labels)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or labels.shape != (data.shape[0],):
        raise UserError(f"{path} has data {data.dtype}{list(data.shape)} and {labels.size} labels; "
                        "a CIFAR-10 batch holds uint8 [N, 3072] and N labels")
    return data.reshape(-1, 3, 32, 32), labels


def read_binary_batch(path):
    raw = read_bytes(path)
    if not raw or len(raw) % RECORD_BYTES:
        raise UserError(f"{path} is {len(raw)} bytes, not a whole number of {RECORD_BYTES}-byte CIFAR-10 "
                        "records; copy it again from cifar-10-binary.tar.gz")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    return records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].copy()


def read_split(layout, folder, names):
    ext = LAYOUTS[layout][1]
    reader = read_python_batch if layout == "python" else read_binary_batch
    images, labels = [], []
    for name in names:
        path = os.path.join(folder, name + ext)
        chw, lab = reader(path)
        if lab.size and (lab.min() < 0 or lab.max() > 9):
            raise UserError(f"{path} has labels outside 0..9; it is not CIFAR-10")
        images.append(chw)
        labels.append(lab.astype(np.int32))
    nhwc = np.concatenate(images).transpose(0, 2, 3, 1)
    return to_unit_float(nhwc), np.concatenate(labels)


def load_cifar10(data_dir):
    layout, folder = locate(data_dir)
    train_x, train_y = read_split(layout, folder, TRAIN_BATCHES)
    eval_x, eval_y = read_split(layout, folder, [TEST_BATCH])
    ext = LAYOUTS[layout][1]
    paths = [os.path.join(folder, n + ext) for n in TRAIN_BATCHES + [TEST_BATCH]]
    source = describe_source(paths, label=f"{folder} ({layout} format)")
    return (train_x, train_y, eval_x, eval_y), (32, 32, 3), 10, source


def validate_cifar10(data_dir):
    layout, folder = locate(data_dir)
    ext = LAYOUTS[layout][1]
    reader = read_python_batch if layout == "python" else read_binary_batch
    for name in TRAIN_BATCHES + [TEST_BATCH]:
        reader(os.path.join(folder, name + ext))
