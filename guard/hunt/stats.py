"""The decision of a comparison: `different`, `same` or `unknown`, from two sets of runs.

Modelled on Chromium's Pinpoint (three answers; "same" only when the runs would have shown the
smallest effect that matters; on unknown, twice the runs, up to a cap), Skia's pairwise runner
(A and B in order-balanced pairs, Wilcoxon signed-rank on the paired log-values, an interval in
percent) and ClickHouse's performance test (a change whose runs vary more than it counts as
unstable, not as a change). The tests and the interval are scipy's; nothing here is a
hand-written test. numpy and scipy are imported by this module only, which only `compare` and
`bisect run --metric` import: hooks and `check` never load them.

Everything is computed on log-values, so a change is a ratio (Δ% = 100·(e^d - 1)) and a 2%
noise means the same at 94 tok/s as at 9,000.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy import stats

DIFFERENT = "different"
SAME = "same"
UNKNOWN = "unknown"
ALPHA = 0.05  # the chance, over a whole comparison with all its looks, of a false `different`
CONFIDENCE = 0.95  # the interval reported
RESAMPLES = 2000
SEED = 28  # the bootstrap's: the same runs always give the same answer

_Answer = TypeVar("_Answer")


@dataclass(frozen=True)
class Plan:
    """How many runs each look has: `repeats`, then twice as many while unknown, up to `cap`.

    Each look tests at ALPHA divided by the number of looks (Bonferroni), so that asking again
    with more runs never raises the chance of a false `different` above ALPHA.
    """

    repeats: int
    cap: int

    @property
    def sizes(self) -> list[int]:
        sizes = [self.repeats]
        while sizes[-1] < self.cap:
            sizes.append(min(2 * sizes[-1], self.cap))
        return sizes

    @property
    def alpha_per_look(self) -> float:
        return ALPHA / len(self.sizes)

    @property
    def can_differ(self) -> bool:
        """Whether the last look's pairs can reach significance at all: the signed-rank test's
        smallest two-sided p-value with n pairs is 2/2^n (0.0078 for 8)."""
        return bool(2.0 / 2.0**self.cap <= self.alpha_per_look)


@dataclass(frozen=True)
class Decision:
    """B against A. `delta_pct` and `ci_pct` are B's change relative to A, in percent."""

    verdict: str
    delta_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    noise_pct: float  # how much single runs vary (the larger side's robust spread)
    unstable: bool  # the runs vary more than the change (or than the smallest effect)
    n: tuple[int, int]
    min_effect_pct: float


def decide(
    a: Sequence[float],
    b: Sequence[float],
    *,
    paired: bool,
    min_effect_pct: float,
    alpha: float = ALPHA,
) -> Decision:
    """One look: `different` when B differs from A significantly (p ≤ alpha and the interval
    excludes 0) by at least the smallest effect and by more than single runs vary; `same` when
    the whole interval lies within ± the smallest effect; `unknown` otherwise.

    Paired (compare's runs, one A and one B each): Wilcoxon signed-rank on the differences of
    the log-values, the interval a bootstrap of their median. Unpaired (a bisect step against
    GOOD's or BAD's runs): Mann-Whitney U, the interval a bootstrap of the difference of the
    medians.
    """
    log_a, log_b = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    rng = np.random.default_rng(SEED)
    if paired:
        differences = log_b - log_a
        estimate = float(np.median(differences))
        p_value = 1.0 if not differences.any() else float(stats.wilcoxon(differences).pvalue)
        samples: tuple[np.ndarray, ...] = (differences,)
        statistic: Callable[..., np.ndarray] = _median
    else:
        estimate = float(np.median(log_b) - np.median(log_a))
        p_value = float(stats.mannwhitneyu(log_b, log_a, alternative="two-sided").pvalue)
        samples = (log_b, log_a)
        statistic = _median_difference
    if np.ptp(np.concatenate(samples)) == 0:  # all equal: the bootstrap has nothing to vary
        low = high = estimate
    else:
        interval = stats.bootstrap(
            samples,
            statistic,
            paired=False,
            vectorized=True,
            n_resamples=RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=rng,
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
    noise = max(_spread_pct(log_a), _spread_pct(log_b))
    delta, ci = _pct(estimate), (_pct(low), _pct(high))
    significant = p_value <= alpha and not ci[0] <= 0 <= ci[1]
    unstable = False
    if significant and abs(delta) >= min_effect_pct:
        unstable = noise >= abs(delta)
        verdict = UNKNOWN if unstable else DIFFERENT
    elif -min_effect_pct < ci[0] and ci[1] < min_effect_pct:
        verdict = SAME
    else:
        verdict = UNKNOWN
        unstable = noise > min_effect_pct
    return Decision(verdict, delta, ci, p_value, noise, unstable, (len(a), len(b)), min_effect_pct)


def settle(
    plan: Plan, look: Callable[[int, float], _Answer], settled: Callable[[_Answer], bool]
) -> tuple[_Answer, int]:
    """Look with plan.sizes runs in turn until an answer is settled; the last answer, its size."""
    for size in plan.sizes:
        answer = look(size, plan.alpha_per_look)
        if settled(answer):
            break
    return answer, size


def median_of(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, float)))


def _median(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(x, axis=axis))


def _median_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(x, axis=axis) - np.median(y, axis=axis))


def _spread_pct(log_values: np.ndarray) -> float:
    """The robust spread of single runs, in percent (scaled MAD of the log-values)."""
    if len(log_values) < 2:
        return 0.0
    return _pct(float(stats.median_abs_deviation(log_values, scale="normal")))


def _pct(log_ratio: float) -> float:
    return float(100.0 * np.expm1(log_ratio))
