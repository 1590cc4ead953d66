"""Reading one number from a benchmark's output, as sglang's benchmark scripts print it.

Three ways to name it (docs/hunting.md):
- a label, as `bench_serving` and `bench_offline_throughput` print their rows (`Output token
  throughput (tok/s):` padded to 40 columns, then the value) and as `bench_one_batch` and
  `bench_one_batch_server` print theirs (`Decode.  median latency: 0.01178 s, median
  throughput:    339.57 token/s`: a `key: value` pair after each comma, under the line's
  `Decode.` prefix). Typed with or without its colon and its trailing unit (`(tok/s)`); spaces
  and case do not matter.
- `json:KEY`, a key of a JSON line (sglang appends JSONL with `--output-file`); a bare KEY that
  no label matches is tried as one too.
- `re:PATTERN`, a regular expression with one group.
The last match wins: the warm-up rows come before the result. Which way is better is known
for sglang's own names (throughput up, latency down); for others the user says.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from guard.errors import ConfigError

HIGHER = "higher"
LOWER = "lower"
_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_PREFIX = re.compile(r"^(\S.*?\.)\s+(\S.*)$")  # `Decode 0.` / `Prefill.` before the first key
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT = re.compile(r"\s*\([^()]*\)$")  # a label's trailing unit: `(tok/s)`, `(ms)`
# Words that say which way is better in sglang's labels and JSON keys (sglang-bench-output.md).
_HIGHER_WORDS = ("throughput", "accept length", "accept_length", "acc_length")
_LOWER_WORDS = ("latency", "ttft", "tpot", "itl", "duration", "(ms)", "(s)", "_ms", "_s")


@dataclass(frozen=True)
class Metric:
    """What to read from each run, and which way is better (None: not known)."""

    spec: str
    kind: str  # "label", "json" or "regex"
    key: str
    direction: str | None

    def read(self, output: str) -> float | None:
        """The metric's value in one run's output (its last occurrence), or None."""
        if self.kind == "regex":
            return _last_float(m.group(1) for m in re.finditer(self.key, output, re.M))
        if self.kind == "label":
            found = _last_float(_labelled(output, _normal(self.key)))
            if found is not None or not _IDENTIFIER.match(self.key):
                return found
        return _last_float(_json_values(output, self.key))

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
    found = []
    for line in output.splitlines():
        if not line.lstrip().startswith("{"):
            continue
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append(repr(value))
    return found


def _last_float(texts: Iterable[str]) -> float | None:
    value = None
    for text in texts:
        match = _NUMBER.match(text)
        if match:
            number = float(match.group(1))
            value = number if math.isfinite(number) else value
    return value
