"""Confidence intervals and interleaving, against independent formulas."""
import math

import numpy as np
import pytest

from bench.core import stats


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


# ---- intervals over launches (issue 33, item 5) ----------------------------------------------

def test_t_critical_matches_the_table():
    # Student's t two-sided 95% (and one 99%) critical values, from any printed table
    for df, expected in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (29, 2.0452), (30, 2.0423),
                         (100, 1.9840), (10**6, 1.9600)):
        assert stats.t_critical(0.95, df) == pytest.approx(expected, abs=1e-4), df
    assert stats.t_critical(0.99, 5) == pytest.approx(4.0321, abs=1e-4)
    with pytest.raises(ValueError):
        stats.t_critical(0.95, 0)


def _experiment(rng, launches, steps, sigma_b, sigma_w, mean=1.0):
    """One simulated measurement: each launch's level drawn with sd sigma_b around ``mean``,
    its steps with sd sigma_w around that level."""
    return [rng.normal(rng.normal(mean, sigma_b), sigma_w, steps) for _ in range(launches)]


def test_the_two_level_bootstrap_splits_the_variance_as_the_random_effects_formulas_say():
    # For the mean statistic: between-launch part = variance of the launch means / N (ddof 1),
    # within part = sum of each launch's variance (ddof 0) / m, over N^2.
    rng = np.random.default_rng(5)
    spread_out = _experiment(rng, 4, 30, 0.5, 1.0)
    means = np.array([x.mean() for x in spread_out])
    got = stats.launch_spread(spread_out, statistic=np.mean, resamples=20000)
    assert got.between and got.df == 3 and got.estimate == pytest.approx(means.mean())
    assert got.variance == pytest.approx(means.var(ddof=1) / 4, rel=0.08)
    alike = [rng.normal(1.0, 1.0, 30) for _ in range(4)]
    got = stats.launch_spread(alike, statistic=np.mean, resamples=20000)
    within = sum(x.var() / 30 for x in alike) / 16
    assert not got.between  # launches drawn alike: the steps' variance, with steps - launches df
    assert got.df == 4 * 30 - 4 and got.variance == pytest.approx(within, rel=0.08)


def _coverage(sigma_b, experiments=300, launches=3, steps=20, sigma_w=0.05):
    """Share of simulated experiments whose interval holds the true mean (1.0), for the interval
    over launches and the pooled one; and the median ratio of their widths."""
    rng = np.random.default_rng(11)
    held_new = held_pooled = 0
    widths = []
    for seed in range(experiments):
        sample = _experiment(rng, launches, steps, sigma_b, sigma_w)
        _, low, high = stats.launch_interval(sample, resamples=300, seed=seed)
        p_low, p_high = stats.pooled_interval(sample, resamples=300, seed=seed)
        held_new += low <= 1.0 <= high
        held_pooled += p_low <= 1.0 <= p_high
        widths.append((high - low) / (p_high - p_low))
    return held_new / experiments, held_pooled / experiments, float(np.median(widths))


def test_with_launches_that_differ_the_interval_over_launches_holds_the_true_mean_and_the_pooled_does_not():
    # 3 launches of 20 steps; launch levels sd 5%, steps sd 5% around them (the spread seen between
    # two launches of one cell, 1.6-10.8%): the pooled interval treats the 60 steps as independent.
    new, pooled, width = _coverage(sigma_b=0.05)
    assert new >= 0.88, f"interval over launches held the mean in {new:.0%} of experiments"
    assert pooled <= 0.70, f"pooled interval held it in {pooled:.0%} (expected ~50%)"
    assert width > 3  # t with 2 df over the launches' spread, against the steps' own


def test_with_launches_alike_the_two_intervals_roughly_agree():
    new, pooled, width = _coverage(sigma_b=0.0)
    assert new >= 0.9 and pooled >= 0.88, (new, pooled)
    assert 0.8 <= width <= 1.5, width


def test_intervals_are_seeded_at_the_project_confidence_and_one_launch_is_the_pooled_interval():
    rng = np.random.default_rng(2)
    sample = [x.tolist() for x in _experiment(rng, 3, 15, 0.05, 0.05)]
    assert stats.launch_interval(sample) == stats.launch_interval(sample, confidence=stats.CONFIDENCE, seed=0)
    assert stats.launch_interval(sample, seed=1) != stats.launch_interval(sample, seed=0)
    wider = stats.launch_interval(sample, confidence=0.99)
    assert wider[1] < stats.launch_interval(sample)[1] and wider[2] > stats.launch_interval(sample)[2]
    one = sample[0]
    assert stats.launch_interval(one) == (np.median(one), *stats.bootstrap_ci(one))
    assert stats.launch_interval([one]) == stats.launch_interval(one)  # a list of one launch is one launch
    with pytest.raises(ValueError, match="no samples"):
        stats.launch_interval([one, []])


def test_the_estimate_counts_each_launch_once():
    # A steady launch stopped after 10 steps and a noisy one run to 40: pooling would follow the long one.
    short, long = [1.0] * 9 + [1.1], [2.0] * 39 + [2.1]
    spread = stats.launch_spread([short, long])
    assert spread.estimate == pytest.approx(1.5) and spread.between and spread.df == 1
    assert np.median(stats.pooled([short, long])) == 2.0


def test_a_gain_within_the_launch_spread_is_significant_pooled_but_not_over_launches():
    rng = np.random.default_rng(4)
    base = [rng.normal(level, 0.01, 20) for level in (1.02, 1.08, 0.99)]
    new = [rng.normal(level, 0.01, 20) for level in (0.97, 1.03, 0.95)]
    ratio, low, high = stats.pooled_speedup_ci(base, new)
    assert stats.significant(low, high)                        # steps as independent: "5% faster"
    ratio, low, high = stats.speedup_ci(base, new)
    assert ratio == pytest.approx(np.mean([np.median(x) for x in base]) / np.mean([np.median(x) for x in new]))
    assert not stats.significant(low, high) and low < 1.0 < high  # launches differ by as much: "≈"
    ratio, low, high = stats.speedup_ci(base, [x / 2 for x in base])
    assert stats.significant(low, high) and ratio == pytest.approx(2.0)


def test_rate_summary_over_launches():
    summary = stats.rate_summary([[0.5, 0.5, 0.5], [0.25, 0.25, 0.25]], 64)
    assert summary["median"] == pytest.approx((128 + 256) / 2) and summary["launches"] == 2 and summary["n"] == 6
    assert summary["low"] < 128 and summary["high"] > 256  # t with 1 df over two launches: wide
