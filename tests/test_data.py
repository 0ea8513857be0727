"""Data layer: real readers on real (bundled) and small fake files, errors, sharding and batching."""
import gzip
import os
import pickle
import struct

import numpy as np
import pytest

from bench.core.errors import UserError
from bench.data import (DATASET_NAMES, batch_indices, global_batch, load_dataset, shard, shard_indices,
                        validate_data, worker_batch)
from bench.data.bundled import bundled_mnist_path

# ---------------------------------------------------------------- synthetic


def test_synthetic_shapes_range_and_determinism():
    a = load_dataset("synthetic", seed=3, input_shape=(32, 32, 3), num_classes=10, synthetic_size=40)
    b = load_dataset("synthetic", seed=3, input_shape=(32, 32, 3), num_classes=10, synthetic_size=40)
    c = load_dataset("synthetic", seed=4, input_shape=(32, 32, 3), num_classes=10, synthetic_size=40)
    assert a.train_x.shape == (40, 32, 32, 3) and a.train_x.dtype == np.float32
    assert a.train_y.shape == (40,) and a.train_y.dtype == np.int32
    assert a.eval_x.shape[1:] == (32, 32, 3) and a.input_shape == (32, 32, 3) and a.num_classes == 10
    assert 0 <= a.train_x.min() and a.train_x.max() < 1 and 0 <= a.train_y.min() and a.train_y.max() < 10
    assert np.array_equal(a.train_x, b.train_x) and np.array_equal(a.train_y, b.train_y)
    assert not np.array_equal(a.train_x, c.train_x)
    assert "seed=3" in a.source


def test_synthetic_defaults_are_imagenet_sized_and_bounded():
    d = load_dataset("synthetic")
    assert d.train_x.shape == (256, 224, 224, 3) and d.num_classes == 1000
    assert d.train_x.nbytes + d.eval_x.nbytes < 200 * 2**20


# ---------------------------------------------------------------- bundled MNIST and digits


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist", seed=0)


def test_mnist_sizes_and_values(mnist):
    assert mnist.train_x.shape == (4000, 28, 28, 1) and mnist.eval_x.shape == (1000, 28, 28, 1)
    assert mnist.train_x.dtype == np.float32 and mnist.train_y.dtype == np.int32
    assert mnist.train_x.min() == 0.0 and mnist.train_x.max() == 1.0
    assert 0.08 < mnist.train_x.mean() < 0.2  # MNIST is mostly background (mean ~0.13)
    assert np.array_equal(np.bincount(mnist.train_y, minlength=10), [400] * 10)
    assert np.array_equal(np.bincount(mnist.eval_y, minlength=10), [100] * 10)
    assert "mnist_5k.csv.gz sha256:" in mnist.source


def test_mnist_split_is_a_disjoint_partition_of_the_file(mnist):
    table = np.loadtxt(gzip.open(bundled_mnist_path()), delimiter=",", dtype=np.int64)
    def rows(x, y):
        pixels = np.rint(x.reshape(len(x), -1) * 255).astype(np.int64)
        return {r.tobytes() for r in np.column_stack([pixels, y])}
    train, evals = rows(mnist.train_x, mnist.train_y), rows(mnist.eval_x, mnist.eval_y)
    assert len(train) == 4000 and len(evals) == 1000 and not train & evals
    assert train | evals == {r.tobytes() for r in table}


def test_mnist_split_depends_on_seed_only(mnist):
    again = load_dataset("mnist", seed=0)
    other = load_dataset("mnist", seed=1)
    assert np.array_equal(again.eval_x, mnist.eval_x)
    assert not np.array_equal(other.eval_x, mnist.eval_x)


def test_mnist_resized_to_a_model_input_shape(mnist):
    d = load_dataset("mnist", input_shape=(32, 32, 3), limit=300)
    assert d.train_x.shape == (300, 32, 32, 3) and d.input_shape == (32, 32, 3)
    assert np.array_equal(d.train_y, mnist.train_y[:300])
    assert d.train_x.min() >= 0 and d.train_x.max() <= 1
    assert np.array_equal(d.train_x[..., 0], d.train_x[..., 2])  # grey replicated
    assert abs(d.train_x.mean() - mnist.train_x[:300].mean()) < 0.01


def test_digits():
    d = load_dataset("digits", seed=0)
    assert d.train_x.shape == (1400, 8, 8, 1) and d.eval_x.shape == (397, 8, 8, 1)
    assert d.train_x.min() == 0 and d.train_x.max() == 1
    assert set(np.unique(d.eval_y)) == set(range(10))


def test_num_classes_mismatch_and_unknown_name():
    with pytest.raises(UserError, match="mnist has 10 classes"):
        load_dataset("mnist", num_classes=1000)
    with pytest.raises(UserError) as info:
        load_dataset("imagenet22k")
    for name in DATASET_NAMES:
        assert name in str(info.value)
    with pytest.raises(UserError, match="cifar10 is not bundled; pass --data-dir"):
        load_dataset("cifar10")
    with pytest.raises(UserError):
        validate_data("svhn")


# ---------------------------------------------------------------- MNIST idx files


def write_idx(path, array, magic):
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def make_mnist_idx(folder, gz=True, n_train=30, n_eval=10):
    rng = np.random.default_rng(0)
    ext = ".gz" if gz else ""
    parts = {"train": n_train, "t10k": n_eval}
    for prefix, n in parts.items():
        write_idx(str(folder / f"{prefix}-images-idx3-ubyte{ext}"), rng.integers(0, 256, (n, 28, 28)), 0x803)
        write_idx(str(folder / f"{prefix}-labels-idx1-ubyte{ext}"), np.arange(n) % 10, 0x801)
    return folder


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_reader(tmp_path, gz):
    make_mnist_idx(tmp_path, gz=gz)
    d = load_dataset("mnist", data_dir=str(tmp_path))
    assert d.train_x.shape == (30, 28, 28, 1) and d.eval_x.shape == (10, 28, 28, 1)
    assert np.array_equal(d.train_y, np.arange(30) % 10)
    opener = gzip.open if gz else open
    with opener(str(tmp_path / f"train-images-idx3-ubyte{'.gz' if gz else ''}"), "rb") as handle:
        first = np.frombuffer(handle.read()[16:16 + 784], dtype=np.uint8)
    np.testing.assert_allclose(d.train_x[0].ravel(), first / 255.0, rtol=1e-6)
    assert str(tmp_path) in validate_data("mnist", str(tmp_path))


def test_mnist_idx_errors(tmp_path):
    with pytest.raises(UserError, match="t10k-labels-idx1-ubyte"):
        (tmp_path / "partial").mkdir()
        make_mnist_idx(tmp_path / "partial")
        os.remove(tmp_path / "partial" / "t10k-labels-idx1-ubyte.gz")
        validate_data("mnist", str(tmp_path / "partial"))
    make_mnist_idx(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF  # break the gzip CRC
    path.write_bytes(bytes(raw))
    with pytest.raises(UserError, match=r"train-images-idx3-ubyte\.gz is a corrupt or truncated gzip"):
        validate_data("mnist", str(tmp_path))
    write_idx(str(path), np.zeros((30, 28, 28)), 0x803)
    labels = tmp_path / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes())[:-3]))
    with pytest.raises(UserError, match=r"train-labels-idx1-ubyte\.gz .*truncated"):
        validate_data("mnist", str(tmp_path))


# ---------------------------------------------------------------- CIFAR-10 (fake files, both formats)

CIFAR_NAMES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def fake_cifar_arrays(n=6):
    rng = np.random.default_rng(7)
    return {name: (rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8), rng.integers(0, 10, n))
            for name in CIFAR_NAMES}


def write_cifar_python(folder, arrays):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (chw, labels) in arrays.items():
        with open(folder / name, "wb") as handle:
            pickle.dump({b"batch_label": name.encode(), b"labels": labels.tolist(),
                         b"data": chw.reshape(len(chw), -1), b"filenames": [b"x.png"] * len(chw)}, handle)
    return folder


def write_cifar_binary(folder, arrays):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (chw, labels) in arrays.items():
        records = np.column_stack([labels.astype(np.uint8), chw.reshape(len(chw), -1)])
        (folder / f"{name}.bin").write_bytes(records.tobytes())
    return folder


@pytest.mark.parametrize("layout", ["python", "binary"])
def test_cifar_readers(tmp_path, layout):
    arrays = fake_cifar_arrays()
    if layout == "python":
        write_cifar_python(tmp_path / "cifar-10-batches-py", arrays)
    else:
        write_cifar_binary(tmp_path / "cifar-10-batches-bin", arrays)
    d = load_dataset("cifar10", data_dir=str(tmp_path))
    assert d.train_x.shape == (30, 32, 32, 3) and d.eval_x.shape == (6, 32, 32, 3) and d.num_classes == 10
    chw, labels = arrays["data_batch_2"]
    image, row, col, channel = 1, 5, 17, 2  # batch 2's image 1 is the 8th training image
    assert d.train_x[6 + image, row, col, channel] == np.float32(chw[image, channel, row, col] / 255.0)
    assert np.array_equal(d.train_y[6:12], labels) and np.array_equal(d.eval_y, arrays["test_batch"][1])
    assert f"({layout} format)" in d.source and "sha256:" in d.source
    validate_data("cifar10", str(tmp_path))


def test_cifar_both_formats_agree_and_dir_can_be_the_batches_folder(tmp_path):
    arrays = fake_cifar_arrays()
    py = load_dataset("cifar10", data_dir=str(write_cifar_python(tmp_path / "py", arrays)))
    binary = load_dataset("cifar10", data_dir=str(write_cifar_binary(tmp_path / "bin", arrays)))
    assert np.array_equal(py.train_x, binary.train_x) and np.array_equal(py.eval_y, binary.eval_y)


def test_cifar_errors(tmp_path):
    with pytest.raises(UserError, match=f"{tmp_path / 'nowhere'} does not exist"):
        validate_data("cifar10", str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="expected data_batch_1..5 and test_batch"):
        validate_data("cifar10", str(tmp_path / "empty"))
    (tmp_path / "packed").mkdir()
    (tmp_path / "packed" / "cifar-10-python.tar.gz").write_bytes(b"x")
    with pytest.raises(UserError, match="tar xzf cifar-10-python.tar.gz"):
        validate_data("cifar10", str(tmp_path / "packed"))

    folder = write_cifar_python(tmp_path / "py", fake_cifar_arrays())
    os.remove(folder / "test_batch")
    with pytest.raises(UserError, match="lacks test_batch"):
        validate_data("cifar10", str(folder))
    (folder / "test_batch").write_text("this is a text file, not a pickle\n")
    with pytest.raises(UserError, match=r"test_batch is not a CIFAR-10 python pickle"):
        validate_data("cifar10", str(folder))
    full = (folder / "data_batch_1").read_bytes()
    (folder / "test_batch").write_bytes(full[: len(full) // 2])
    with pytest.raises(UserError, match=r"test_batch is a truncated pickle"):
        validate_data("cifar10", str(folder))
    with open(folder / "test_batch", "wb") as handle:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, handle)
    with pytest.raises(UserError, match=r"test_batch has data uint8\[2, 100\]"):
        validate_data("cifar10", str(folder))
    (folder / "test_batch").write_bytes(pickle.dumps(os.system))  # a pickle that would call a function
    with pytest.raises(UserError, match="test_batch is not a CIFAR-10 python pickle"):
        validate_data("cifar10", str(folder))

    binary = write_cifar_binary(tmp_path / "bin", fake_cifar_arrays())
    (binary / "data_batch_3.bin").write_bytes(b"\0" * 3072)
    with pytest.raises(UserError, match=r"data_batch_3\.bin is 3072 bytes, not a whole number of 3073-byte"):
        validate_data("cifar10", str(binary))


# ---------------------------------------------------------------- ImageNet TFRecords (fake shards)


def write_imagenet_shards(folder, tf):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(9)
    layout = {"train-00000-of-00002": 3, "train-00001-of-00002": 2, "validation-00000-of-00001": 2}
    label = 1
    for name, count in layout.items():
        with tf.io.TFRecordWriter(str(folder / name)) as writer:
            for _ in range(count):
                pixels = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
                jpeg = tf.io.encode_jpeg(pixels).numpy()
                feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                           "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
                label += 1
    return folder


def test_crc32c_known_vector():
    from bench.data.imagenet import crc32c
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_imagenet_reader_and_validator(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from bench.data import imagenet_tf_dataset
    folder = write_imagenet_shards(tmp_path, tf)
    assert "5 train and 2 validation records" in validate_data("imagenet", str(folder))
    batches = list(imagenet_tf_dataset(str(folder), "train", 24, 2))
    assert len(batches) == 2  # 5 images, batch 2, remainder dropped
    x, y = batches[0]
    assert x.shape == (2, 24, 24, 3) and x.dtype == tf.float32 and y.dtype == tf.int32
    assert np.array_equal(y.numpy(), [0, 1])  # labels 1.. shifted to 0..
    rank1 = [int(v) for _, ys in imagenet_tf_dataset(str(folder), "train", 24, 1, rank=1, workers=2) for v in ys]
    assert rank1 == [3, 4]  # rank 1 reads the second shard
    d = load_dataset("imagenet", data_dir=str(folder), input_shape=(32, 32, 3), limit=4)
    assert d.train_x.shape == (4, 32, 32, 3) and d.eval_x.shape == (1, 32, 32, 3) and d.num_classes == 1000
    assert 0 <= d.train_x.min() and d.train_x.max() <= 1 and np.array_equal(d.train_y, [0, 1, 2, 3])


def test_imagenet_errors(tmp_path):
    tf = pytest.importorskip("tensorflow")
    with pytest.raises(UserError, match="has no train-\\* files"):
        (tmp_path / "empty").mkdir()
        validate_data("imagenet", str(tmp_path / "empty"))
    folder = write_imagenet_shards(tmp_path / "ok", tf)
    shard_path = folder / "train-00001-of-00002"
    good = shard_path.read_bytes()
    shard_path.write_bytes(good[:-10])
    with pytest.raises(UserError, match="train-00001-of-00002 record 1 .*truncated"):
        validate_data("imagenet", str(folder))
    shard_path.write_text("just some text pretending to be a TFRecord file\n" * 5)
    with pytest.raises(UserError, match="train-00001-of-00002 is not a valid TFRecord file"):
        validate_data("imagenet", str(folder))
    shard_path.write_bytes(good)
    first = folder / "train-00000-of-00002"
    raw = bytearray(first.read_bytes())
    raw[40] ^= 0x01
    first.write_bytes(bytes(raw))
    with pytest.raises(UserError, match="train-00000-of-00002 record 0 fails its data CRC"):
        validate_data("imagenet", str(folder))
    with tf.io.TFRecordWriter(str(first)) as writer:
        feature = {"image/raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}
        writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    with pytest.raises(UserError, match="lack the features image/encoded, image/class/label .found image/raw"):
        validate_data("imagenet", str(folder))


# ---------------------------------------------------------------- sharding and batching


@pytest.mark.parametrize("n,workers", [(100, 3), (64, 4), (7, 7), (1000, 8)])
def test_shards_are_equal_disjoint_and_cover_all_but_the_remainder(n, workers):
    shards = [shard_indices(n, r, workers, seed=11) for r in range(workers)]
    per = n // workers
    assert all(s.size == per for s in shards)
    union = np.concatenate(shards)
    assert np.unique(union).size == workers * per and union.min() >= 0 and union.max() < n
    assert np.array_equal(shards[0], shard_indices(n, 0, workers, seed=11))
    if per > 2:
        assert not np.array_equal(shards[0], shard_indices(n, 0, workers, seed=12))


def test_shard_keeps_images_and_labels_aligned():
    x = np.arange(50, dtype=np.float32)[:, None, None, None] * np.ones((1, 2, 2, 1), np.float32)
    y = np.arange(50, dtype=np.int32)
    xs, ys = shard(x, y, 1, 3, seed=0)
    assert xs.shape == (16, 2, 2, 1) and np.array_equal(xs[:, 0, 0, 0], ys)


def test_batches_cover_each_epoch_once_and_change_between_epochs():
    shard_len, batch = 23, 5  # 4 batches per epoch, 3 images skipped
    epoch0 = [batch_indices(s, batch, shard_len, seed=1, rank=0) for s in range(4)]
    epoch1 = [batch_indices(s, batch, shard_len, seed=1, rank=0) for s in range(4, 8)]
    for epoch in (epoch0, epoch1):
        flat = np.concatenate(epoch)
        assert flat.size == 20 and np.unique(flat).size == 20 and flat.max() < shard_len
    assert not np.array_equal(np.concatenate(epoch0), np.concatenate(epoch1))
    assert np.array_equal(batch_indices(2, batch, shard_len, 1, 0), epoch0[2])
    assert not np.array_equal(batch_indices(2, batch, shard_len, 1, 1), epoch0[2])
    with pytest.raises(UserError, match="batch size 24 exceeds the 23 images"):
        batch_indices(0, 24, shard_len, 1, 0)
    with pytest.raises(UserError, match="rank 3 is outside 0..2"):
        shard_indices(10, 3, 3, 0)
    with pytest.raises(UserError, match="cannot give 11 workers"):
        shard_indices(10, 0, 11, 0)


def test_global_batch_is_the_rank_ordered_concatenation_of_worker_batches():
    data = load_dataset("synthetic", seed=2, input_shape=(4, 4, 1), num_classes=5, synthetic_size=90)
    workers, batch, seed = 3, 8, 5
    shards = [shard(data.train_x, data.train_y, r, workers, seed) for r in range(workers)]
    for step in (0, 1, 3, 4, 17):
        gx, gy = global_batch(step, data.train_x, data.train_y, batch, workers, seed)
        parts = [worker_batch(step, sx, sy, batch, seed, r) for r, (sx, sy) in enumerate(shards)]
        assert gx.shape == (workers * batch, 4, 4, 1)
        assert np.array_equal(gx, np.concatenate([p[0] for p in parts]))
        assert np.array_equal(gy, np.concatenate([p[1] for p in parts]))
