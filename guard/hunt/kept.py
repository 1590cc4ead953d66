"""What a hunt keeps in the git dir for the next one: a metric bisect's samples, so a hunt that
Ctrl-C stopped goes on without measuring anything twice, and where the user was (HomeNote)."""

from __future__ import annotations

import hashlib
import json
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.ops.provenance import same_code
from guard.store import journal

KEPT_FILE = "patchguard-hunt.jsonl"  # in the worktree's git dir
HOME_FILE = "patchguard-hunt-home"  # in the worktree's git dir, while a hunt runs


@dataclass
class Sample:
    value: float
    stamp: dict[str, Any]


class Kept:
    """A metric bisect's samples, warm-ups and runs (KEPT_FILE). A sample is taken again only
    for the same hunt (bisect, endpoints, command, metric) and the same code (its stamp's HEAD,
    patches and guarded files as they are at that commit now)."""

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
        kept = [(str(p["lead"]), Sample(**p["a"]), Sample(**p["b"])) for p in self._of("pair")]
        return [
            (lead, a, b)
            for lead, a, b in kept
            if same_code(a.stamp, stamp_a) and same_code(b.stamp, stamp_b)
        ]

    def samples(self, commit: str, now: dict[str, Any]) -> list[Sample]:
        found = [Sample(**line["sample"]) for line in self._of("sample", commit)]
        return [sample for sample in found if same_code(sample.stamp, now)]

    def warmed(self, commit: str, now: dict[str, Any]) -> bool:
        """Whether this commit's warm-ups ran already, on the same code."""
        return any(same_code(line.get("stamp", {}), now) for line in self._of("warmup", commit))

    def _of(self, kind: str, commit: str | None = None) -> list[dict[str, Any]]:
        return [
            line for line in self.lines if (line.get("kind"), line.get("commit")) == (kind, commit)
        ]

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


class HomeNote:
    """Where the user was when the hunt began and its lift's undo entry, then each commit it
    moves to (HOME_FILE, one a line). A hunt killed outright (SIGKILL: no handler runs) leaves
    HEAD detached at one of those commits, and its lift's entry where `undo` would take it for
    the user's. The next hunt drops that entry and, finding HEAD still at one of the commits,
    goes back to where the user was; HEAD anywhere else: the user moved since, and stays."""

    def __init__(self, git_dir: Path) -> None:
        self.path = git_dir / HOME_FILE
        self.entry = "-"

    def begin(self, here: str, lift_entry: Path | None) -> str | None:
        """Note home; where a killed hunt took the user from, if HEAD is still where it left it."""
        earlier = self.path.read_text().splitlines() if self.path.exists() else []
        if earlier[1:2] and earlier[1] != "-" and Path(earlier[1]) != lift_entry:
            journal.forget(Path(earlier[1]))
        self.entry = str(lift_entry or "-")
        back = earlier[0] if here in earlier[2:] and earlier[0] != here else None
        self.write(back or here)
        return back

    def write(self, home: str) -> None:
        self.path.write_text(f"{home}\n{self.entry}\n")

    def moving_to(self, commit: str) -> None:
        with self.path.open("a") as note:
            note.write(commit + "\n")

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)
