"""Code run at import that changes a method indirectly (through an alias, a
hook of a base class in another module, a function of the checkout handed the class) is
"cannot tell" from reading; real-shaped model code stays present (guard.truth.effects)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import sample_repo
from conftest import Sample, git, patchguard
from helpers import run_patchguard

from guard.git.repo import Repo
from guard.tree.assess import check_symbol
from guard.tree.worktree import Worktree
from guard.truth.effect_reader import summarize
from guard.truth.model_names import CANNOT_TELL

UTILS = {
    "python/sglang/srt/utils/__init__.py": "from sglang.srt.utils.common import *\n",
    "python/sglang/srt/utils/common.py": '''\
import functools
import os

import torch

_OVERRIDES = {}


def is_cuda():
    return torch.cuda.is_available() and torch.version.cuda is not None


def get_bool_env_var(name, default="false"):
    return os.getenv(name, default).lower() in ("true", "1")


def set_weight_attrs(weight, weight_attrs):
    """As sglang: attributes of a tensor, by computed names."""
    if weight_attrs is None:
        return
    for key, value in weight_attrs.items():
        setattr(weight, key, value)


def register_custom_op(mutates_args=()):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        wrapper.mutates_args = mutates_args
        _OVERRIDES[fn.__name__] = wrapper
        return wrapper

    return decorator
''',
    "python/sglang/srt/layers/__init__.py": "",
    "python/sglang/srt/layers/base.py": """\
from torch import nn

LAYERS = {}


class RegisteredLayer(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        LAYERS[cls.__name__] = cls

    def __init__(self):
        super().__init__()
        self.cache = {}
""",
}

MODEL = "python/sglang/srt/models/llama_like.py"
MODEL_TEXT = '''\
"""A model file shaped like sglang's: what its import runs leaves its classes alone."""

import logging
from typing import Iterable, Optional, Tuple

import torch
from torch import nn

from sglang.srt.layers.base import RegisteredLayer
from sglang.srt.utils import get_bool_env_var, is_cuda, register_custom_op, set_weight_attrs

logger = logging.getLogger(__name__)
_is_cuda = is_cuda()
_use_fused = get_bool_env_var("SGLANG_USE_FUSED")


@register_custom_op(mutates_args=["output"])
def fused_attention(q, k, v, output):
    output.copy_(q @ k.transpose(-1, -2) @ v)


@torch.compile(dynamic=True)
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaMLP(RegisteredLayer):
    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size)
        set_weight_attrs(self.gate_up_proj.weight, {"output_dim": 0})
        self.__dict__["_fused"] = _use_fused

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return nn.functional.silu(gate) * up


class LlamaForCausalLM(nn.Module):
    def __init__(self, config, quant_config: Optional[dict] = None) -> None:
        super().__init__()
        self.config = config
        self.mlp = LlamaMLP(config.hidden_size, config.intermediate_size)

    @torch.no_grad()
    def forward(self, input_ids, positions, forward_batch):
        forward_batch.out_cache_loc = positions
        return self.mlp(input_ids)

    def load_weights(self, weights: Iterable[Tuple[str, torch.Tensor]]):
        params = dict(self.named_parameters())
        for name, loaded in weights:
            setattr(params[name], "loaded", True)
            params[name].data.copy_(loaded)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @classmethod
    def from_config(cls, config):
        return cls(config)


EntryClass = [LlamaForCausalLM]
'''


def _methods(text: str) -> list[str]:
    return [
        f"{node.name}.{item.name}"
        for node in ast.parse(text).body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef)
    ]


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_real_shaped_model_code_stays_present(sample: Sample, clean_env: dict[str, str]) -> None:
    """Import-time calls into the checkout, a registering __init_subclass__ in another module,
    a wrapping decorator, setattr on tensors, `self.x = ...`: every method stays present."""
    _write(sample.root, {**UTILS, MODEL: MODEL_TEXT})
    git(sample.root, "add", "-A")
    git(sample.root, "commit", "-qm", "a llama-shaped model", env=clean_env)
    specs = [f"{MODEL}::{q}" for q in _methods(MODEL_TEXT)]
    kimi = (sample.root / sample_repo.KIMI).read_text()
    specs += [f"{sample_repo.KIMI}::{q}" for q in _methods(kimi)]
    run_patchguard(sample.root, clean_env, ("require", *specs), check=0)
    data = json.loads(run_patchguard(sample.root, clean_env, ("check", "--json"), check=0).stdout)
    assert {s["spec"]: s["state"] for s in data["symbols"]} == dict.fromkeys(specs, "present")


def test_a_hook_in_another_module_that_drops_the_method_is_not_green(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """The base class, imported from another module of the checkout, takes the method off
    every class derived from it: reading says cannot tell, naming the hook; the other
    methods of an unrelated file stay present."""
    sample.record_eagle3()
    method = sample_repo.METHODS[0]
    hooks = (
        "from torch import nn\n\n\nclass Stripped(nn.Module):\n"
        "    def __init_subclass__(cls, **kwargs):\n"
        "        super().__init_subclass__(**kwargs)\n"
        f"        cls.{method} = None\n"
    )
    _write(sample.root, {"python/sglang/srt/models/hooks.py": hooks})
    text = sample.kimi.read_text()
    text = text.replace(
        "from torch import nn\n", "from torch import nn\n\nfrom .hooks import Stripped\n"
    ).replace("(nn.Module):", "(nn.Module, Stripped):", 1)
    sample.kimi.write_text(text)
    result = run_patchguard(sample.root, clean_env, ("check", "--json"), check=1)
    states = {s["spec"]: s for s in json.loads(result.stdout)["symbols"]}
    dropped = states[f"{sample_repo.KIMI}::{sample_repo.CLASS}.{method}"]
    assert dropped["state"] == "cannot-tell"
    assert "hooks.py" in dropped["detail"] and method in dropped["detail"]
    others = [s for spec, s in states.items() if not spec.endswith(f".{method}")]
    assert others and all(s["state"] == "present" for s in others)


def test_an_alias_of_a_function_that_deletes_the_method_is_not_green(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """`g = f; g()` and `from sglang.srt.models.patching import patch; patch(C)`: each
    cannot tell."""
    sample.record_eagle3()
    method = sample_repo.METHODS[1]
    original = sample.kimi.read_text()
    alias = (
        f"\n\ndef _drop():\n    del {sample_repo.CLASS}.{method}\n\n\ncleanup = _drop\ncleanup()\n"
    )
    patcher = f"def patch(cls):\n    delattr(cls, {method!r})\n    return cls\n"
    through = f"\nfrom sglang.srt.models.patching import patch\n\npatch({sample_repo.CLASS})\n"
    _write(sample.root, {"python/sglang/srt/models/patching.py": patcher})
    for tail, named in ((alias, "_drop()"), (through, "patching.py")):
        sample.kimi.write_text(original + tail)
        result = run_patchguard(sample.root, clean_env, ("check",), check=1)
        assert "cannot tell from reading" in result.stdout + result.stderr
        assert named in result.stdout + result.stderr
    sample.kimi.write_text(original)
    run_patchguard(sample.root, clean_env, ("check",), check=0)


def _check_states(sample: Sample, clean_env: dict[str, str], code: int) -> dict[str, dict]:
    result = run_patchguard(sample.root, clean_env, ("check", "--json"), check=code)
    return {s["spec"]: s for s in json.loads(result.stdout)["symbols"]}


def test_a_function_defined_below_the_one_that_calls_it_is_followed(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """The import calls `prepare()`, which calls `strip()`, defined below it: Python runs
    `strip()` (bound by the time `prepare()` runs), which deletes the method."""
    sample.record_eagle3()
    method = sample_repo.METHODS[0]
    with sample.kimi.open("a") as kimi:
        kimi.write(
            f"\n\ndef prepare():\n    strip()\n\n\ndef strip():\n"
            f"    delattr({sample_repo.CLASS}, {method!r})\n\n\nprepare()\n"
        )
    dropped = _check_states(sample, clean_env, 1)[
        f"{sample_repo.KIMI}::{sample_repo.CLASS}.{method}"
    ]
    assert dropped["state"] == "cannot-tell"
    assert "strip()" in dropped["detail"] and method in dropped["detail"]


def test_a_stored_parse_builds_what_a_later_check_asks_of_it(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """A function's effects are read when a check first asks for them, and the parse is kept
    with what was read: the next check, whose model file calls another function of the same
    (unchanged, stored) module, reads that one too, and is not green where Python drops the
    method. A check with the cache emptied says the same."""
    sample.record_eagle3()
    method = sample_repo.METHODS[0]
    helpers = "python/sglang/srt/models/helpers.py"
    _write(
        sample.root,
        {
            helpers: f"def harmless(k):\n    return k\n\n\ndef strip(k):\n    delattr(k, {method!r})\n"
        },
    )
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.{method}"
    original = sample.kimi.read_text()
    sample.kimi.write_text(
        f"{original}\n\nfrom .helpers import harmless\n\nharmless({sample_repo.CLASS})\n"
    )
    assert _check_states(sample, clean_env, 0)[spec]["state"] == "present"
    sample.kimi.write_text(
        f"{original}\n\nfrom .helpers import strip\n\nstrip({sample_repo.CLASS})\n"
    )
    dropped = _check_states(sample, clean_env, 1)[spec]
    assert dropped["state"] == "cannot-tell" and "strip()" in dropped["detail"]
    shutil.rmtree(sample.root / ".git" / "patchguard-cache")
    assert _check_states(sample, clean_env, 1)[spec] == dropped


def test_a_hook_another_patch_writes_in_the_same_command_is_not_green(tmp_path: Path) -> None:
    """Two patches re-applied by one hook (apply, then check the same view of the files):
    `asub` adds a method to a subclass, `zbase` gives its base, in another file, an
    `__init_subclass__` that deletes it. `asub` is assessed before `zbase` writes base.py; the
    check after must read the base as written, as a fresh check and Python do."""
    root = tmp_path / "repo"
    base, sub = root / "pkg" / "base.py", root / "pkg" / "sub.py"
    base.parent.mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    base.write_text("class Base:\n    def a(self):\n        return 1\n")
    sub.write_text(
        "from pkg.base import Base\n\n\nclass Sub(Base):\n    def b(self):\n        return 2\n"
    )
    git(root.parent, "init", "-q", "-b", "main", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (root / "README").write_text("docs\n")
    git(root, "add", "README")
    git(root, "commit", "-qm", "docs")
    git(root, "checkout", "-q", "HEAD~1")
    with sub.open("a") as typed:
        typed.write("\n    def mine(self):\n        return 3\n")
    assert patchguard("-C", root, "record", "asub", "pkg/sub.py").exit_code == 0
    with base.open("a") as typed:
        typed.write(
            "\n    def zed(self):\n        return 9\n\n    def __init_subclass__(cls, **kw):\n"
            "        super().__init_subclass__(**kw)\n        del cls.mine\n"
        )
    assert patchguard("-C", root, "record", "zbase", "pkg/base.py").exit_code == 0
    assert patchguard("-C", root, "install").exit_code == 0
    assert patchguard("-C", root, "unapply").exit_code == 0
    moved = git(root, "checkout", "-q", "main", check=False)  # the hook applies, then checks
    assert "pkg/sub.py::Sub.mine: cannot tell from reading" in moved.stderr
    assert moved.returncode == 1  # the hook's status: the guard failed
    fresh = json.loads(patchguard("-C", root, "check", "--json").stdout)
    assert {s["spec"]: s["state"] for s in fresh["symbols"]}["pkg/sub.py::Sub.mine"] == (
        "cannot-tell"
    )
    python = subprocess.run(
        [sys.executable, "-c", "import pkg.sub; print(hasattr(pkg.sub.Sub, 'mine'))"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert python.stdout == "False\n"  # Python: gone, so no green may say it is there


def test_deleting_a_functions_code_or_defaults_is_not_green(tmp_path: Path) -> None:
    """`del f.__defaults__` (`__code__`, `__kwdefaults__`) at import changes the code that runs
    under the name as assigning it does: cannot tell, naming the line."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    git(tmp_path, "init", "-q")
    for attribute in ("__defaults__", "__code__", "__kwdefaults__"):
        deleted = (f"del f.{attribute}\n", f"del (f.{attribute},)\n", f"del [f.{attribute}]\n")
        for tail in (f"f.{attribute} = None\n", *deleted):
            (package / "mod.py").write_text(f"def f(a=1, *, b=2):\n    return a\n\n\n{tail}")
            git(tmp_path, "add", "-A")
            result = check_symbol(Worktree(Repo.discover(tmp_path)), "pkg/mod.py::f", None)
            assert not result.ok and result.state == CANNOT_TELL, (tail, result)
            assert f"line 5 replaces the {attribute} of f" in result.detail
    (package / "mod.py").write_text("def f(a=1):\n    return a\n\n\ndel (f.__defaults__,)\n")
    python = [sys.executable, "-c", "import pkg.mod; print(pkg.mod.f.__defaults__)"]
    ran = subprocess.run(python, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ran.stdout == "None\n"  # Python deletes each element of a tuple target


def test_why_a_name_may_change_is_worded_the_same_under_any_hash_seed() -> None:
    """Several functions the import runs each may change any name: the reason given is the
    same in every process, whatever order Python's hash seed gives their sets."""
    names = "abcdefgh"
    source = "".join(f"def {n}():\n    setattr(C, NAME, None)\n\n\n" for n in names)
    source += "class C:\n    pass\n\n\n" + "".join(f"{n}()\n" for n in names)
    script = (
        "import ast, sys\nfrom guard.truth.effect_reader import summarize\n"
        "effects = summarize(ast.parse(sys.stdin.read()))\n"
        "print(effects.at_import.changes, effects.value('a'))\n"
    )
    said = {
        subprocess.run(
            [sys.executable, "-c", script],
            input=source,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1")
    }
    assert len(said) == 1, said


def test_a_registry_filled_at_import_is_read_in_bounded_memory() -> None:
    """`R.add(mod.x, R.x)` a few times at import: what R may hold grows each pass of the
    reading (`mod.x.y.x...`); past a bound, reading stops and says it cannot settle (the
    module's names cannot tell), instead of exhausting memory."""
    names = ("a", "b", "c")
    source = "import datetime\n\n\nclass R:\n    @classmethod\n    def add(cls, kind, how):\n"
    source += "        cls.registry[kind] = how\n\n"
    source += "".join(f"    def {n}(self, data):\n        return data\n\n" for n in names)
    source += "".join(f"R.add(datetime.{n}, R.{n})\n" for n in names)
    script = (
        "import ast, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from guard.truth.effect_reader import summarize\n"
        "print(summarize(ast.parse(sys.stdin.read())).at_import.changes)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], input=source, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-300:]
    assert "import-time values that reading does not settle" in ran.stdout


def test_an_instance_a_class_body_keeps_runs_when_the_class_is_used() -> None:
    """`h = Helper()` in a class body: using the class (another module's `C()`) may run what
    Helper's methods do (a descriptor's `__get__`), as for a function the body keeps."""
    source = (
        "import pkg.other\n\n\nclass Helper:\n    def __get__(self, obj, owner):\n"
        "        del pkg.other.Target.m\n\n\nclass C:\n    h = Helper()\n"
    )
    used = summarize(ast.parse(source)).export("call", "C")
    assert used is not None and "deletes the attribute m" in used.changes.get("m", "")
