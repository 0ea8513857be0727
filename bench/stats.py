"""Statistics for timed steps: medians with bootstrap confidence intervals, jitter, speedups.

Why: a speedup printed from one sample of a handful of steps on a shared machine
says nothing about noise. Each row keeps every timed step (``step_times_s``);
from them the report prints the median images/sec with a 95% percentile
bootstrap interval (resampling steps), tf_cnn_benchmarks' "+/- jitter" (the
median absolute deviation scaled to a normal's standard deviation), and a
speedup B/A with the interval of the ratio of medians, resampling both sides;
an interval that contains 1.0 is "no significant difference".
"""
import json
import math
from statistics import NormalDist
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


def binomial_halfwidth(p: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Normal-approximation half-width of a proportion ``p`` measured on ``n`` trials (a held-out
    accuracy on n images): differences smaller than this are not resolved by that many trials."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return z * math.sqrt(max(p * (1 - p), 0.0) / n)


def parse_steps(text) -> Optional[np.ndarray]:
    """The row's ``step_times_s`` (a JSON list) as an array; None when absent or empty."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return None
    values = np.asarray(json.loads(text) if isinstance(text, str) else list(text), dtype=float)
    return values if values.size else None


def bootstrap_ci(samples: Sequence[float], statistic=np.median, confidence: float = CONFIDENCE,
                 resamples: int = RESAMPLES, seed: int = 0) -> Tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over ``samples`` (deterministic for a seed)."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    rng = np.random.default_rng(seed)
    stats = statistic(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def relative_halfwidth(samples: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """The wider side of the median's bootstrap interval as a share of the median: 0.05 means
    the 95% interval lies within ±5% of the median (inf for fewer than 3 samples)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return float("inf")
    median = float(np.median(x))
    low, high = bootstrap_ci(x, confidence=confidence)
    return max(median - low, high - median) / median if median > 0 else float("inf")


def precise_enough(step_times: Sequence[float], minimum: int, target: Optional[float], timed_s: float,
                   time_cap_s: Optional[float]) -> bool:
    """Stop adding timed steps? Never before ``minimum``; then once the median's 95% interval is
    within ±``target`` (None: at once), or once ``time_cap_s`` seconds of timed steps have run."""
    if len(step_times) < minimum:
        return False
    if target is None:
        return True
    if time_cap_s is not None and timed_s >= time_cap_s:
        return True
    return relative_halfwidth(step_times) <= target


def jitter(samples: Sequence[float]) -> float:
    """tf_cnn_benchmarks' jitter: 1.4826 x the median absolute deviation."""
    x = np.asarray(samples, dtype=float)
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def rate_summary(step_times: Sequence[float], images_per_step: float) -> dict:
    """Median images/sec over steps, its 95% bootstrap interval and jitter."""
    rates = images_per_step / np.asarray(step_times, dtype=float)
    low, high = bootstrap_ci(rates)
    return {"median": float(np.median(rates)), "low": low, "high": high, "jitter": jitter(rates), "n": rates.size}


def speedup_ci(base_times: Sequence[float], new_times: Sequence[float], confidence: float = CONFIDENCE,
               resamples: int = RESAMPLES, seed: int = 0) -> Tuple[float, float, float]:
    """(speedup, low, high) of ``new`` over ``base`` for the same images per step: the ratio of
    median step times base/new, with a bootstrap interval resampling each side's steps."""
    a, b = np.asarray(base_times, dtype=float), np.asarray(new_times, dtype=float)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    ratios = ma / mb
    tail = (1 - confidence) / 2 * 100
    return (float(np.median(a) / np.median(b)), float(np.percentile(ratios, tail)),
            float(np.percentile(ratios, 100 - tail)))


def significant(low: float, high: float) -> bool:
    """A speedup interval that excludes 1.0."""
    return not (low <= 1.0 <= high)


def interleaved(items: Iterable, repeats: int) -> List:
    """A B C A B C ... (each of ``items`` once per round), so drift over time hits all alike."""
    items = list(items)
    return [item for _ in range(repeats) for item in items]
