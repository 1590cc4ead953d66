"""The decision of `compare` and `bisect run --metric` on numbers alone (no git), and the metric
read from output as sglang's benchmark scripts print it (sglang-bench-output.md)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from guard.errors import ConfigError
from guard.hunt import stats
from guard.hunt.metrics import HIGHER, LOWER, Unreadable, parse_metric

NOISE = 0.02  # 2% per run, as a quiet GPU box gives
PLAN = stats.Plan(8, 32)  # compare's defaults


def sequential(a: np.ndarray, b: np.ndarray, min_effect_pct: float) -> stats.Decision:
    """A whole compare on precomputed runs: looks at 8, 16, 32 pairs until settled."""

    def look(size: int, alpha: float) -> stats.Decision:
        return stats.decide(
            a[:size], b[:size], paired=True, min_effect_pct=min_effect_pct, alpha=alpha
        )

    decision, _ = stats.settle(PLAN, look, lambda d: d.verdict != stats.UNKNOWN)
    return decision


def noise(rng: np.random.Generator, size: int = 32) -> np.ndarray:
    return 94.0 * np.exp(rng.normal(0.0, NOISE, size))


def test_a_a_compares_on_pure_noise_say_different_no_more_often_than_alpha() -> None:
    """With no smallest effect at all (the test alone decides), every compare goes to the cap,
    looking three times; the looks share ALPHA, so the false `different`s stay within it."""
    rng = np.random.default_rng(20261202)
    trials = 150
    false = sum(
        sequential(noise(rng), noise(rng), min_effect_pct=0).verdict == stats.DIFFERENT
        for _ in range(trials)
    )
    # The most a rate of ALPHA gives in `trials` compares, but for a 1-in-1000 chance.
    assert false <= scipy_stats.binom.ppf(0.999, trials, stats.ALPHA)
    assert false / trials <= stats.ALPHA + 0.01


def test_a_a_compares_with_the_default_smallest_effect_are_never_different() -> None:
    rng = np.random.default_rng(7)
    verdicts = [sequential(noise(rng), noise(rng), min_effect_pct=5).verdict for _ in range(60)]
    assert stats.DIFFERENT not in verdicts
    assert verdicts.count(stats.SAME) >= 55  # and nearly always settled as same


def test_a_third_slower_is_different_at_the_first_look_near_the_truth() -> None:
    rng = np.random.default_rng(9)
    for _ in range(20):
        a, b = noise(rng), noise(rng) / 1.5
        decision = stats.decide(a[:8], b[:8], paired=True, min_effect_pct=5, alpha=1 / 60)
        assert decision.verdict == stats.DIFFERENT
        low, high = decision.ci_pct
        assert low < decision.delta_pct < high < 0
        assert abs(decision.delta_pct + 100 / 3) < 3


def test_a_change_below_the_smallest_effect_is_same_not_different() -> None:
    rng = np.random.default_rng(11)
    decision = sequential(noise(rng), noise(rng) * 0.98, min_effect_pct=5)
    assert decision.verdict == stats.SAME


def test_noise_larger_than_the_change_is_unstable_not_different() -> None:
    """ClickHouse's rule: runs that vary by ±20% do not show a 6% change, however many."""
    rng = np.random.default_rng(3)
    a = 94.0 * np.exp(rng.normal(0.0, 0.2, 400))
    b = 0.94 * 94.0 * np.exp(rng.normal(0.0, 0.2, 400))
    decision = stats.decide(a, b, paired=True, min_effect_pct=5)
    assert decision.verdict == stats.UNKNOWN
    assert decision.unstable and decision.noise_pct > 15


def test_a_bisect_step_is_judged_against_each_side_unpaired() -> None:
    rng = np.random.default_rng(5)
    good, bad = noise(rng, 8), noise(rng, 8) / 1.5
    slow, fast = noise(rng, 4) / 1.5, noise(rng, 4)
    for runs, like in ((slow, bad), (fast, good)):
        same_side = stats.decide(like, runs, paired=False, min_effect_pct=5, alpha=0.0125)
        other = good if like is bad else bad
        other_side = stats.decide(other, runs, paired=False, min_effect_pct=5, alpha=0.0125)
        assert other_side.verdict == stats.DIFFERENT
        assert same_side.verdict != stats.DIFFERENT


def test_a_cap_that_cannot_reach_significance_is_known() -> None:
    assert not stats.Plan(4, 4).can_differ  # 4 pairs: the smallest p is 0.125
    assert stats.Plan(8, 8).can_differ and stats.Plan(8, 32).can_differ
    assert stats.Plan(8, 32).sizes == [8, 16, 32]
    assert stats.Plan(6, 20).sizes == [6, 12, 20]


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
