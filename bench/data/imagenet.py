"""ImageNet from the user's TFRecord shards (the layout of TensorFlow's build_imagenet_data.py).

Files ``train-*`` and ``validation-*`` hold tf.train.Example records with ``image/encoded`` (JPEG
bytes) and ``image/class/label`` (1..1000; 0 is the unused background class). ImageNet does not fit
in memory, so this module offers a validator that needs no TensorFlow, a tf.data reader for
streaming, and ``load_imagenet`` that keeps a bounded number of images for the array-based harness.

TFRecord framing: uint64 length, uint32 masked CRC32C of the length, data, uint32 masked CRC32C of
the data (all little-endian). The validator walks every record header of every file, so a truncated
copy is caught, and fully checks the first record of each split.
"""
import glob
import os
import struct

import numpy as np

from bench.core.errors import UserError
from bench.data.files import require_dir

SPLITS = {"train": "train-*", "validation": "validation-*"}
REQUIRED_FEATURES = ("image/encoded", "image/class/label")
NUM_CLASSES = 1000


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum TFRecord uses; pure Python, fine for headers and a record."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def split_files(data_dir, split):
    """Sorted shard paths of ``split`` ('train' or 'validation'); UserError if there are none."""
    if split not in SPLITS:
        raise UserError(f"ImageNet split {split!r} is unknown; use one of {', '.join(SPLITS)}")
    data_dir = require_dir(data_dir, "ImageNet TFRecord")
    files = sorted(p for p in glob.glob(os.path.join(data_dir, SPLITS[split])) if os.path.isfile(p))
    if not files:
        raise UserError(f"{data_dir} has no {SPLITS[split]} files; expected TFRecord shards named like "
                        "train-00000-of-01024 and validation-00000-of-00128")
    return files


def walk_records(path, check_first_data=False):
    """Number of records in a TFRecord file, checking every header; the first record's bytes if asked."""
    size = os.path.getsize(path)
    if size == 0:
        raise UserError(f"{path} is empty; copy the TFRecord shard again")
    count, first = 0, None
    with open(path, "rb") as handle:
        offset = 0
        while offset < size:
            header = handle.read(12)
            if len(header) < 12:
                raise UserError(f"{path} ends inside a record header at byte {offset}; "
                                "the file is truncated, copy it again")
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != length_crc:
                raise UserError(f"{path} is not a valid TFRecord file (bad length CRC at byte {offset}); "
                                "point --data-dir at ImageNet TFRecord shards")
            end = offset + 12 + length + 4
            if end > size:
                raise UserError(f"{path} record {count} needs {end} bytes but the file has {size}; "
                                "the file is truncated, copy it again")
            if check_first_data and count == 0:
                data = handle.read(length)
                (data_crc,) = struct.unpack("<I", handle.read(4))
                if masked_crc32c(data) != data_crc:
                    raise UserError(f"{path} record 0 fails its data CRC; the file is corrupt, copy it again")
                first = data
            else:
                handle.seek(end)
            offset = end
            count += 1
    return count, first


def _varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the end")
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return result, pos
        shift += 7


def _length_delimited_fields(buf):
    """(field number, bytes) of each length-delimited field of a protobuf message; others skipped."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("field runs past the end")
            yield field, buf[pos:pos + length]
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def example_feature_names(record):
    """Feature keys of a serialized tf.train.Example, read from the wire format without TensorFlow."""
    names = []
    for field, features in _length_delimited_fields(record):
        if field != 1:
            continue
        for entry_field, entry in _length_delimited_fields(features):
            if entry_field == 1:
                for key_field, key in _length_delimited_fields(entry):
                    if key_field == 1:
                        names.append(key.decode("utf-8", "replace"))
    return names


def validate_imagenet(data_dir):
    """Check both splits' shards without TensorFlow; returns {split: record count}."""
    counts = {}
    for split in SPLITS:
        total = 0
        for index, path in enumerate(split_files(data_dir, split)):
            count, first = walk_records(path, check_first_data=index == 0)
            if index == 0:
                try:
                    names = example_feature_names(first)
                except ValueError as exc:
                    raise UserError(f"{path} record 0 is not a tf.train.Example ({exc}); "
                                    "use shards written by build_imagenet_data.py") from None
                missing = [f for f in REQUIRED_FEATURES if f not in names]
                if missing:
                    raise UserError(f"{path} records lack the features {', '.join(missing)} "
                                    f"(found {', '.join(names) or 'none'}); use the standard ImageNet TFRecords")
            total += count
        counts[split] = total
    return counts


def imagenet_tf_dataset(data_dir, split, image_size, batch, *, rank=0, workers=1, seed=0,
                        shuffle=False, label_offset=1):
    """tf.data pipeline of (float32 [batch, size, size, 3] in [0, 1], int32 [batch]) from the shards.

    Images are centre-cropped to 87.5% and resized (the standard evaluation crop; deterministic, so
    every strategy sees the same pixels). Labels are shifted by ``label_offset`` (1 for the standard
    files) to 0..999. With ``workers`` > 1 each rank reads a disjoint part: whole files when there are
    at least as many files as workers, else every workers-th record. Incomplete batches are dropped.
    """
    import tensorflow as tf

    files = split_files(data_dir, split)
    if not 0 <= rank < workers:
        raise UserError(f"rank {rank} is outside 0..{workers - 1}")
    by_file = len(files) >= workers
    records = tf.data.TFRecordDataset(files[rank::workers] if by_file else files)
    if not by_file:
        records = records.shard(workers, rank)
    if shuffle:
        records = records.shuffle(10_000, seed=seed, reshuffle_each_iteration=True)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def decode(serialized):
        parsed = tf.io.parse_single_example(serialized, spec)
        image = tf.io.decode_image(parsed["image/encoded"], channels=3, expand_animations=False)
        image = tf.image.central_crop(tf.image.convert_image_dtype(image, tf.float32), 0.875)
        image = tf.image.resize(image, [image_size, image_size])
        label = tf.cast(parsed["image/class/label"] - label_offset, tf.int32)
        return tf.clip_by_value(image, 0.0, 1.0), label

    return (records.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))


def _take_arrays(data_dir, split, image_size, count):
    import tensorflow as tf

    images, labels = [], []
    try:
        for x, y in imagenet_tf_dataset(data_dir, split, image_size, 1).take(count):
            images.append(x.numpy()[0])
            labels.append(y.numpy()[0])
    except tf.errors.OpError as exc:
        first_line = str(exc.message).splitlines()[0]
        raise UserError(f"reading {data_dir} {split}-* shards failed ({first_line}); "
                        "check the shards with `ralp-bench doctor` or copy them again") from None
    if not images:
        raise UserError(f"{data_dir} {split}-* shards hold no readable images")
    return np.stack(images), np.asarray(labels, dtype=np.int32)


def load_imagenet(data_dir, input_shape, limit):
    """The first ``limit`` training and ``limit // 4`` validation images, in file order, as arrays."""
    input_shape = tuple(input_shape or (224, 224, 3))
    if len(input_shape) != 3 or input_shape[0] != input_shape[1] or input_shape[2] != 3:
        raise UserError(f"ImageNet input shape {input_shape} must be SIZE,SIZE,3")
    train_x, train_y = _take_arrays(data_dir, "train", input_shape[0], limit)
    eval_x, eval_y = _take_arrays(data_dir, "validation", input_shape[0], max(1, limit // 4))
    files = split_files(data_dir, "train")
    source = f"{os.path.abspath(data_dir)} (first {len(train_y)} of {len(files)} train shards' images)"
    return (train_x, train_y, eval_x, eval_y), input_shape, NUM_CLASSES, source
