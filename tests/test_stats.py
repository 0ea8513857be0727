"""Confidence intervals and interleaving, against independent formulas."""
import math

import numpy as np
import pytest

from bench import stats


def test_bootstrap_interval_of_the_median_matches_the_asymptotic_formula():
    # Median of n normal samples: standard error sqrt(pi/2) * sigma / sqrt(n) (1.2533 sigma / sqrt(n)).
    # One sample's interval varies with the sample, so average the half-width over 30 samples.
    half = 1.96 * math.sqrt(math.pi / 2) / math.sqrt(400)
    widths, covered = [], 0
    for seed in range(30):
        sample = np.random.default_rng(seed).normal(10.0, 1.0, size=400)
        low, high = stats.bootstrap_ci(sample, resamples=1000, seed=seed)
        widths.append((high - low) / 2)
        covered += low <= 10.0 <= high
    assert np.mean(widths) == pytest.approx(half, rel=0.15)
    assert covered >= 25  # ~95% of 30 intervals hold the true median


def test_bootstrap_interval_of_the_mean_matches_t_interval():
    rng = np.random.default_rng(3)
    sample = rng.exponential(2.0, size=200)
    low, high = stats.bootstrap_ci(sample, statistic=np.mean)
    se = sample.std(ddof=1) / math.sqrt(sample.size)
    assert low == pytest.approx(sample.mean() - 1.96 * se, abs=0.25 * se * 1.96)
    assert high == pytest.approx(sample.mean() + 1.96 * se, abs=0.25 * se * 1.96)


def test_constant_samples_have_a_point_interval_and_no_jitter():
    assert stats.bootstrap_ci([0.5] * 12) == (0.5, 0.5)
    assert stats.jitter([0.5] * 12) == 0.0


def test_jitter_is_the_scaled_median_absolute_deviation():
    assert stats.jitter([1, 2, 3, 4, 100]) == pytest.approx(1.4826 * 1.0)


def test_speedup_interval_includes_one_for_the_same_distribution_and_not_for_a_clear_gain():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.05, 30), rng.normal(1.0, 0.05, 30)
    ratio, low, high = stats.speedup_ci(a, b)
    assert low < 1.0 < high and not stats.significant(low, high)
    ratio, low, high = stats.speedup_ci(a, a / 2)
    assert ratio == pytest.approx(2.0) and stats.significant(low, high) and low > 1.8


def test_rate_summary_uses_images_per_step():
    summary = stats.rate_summary([0.5, 0.5, 0.5], 64)
    assert summary["median"] == 128 and summary["low"] == summary["high"] == 128 and summary["n"] == 3


def test_interleaving_really_interleaves():
    assert stats.interleaved(["ps", "horovod", "ralp"], 3) == ["ps", "horovod", "ralp"] * 3
    assert stats.interleaved(["a"], 2) == ["a", "a"] and stats.interleaved(["a", "b"], 0) == []


def test_parse_steps():
    assert stats.parse_steps("[0.5, 0.25]").tolist() == [0.5, 0.25]
    assert stats.parse_steps(None) is None and stats.parse_steps(float("nan")) is None
    assert stats.parse_steps("[]") is None


def test_precise_enough_waits_for_the_minimum_then_the_interval_or_the_cap():
    rng = np.random.default_rng(1)
    tight, noisy = rng.normal(1.0, 0.01, 30), rng.normal(1.0, 0.5, 30).clip(0.05)
    assert not stats.precise_enough(tight[:5], 10, 0.05, 5.0, None)        # below the minimum
    assert stats.precise_enough(tight[:10], 10, None, 10.0, None)          # fixed step count
    assert stats.precise_enough(tight[:10], 10, 0.05, 10.0, None)          # 1% noise: ±5% at once
    assert not stats.precise_enough(noisy, 10, 0.05, 30.0, None)           # 50% noise: not yet
    assert stats.precise_enough(noisy, 10, 0.05, 30.0, 20.0)               # ... but the time cap is reached
    assert stats.relative_halfwidth([1.0, 1.0]) == math.inf
    assert stats.relative_halfwidth([2.0] * 5) == 0.0


def test_binomial_halfwidth_is_the_normal_approximation():
    se = math.sqrt(0.965 * 0.035 / 1000)
    assert stats.binomial_halfwidth(0.965, 1000) == pytest.approx(1.96 * se, rel=1e-3)
    assert stats.binomial_halfwidth(0.965, 1000, confidence=0.99) == pytest.approx(2.576 * se, rel=1e-3)
    assert stats.binomial_halfwidth(1.0, 1000) == 0.0
