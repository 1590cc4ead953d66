"""Build a small sglang-shaped git repository for the demo, the tests and the benchmarks.

History of `main`:  no-kimi (no kimi_k25.py) -> old (kimi_k25.py added) -> kimi moved upstream
-> main (another file changed). Branch `upstream-has-methods` adds the three EAGLE-3 methods
upstream, with type hints and docstrings and at another place in the class.

`build_hunt` makes the history of a regression hunt instead: c0 (the model without the methods),
c1 (an unrelated change), c2 (upstream edits the model file elsewhere), c3 (upstream adds the
same methods, typed, documented, at another place in the class), c4 (a later change that brings
a real regression: the all-reduce slows down).

`build_absorbing` makes the shape where git cannot merge: r0 (the model as in v0.5.9), r1 (an
unrelated change), r2 (the release v0.5.10 that absorbs the three methods, typed and documented,
at the very spot where a user types them: right after `load_weights`). `type_eagle3_by_hand`
is that user's copy.

Usage: python scripts/sample_repo.py DIR [--filler N] [--hunt | --absorbing]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

KIMI = "python/sglang/srt/models/kimi_k25.py"
CLASS = "KimiK25ForConditionalGeneration"
METHODS = ("set_eagle3_layers_to_capture", "get_embed_and_head", "set_embed_and_head")

KIMI_V1 = f'''"""Kimi-K2.5 multimodal model."""

from torch import nn

from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM


class {CLASS}(nn.Module):
    def __init__(self, config, quant_config=None):
        super().__init__()
        self.config = config
        self.language_model = DeepseekV3ForCausalLM(config.text_config, quant_config)

    def forward(self, input_ids, positions, forward_batch):
        return self.language_model(input_ids, positions, forward_batch)

    def load_weights(self, weights):
        self.language_model.load_weights(weights)


EntryClass = [{CLASS}]
'''

# Upstream later moves on: a new helper at the top and a changed forward().
KIMI_V2 = KIMI_V1.replace(
    "from torch import nn\n",
    "from torch import nn\n\nDEFAULT_VISION_TOKENS = 1024\n",
).replace(
    "        return self.language_model(input_ids, positions, forward_batch)\n",
    "        hidden = self.language_model(input_ids, positions, forward_batch)\n"
    "        return hidden\n",
)

EAGLE3_METHODS = """
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.language_model.set_eagle3_layers_to_capture(layer_ids)

    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()

    def set_embed_and_head(self, embed, head):
        self.language_model.set_embed_and_head(embed, head)
"""

# How upstream might absorb the same methods: typed, documented, and earlier in the class.
UPSTREAM_METHODS = '''
    def get_embed_and_head(self) -> tuple:
        """Expose the base model's embedding and head to an EAGLE-3 draft."""
        return self.language_model.get_embed_and_head()

    def set_embed_and_head(self, embed, head) -> None:
        """Share the embedding and head with the draft model."""
        self.language_model.set_embed_and_head(embed, head)

    def set_eagle3_layers_to_capture(self, layer_ids: list[int] | None = None) -> None:
        """Choose the hidden layers the EAGLE-3 draft reads."""
        self.language_model.set_eagle3_layers_to_capture(layer_ids)
'''

OTHER_FILES = {
    "README.md": "# sglang (sample)\n",
    "python/sglang/__init__.py": '"""sglang sample package."""\n',
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/models/__init__.py": "",
    "python/sglang/srt/models/deepseek_v2.py": (
        "class DeepseekV3ForCausalLM:\n"
        "    def __init__(self, config, quant_config=None):\n"
        "        self.config = config\n"
    ),
    "python/sglang/srt/distributed/__init__.py": "",
    "python/sglang/srt/distributed/parallel_state.py": "TP_GROUP = None\n",
}


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "sample",
        "GIT_AUTHOR_EMAIL": "sample@example.invalid",
        "GIT_COMMITTER_NAME": "sample",
        "GIT_COMMITTER_EMAIL": "sample@example.invalid",
    }
    result = subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    )
    return result.stdout.strip()


def write(root: Path, path: str, text: str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def add_eagle3_methods(root: Path) -> None:
    """The user's local patch: the three methods, inside the class, before EntryClass."""
    path = root / KIMI
    text = path.read_text()
    path.write_text(text.replace("\n\nEntryClass", EAGLE3_METHODS + "\n\nEntryClass", 1))


def build(root: Path, filler: int = 0) -> dict[str, str]:
    """Create the repository at `root`; return the commit ids by name."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in OTHER_FILES.items():
        write(root, path, text)
    for number in range(filler):
        write(root, f"python/sglang/srt/layers/gen/mod_{number:05d}.py", f"VALUE = {number}\n")
    commits = {"no-kimi": commit(root, "initial sglang layout")}
    write(root, KIMI, KIMI_V1)
    commits["old"] = commit(root, "add Kimi-K2.5")
    write(root, KIMI, KIMI_V2)
    commits["kimi-moved"] = commit(root, "kimi: vision token default, forward refactor")
    write(
        root,
        "python/sglang/srt/distributed/parallel_state.py",
        "TP_GROUP = None\nPP_GROUP = None\n",
    )
    commits["main"] = commit(root, "distributed: pipeline group")
    git(root, "checkout", "-q", "-b", "upstream-has-methods")
    text = (root / KIMI).read_text()
    marker = "\n    def forward("
    write(root, KIMI, text.replace(marker, UPSTREAM_METHODS + marker, 1))
    commits["upstream-has-methods"] = commit(root, "kimi: EAGLE-3 support upstream")
    git(root, "checkout", "-q", "main")
    for name in ("no-kimi", "old"):
        git(root, "tag", name, commits[name])
    return commits


REGRESSION_FILE = "python/sglang/srt/distributed/parallel_state.py"
HUNT_BENCH = "bench_eagle3.py"
# What both benchmarks begin with: the model imported from the checkout (torch is not needed: the
# model module gets a stand-in), and a failure (exit 1) without the EAGLE-3 methods.
_BENCH_PREAMBLE = f"""import sys
import types

sys.path.insert(0, "python")
torch = types.ModuleType("torch")
torch.nn = types.SimpleNamespace(Module=object)
sys.modules["torch"] = torch

from sglang.srt.distributed import parallel_state  # noqa: E402
from sglang.srt.models.kimi_k25 import {CLASS}  # noqa: E402

missing = [m for m in {METHODS!r} if not callable(getattr({CLASS}, m, None))]
if missing:
    sys.exit(f"bench: the model lacks {{', '.join(missing)}}")
"""
# What a benchmark of the sample starts with: it imports the patched model (so its run is attested).
IMPORT_THE_MODEL = _BENCH_PREAMBLE
# The benchmark of the hunt: it needs the EAGLE-3 methods in the class, and fails on the regression.
HUNT_BENCH_TEXT = (
    '"""Fails without the EAGLE-3 methods, and on the slow all-reduce."""\n'
    + _BENCH_PREAMBLE
    + """if getattr(parallel_state, "SLOW_ALLREDUCE", False):
    sys.exit("bench: regression: all-reduce is slow")
print("bench: ok")
"""
)


# A stand-in for `python -m sglang.bench_serving`: the same `Label: value` rows (40 columns), a
# throughput that depends on the code (a third lower with the slow all-reduce), 2% noise, and a
# failure without the EAGLE-3 methods; `--output-file F` appends a JSON line. With BENCH_COUNTER naming a file, the noise of run N is
# seeded with N (the file counts the runs): the same hunt draws the same numbers every time.
THROUGHPUT_BENCH = "bench_throughput.py"
THROUGHPUT = 94.0
SLOWDOWN = 1.5  # the slow all-reduce: 94 -> 62.7 tok/s, -33.3%
THROUGHPUT_BENCH_TEXT = (
    '"""Output token throughput of the Kimi-K2.5 model (a stand-in for sglang.bench_serving)."""\n'
    + "import json\nimport os\nimport random\n"
    + _BENCH_PREAMBLE
    + f"""counter = os.environ.get("BENCH_COUNTER")
if counter:
    run = int(open(counter).read() or 0) if os.path.exists(counter) else 0
    with open(counter, "w") as handle:
        handle.write(str(run + 1))
    noise = random.Random(run)
else:
    noise = random.Random()
cost = {SLOWDOWN} if getattr(parallel_state, "SLOW_ALLREDUCE", False) else 1.0
value = {THROUGHPUT} / cost * noise.lognormvariate(0, 0.02)
print("Starting warmup with 1 sequences...")
print("{{:=^50}}".format(" Serving Benchmark Result "))
print("{{:<40}} {{:<10}}".format("Backend:", "sglang"))
print("{{:<40}} {{:<10}}".format("Successful requests:", 1000))
print("{{:<40}} {{:<10.2f}}".format("Output token throughput (tok/s):", value))
print("{{:<40}} {{:<10.2f}}".format("Median TTFT (ms):", 40.0 * cost))
if "--output-file" in sys.argv:  # as sglang's: one JSON line appended per run
    with open(sys.argv[sys.argv.index("--output-file") + 1], "a") as results:
        results.write(json.dumps({{"output_throughput": value}}) + "\\n")
"""
)


def build_slowdown(root: Path) -> dict[str, str]:
    """A regression hunt over fourteen commits (s00..s13, each also a tag): the benchmark
    (bench_throughput.py) from s00 on, upstream editing the patched file at s05, and the slow
    all-reduce at s09, a third off the throughput; the other commits touch other files."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in OTHER_FILES.items():
        write(root, path, text)
    write(root, KIMI, KIMI_V1)
    write(root, THROUGHPUT_BENCH, THROUGHPUT_BENCH_TEXT)
    commits = {"s00": commit(root, "s00: sglang with Kimi-K2.5 and its benchmark")}
    for number in range(1, 14):
        name = f"s{number:02d}"
        if number == 5:
            write(root, KIMI, KIMI_V2)
            subject = "kimi: vision token default, forward refactor"
        elif number == 9:
            write(root, REGRESSION_FILE, "TP_GROUP = None\nSLOW_ALLREDUCE = True\n")
            subject = "distributed: new all-reduce (slow)"
        else:
            write(root, f"docs/notes_{number:02d}.md", f"# release note {number}\n")
            subject = f"docs: release note {number}"
        commits[name] = commit(root, f"{name}: {subject}")
    for name, commit_id in commits.items():
        git(root, "tag", name, commit_id)
    return commits


def build_hunt(root: Path) -> dict[str, str]:
    """The regression hunt's history on `main` (c0..c4, each also a tag); returns ids by name."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in OTHER_FILES.items():
        write(root, path, text)
    write(root, KIMI, KIMI_V1)
    commits = {"c0": commit(root, "c0: sglang with Kimi-K2.5")}
    write(root, "README.md", "# sglang (sample)\n\nServing framework.\n")
    commits["c1"] = commit(root, "c1: docs")
    write(root, KIMI, KIMI_V2)
    commits["c2"] = commit(root, "c2: kimi: vision token default, forward refactor")
    marker = "\n    def forward("
    write(root, KIMI, KIMI_V2.replace(marker, UPSTREAM_METHODS + marker, 1))
    commits["c3"] = commit(root, "c3: kimi: EAGLE-3 support upstream")
    write(root, REGRESSION_FILE, "TP_GROUP = None\nSLOW_ALLREDUCE = True\n")
    commits["c4"] = commit(root, "c4: distributed: new all-reduce (slow)")
    for name, commit_id in commits.items():
        git(root, "tag", name, commit_id)
    # As in sglang: 0.5.10 absorbed the methods (and, here, brought the regression).
    git(root, "tag", "v0.5.9", commits["c1"])
    git(root, "tag", "v0.5.10", commits["c4"])
    return commits


# Upstream absorbing the methods exactly where users put them: after the last method of the class.
ABSORBED_METHODS = '''
    def set_eagle3_layers_to_capture(self, layer_ids: list[int] | None = None) -> None:
        """Choose the hidden layers the EAGLE-3 draft reads."""
        self.language_model.set_eagle3_layers_to_capture(layer_ids)

    def get_embed_and_head(self) -> tuple:
        """Expose the base model's embedding and head to an EAGLE-3 draft."""
        return self.language_model.get_embed_and_head()

    def set_embed_and_head(self, embed, head) -> None:
        """Share the embedding and head with the draft model."""
        self.language_model.set_embed_and_head(embed, head)
'''
_AFTER_LOAD_WEIGHTS = "        self.language_model.load_weights(weights)\n"


def type_eagle3_by_hand(root: Path) -> None:
    """The methods as a user types them: no comment, right after `load_weights`, one blank line
    before `EntryClass` (where upstream's own copy lands too, so git cannot merge the two)."""
    path = root / KIMI
    text = path.read_text()
    start = text.index(_AFTER_LOAD_WEIGHTS) + len(_AFTER_LOAD_WEIGHTS)
    end = text.index("EntryClass")
    path.write_text(text[:start] + EAGLE3_METHODS + "\n" + text[end:])


def build_absorbing(root: Path) -> dict[str, str]:
    """r0 (v0.5.9), r1 (unrelated), r2 (v0.5.10 absorbs the methods at the same spot) on `main`."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in OTHER_FILES.items():
        write(root, path, text)
    write(root, KIMI, KIMI_V1)
    commits = {"r0": commit(root, "r0: sglang with Kimi-K2.5")}
    write(root, "README.md", "# sglang (sample)\n\nServing framework.\n")
    commits["r1"] = commit(root, "r1: docs")
    absorbed = KIMI_V1.replace(_AFTER_LOAD_WEIGHTS, _AFTER_LOAD_WEIGHTS + ABSORBED_METHODS, 1)
    write(root, KIMI, absorbed)
    commits["r2"] = commit(root, "r2: kimi: EAGLE-3 support upstream")
    for name, commit_id in commits.items():
        git(root, "tag", name, commit_id)
    git(root, "tag", "v0.5.9", commits["r0"])
    git(root, "tag", "v0.5.10", commits["r2"])
    return commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--filler", type=int, default=0, help="extra small files to add")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--hunt", action="store_true", help="the regression hunt's history")
    shape.add_argument(
        "--absorbing", action="store_true", help="a release that absorbs the methods in place"
    )
    args = parser.parse_args()
    if args.hunt:
        commits = build_hunt(args.directory)
    elif args.absorbing:
        commits = build_absorbing(args.directory)
    else:
        commits = build(args.directory, args.filler)
    print(json.dumps(commits))


if __name__ == "__main__":
    main()
