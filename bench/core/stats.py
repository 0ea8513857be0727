"""Statistics for timed steps: medians with confidence intervals over launches, jitter, speedups.

Why: a speedup printed from one sample of a handful of steps on a shared machine
says nothing about noise, and neither does one launch: two launches of the same
configuration differ by 1.6-10.8% on this machine (placement, neighbours, caches), more
than the steps of one launch vary around their median. Each row keeps every timed step
(``step_times_s``) and each repeat is its own row, so the report keeps one step list per
launch and prints the median images/sec with a 95% interval over launches
(``launch_interval``: a two-level bootstrap, launches then steps within each, with a
Student-t width for few launches), tf_cnn_benchmarks' "+/- jitter" (the median absolute
deviation scaled to a normal's standard deviation), and a speedup B/A with the interval
of the ratio of medians; an interval that contains 1.0 is "no significant difference".
With one launch the interval can only resample its steps (``pooled_interval``): the
report marks it as covering one launch.
"""
import json
import math
from dataclasses import dataclass
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


def t_critical(confidence: float, df: int) -> float:
    """Student's t two-sided critical value for ``df`` degrees of freedom (4.30 for 95% at 2,
    1.96 as df grows). Exact for df < 30 (Abramowitz & Stegun 26.7.3, solved by bisection), the
    Cornish-Fisher series (26.7.5, good to 1e-6) above; written out because numpy has no t
    distribution and the project does not depend on scipy."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if df >= 30:
        v = float(df)
        return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
                + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
                + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / (92160 * v ** 4))
    low, high = 0.0, z
    while _t_central(high, df) < confidence:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_central(middle, df) < confidence else (low, middle)
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with an integer ``df`` (Abramowitz & Stegun 26.7.3)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    k, term, total = (1, math.cos(theta), 0.0) if df % 2 else (0, 1.0, 0.0)
    while k <= df - 2:
        total += term
        term *= c2 * (k + 1) / (k + 2)
        k += 2
    if df % 2:
        return 2 / math.pi * (theta + math.sin(theta) * total)
    return math.sin(theta) * total


def as_launches(samples) -> List[np.ndarray]:
    """Step times as one array per launch: a list of lists is one list per launch (the summary's
    ``step_times``), a flat list is a single launch (one row's own steps)."""
    items = list(samples)
    if items and all(np.ndim(item) == 1 for item in items):
        launches = [np.asarray(item, dtype=float) for item in items]
    else:
        launches = [np.asarray(items, dtype=float)]
    if any(launch.size == 0 for launch in launches):
        raise ValueError("no samples (a launch without steps)")
    return launches


def pooled(samples) -> np.ndarray:
    """Every step of every launch in one array."""
    return np.concatenate(as_launches(samples))


def step_count(samples) -> int:
    """Timed steps over all launches (0 for None)."""
    return 0 if samples is None or not len(samples) else int(pooled(samples).size)


def pooled_interval(samples, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = 0) -> Tuple[float, float]:
    """The median's percentile bootstrap interval with every step of every launch resampled as
    independent: right for one launch, too narrow for several (the spread between launches is
    not in it). Kept for one launch and to show beside ``launch_interval``."""
    return bootstrap_ci(pooled(samples), confidence=confidence, resamples=resamples, seed=seed)


@dataclass(frozen=True)
class Spread:
    """A configuration's median step (``estimate``: the mean of its launches' medians), the
    variance of that estimate and its degrees of freedom: from the spread between launches
    (``between``: they differed by more than their steps explain; df = launches - 1), or else
    from the steps within them (df = steps - launches)."""

    estimate: float
    variance: float
    df: int
    between: bool


def launch_estimate(samples, statistic=np.median) -> float:
    """The mean of the launches' medians (one launch: its median): ``launch_spread``'s estimate,
    without the bootstraps that give its spread."""
    return float(np.mean([statistic(launch) for launch in as_launches(samples)]))


def launch_spread(samples, statistic=np.median, resamples: int = RESAMPLES, seed: int = 0) -> Spread:
    """How far a configuration's median step moves from one experiment to the next, launches included.

    The estimate is the mean of the launches' medians (one launch: its median, as before). Why not
    the median of all steps pooled: a precision target (``--target-ci``) stops a steady launch
    early and lets a noisy one run to its cap, so pooling weights launches by their noise (stored
    run 20261203T092100Z-50a016, alexnet_cifar ralp: launches of 13, 11 and 40 steps with medians
    240, 228 and 166 images/sec pool to 190). Why not the median of the launch medians: with 3
    launches that is the middle launch alone, and with 2 it is this mean anyway. The launch is
    the unit that repeats; each counts once.

    Two seeded bootstraps: launches drawn with replacement, then each drawn launch's steps drawn
    with replacement (two-level, variance V2), and each launch's own steps alone (variance W, the
    steps' noise in the estimate). For a mean of N launch medians V2 = (N-1)/N * B + W, where B is
    the variance the launches' spread gives it (their medians' variance / N, step noise
    included), so B = N/(N-1) * (V2 - W).

    Why not the percentile interval of the two-level replicates: over 3 launches it cannot reach
    past the most extreme launch, so it holds the true value at most 75% of the time (1 - 2/2^3),
    about 78% in simulation when launches dominate. This uses the one-way random-effects
    model's rule (what a mixed model with a random launch effect gives, the launch variance
    estimated): when B > W (launches differ by more than their steps explain) the variance is B
    with N - 1 degrees of freedom, otherwise W with steps - N. In simulation (tests/test_stats.py)
    it covers the true value in 93-96% of experiments at 3 launches whatever the share of the
    launch spread, and is about as wide as the steps' interval when launches agree."""
    launches = as_launches(samples)
    count, steps = len(launches), sum(launch.size for launch in launches)
    rng = np.random.default_rng(seed)
    # medians[j, r, k]: the statistic of launch j's steps drawn with replacement, replicate r, slot k
    medians = np.stack([statistic(launch[rng.integers(0, launch.size, size=(resamples, count, launch.size))], axis=2)
                        for launch in launches])
    estimate = launch_estimate(launches, statistic)
    replicate = np.arange(resamples)[:, None]
    own = np.broadcast_to(np.arange(count), (resamples, count))
    within = float(np.var(medians[own, replicate, own].mean(axis=1), ddof=1))
    if count == 1:
        return Spread(estimate, within, max(steps - 1, 1), False)
    drawn = rng.integers(0, count, size=(resamples, count))
    both = float(np.var(medians[drawn, replicate, own].mean(axis=1), ddof=1))
    between = count / (count - 1) * (both - within)
    if between > within:
        return Spread(estimate, between, count - 1, True)
    return Spread(estimate, within, max(steps - count, 1), False)


def launch_interval(samples, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = 0) -> Tuple[float, float, float]:
    """(estimate, low, high): ``launch_spread``'s estimate times exp(-/+ t x its relative standard
    error), on the log scale like the speedups' intervals, so a rate or a time stays positive
    however few launches there are (a symmetric interval over 2 launches 30% apart reaches below
    zero). One launch: its median with the steps' percentile bootstrap (``pooled_interval``), all
    a single launch can say."""
    launches = as_launches(samples)
    if len(launches) == 1:
        return (float(np.median(launches[0])), *pooled_interval(launches, confidence, resamples, seed))
    spread = launch_spread(launches, resamples=resamples, seed=seed)
    if spread.estimate <= 0:
        raise ValueError(f"an interval over launches needs positive values (times, rates), got {spread.estimate}")
    half = t_critical(confidence, spread.df) * math.sqrt(spread.variance) / spread.estimate
    return spread.estimate, spread.estimate * math.exp(-half), spread.estimate * math.exp(half)


def rate_summary(step_times, images_per_step: float) -> dict:
    """images/sec of a configuration: ``launch_spread``'s estimate (the mean of the launches' median
    rates; one launch: its median) with its 95% interval (``launch_interval``), the jitter of all
    steps, the number of steps (``n``) and of launches. ``step_times``: one list per launch, or
    one flat list for a single launch."""
    rates = [images_per_step / launch for launch in as_launches(step_times)]
    estimate, low, high = launch_interval(rates)
    every = np.concatenate(rates)
    return {"median": estimate, "low": low, "high": high, "jitter": jitter(every), "n": every.size,
            "launches": len(rates)}


def speedup_ci(base_times, new_times, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
               seed: int = 0) -> Tuple[float, float, float]:
    """(speedup, low, high) of ``new`` over ``base`` for the same images per step: the ratio of
    their median step times (``launch_spread``'s estimates) base/new; each side one list per
    launch (or one flat list). One launch a side: ``pooled_speedup_ci``. Otherwise each side's
    ``launch_spread`` gives the variance of the log of its estimate (variance / estimate^2), the
    two add, and Welch-Satterthwaite degrees of freedom (rounded down, which widens) set the t:
    the interval is ratio x exp(-/+ t x sqrt(sum))."""
    a, b = as_launches(base_times), as_launches(new_times)
    if len(a) == len(b) == 1:
        return pooled_speedup_ci(a, b, confidence, resamples, seed)
    sa, sb = launch_spread(a, resamples=resamples, seed=seed), launch_spread(b, resamples=resamples, seed=seed + 1)
    ratio = sa.estimate / sb.estimate
    ra, rb = sa.variance / sa.estimate ** 2, sb.variance / sb.estimate ** 2
    if ra + rb == 0:
        return ratio, ratio, ratio
    df = max(1, math.floor((ra + rb) ** 2 / (ra ** 2 / sa.df + rb ** 2 / sb.df)))
    half = t_critical(confidence, df) * math.sqrt(ra + rb)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def pooled_speedup_ci(base_times, new_times, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                      seed: int = 0) -> Tuple[float, float, float]:
    """The speedup's percentile bootstrap with each side's steps resampled as independent (launches
    pooled): right for one launch a side, too narrow for several; kept for that and for comparison."""
    a, b = pooled(base_times), pooled(new_times)
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
