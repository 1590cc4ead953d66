"""Pictures of a hunt (`--plot FILE`): matplotlib is imported only when one is drawn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from guard.errors import ConfigError
from guard.hunt.hunt import Comparison, Hunt


def require_plotting(path: Path) -> None:
    """Before anything is measured: a plot that cannot be drawn is refused now, not at the end."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise ConfigError(f"--plot {path}: name a .png or .svg file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed: pip install 'git-patchguard[plot]'"
        ) from None
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise ConfigError(
            f"--plot {path}: {path.parent} is not a directory patchguard can write to; name "
            "a file in one that is"
        )


def plot(comparison: Comparison, path: Path) -> None:
    """Each side's runs as points over a box: the distribution the verdict was drawn from."""
    figure, axes = _figure(5.0)
    sides = (comparison.a, comparison.b)
    axes.boxplot([side.values for side in sides], widths=0.4)
    for position, side in enumerate(sides, start=1):
        axes.plot([position] * len(side.values), side.values, "o", alpha=0.5)
    axes.set_xticks([1, 2], [f"A {comparison.a.commit[:10]}", f"B {comparison.b.commit[:10]}"])
    axes.set_ylabel(comparison.metric.key)
    decision = comparison.decision
    axes.set_title(f"{decision.verdict}: {decision.delta_pct:+.1f}%")
    _save(figure, path)


def plot_bisect(found: Hunt, path: Path) -> None:
    """Every run of a metric bisect at its commit, GOOD left and BAD right, the commit found
    marked: where the hunt spent its runs, and how clearly the number moved there."""
    good, bad = found.endpoints.a, found.endpoints.b
    order = [good.commit, *found.line] if found.line else [good.commit, bad.commit]
    runs = {good.commit: good.values, bad.commit: bad.values}
    runs.update({step.runs.commit: step.runs.values for step in found.steps})
    figure, axes = _figure(max(5.0, 0.45 * len(order) + 2))
    for position, commit in enumerate(order):
        values = runs.get(commit, [])
        colour = "tab:red" if commit == found.first_changed else "tab:blue"
        axes.plot([position] * len(values), values, "o", alpha=0.6, color=colour)
    if found.first_changed in order:
        axes.axvline(order.index(found.first_changed) - 0.5, color="tab:red", linestyle="--")
    labels = [commit[:7] for commit in order]
    labels[0], labels[-1] = f"GOOD {labels[0]}", f"BAD {labels[-1]}"
    axes.set_xticks(range(len(order)), labels, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel(found.endpoints.metric.key)
    measured = sum(len(values) for values in runs.values())
    title = f"{found.verdict}: {found.first_changed[:10]}" if found.first_changed else found.verdict
    axes.set_title(f"{title} ({measured} runs counted, {found.runs} in all)")
    _save(figure, path)


def _figure(width: float) -> tuple[Any, Any]:
    """A figure drawn off screen (no display needed) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot.subplots(figsize=(width, 4))


def _save(figure: Any, path: Path) -> None:
    """Written after the verdict is printed: a disk that filled meanwhile costs the picture,
    with one line, never the hunt's answer."""
    from matplotlib import pyplot

    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as error:
        raise ConfigError(f"--plot {path}: cannot write it ({error.strerror})") from None
    finally:
        pyplot.close(figure)
