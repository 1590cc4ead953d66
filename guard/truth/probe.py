"""The runtime probe: ask Python itself whether each required symbol is there, where reading
cannot tell (a runtime condition, a decorator it cannot follow). It imports each guarded module
in ONE fresh process of the command's interpreter, its `__file__` held to this checkout's file.
It runs user code, so never in patchguard's own process nor on the hooks' path, and it writes
nothing (no bytecode either).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from guard.errors import ConfigError
from guard.truth.interpreters import cannot_run
from guard.truth.model_names import ABSENT, CANNOT_TELL, PRESENT

DEFAULT_TIMEOUT = 600.0  # seconds: an sglang model module imports torch
_POLL = 0.05  # seconds between looks at a probe that has not answered: has it ended?

# Run by the probed interpreter (any Python 3). It answers on the pipe `channel` alone, which
# the modules' own output (stdout, stderr, an atexit handler) never reaches: the nonce, one line
# per symbol ("1", "0" or "?", then the detail, unicode-escaped), the nonce.
# The builtins and functions it uses are taken before any module runs (default arguments: a
# module that replaces builtins.getattr or json changes nothing here), and nothing the modules
# can see (sys.argv, the environment) holds the nonce.
_PROBE = r"""
def probe(getattr=getattr, isinstance=isinstance, callable=callable, hasattr=hasattr,
          type=type, repr=repr, str=str, object=object, BaseException=BaseException):
    import importlib, json, os, sys, unicodedata
    request = json.loads(sys.stdin.read())
    nonce, channel, asked = request["nonce"], request["channel"], request["asked"]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # no module reads the request (the nonce) again
    import_module, realpath, normalize = importlib.import_module, os.path.realpath, unicodedata.normalize
    write, close, path = os.write, os.close, sys.path
    modules, lines, missing = {}, [], object()
    for module, root, expected, qualname, method in asked:
        if root not in path:
            path.append(root)  # last: an installed copy wins, and the file check sees it
        if module not in modules:
            try:
                modules[module] = import_module(module)
            except BaseException as error:
                try:
                    said = str(error)
                except BaseException:  # an exception whose __str__ raises too
                    said = "(its message cannot be shown)"
                modules[module] = "importing %s failed: %s: %s" % (module, type(error).__name__, said)
        obj = modules[module]
        if isinstance(obj, str):
            lines.append("? cannot tell: " + obj)
            continue
        try:
            where = realpath(getattr(obj, "__file__", None) or "")
            if where != realpath(expected):
                lines.append("0 %s is imported from %s, not from this checkout" % (module, where))
                continue
            for part in qualname.split("."):
                part = normalize("NFKC", part)
                if isinstance(obj, type) and part.startswith("__") and not part.endswith("__"):
                    part = "_" + obj.__name__.lstrip("_") + part
                obj = getattr(obj, part, missing)
                if obj is missing:
                    break
            if obj is missing:
                lines.append("0 Python finds no %s in %s" % (qualname, module))
            elif method and (obj is None or not (callable(obj) or hasattr(type(obj), "__get__"))):
                try:
                    shown = repr(obj)[:200]
                except BaseException:
                    shown = "a %s" % type(obj).__name__
                lines.append("0 %s is %s at runtime, not a function" % (qualname, shown))
            else:
                lines.append("1 present at runtime")
        except BaseException as error:
            lines.append("? cannot tell: looking up %s raised %s" % (qualname, type(error).__name__))
    escaped = [line.encode("unicode_escape").decode("ascii") for line in lines]
    answer = "\n".join([nonce] + escaped + [nonce, ""]).encode("ascii")
    while answer:
        answer = answer[write(channel, answer):]
    close(channel)
probe()
"""
_STATES = {"1": PRESENT, "0": ABSENT, "?": CANNOT_TELL}


def ask(
    python: str, asked: list[list[object]], cwd: Path, timeout: float, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    """Each symbol's (state, detail). The probe's session is killed once it has answered, ended
    or timed out (a server a module starts does not linger); stdout is discarded and stderr is a
    file: a grandchild that keeps them open never makes this wait."""
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    request = json.dumps({"nonce": nonce, "channel": write_end, "asked": asked}).encode()
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
        stdin.write(request)
        stdin.seek(0)
        try:
            process = subprocess.Popen(
                [python, "-B", "-c", _PROBE],
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=cwd,
                env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                pass_fds=(write_end,),
                start_new_session=True,
            )
        except OSError as error:
            os.close(read_end)
            raise cannot_run(python, error) from None
        finally:
            os.close(write_end)
        try:
            data = _read_answer(process, read_end, nonce, time.monotonic() + timeout)
        finally:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # the probe's group: every child it left
            process.wait()
        answers = _parse_answer(data, nonce, len(asked))
        if answers is not None:
            return answers
        if data is None:
            modules = sorted({str(a[0]) for a in asked})
            raise ConfigError(
                f"the runtime probe did not finish in {timeout:g} s importing "
                f"{', '.join(modules)} with {python}; raise --runtime-timeout, or check without "
                "--runtime"
            )
        stderr.seek(0)
        last = (stderr.read().decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
    raise ConfigError(
        f"the runtime probe with {python} ended without an answer (exit {process.returncode}): "
        f"{last}"
    )


def _read_answer(
    process: subprocess.Popen[bytes], channel: int, nonce: str, deadline: float
) -> bytes | None:
    """What the probe wrote on its channel: up to its closing nonce, or all it wrote before it
    ended; None when the deadline passed first. Never waits for the end of the pipe, which a
    process the probe forked may hold open."""
    data, closing = b"", f"\n{nonce}\n".encode()
    while not data.endswith(closing):
        ended = process.poll() is not None
        wait = 0.0 if ended else min(_POLL, deadline - time.monotonic())
        if wait < 0:
            return None
        ready, _, _ = select.select([channel], [], [], wait)
        chunk = os.read(channel, 1 << 16) if ready else b""
        data += chunk
        if ended and not chunk:
            break
    return data


def _parse_answer(data: bytes | None, nonce: str, count: int) -> list[tuple[str, str]] | None:
    """The probe's lines, or None for anything but its whole answer (a module that wrote on
    the channel, or a probe cut short, is no answer)."""
    try:
        lines = (data or b"").decode("ascii").split("\n")
        if len(lines) != count + 3 or lines[0] != nonce or lines[-2:] != [nonce, ""]:
            return None
        answers = [line.partition(" ") for line in lines[1:-2]]
        return [
            (_STATES[state], detail.encode().decode("unicode_escape"))
            for state, _, detail in answers
        ]
    except (UnicodeError, KeyError):
        return None
