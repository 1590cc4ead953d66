"""The decision of `compare` and `bisect run --metric` on numbers alone (no git), and the metric
read from output as sglang's benchmark scripts print it (sglang-bench-output.md)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from guard.errors import ConfigError
from guard.hunt import stats
from guard.hunt.metrics import HIGHER, LOWER, Unreadable, parse_metric

REPEATS, CAP = 3, 24  # compare's defaults: looks at 3, 6, 12 and 24 pairs
ALPHA_PER_LOOK = stats.ALPHA / 4
WARMUPS = 2  # compare's: one at each side


def sequential(a: np.ndarray, b: np.ndarray, min_effect_pct: float) -> tuple[stats.Decision, int]:
    """A whole compare on precomputed runs: looks at 3, 6, 12, 24 pairs until settled; the
    decision and the runs of the command it cost (warm-ups included)."""

    def look(size: int, alpha: float) -> stats.Decision:
        return stats.decide(a[:size], b[:size], min_effect_pct=min_effect_pct, alpha=alpha)

    decision = stats.settle(REPEATS, CAP, look, lambda d: d.verdict != stats.UNKNOWN)
    return decision, WARMUPS + 2 * decision.n[0]


def runs(rng: np.random.Generator, noise: float, factor: float = 1.0) -> np.ndarray:
    return 94.0 * factor * np.exp(rng.normal(0.0, noise, CAP))


def test_a_a_compares_on_pure_noise_say_different_no_more_often_than_alpha() -> None:
    """With no smallest effect at all (the tests alone decide), nearly every compare goes to
    the cap, looking four times; the looks share ALPHA, so the false `different`s stay within
    it over the whole comparison (measured: 9 of 400)."""
    rng = np.random.default_rng(20261202)
    trials = 400
    false = sum(
        sequential(runs(rng, 0.02), runs(rng, 0.02), min_effect_pct=0)[0].verdict == stats.DIFFERENT
        for _ in range(trials)
    )
    # The most a rate of ALPHA gives in `trials` compares, but for a 1-in-1000 chance.
    assert false <= scipy_stats.binom.ppf(0.999, trials, stats.ALPHA)
    assert false / trials <= stats.ALPHA + 0.01


def test_a_a_compares_with_the_default_smallest_effect_settle_as_same() -> None:
    rng = np.random.default_rng(7)
    verdicts = [
        sequential(runs(rng, 0.02), runs(rng, 0.02), min_effect_pct=5)[0].verdict
        for _ in range(200)
    ]
    assert verdicts.count(stats.DIFFERENT) <= 200 * stats.ALPHA
    assert verdicts.count(stats.SAME) >= 190


def test_a_third_slower_at_2pct_noise_is_different_in_8_runs_near_the_truth() -> None:
    """The acceptance: at most 8 runs of the command, warm-ups included (3 pairs)."""
    rng = np.random.default_rng(9)
    for _ in range(200):
        decision, cost = sequential(runs(rng, 0.02), runs(rng, 0.02, 1 / 1.5), min_effect_pct=5)
        assert decision.verdict == stats.DIFFERENT and cost <= 8
        low, high = decision.ci_pct
        assert low < decision.delta_pct < high < 0
        assert abs(decision.delta_pct + 100 / 3) < 3


def test_a_5pct_drop_at_1pct_noise_is_decided_in_20_runs() -> None:
    """The acceptance: decided in at most 20 runs (6 pairs); measured on 400 compares: 158
    at 3 pairs, 240 at 6, 2 at 12; `same` for 10 of them (a drop of exactly --min-effect is
    the border of what counts)."""
    rng = np.random.default_rng(1)
    results = [
        sequential(runs(rng, 0.01), runs(rng, 0.01, 0.95), min_effect_pct=5) for _ in range(400)
    ]
    assert sum(cost <= 20 for _, cost in results) >= 0.99 * len(results)
    assert sum(d.verdict == stats.DIFFERENT for d, _ in results) >= 0.95 * len(results)
    assert all(d.verdict != stats.DIFFERENT or d.delta_pct < 0 for d, _ in results)


def test_a_change_below_the_smallest_effect_is_same_not_different() -> None:
    """A 2% drop with --min-effect 5: `same` (any change is within ±5%). A few pairs can
    make it look larger than it is, and it is real: measured, 184 of 200 compares say same,
    16 different (Δ -3% to -6% at 3 or 6 pairs)."""
    rng = np.random.default_rng(11)
    verdicts = [
        sequential(runs(rng, 0.02), runs(rng, 0.02, 0.98), min_effect_pct=5)[0].verdict
        for _ in range(200)
    ]
    assert verdicts.count(stats.SAME) >= 180
    assert verdicts.count(stats.UNKNOWN) == 0


def test_noise_larger_than_the_change_is_unstable_not_different() -> None:
    """ClickHouse's rule: runs that vary by ±20% do not show a 6% change, however many."""
    rng = np.random.default_rng(3)
    a = 94.0 * np.exp(rng.normal(0.0, 0.2, 400))
    b = 0.94 * 94.0 * np.exp(rng.normal(0.0, 0.2, 400))
    decision = stats.decide(a, b, min_effect_pct=5)
    assert decision.verdict == stats.UNKNOWN
    assert decision.unstable and decision.noise_pct > 15


def test_two_peaked_runs_are_unstable_not_different() -> None:
    """B is fast in half its runs and a third slower in the others (a server that sometimes
    lands on the slow path): significant, but no single change describes it."""
    rng = np.random.default_rng(4)
    a = runs(rng, 0.01)
    b = runs(rng, 0.01) * np.where(np.arange(CAP) % 2, 1.0, 1 / 1.5)
    decision = stats.decide(a, b, min_effect_pct=5, alpha=ALPHA_PER_LOOK)
    assert decision.p_value <= ALPHA_PER_LOOK  # the t-test alone would say different
    assert decision.verdict == stats.UNKNOWN and decision.unstable


def test_an_outlier_pair_makes_a_change_unstable() -> None:
    rng = np.random.default_rng(6)
    a, b = runs(rng, 0.01)[:12], runs(rng, 0.01, 0.8)[:12]
    clean = stats.decide(a, b, min_effect_pct=5, alpha=ALPHA_PER_LOOK)
    assert clean.verdict == stats.DIFFERENT and not clean.unstable
    b[5] *= 0.8  # one run met a hiccup
    hiccup = stats.decide(a, b, min_effect_pct=5, alpha=ALPHA_PER_LOOK)
    assert hiccup.p_value <= ALPHA_PER_LOOK and hiccup.noise_pct < abs(hiccup.delta_pct)
    assert hiccup.verdict == stats.UNKNOWN and hiccup.unstable


def test_the_rank_test_must_agree_with_a_t_test_different() -> None:
    """Five pairs a third slower and one a hair faster: the t-test alone says different at 6
    pairs; the signed-rank test (one-sided p = 2/64 > 1/64) does not, so it is unknown."""
    a = np.full(6, 94.0)
    b = 94.0 * np.array([1 / 1.5, 1 / 1.52, 1 / 1.48, 1 / 1.51, 1 / 1.49, 1.002])
    decision = stats.decide(a, b, min_effect_pct=5, alpha=ALPHA_PER_LOOK)
    assert decision.p_value <= ALPHA_PER_LOOK
    assert decision.verdict == stats.UNKNOWN
    assert stats.decide(a[:5], b[:5], min_effect_pct=5, alpha=0.0125).verdict == stats.DIFFERENT


def test_the_bootstrap_must_agree_with_a_t_test_different() -> None:
    """23 pairs 5% slower and one 2.2 times faster: the signed-rank test sees 23 of 24 agree
    (one-sided p ~ 1e-5), but the mean rests on how often resampling draws the odd pair, and
    its bootstrap interval holds 0: not a `different`."""
    ratios = np.array([-0.05] * 23 + [0.8]) + np.linspace(0, 0.001, 24)
    assert float(scipy_stats.wilcoxon(ratios, alternative="less").pvalue) < 1e-3
    assert not stats._robust(ratios, float(np.mean(ratios)), ALPHA_PER_LOOK)
    assert stats._robust(ratios[:23], float(np.mean(ratios[:23])), ALPHA_PER_LOOK)


def test_identical_runs_decide_plainly() -> None:
    same = stats.decide([94.0] * 3, [94.0] * 3, min_effect_pct=5)
    assert same.verdict == stats.SAME and same.p_value == 1.0
    lower = stats.decide([94.0] * 3, [60.0] * 3, min_effect_pct=5, alpha=0.0125)
    assert lower.verdict == stats.DIFFERENT


def test_pooled_runs_of_two_commits_decide_from_one_run_each() -> None:
    """A bisect reports the first changed commit against its parent from the runs taken
    there, with the spread of single runs known from the whole hunt."""
    spread = (0.02, 20)
    one = stats.decide([94.0], [62.0], min_effect_pct=5, spread=spread)
    assert one.verdict == stats.DIFFERENT and one.ci_pct[1] < -20
    near = stats.decide([94.0] * 8, [94.5] * 8, min_effect_pct=5, spread=spread)
    assert near.verdict == stats.SAME
    groups = [[94.0, 95.0, 93.0], [60.0, 61.0, 59.0]]
    scale, df = stats.pooled_spread(groups)
    assert df == 4
    logs = [np.log(g) - np.mean(np.log(g)) for g in groups]
    assert scale == pytest.approx(np.sqrt(sum(np.sum(x**2) for x in logs) / 4))


def test_looks_double_in_size_each_at_alpha_over_their_number() -> None:
    looks: list[tuple[int, float]] = []
    stats.settle(REPEATS, CAP, lambda size, alpha: looks.append((size, alpha)), lambda _: False)
    assert looks == [(size, ALPHA_PER_LOOK) for size in (3, 6, 12, 24)]
    looks.clear()
    stats.settle(6, 20, lambda size, alpha: looks.append((size, alpha)), lambda _: False)
    assert [size for size, _ in looks] == [6, 12, 20]


# --- the metric, as sglang prints it ------------------------------------------------------------

SERVING = """Starting warmup with 1 sequences...
============ Serving Benchmark Result ============
Backend:                                 sglang
Successful requests:                     1000
Benchmark duration (s):                  93.12
Output token throughput (tok/s):         94.12
Total token throughput (tok/s):          1203.55
Accept length:                           2.81
Median TTFT (ms):                        123.40
P99 TTFT (ms):                           410.00
"""
ONE_BATCH = """Warmup ...
Prefill. latency: 0.46342 s, throughput:   9316.59 token/s
Decode 0. Batch size: 4, latency: 0.29446 s, throughput:     13.58 token/s
Decode.  median latency: 0.01178 s, median throughput:    339.57 token/s
Total. latency:  1.112 s, throughput:   3981.76 token/s
"""
ONE_BATCH_SERVER = """latency: 2.5 s
input throughput: 4000.1 tok/s
output throughput: 321.5 tok/s
last generation throughput: 330.2 tok/s
"""
JSONL = '{"output_throughput": 93.5, "median_ttft_ms": 12.5, "backend": "sglang"}\n'


@pytest.mark.parametrize(
    ("spec", "output", "value", "direction"),
    [
        ("Output token throughput (tok/s):", SERVING, 94.12, HIGHER),
        ("Output token throughput (tok/s)", SERVING, 94.12, HIGHER),
        ("output  token throughput (tok/s)", SERVING, 94.12, HIGHER),
        ("Median TTFT (ms)", SERVING, 123.4, LOWER),
        ("Benchmark duration (s):", SERVING, 93.12, LOWER),
        ("Accept length", SERVING, 2.81, HIGHER),
        ("Successful requests", SERVING, 1000, None),
        ("Decode.  median throughput:", ONE_BATCH, 339.57, HIGHER),
        ("Decode. median latency", ONE_BATCH, 0.01178, LOWER),
        ("Prefill. throughput", ONE_BATCH, 9316.59, HIGHER),
        ("Total. latency", ONE_BATCH, 1.112, LOWER),
        ("output throughput", ONE_BATCH_SERVER, 321.5, HIGHER),
        ("last generation throughput:", ONE_BATCH_SERVER, 330.2, HIGHER),
        ("json:output_throughput", SERVING + JSONL, 93.5, HIGHER),
        ("median_ttft_ms", JSONL, 12.5, LOWER),
        (r"re:Total\. latency:\s+([\d.]+)", ONE_BATCH, 1.112, None),
    ],
)
def test_the_metric_is_read_as_sglang_prints_it(
    spec: str, output: str, value: float, direction: str | None
) -> None:
    metric = parse_metric(spec)
    assert metric.read(output) == pytest.approx(value)
    assert metric.direction == direction


def test_the_last_occurrence_wins_a_missing_value_is_none_and_a_textual_one_refused() -> None:
    assert parse_metric("Output token throughput (tok/s)").read(SERVING + SERVING[-140:]) == 94.12
    assert parse_metric("Request throughput (req/s)").read(SERVING) is None
    for textual in ("Backend", "json:backend"):
        with pytest.raises(Unreadable, match="not a number"):
            parse_metric(textual).read(SERVING + JSONL)
    assert parse_metric("Concurrency", LOWER).direction == LOWER  # the user says


@pytest.mark.parametrize(("spec", "said"), [("re:(", "not a regular"), ("re:x", "0 groups")])
def test_a_bad_metric_is_one_clear_line(spec: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_metric(spec)
