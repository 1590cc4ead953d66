"""The probabilistic bisection of `bisect run --metric` (guard.hunt.culprit) on numbers alone:
the whole decision procedure simulated in-process with seeded noise (the compare of GOOD and
BAD with its looks, then the probes), as the acceptance asks: a 33% drop at 2% noise named in
at most 14 runs over 12 commits, a 5% drop at 1% noise named in at least 95% of 200 hunts,
a range with no change said to have none. The CLI end-to-end runs are in test_hunt.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats as scipy_stats

from guard.hunt import culprit, stats

REPEATS, CAP = 3, 24  # the defaults: --repeats 3, --max-repeats 24
LEVEL = 94.0


def compare(
    rng: np.random.Generator, noise: float, factor: float
) -> tuple[stats.Decision, np.ndarray, np.ndarray, int]:
    """GOOD against BAD as compare measures them: the decision, the runs, what it cost (a
    warm-up at each)."""
    good = LEVEL * np.exp(rng.normal(0, noise, CAP))
    bad = LEVEL * factor * np.exp(rng.normal(0, noise, CAP))
    decision = stats.settle(
        REPEATS,
        CAP,
        lambda n, alpha: stats.decide(good[:n], bad[:n], min_effect_pct=5, alpha=alpha),
        lambda d: d.verdict != stats.UNKNOWN,
    )
    size = decision.n[0]
    return decision, good[:size], bad[:size], 2 + 2 * size


def hunt(
    rng: np.random.Generator, noise: float, factor: float, size: int, first: int | None
) -> tuple[list[int] | None, int]:
    """A whole metric bisect over `size` candidates whose first changed one is `first` (None:
    no change at all): the group it named (None if none) and the runs of the command it cost."""
    decision, good, bad, cost = compare(rng, noise, 1.0 if first is None else factor)
    if decision.verdict != stats.DIFFERENT:
        return None, cost
    taken: dict[int, list[float]] = {}

    def take(index: int, n: int) -> list[float]:
        level = LEVEL * (factor if first is not None and index >= first else 1.0)
        runs = taken.setdefault(index, [])
        while len(runs) < n:
            runs.append(level * float(np.exp(rng.normal(0, noise))))
        return list(runs)

    found = culprit.search(culprit.Fit.of(good, bad), size, take, CAP)
    return found.settled(), cost + sum(len(runs) for runs in taken.values())


def test_a_third_off_at_2pct_noise_is_named_in_14_runs_over_12_commits() -> None:
    """8 runs for GOOD and BAD (a warm-up each, 3 pairs), then one run per probe: log2(12)
    rounds up to 4 probes. Measured over 200 hunts: 11 or 12 runs."""
    rng = np.random.default_rng(38)
    for trial in range(200):
        first = trial % 12
        group, cost = hunt(rng, 0.02, 1 / 1.5, 12, first)
        assert group == [first]
        assert cost <= 14


def test_a_5pct_drop_at_1pct_noise_is_named_in_95pct_of_200_hunts() -> None:
    """Measured: 197 of 200 named the right commit, none a wrong one; in the 3 others GOOD and
    BAD settled as `same` (a 5% drop is the border of --min-effect 5). At most 32 runs, 16.8
    on average."""
    rng = np.random.default_rng(5)
    named, costs = [], []
    for trial in range(200):
        first = trial % 12
        group, cost = hunt(rng, 0.01, 0.95, 12, first)
        named.append(group == [first])
        costs.append(cost)
        assert group is None or group == [first]  # never a wrong commit
    assert sum(named) >= 0.95 * 200
    assert np.mean(costs) <= 20


def test_a_range_with_no_change_names_no_commit() -> None:
    """Pure noise between GOOD and BAD: the compare finds no change (nearly always `same`),
    so nothing is hunted; a false `different` (at most ALPHA of them) leaves the search to settle
    somewhere, which is what ALPHA costs. Measured: 199 of 200 name nothing."""
    rng = np.random.default_rng(17)
    groups = [hunt(rng, 0.02, 1 / 1.5, 12, None)[0] for _ in range(200)]
    assert sum(group is not None for group in groups) <= scipy_stats.binom.ppf(
        0.999, 200, stats.ALPHA
    )


def brute_force(fit: culprit.Fit, size: int, values: dict[int, list[float]]) -> np.ndarray:
    """The posterior by its definition: for each hypothesis h the product of each run's
    likelihood under BAD's distribution (its commit at or after h) or GOOD's (before h)."""
    weights = []
    for h in range(size):
        total = 0.0
        for index, runs in values.items():
            mean, scale = (fit.bad, fit.scale_bad) if index >= h else (fit.good, fit.scale_good)
            total += float(np.sum(scipy_stats.t.logpdf(np.log(runs), fit.df, mean, scale)))
        weights.append(total)
    weights_array = np.exp(np.array(weights) - max(weights))
    return np.asarray(weights_array / weights_array.sum())


def test_the_posterior_is_the_product_of_the_runs_likelihoods() -> None:
    rng = np.random.default_rng(2)
    fit = culprit.Fit.of(
        LEVEL * np.exp(rng.normal(0, 0.02, 4)), 60 * np.exp(rng.normal(0, 0.02, 4))
    )
    values = {2: [93.0, 70.0], 5: [62.0], 7: [80.0, 77.0, 75.0]}
    posterior = culprit.Posterior(10, {i: fit.evidence(v) for i, v in values.items()})
    assert posterior.probabilities() == pytest.approx(brute_force(fit, 10, values), rel=1e-9)


def test_the_probe_splits_the_posterior_in_half_and_a_settled_one_is_named() -> None:
    posterior = culprit.Posterior(12)
    assert posterior.probe() == 5  # P(h ≤ 5) = 6/12
    assert posterior.settled() is None
    posterior.evidence[5] = -50.0  # like GOOD: the change is after it
    assert posterior.probe() == 8  # P(h ≤ 8) = 3/6 of what is left
    posterior.evidence.update({8: 50.0, 6: -50.0, 7: 50.0})
    assert posterior.settled() == [7]
    # BAD, the last candidate, is never probed: its runs tell nothing about where it changed.
    assert culprit.Posterior(2).probe() == 0


def test_a_skipped_commit_next_to_the_change_leaves_both_named_together() -> None:
    """Where the patches do not hold at candidate 6, the change at 6 and the change at 7 look
    the same from every run: the search settles on the two, not on one of them."""

    def take(index: int, n: int) -> list[float] | None:
        return None if index == 6 else [LEVEL / (1.5 if index >= 7 else 1.0)] * n

    fit = culprit.Fit.of([94.0, 95.0, 93.0], [62.0, 63.0, 61.0])
    found = culprit.search(fit, 12, take, 24)
    assert found.settled() == [6, 7]
    assert found.skipped == {6}


def test_a_run_between_good_and_bad_asks_for_more_runs_at_that_commit() -> None:
    """One run per probe while runs are decisive; a run between GOOD and BAD is not (here a
    likelihood ratio of e^2 for GOOD, which alone would move the next probe elsewhere), so
    that commit gets another (and another, up to the cap, while still in doubt)."""
    fit = culprit.Fit.of([94.0, 95.0, 93.0], [62.0, 63.0, 61.0])
    between = float(np.exp(0.6 * np.log(94.0) + 0.4 * np.log(62.0)))
    assert 1 < -fit.evidence([between]) < np.log(culprit.DECISIVE)
    asked: list[tuple[int, int]] = []

    taken: dict[int, list[float]] = {}

    def search(value_at: Callable[[int, int], float]) -> culprit.Posterior:
        taken.clear()

        def take(index: int, n: int) -> list[float]:
            asked.append((index, n))
            runs = taken.setdefault(index, [])
            while len(runs) < n:
                runs.append(value_at(index, len(runs)))
            return list(runs)

        return culprit.search(fit, 12, take, 24)

    def clear_but_the_first(index: int, k: int) -> float:
        return between if (index, k) == (5, 0) else (62.0 if index >= 5 else 94.0)

    found = search(clear_but_the_first)
    assert found.settled() == [5]
    assert asked[:2] == [(5, 1), (5, 2)]  # the doubtful first run, then one more there
    assert all(len(runs) == 1 for index, runs in taken.items() if index != 5)
    asked.clear()
    halfway = float(np.exp((np.log(94.0) + np.log(62.0)) / 2))
    stuck = search(lambda index, k: halfway)  # never decisive: up to the cap, then it ends
    assert stuck.settled() is None and max(len(v) for v in taken.values()) == 24
