"""The decision of a comparison: `different`, `same` or `unknown`, from two sets of runs.

Modelled on Chromium's Pinpoint (three answers; "same" only when the runs would have shown the
smallest effect that matters; on unknown, twice the runs, up to a cap), Skia's pairwise runner
(order-balanced pairs) and ClickHouse's performance test (a change whose runs vary more than it
is unstable, not a change). The main test is a t-test on the paired log-ratios, which can
decide at 3 pairs where a rank test cannot (the signed-rank test's smallest two-sided p with n
pairs is 2/2^n); the signed-rank test and a bootstrap interval must agree with a `different`.
Log-values make a change a ratio, so a 2% noise means the same at 94 tok/s as at 9,000.
numpy and scipy load with this module (and guard.hunt.culprit) only: hooks never import them.
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
CONFIDENCE = 0.95  # the interval reported (and the one `same` needs inside ± the smallest effect)
MIN_PAIRS = 3  # the fewest pairs a look may have: the t-test's first chance to decide
RESAMPLES = 1000  # the bootstrap check's; it only confirms what the t-test already found
SEED = 28  # the bootstrap's: the same runs always give the same answer
OUTLIER_MADS = 8.0  # a log-ratio this many robust spreads from the median one is an outlier
OUTLIER_FROM = 12  # the fewest pairs from which a robust spread says what is typical

_Answer = TypeVar("_Answer")


@dataclass(frozen=True)
class Decision:
    """B against A. `delta_pct` and `ci_pct` are B's change relative to A, in percent."""

    verdict: str
    delta_pct: float
    ci_pct: tuple[float, float]
    p_value: float
    noise_pct: float  # how much single runs vary (the larger side's standard deviation)
    unstable: bool  # the runs vary more than the change, or hold an outlier
    n: tuple[int, int]
    min_effect_pct: float


def decide(
    a: Sequence[float],
    b: Sequence[float],
    *,
    min_effect_pct: float,
    alpha: float = ALPHA,
    spread: tuple[float, int] | None = None,
) -> Decision:
    """One look at paired runs (a[i] and b[i] one pair): the t-test on their log-ratios, with
    _robust's checks before a `different`. With `spread`, the spread of single runs known from
    the whole hunt (pooled_spread's), a look at unpaired runs of two commits instead: even one
    run on each side can decide when the change is many times the noise.

    `same` first (a significant change smaller than the smallest effect is still `same`),
    then `different` when the change is significant and closer to the smallest effect than to
    none (|Δ| ≥ half of it: a change that counts is the likelier reading), unless `unstable`.
    """
    log_a, log_b = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    ratios = None  # paired runs' log-ratios
    if spread is None:
        ratios = log_b - log_a
        estimate = float(np.mean(ratios))
        # two-peaked runs show here as a spread as large as the gap between the peaks' mean
        sd = max(np.std(log_a, ddof=1), np.std(log_b, ddof=1)) if len(a) > 1 else 0.0
        noise, outlier = _pct(float(sd)), _has_outlier(ratios)
        plain = bool(np.ptp(ratios) == 0)  # identical ratios: no spread for a t-test
        if not plain:
            test = stats.ttest_1samp(ratios, 0.0)
            interval = test.confidence_interval(CONFIDENCE)
            p_value, low, high = float(test.pvalue), float(interval.low), float(interval.high)
    else:
        estimate = float(np.mean(log_b) - np.mean(log_a))
        scale, df = spread
        error = scale * float(np.sqrt(1 / len(log_a) + 1 / len(log_b)))
        noise, outlier = _pct(scale), False
        plain = error == 0 or df < 1
        if not plain:
            p_value = float(2 * stats.t.sf(abs(estimate) / error, df))
            low, high = stats.t.interval(CONFIDENCE, df, loc=estimate, scale=error)
    if plain:  # no spread to test against: the answer is plain
        p_value, low, high = (1.0 if estimate == 0 else 0.0), estimate, estimate
    delta, ci = _pct(estimate), (_pct(low), _pct(high))
    if -min_effect_pct < ci[0] and ci[1] < min_effect_pct:
        verdict, unstable = SAME, False
    elif (
        abs(delta) >= min_effect_pct / 2
        and p_value <= alpha
        and (ratios is None or _robust(ratios, estimate, alpha))
    ):
        unstable = outlier or noise >= abs(delta)
        verdict = UNKNOWN if unstable else DIFFERENT
    else:
        verdict, unstable = UNKNOWN, outlier or noise > min_effect_pct
    return Decision(verdict, delta, ci, p_value, noise, unstable, (len(a), len(b)), min_effect_pct)


def pooled_spread(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The standard deviation of single runs' log-values about their own commit's mean, pooled
    over the commits (each commit may have a different level), and its degrees of freedom."""
    residuals = [np.log(np.asarray(g, float)) - np.mean(np.log(g)) for g in groups if len(g)]
    df = sum(len(r) for r in residuals) - len(residuals)
    if df < 1:
        return 0.0, 0
    return float(np.sqrt(sum(float(np.sum(r**2)) for r in residuals) / df)), df


def _robust(ratios: np.ndarray, estimate: float, alpha: float) -> bool:
    """The checks a `different` must pass beside the t-test, each at the strictest level it can
    reach with these pairs (so that 3 pairs can decide when they all agree):

    - the signed-rank test, one-sided in the estimate's direction, at max(alpha, 1/2^n): with
      few pairs, every pair must change the same way;
    - the bootstrap's percentile interval of the mean log-ratio at 1 - alpha excludes 0 (with 3
      pairs that all agree in sign it always does: every resampled mean lies between them).
    """
    side = "greater" if estimate > 0 else "less"
    level = max(alpha, 0.5 ** len(ratios)) * (1 + 1e-9)
    if float(stats.wilcoxon(ratios, alternative=side).pvalue) > level:
        return False
    interval = stats.bootstrap(
        (ratios,),
        np.mean,
        vectorized=True,
        n_resamples=RESAMPLES,
        confidence_level=1 - alpha,
        method="percentile",
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    return not float(interval.low) <= 0 <= float(interval.high)


def _has_outlier(ratios: np.ndarray) -> bool:
    """A pair far outside the others (a run that met a hiccup), judged from OUTLIER_FROM pairs
    on: farther from the median log-ratio than OUTLIER_MADS scaled median absolute deviations."""
    if len(ratios) < OUTLIER_FROM:
        return False
    spread = float(stats.median_abs_deviation(ratios, scale="normal"))
    if spread == 0:  # most pairs alike to the digit: no spread to measure the others by
        return False
    return bool(np.any(np.abs(ratios - np.median(ratios)) > OUTLIER_MADS * spread))


def settle(
    repeats: int,
    cap: int,
    look: Callable[[int, float], _Answer],
    settled: Callable[[_Answer], bool],
) -> _Answer:
    """Each look tests at ALPHA over the number of looks (Bonferroni: O'Brien-Fleming would leave
    the first look almost nothing), so that looking again with more runs never raises the
    chance of a false `different` over the whole comparison above ALPHA."""
    sizes = [repeats]
    while sizes[-1] < cap:
        sizes.append(min(2 * sizes[-1], cap))
    for size in sizes:
        answer = look(size, ALPHA / len(sizes))
        if settled(answer):
            break
    return answer


def _pct(log_ratio: float) -> float:
    return float(100.0 * np.expm1(log_ratio))
