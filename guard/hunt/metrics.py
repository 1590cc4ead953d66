"""Reading one number from a benchmark's output, as sglang's and vLLM's benchmarks print it.

The ways to name it (a label as printed, json:KEY, re:PATTERN) are docs/hunting.md's. The last
occurrence decides, as warm-up rows come first; when it holds no number that reads one way only
(`nan`, `inf`, or `12 345`, which may as well be two columns), the run is refused (Unreadable),
never read from an earlier row.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from guard.errors import ConfigError

HIGHER = "higher"
LOWER = "lower"
_GROUP_MARKS = ",_\u00a0\u202f\u2009"  # between groups of three digits: 1,234.56
_NUMBER = re.compile(
    rf"\s*([-+]?(?:\d{{1,3}}(?P<mark>[{_GROUP_MARKS}])\d{{3}}(?:(?P=mark)\d{{3}})*(?:\.\d*)?"
    r"|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
)
# what, right after a number, says it was read short: `1,23`, `1.234,5`, `12 345`, `1'234`
_CUT_SHORT = re.compile(rf"[.'{_GROUP_MARKS}]\d| \d{{3}}(?!\d)")
_PREFIX = re.compile(r"^(\S.*?\.)\s+(\S.*)$")  # `Decode 0.` / `Prefill.` before the first key
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT = re.compile(r"\s*\([^()]*\)$")  # a label's trailing unit: `(tok/s)`, `(ms)`
# Words that say which way is better in sglang's labels and JSON keys (sglang-bench-output.md).
# vLLM's (vllm/benchmarks/serve.py) besides: `Mean E2EL (ms)`, `Acceptance length`, goodput.
_HIGHER_WORDS = (
    "throughput",
    "goodput",
    "accept length",
    "accept_length",
    "acc_length",
    "acceptance",
)
_LOWER_WORDS = ("latency", "ttft", "tpot", "itl", "e2el", "duration", "(ms)", "(s)", "_ms", "_s")


class Unreadable(ValueError):
    """The metric's last occurrence in a run holds no number that reads one way only."""


@dataclass(frozen=True)
class Metric:
    """What to read from each run, and which way is better (None: not known)."""

    spec: str
    kind: str  # "label", "json" or "regex"
    key: str
    direction: str | None

    def read(self, output: str) -> float | None:
        """The value at the metric's last occurrence (None: none); Unreadable when unsure."""
        if self.kind == "regex":
            return _last_number([m.group(1) for m in re.finditer(self.key, output, re.M)])
        if self.kind == "label":
            found = _labelled(output, _normal(self.key))
            if found or not _IDENTIFIER.match(self.key):
                return _last_number(found)
        return _last_number(_json_values(output, self.key))

    def describe(self) -> str:
        if self.kind == "label":
            return f"the `{self.key}:` line (a label is matched whole, with or without its unit)"
        return f"the JSON key {self.key}" if self.kind == "json" else f"the pattern {self.key!r}"


def parse_metric(spec: str, direction: str | None = None) -> Metric:
    """The user's --metric (and --higher-is-better / --lower-is-better, as `direction`)."""
    if spec.startswith("re:"):
        pattern = spec[3:]
        try:
            groups = re.compile(pattern).groups
        except re.error as error:
            raise ConfigError(f"--metric {spec!r}: not a regular expression ({error})") from None
        if groups != 1:
            raise ConfigError(
                f"--metric {spec!r} has {groups} groups; give it exactly one, around the "
                r"number: re:'throughput: ([\d.]+)'"
            )
        return Metric(spec, "regex", pattern, direction)
    if spec.startswith("json:"):
        key = spec[5:]
        if not key:
            raise ConfigError("--metric json: needs a key, e.g. json:output_throughput")
        return Metric(spec, "json", key, direction or _known_direction(key))
    label = " ".join(spec.split()).removesuffix(":").rstrip()
    if not label:
        raise ConfigError("--metric is empty; name a line, e.g. 'Output token throughput (tok/s)'")
    return Metric(spec, "label", label, direction or _known_direction(label))


def _known_direction(name: str) -> str | None:
    lowered = name.lower()
    if any(word in lowered for word in _HIGHER_WORDS):
        return HIGHER
    if any(lowered.endswith(word) or f"{word} " in lowered for word in _LOWER_WORDS):
        return LOWER
    return None


def _normal(label: str) -> str:
    return " ".join(label.split()).casefold()


def _labelled(output: str, wanted: str) -> list[str]:
    """The text after `wanted:` on each line that has it, as a `key: value` pair."""
    found = []
    for line in output.splitlines():
        prefix = ""
        for position, segment in enumerate(line.split(", ")):
            key, colon, value = segment.partition(":")
            if not colon:
                continue
            key = _normal(key)
            if position == 0 and (split := _PREFIX.match(key)):
                prefix, key = split.group(1), split.group(2)
            unit = _UNIT.sub("", key)  # `output token throughput (tok/s)` as typed without it
            if wanted in (key, f"{prefix} {key}", unit, f"{prefix} {unit}"):
                found.append(value)
    return found


def _json_values(output: str, key: str) -> list[str]:
    """The key's value in each JSON line, or in the whole text when it is one JSON object (vLLM's
    --save-result file, indented or not), as its JSON text; a float as Python prints it (`nan`,
    `inf`: refused as a run prints them, not as JSON's NaN)."""
    whole = _json_object(output)
    objects = [whole] if whole is not None else map(_json_object, output.splitlines())
    values = [found[key] for found in objects if found is not None and key in found]
    return [repr(value) if isinstance(value, float) else json.dumps(value) for value in values]


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _last_number(texts: list[str]) -> float | None:
    """The number the last text begins with; Unreadable when it holds none read for sure."""
    if not texts:
        return None
    text = texts[-1]
    match = _NUMBER.match(text)
    shown = " ".join(text.split())[:40]
    if match is None:
        raise Unreadable(f"its last value reads {shown!r}, not a number")
    if _CUT_SHORT.match(text, match.end()):
        raise Unreadable(
            f"its last value {shown!r} can be read more than one way (digits grouped by a "
            "plain space, or a decimal comma); print it without grouping, or name it by "
            "re:PATTERN"
        )
    number = float(re.sub(f"[{_GROUP_MARKS}]", "", match.group(1)))
    if not math.isfinite(number):
        raise Unreadable(f"its last value reads {shown!r}, not a finite number")
    return number
