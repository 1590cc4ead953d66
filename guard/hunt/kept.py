"""A metric bisect's samples, kept as they are measured, so a hunt that Ctrl-C stopped goes on
without measuring anything twice (guard.hunt.hunt writes and reads them)."""

from __future__ import annotations

import hashlib
import json
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.ops.provenance import same_code

KEPT_FILE = "patchguard-hunt.jsonl"  # in the worktree's git dir


@dataclass
class Sample:
    value: float
    stamp: dict[str, Any]


class Kept:
    """A metric bisect's samples, written down as they are measured (KEPT_FILE), so a hunt
    that Ctrl-C stopped goes on without measuring anything twice. A kept sample is taken again
    only for the same hunt (bisect, endpoints, command, metric) and the same code: its stamp's
    HEAD, patches and guarded files equal the stamp at that commit now; warm-ups are kept
    alike, and each run is written down as it ends (what the hunt cost). A finished hunt drops the
    file."""

    def __init__(self, path: Path, hunt: list[str]) -> None:
        self.path = path
        self.key = hashlib.sha1(json.dumps(hunt).encode()).hexdigest()
        self.lines: list[dict[str, Any]] = []
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                with suppress(json.JSONDecodeError):
                    data = json.loads(line)
                    if isinstance(data, dict) and data.get("hunt") == self.key:
                        self.lines.append(data)
        self.earlier_runs = sum(int(line.get("runs", 0)) for line in self.lines)

    def pairs(
        self, stamp_a: dict[str, Any], stamp_b: dict[str, Any]
    ) -> list[tuple[str, Sample, Sample]]:
        """(which side led, A's sample, B's sample) of the pairs kept, where the code is the same."""
        found = []
        for line in self.lines:
            if line.get("kind") == "pair":
                a, b = Sample(**line["a"]), Sample(**line["b"])
                if same_code(a.stamp, stamp_a) and same_code(b.stamp, stamp_b):
                    found.append((str(line["lead"]), a, b))
        return found

    def samples(self, commit: str, now: dict[str, Any]) -> list[Sample]:
        found = [
            Sample(**line["sample"])
            for line in self.lines
            if line.get("kind") == "sample" and line.get("commit") == commit
        ]
        return [sample for sample in found if same_code(sample.stamp, now)]

    def warmed(self, commit: str, now: dict[str, Any]) -> bool:
        """Whether this commit's warm-ups ran already, on the same code."""
        return any(
            line.get("kind") == "warmup"
            and line.get("commit") == commit
            and same_code(line.get("stamp", {}), now)
            for line in self.lines
        )

    def add(self, **record: Any) -> None:
        line = {"hunt": self.key, **record}
        self.lines.append(line)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")

    def samples_kept(self) -> int:
        counted = {"pair": 2, "sample": 1}
        return sum(counted.get(str(line.get("kind")), 0) for line in self.lines)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)
