"""Probabilistic bisection on a metric: which commit of a range first changed it.

Horstein's scheme as Waeber, Frazier and Henderson (2013) analyse it, for a continuous metric
(Google's flake-aware culprit finding and git_bayesect do it for pass/fail): a posterior over
the candidates, each run at a probed commit weighing GOOD's distribution against BAD's, and the
next probe at the posterior's median. Runs that leave no doubt cost one run per probe; a run
that falls between GOOD and BAD asks for another at the same commit. Hypothesis h says
candidates[h] (oldest first, BAD last) is the first changed one: the commits before it run like
GOOD, it and those after like BAD. A run's likelihood is Student's t predictive (heavy-tailed,
so one odd run does not settle anything). Pure logic, no I/O: guard.hunt.hunt measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from guard.hunt.stats import pooled_spread

SETTLED = 0.99  # the posterior one commit (or one group joined by skipped commits) must hold
DECISIVE = 100.0  # the likelihood ratio after which a probe's runs are enough for this visit


@dataclass(frozen=True)
class Fit:
    """GOOD's and BAD's distributions of log-values: their means and the pooled spread."""

    good: float
    bad: float
    scale_good: float  # the predictive spread of a new run: pooled sd times sqrt(1 + 1/n)
    scale_bad: float
    df: int

    @classmethod
    def of(cls, good: Sequence[float], bad: Sequence[float]) -> Fit:
        level_good, level_bad = (float(np.mean(np.log(runs))) for runs in (good, bad))
        spread, df = pooled_spread([good, bad])
        if df < 1 or spread == 0:  # a benchmark that prints the same number each run
            spread, df = max(abs(level_bad - level_good), 1e-9) * 1e-3, max(df, 1)
        return cls(
            level_good,
            level_bad,
            spread * math.sqrt(1 + 1 / len(good)),
            spread * math.sqrt(1 + 1 / len(bad)),
            df,
        )

    def evidence(self, values: Sequence[float]) -> float:
        """The log-likelihood ratio of runs: > 0 for like BAD, < 0 for like GOOD."""
        logs = np.log(np.asarray(values, float))
        like_bad = stats.t.logpdf(logs, self.df, loc=self.bad, scale=self.scale_bad)
        like_good = stats.t.logpdf(logs, self.df, loc=self.good, scale=self.scale_good)
        return float(np.sum(like_bad - like_good))


@dataclass
class Posterior:
    """Which of `size` candidates first changed, from the evidence of the runs at each."""

    size: int
    evidence: dict[int, float] = field(default_factory=dict)  # a probed candidate's runs' LLR
    skipped: set[int] = field(default_factory=set)  # where nothing can be measured

    def probabilities(self) -> np.ndarray:
        """P(h) ∝ the product over probed j of (j ≥ h ? like BAD : like GOOD): with log ratios,
        log P(h) = Σ_{j ≥ h} evidence[j] up to a constant (the uniform prior cancels)."""
        ratios = np.zeros(self.size)
        ratios[list(self.evidence)] = list(self.evidence.values())
        log_p = np.cumsum(ratios[::-1])[::-1]
        return np.asarray(np.exp(log_p - special.logsumexp(log_p)))

    def settled(self) -> list[int] | None:
        """The hypotheses of the group that holds SETTLED of the posterior, if one does. A group
        is the hypotheses no measurement can tell apart: h and h + 1 differ only at candidate h,
        so a skipped candidate joins them."""
        groups: list[list[int]] = [[0]]
        for h in range(1, self.size):
            if h - 1 in self.skipped:
                groups[-1].append(h)
            else:
                groups.append([h])
        p = self.probabilities()
        return next((group for group in groups if float(p[group].sum()) >= SETTLED), None)

    def probe(self) -> int | None:
        """The candidate whose run splits the posterior closest to half and half (the median):
        a run at j tells {h ≤ j} from {h > j}. BAD (the last candidate) tells nothing."""
        cdf = np.cumsum(self.probabilities())
        usable = [j for j in range(self.size - 1) if j not in self.skipped]
        return min(usable, key=lambda j: (abs(float(cdf[j]) - 0.5), j), default=None)


def search(
    fit: Fit, size: int, take: Callable[[int, int], list[float] | None], cap: int
) -> Posterior:
    """Probe the posterior's median until one group holds SETTLED of it, or the next probe has
    `cap` runs already. take(j, n) gives at least n values of candidate j, or None where nothing
    can be measured (the candidate is skipped)."""
    posterior = Posterior(size)
    values: dict[int, list[float]] = {}
    while posterior.settled() is None:
        probe = posterior.probe()
        if probe is None or len(values.get(probe, [])) >= cap:
            break
        while True:
            got = take(probe, len(values.get(probe, [])) + 1)
            if got is None:
                posterior.skipped.add(probe)
                posterior.evidence.pop(probe, None)
                break
            values[probe] = got
            posterior.evidence[probe] = fit.evidence(got)
            if abs(posterior.evidence[probe]) >= math.log(DECISIVE) or len(got) >= cap:
                break
    return posterior
