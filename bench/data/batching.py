"""Deterministic sharding and batching: every strategy sees the same images per worker per step.

Workers keep their shard resident and index batches by step number, so nothing here holds state:
the batch of (rank, step) is a pure function of (seed, rank, step, sizes). A single-process
reference trainer rebuilds the global batch of a step from the same functions and checks that the
distributed strategies computed the same update.
"""
import numpy as np

from bench.core.errors import UserError


def shard_indices(n, rank, workers, seed):
    """Indices of ``rank``'s shard: a seeded permutation of range(n), then contiguous equal slices.

    Shards are disjoint, all of size n // workers (the remainder is dropped), and together cover the
    first workers * (n // workers) entries of the permutation.
    """
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    if not 0 <= rank < workers:
        raise UserError(f"rank {rank} is outside 0..{workers - 1}")
    per_worker = n // workers
    if per_worker < 1:
        raise UserError(f"{n} training images cannot give {workers} workers one image each; "
                        "use fewer workers or more data")
    permutation = np.random.default_rng([int(seed), 0x5A4D]).permutation(n)
    return permutation[rank * per_worker:(rank + 1) * per_worker]


def shard(x, y, rank, workers, seed):
    """(x_shard, y_shard) of ``rank`` (copies); see ``shard_indices``."""
    if len(x) != len(y):
        raise ValueError(f"{len(x)} images but {len(y)} labels")
    idx = shard_indices(len(x), rank, workers, seed)
    return x[idx], y[idx]


def batches_per_epoch(batch_size, shard_len):
    if batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {batch_size}")
    if batch_size > shard_len:
        raise UserError(f"batch size {batch_size} exceeds the {shard_len} images each worker holds; "
                        "lower --batch-size, use fewer workers or a larger data set (--synthetic-size)")
    return shard_len // batch_size


def batch_indices(step, batch_size, shard_len, seed, rank):
    """Positions within the shard of ``rank``'s batch at ``step``.

    Each epoch (shard_len // batch_size steps; the tail of the epoch's permutation is skipped) uses
    its own permutation seeded by (seed, rank, epoch); step k of the epoch takes slice k.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    per_epoch = batches_per_epoch(batch_size, shard_len)
    epoch, k = divmod(int(step), per_epoch)
    permutation = np.random.default_rng([int(seed), int(rank), epoch]).permutation(shard_len)
    return permutation[k * batch_size:(k + 1) * batch_size]


def worker_batch(step, x_shard, y_shard, batch_size, seed, rank):
    """(x, y) that ``rank`` trains on at ``step``, from its resident shard."""
    idx = batch_indices(step, batch_size, len(x_shard), seed, rank)
    return x_shard[idx], y_shard[idx]


def global_batch(step, x, y, batch_size, workers, seed):
    """Concatenation over ranks 0..workers-1 of each rank's batch at ``step`` (per-worker ``batch_size``).

    This is exactly what the workers of a distributed run see together at that step, in rank order.
    """
    xs, ys = [], []
    for rank in range(workers):
        idx = shard_indices(len(x), rank, workers, seed)
        local = idx[batch_indices(step, batch_size, idx.size, seed, rank)]
        xs.append(x[local])
        ys.append(y[local])
    return np.concatenate(xs), np.concatenate(ys)
