"""Small modules that each bind (or do not bind) `C.m` in one of many ways, for the
differential test against Python itself (tests/test_binding_forms.py).

Each form is a package: `mod.py` (and sometimes sibling modules), with no third-party
imports, so the oracle can import it in a plain interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Form:
    name: str
    mod: str
    qualname: str = "C.m"
    others: dict[str, str] = field(default_factory=dict)


M = "    def m(self):\n        return 1\n"


def _indent(text: str, by: int = 4) -> str:
    return "".join(" " * by + line if line.strip() else line for line in text.splitlines(True))


def _in_class(body: str, head: str = "", after: str = "", cls: str = "class C:") -> str:
    return f"{head}{cls}\n{body}{after}"


def _wrapped(name: str, opening: str, closing: str = "", head: str = "") -> Form:
    """`def m` inside a compound statement at class level."""
    body = f"    {opening}\n{_indent(M)}" + (f"    {closing}\n" if closing else "")
    return Form(name, _in_class(body, head))


def forms() -> list[Form]:
    found: list[Form] = [Form("plain", _in_class(M))]
    add = found.append

    # try / except / else / finally
    for name, pre in [
        ("try-import-missing", "import missing_module_xyz"),
        ("try-import-stdlib", "import json"),
        ("try-from-stdlib", "from json import dumps"),
        ("try-from-missing-name", "from json import no_such_name"),
        ("try-call-fails", "int('x')"),
        ("try-call-works", "int('1')"),
        ("try-pass", "pass"),
        ("try-zero-division", "1 / 0"),
        ("try-raise", "raise ValueError"),
    ]:
        body = f"    try:\n        {pre}\n{_indent(M)}    except Exception:\n        pass\n"
        add(Form(name, _in_class(body)))
    add(
        Form(
            "try-def-before-failing",
            _in_class(
                f"    try:\n{_indent(M)}        import missing_module_xyz\n    except ImportError:\n        pass\n"
            ),
        )
    )
    add(
        Form(
            "only-in-except-not-run",
            _in_class(f"    try:\n        pass\n    except Exception:\n{_indent(M)}"),
        )
    )
    add(
        Form(
            "only-in-except-run",
            _in_class(
                f"    try:\n        import missing_module_xyz\n    except ImportError:\n{_indent(M)}"
            ),
        )
    )
    add(
        Form(
            "only-in-except-raise",
            _in_class(f"    try:\n        raise KeyError\n    except KeyError:\n{_indent(M)}"),
        )
    )
    add(
        Form(
            "else-after-failing",
            _in_class(
                f"    try:\n        import missing_module_xyz\n    except ImportError:\n        pass\n    else:\n{_indent(M)}"
            ),
        )
    )
    add(
        Form(
            "else-after-pass",
            _in_class(
                f"    try:\n        pass\n    except Exception:\n        pass\n    else:\n{_indent(M)}"
            ),
        )
    )
    add(
        Form(
            "finally",
            _in_class(
                f"    try:\n        import missing_module_xyz\n    except ImportError:\n        pass\n    finally:\n{_indent(M)}"
            ),
        )
    )
    add(
        Form(
            "both-branches",
            _in_class(
                f"    try:\n        import missing_module_xyz\n{_indent(M)}    except ImportError:\n{_indent(M)}"
            ),
        )
    )
    add(
        Form(
            "suppress-raise",
            _in_class(
                f"    with contextlib.suppress(Exception):\n        raise ValueError\n{_indent(M)}",
                head="import contextlib\n",
            ),
        )
    )
    add(
        Form(
            "suppress-no-raise",
            _in_class(
                f"    with contextlib.suppress(Exception):\n{_indent(M)}",
                head="import contextlib\n",
            ),
        )
    )
    add(
        Form(
            "suppress-import-missing",
            _in_class(
                f"    with contextlib.suppress(ImportError):\n        import missing_module_xyz\n{_indent(M)}",
                head="import contextlib\n",
            ),
        )
    )
    add(
        Form(
            "suppress-import-stdlib",
            _in_class(
                f"    with contextlib.suppress(ImportError):\n        import json\n{_indent(M)}",
                head="import contextlib\n",
            ),
        )
    )
    add(
        Form(
            "custom-cm-swallows",
            _in_class(
                f"    with Swallow():\n        int('x')\n{_indent(M)}",
                head="class Swallow:\n    def __enter__(self):\n        return self\n\n    def __exit__(self, *exc):\n        return True\n\n\n",
            ),
        )
    )
    add(Form("open-cm", _in_class(f"    with open(__file__) as handle:\n{_indent(M)}")))
    add(
        Form(
            "both-branches-handler-deletes",
            _in_class(
                f"    try:\n        import missing_module_xyz\n{_indent(M)}    except ImportError:\n{_indent(M)}        del m\n"
            ),
        )
    )
    add(
        Form(
            "both-branches-two-handlers",
            _in_class(
                f"    try:\n        import missing_module_xyz\n{_indent(M)}    except KeyError:\n{_indent(M)}    except ImportError:\n        pass\n"
            ),
        )
    )
    add(
        Form(
            "if-else-nested-del",
            _in_class(
                f"    if _flag:\n{_indent(M)}        if _flag:\n            del m\n    else:\n{_indent(M)}",
                "_flag = bool(len([1]))\n",
            ),
        )
    )

    # decorators
    decorators = {
        "deco-none": ("def d(f):\n    return None\n", "@d"),
        "deco-other": ("def d(f):\n    return 42\n", "@d"),
        "deco-identity": ("def d(f):\n    return f\n", "@d"),
        "deco-wrapper": (
            "def d(f):\n    def inner(*a):\n        return f(*a)\n    return inner\n",
            "@d",
        ),
        "deco-lambda-none": ("d = lambda f: None\n", "@d"),
        "deco-property": ("", "@property"),
        "deco-staticmethod": ("", "@staticmethod"),
        "deco-classmethod": ("", "@classmethod"),
        "deco-lru-cache": ("import functools\n", "@functools.lru_cache"),
        "deco-lru-cache-call": ("import functools\n", "@functools.lru_cache(maxsize=None)"),
        "deco-cache-from": ("from functools import cache\n", "@cache"),
        "deco-abstract": ("import abc\n", "@abc.abstractmethod"),
        "deco-shadowed-property": ("def property(f):\n    return None\n", "@property"),
        "deco-unknown-import": ("from json import dumps as d\n", "@d"),
        "deco-undefined": ("", "@undefined_decorator"),
    }
    for name, (head, deco) in decorators.items():
        add(Form(name, _in_class(f"    {deco}\n{M}", head)))
    for name, head, deco in [
        ("class-deco-none", "def d(c):\n    return None\n", "@d"),
        ("class-deco-other", "def d(c):\n    return object\n", "@d"),
        ("class-deco-identity", "def d(c):\n    return c\n", "@d"),
        ("class-deco-dataclass", "import dataclasses\n", "@dataclasses.dataclass"),
        ("class-deco-total-ordering", "import functools\n", "@functools.total_ordering"),
    ]:
        add(Form(name, f"{head}{deco}\nclass C:\n{M}"))

    # metaclasses
    add(
        Form(
            "metaclass-drops",
            (
                "class Meta(type):\n    def __new__(mcs, name, bases, ns):\n        ns.pop('m', None)\n"
                "        return super().__new__(mcs, name, bases, ns)\n\n\n"
                f"class C(metaclass=Meta):\n{M}"
            ),
        )
    )
    add(
        Form(
            "metaclass-inherited-drops",
            (
                "class Meta(type):\n    def __new__(mcs, name, bases, ns):\n        ns.pop('m', None)\n"
                "        return super().__new__(mcs, name, bases, ns)\n\n\n"
                f"class B(metaclass=Meta):\n    pass\n\n\nclass C(B):\n{M}"
            ),
        )
    )
    add(
        Form(
            "init-subclass-deletes",
            (f"class B:\n    def __init_subclass__(cls):\n        del cls.m\n\n\nclass C(B):\n{M}"),
        )
    )
    add(
        Form(
            "init-subclass-own",
            (f"class C:\n    def __init_subclass__(cls):\n        del cls.m\n\n{M}"),
        )
    )
    add(Form("metaclass-abc", f"import abc\n\n\nclass C(metaclass=abc.ABCMeta):\n{M}"))
    add(Form("metaclass-type", f"class C(metaclass=type):\n{M}"))

    # deleting and rebinding after the class
    after = {
        "del-attr-after": "del C.m\n",
        "delattr-after": "delattr(C, 'm')\n",
        "delattr-computed": "name = 'm'\ndelattr(C, name)\n",
        "setattr-none-after": "setattr(C, 'm', None)\n",
        "assign-none-after": "C.m = None\n",
        "assign-value-after": "C.m = 5\n",
        "registered-after": "C.registered = True\n",
        "count-after": "C.count = 0\nC.count += 1\n",
        "registry-after": "REGISTRY = {}\nREGISTRY[C] = 1\n",
        "registry-subscript-m": "REGISTRY = {}\nREGISTRY['m'] = None\n",
        "class-rebound-none": "C = None\n",
        "class-rebound-other": "class C:\n    pass\n",
        "class-deleted": "del C\n",
        "module-raises-systemexit": "raise SystemExit\n",
        "module-raises": "raise ImportError('no')\n",
        "module-assert-false": "assert False\n",
        "module-assert-true": "assert True\n",
        "module-sys-exit": "import sys\nsys.exit(1)\n",
        "module-main-exit": "import sys\nif __name__ == '__main__':\n    sys.exit(0)\n",
        "module-not-main-raise": "if __name__ != '__main__':\n    raise ImportError\n",
        "module-name-startswith": "if __name__.startswith('form'):\n    del C.m\n",
        "module-star-stdlib": "from json import *\n",
        "module-star-stdlib-rebinds": "from string import *\nC = Template\n",
        "module-exit-maybe": "import os\nif os.environ.get('NO_SUCH_VAR_XYZ'):\n    raise SystemExit\n",
        "module-raise-in-suppress": "import contextlib\nwith contextlib.suppress(Exception):\n    raise ValueError\n",
        "exec-after": "exec('del C.m')\n",
    }
    for name, tail in after.items():
        add(Form(name, _in_class(M, after="\n\n" + tail)))
    # The package's __init__.py runs before the module and may undo it or fail.
    inits = {
        "init-raises": "raise ImportError('not on this platform')\n",
        "init-rebinds-class": "from . import mod\nmod.C = None\n",
        "init-deletes-method": "from . import mod\ndel mod.C.m\n",
        "init-harmless": '"""A package."""\nVERSION = "1.0"\n',
    }
    for name, init in inits.items():
        add(Form(name, _in_class(M), others={"__init__.py": init}))
    # A relative import of a module the checkout lacks fails the import of the module.
    add(Form("relative-import-missing", _in_class(M, head="from .nothere import X\n\n\n")))
    add(
        Form(
            "relative-import-present",
            _in_class(M, head="from .helpers import X\n\n\n"),
            others={"helpers.py": "X = 1\n"},
        )
    )
    # A package of the module's name beside it is what `import` loads.
    add(Form("package-shadows-module", _in_class(M), others={"mod/__init__.py": "X = 1\n"}))
    add(Form("del-in-class-tuple", _in_class(M + "    del (m,)\n")))
    add(Form("del-in-class-list", _in_class(M + "    del [m]\n")))
    add(Form("del-in-class", _in_class(M + "    del m\n")))
    add(Form("del-in-for", _in_class(M + "    for _ in range(1):\n        del m\n")))
    add(Form("del-in-for-empty", _in_class(M + "    for _ in ():\n        del m\n")))
    add(Form("del-in-for-unknown", _in_class(M + "    for _ in list():\n        del m\n")))
    add(Form("del-in-match", _in_class(M + "    match 1:\n        case _:\n            del m\n")))
    add(
        Form(
            "del-in-match-literal",
            _in_class(M + "    match 1:\n        case 2:\n            del m\n"),
        )
    )
    add(Form("value-after-def", _in_class(M + "    m = None\n")))
    add(Form("number-after-def", _in_class(M + "    m = 3\n")))
    add(Form("doc-in-body", _in_class(M + "    m.__doc__ = 'the method'\n")))
    add(Form("attr-in-body", _in_class(M + "    m.flag = True\n")))
    add(Form("global-before-def", _in_class("    global m\n" + M)))
    add(Form("slots-conflict", _in_class("    __slots__ = ('m',)\n" + M)))
    add(Form("slots-other", _in_class("    __slots__ = ('x',)\n" + M)))
    add(
        Form(
            "star-import-rebinds",
            _in_class(M, after="\n\nfrom .other import *\n"),
            others={"other.py": "class C:\n    pass\n"},
        )
    )
    add(
        Form(
            "star-import-harmless",
            _in_class(M, after="\n\nfrom .other import *\n"),
            others={"other.py": "X = 1\n"},
        )
    )
    add(
        Form(
            "import-rebinds",
            _in_class(M, after="\n\nfrom .other import C\n"),
            others={"other.py": "class C:\n    pass\n"},
        )
    )

    # conditions
    conditions = {
        "if-version-old": ("import sys\n", "sys.version_info < (3, 0)"),
        "if-version-new": ("import sys\n", "sys.version_info >= (3, 8)"),
        "if-version-major": ("import sys\n", "sys.version_info.major == 2"),
        "if-version-index": ("import sys\n", "sys.version_info[0] >= 3"),
        "if-version-slice": ("import sys\n", "sys.version_info[:2] >= (3, 8)"),
        "if-version-bad-slice": ("import sys\n", 'sys.version_info[:"2"] >= (3, 8)'),
        "if-platform-win": ("import sys\n", 'sys.platform == "win32"'),
        "if-platform-linux": ("import sys\n", 'sys.platform.startswith("linux")'),
        "if-platform-not-win": ("import sys\n", 'sys.platform != "win32"'),
        "if-os-name": ("import os\n", 'os.name == "nt"'),
        "if-empty-tuple": ("", "()"),
        "if-one-tuple": ("", "(1,)"),
        "if-literal-compare": ("", "1 == 2"),
        "if-literal-true-compare": ("", "2 > 1"),
        "if-false": ("", "False"),
        "if-zero": ("", "0"),
        "if-string": ("", "'x'"),
        "if-none": ("", "None"),
        "if-not-false": ("", "not False"),
        "if-and": ("", "1 and 0"),
        "if-or": ("", "0 or 1"),
        "if-tc-typing": ("from typing import TYPE_CHECKING\n", "TYPE_CHECKING"),
        "if-tc-alias": ("from typing import TYPE_CHECKING as TC\n", "TC"),
        "if-tc-module": ("import typing\n", "typing.TYPE_CHECKING"),
        "if-tc-local-false": ("TYPE_CHECKING = False\n", "TYPE_CHECKING"),
        "if-tc-local-true": ("TYPE_CHECKING = True\n", "TYPE_CHECKING"),
        "if-not-tc": ("from typing import TYPE_CHECKING\n", "not TYPE_CHECKING"),
        "if-runtime-env": ("import os\n", "os.environ.get('NO_SUCH_VAR_XYZ')"),
        "if-runtime-name": ("_is_npu = bool(len([]))\n", "_is_npu"),
        "if-local-literal": ("FLAG = 0\n", "FLAG"),
        "if-local-literal-true": ("FLAG = 1\n", "FLAG"),
        "if-version-and-platform": (
            "import sys\n",
            'sys.version_info >= (3, 0) and sys.platform != "x"',
        ),
    }
    for name, (head, test) in conditions.items():
        add(Form(name, _in_class(f"    if {test}:\n{_indent(M)}", head)))
    add(
        Form(
            "if-else-both",
            _in_class(
                f"    if _flag:\n{_indent(M)}    else:\n{_indent(M)}", "_flag = bool(len([]))\n"
            ),
        )
    )
    add(
        Form(
            "if-elif-version",
            _in_class(
                f"    if sys.version_info < (3, 0):\n        pass\n    elif sys.platform == 'win32':\n        pass\n    else:\n{_indent(M)}",
                "import sys\n",
            ),
        )
    )
    add(
        Form(
            "class-under-runtime-if",
            "import os\nif os.environ.get('NO_SUCH_VAR_XYZ'):\n" + _indent(f"class C:\n{M}"),
        )
    )
    add(
        Form(
            "class-under-version-if",
            "import sys\nif sys.version_info >= (3, 0):\n" + _indent(f"class C:\n{M}"),
        )
    )
    add(
        Form(
            "class-twice-runtime",
            f"import os\nclass C:\n{M}\n\nif os.environ.get('NO_SUCH_VAR_XYZ'):\n"
            + _indent("class C:\n    pass\n"),
        )
    )

    # bases
    add(Form("base-same-file", f"class B:\n{M}\n\nclass C(B):\n    pass\n"))
    add(
        Form(
            "base-same-file-two",
            f"class A:\n    pass\n\nclass B(A):\n{M}\n\nclass C(B):\n    pass\n",
        )
    )
    add(
        Form(
            "base-other-module",
            "from .base import B\n\n\nclass C(B):\n    pass\n",
            others={"base.py": f"class B:\n{M}"},
        )
    )
    uses_m = "from .base import B\n\n\nclass C(B):\n    def other(self):\n        return self.m()\n"
    add(Form("base-other-module-used", uses_m, others={"base.py": f"class B:\n{M}"}))
    add(
        Form(
            "base-other-module-none",
            uses_m,
            others={
                "base.py": "class B:\n    m = None\n    def m2(self):\n        return self.m\n\n    def m(self):\n        return 1\n\n    m = None\n"
            },
        )
    )
    add(
        Form(
            "base-other-package-init",
            uses_m.replace(".base", "."),
            others={"__init__.py": f"class B:\n{M}"},
        )
    )
    add(
        Form(
            "base-other-module-chain",
            uses_m,
            others={
                "base.py": "from .root import A\n\n\nclass B(A):\n    pass\n",
                "root.py": f"class A:\n{M}",
            },
        )
    )
    add(
        Form(
            "base-other-module-conditional",
            uses_m,
            others={
                "base.py": f"import os\n\n\nclass B:\n    if os.environ.get('NO_SUCH_VAR_XYZ'):\n{_indent(M)}"
            },
        )
    )
    add(Form("base-missing-method", "class B:\n    pass\n\nclass C(B):\n    pass\n"))
    add(Form("base-overrides-none", f"class B:\n{M}\n\nclass C(B):\n    m = None\n"))
    add(Form("base-deleted-in-subclass", f"class B:\n{M}\n\nclass C(B):\n{M}    del m\n"))
    add(Form("object-method", "class C:\n    pass\n", "C.__init__"))

    # binding forms
    add(
        Form(
            "setattr-after",
            _in_class(
                "    pass\n", after="\n\ndef f(self):\n    return 1\n\n\nsetattr(C, 'm', f)\n"
            ),
        )
    )
    add(
        Form(
            "assign-after",
            _in_class("    pass\n", after="\n\ndef f(self):\n    return 1\n\n\nC.m = f\n"),
        )
    )
    add(Form("assign-lambda-after", _in_class("    pass\n", after="\n\nC.m = lambda self: 1\n")))
    add(Form("lambda-in-body", _in_class("    m = lambda self: 1\n")))
    add(Form("alias-in-body", _in_class("    def f(self):\n        return 1\n\n    m = f\n")))
    add(Form("staticmethod-call", _in_class("    m = staticmethod(lambda: 1)\n")))
    add(Form("for-range-1", _in_class(f"    for _ in range(1):\n{_indent(M)}")))
    add(Form("for-range-0", _in_class(f"    for _ in range(0):\n{_indent(M)}")))
    add(Form("for-tuple", _in_class(f"    for _ in (1, 2):\n{_indent(M)}")))
    add(Form("for-empty-list", _in_class(f"    for _ in []:\n{_indent(M)}")))
    add(Form("for-unknown", _in_class(f"    for _ in list():\n{_indent(M)}")))
    add(Form("for-break-first", _in_class(f"    for _ in (1,):\n        break\n{_indent(M)}")))
    add(Form("for-else", _in_class(f"    for _ in ():\n        pass\n    else:\n{_indent(M)}")))
    add(
        Form(
            "for-break-else",
            _in_class(f"    for _ in (1,):\n        break\n    else:\n{_indent(M)}"),
        )
    )
    add(Form("while-true-break", _in_class(f"    while True:\n{_indent(M)}        break\n")))
    add(Form("while-false", _in_class(f"    while False:\n{_indent(M)}")))
    add(
        Form(
            "while-false-else",
            _in_class(f"    while False:\n        pass\n    else:\n{_indent(M)}"),
        )
    )
    add(Form("match-wildcard", _in_class(f"    match 1:\n        case _:\n{_indent(M, 12)}")))
    add(Form("match-capture", _in_class(f"    match 1:\n        case x:\n{_indent(M, 12)}")))
    add(Form("match-literal", _in_class(f"    match 1:\n        case 2:\n{_indent(M, 12)}")))
    add(Form("match-capture-m", _in_class("    match 1:\n        case m:\n            pass\n")))
    add(Form("walrus-lambda", _in_class("    (m := lambda self: 1)\n")))
    add(Form("walrus-in-if", _in_class("    if (m := lambda self: 1):\n        pass\n")))
    add(Form("walrus-none", _in_class(M + "    (m := None)\n")))
    add(
        Form(
            "with-nullcontext",
            _in_class(f"    with contextlib.nullcontext():\n{_indent(M)}", "import contextlib\n"),
        )
    )
    add(Form("async-def", _in_class("    async def m(self):\n        return 1\n")))
    add(Form("nested-class-m", _in_class("    class m:\n        pass\n")))
    add(Form("import-in-class", _in_class("    from json import dumps as m\n")))
    add(Form("mangled-spec", _in_class("    def __m(self):\n        return 1\n"), "C.__m"))
    add(
        Form("mangled-spec-written", _in_class("    def __m(self):\n        return 1\n"), "C._C__m")
    )
    add(
        Form("dunder-not-mangled", _in_class("    def __m__(self):\n        return 1\n"), "C.__m__")
    )
    add(Form("nfkc-source", _in_class("    def \uff4d(self):\n        return 1\n")))
    add(Form("nfkc-spec", _in_class(M), "C.\uff4d"))
    # Other text beyond ASCII: the name is looked for in the text as Python normalises it
    add(Form("non-ascii-comment", _in_class("    # caf\u00e9\n" + M)))
    add(
        Form("non-ascii-other-name", _in_class("    def n(self):  # caf\u00e9\n        return 1\n"))
    )
    add(Form("nfkc-composed", _in_class("    def m\u0301(self):\n        return 1\n")))
    add(Form("nfkc-ligature", _in_class("    def \ufb01(self):\n        return 1\n"), "C.fi"))
    add(Form("utf8-cookie", "# -*- coding: utf-8 -*-\n# caf\u00e9\n" + _in_class(M)))
    add(Form("nested-inner", "class C:\n    class Inner:\n" + _indent(M), "C.Inner.m"))
    add(Form("nested-inner-missing", "class C:\n    class Inner:\n        pass\n" + M, "C.Inner.m"))
    add(Form("module-function", "def m():\n    return 1\n", "m"))
    add(Form("module-function-deleted", "def m():\n    return 1\n\n\ndel m\n", "m"))
    add(
        Form(
            "module-function-global-del",
            "def m():\n    return 1\n\n\nclass C:\n    global m\n    del m\n",
            "m",
        )
    )
    add(Form("module-tuple-del", "def m():\n    return 1\n\n\ndel (m,)\n", "m"))
    add(Form("namedtuple-field", "import typing\n\n\nclass C(typing.NamedTuple):\n    m: int\n"))
    add(Form("slots-entry", "class C:\n    __slots__ = ('m',)\n"))
    dc = "import dataclasses\n\n\n@dataclasses.dataclass\nclass C:\n"
    add(
        Form(
            "dataclass-field-factory",
            dc + "    m: list = dataclasses.field(default_factory=list)\n",
        )
    )
    add(Form("dataclass-field-default", dc + "    m: int = dataclasses.field(default=3)\n"))
    add(Form("dataclass-plain-default", dc + "    m: int = 3\n"))
    add(Form("dataclass-no-default", dc + "    m: int\n"))
    add(
        Form(
            "from-dataclasses-field",
            "from dataclasses import dataclass, field\n\n\n@dataclass\nclass C:\n    m: list = field(default_factory=list)\n",
        )
    )
    add(Form("class-attr-none", "class C:\n    m = None\n"))
    add(Form("class-attr-annotated-only", "class C:\n    m: int\n"))
    add(Form("class-attr-deleted-later", "class C:\n    m = 1\n\n\ndel C.m\n"))

    # deep nesting
    add(Form("deep-not-300", _in_class(f"    if {'not ' * 300}False:\n{_indent(M)}")))
    add(Form("deep-not-301", _in_class(f"    if {'not ' * 301}False:\n{_indent(M)}")))
    add(Form("deep-not-1200", _in_class(f"    if {'not ' * 1200}False:\n{_indent(M)}")))
    add(Form("deep-not-3000", _in_class(f"    if {'not ' * 3000}False:\n{_indent(M)}")))
    add(Form("deep-not-3000-elsewhere", _in_class(M, after=f"\n\nX = {'not ' * 3000}False\n")))
    add(Form("deep-parens", _in_class(f"    if {'(' * 150}1{')' * 150}:\n{_indent(M)}")))
    add(
        Form(
            "deep-nested-ifs",
            "class C:\n"
            + "".join("    " * (depth + 1) + "if True:\n" for depth in range(90))
            + _indent(M, 4 * 91 - 4),
        )
    )
    # Parsed by ast, refused by the compiler: Python cannot import the module at all.
    compile_refuses = {
        "duplicate-argument": "def f(a, a):\n    pass\n",
        "return-at-module-level": "return\n",
        "nonlocal-at-module-level": "nonlocal x\n",
        "yield-at-module-level": "yield 1\n",
        "star-import-in-function": "def f():\n    from os import *\n",
        "future-braces": "from __future__ import braces\n",
    }
    for name, tail in compile_refuses.items():
        add(Form(name, _in_class(M, after="\n\n" + tail)))
    # Reflection: the namespace reached through globals(), locals(), vars(), sys.modules,
    # type.__setattr__, or a function the module calls while it runs.
    in_body = {
        "locals-pop-in-class": "    locals().pop('m')\n",
        "del-vars-in-class": "    del vars()['m']\n",
    }
    for name, line in in_body.items():
        add(Form(name, _in_class(M + line)))
    after = {
        "globals-item-none": "globals()['C'] = None\n",
        "globals-pop": "globals().pop('C')\n",
        "sys-modules-setattr": "import sys\nsetattr(sys.modules[__name__], 'C', None)\n",
        "sys-modules-attribute": "import sys\nsys.modules[__name__].C = 0\n",
        "type-delattr": "type.__delattr__(C, 'm')\n",
        "type-setattr-none": "type.__setattr__(C, 'm', None)\n",
        "cleanup-function-called": "def _cleanup():\n    del C.m\n\n\n_cleanup()\n",
        "map-lambda-delattr": "list(map(lambda n: delattr(C, n), ['m']))\n",
        "vars-update-kept": "vars(C)\n",
    }
    for name, tail in after.items():
        add(Form(name, _in_class(M, after="\n\n" + tail)))
    # A package of the module's name beside it is what `import` loads.
    add(Form("package-shadows-module", _in_class(M), others={"mod/__init__.py": "X = 1\n"}))
    found += _indirect_forms()
    found += _rebinding_forms()
    return found


_MRO = (  # an object base whose __mro_entries__ puts B, whose hook nulls the method, in place
    "class B:\n    def __init_subclass__(cls, **kw):\n        cls.m = None\n\n\n"
    "class E:\n    def __mro_entries__(self, bases):\n        return (B,)\n\n\n"
)
_OTHER_NULLS = "from .mod import C\n\nC.m = None\n"  # another module rebinds at its own top


def _rebinding_forms() -> list[Form]:
    """Rebinding that reading must never read as nothing (the module reached
    as itself, a function bound after the class or in place of the defined one, a swapped
    `__code__`, a module it imports that rebinds, an object base), and look-alikes."""
    after = {
        "self-import-rebinds-class": "from . import mod as _me\n\n_me.C = None\n",
        "self-import-nulls-method": "from . import mod as _me\n\n_me.C.m = None\n",
        "self-import-class-del": "from .mod import C as K\n\ndel K.m\n",
        "self-import-class-setattr": "from .mod import C as K\n\nsetattr(K, 'm', None)\n",
        "import-module-of-name": "import importlib\n\nimportlib.import_module(__name__).C = None\n",
        "sys-modules-alias": "import sys\n\n_me = sys.modules[__name__]\n_me.C = None\n",
        "function-bound-after": "def f(self):\n    return 2\n\n\nC.m = f\n",
        "setattr-function-after": "def f(self):\n    return 2\n\n\nsetattr(C, 'm', f)\n",
        "code-swapped": "def f(self):\n    return 2\n\n\nC.m.__code__ = f.__code__\n",
        "self-import-harmless": "from . import mod as _me\n\nassert _me.C.m\n",
    }
    found = [Form(name, _in_class(M, after="\n\n" + tail)) for name, tail in after.items()]
    found.append(
        Form(
            "body-reassigned-alias",
            _in_class(M + "\n    def g(self):\n        return 2\n\n    m = g\n"),
        )
    )
    found.append(Form("body-reassigned-lambda", _in_class(M + "\n    m = lambda self: 2\n")))
    found.append(Form("body-lambda-defines", _in_class("    m = lambda self: 2\n")))
    imported = "from . import other  # noqa: E402\n"
    found.append(
        Form(
            "imported-module-rebinds",
            _in_class(M, after="\n\n" + imported),
            others={"other.py": _OTHER_NULLS},
        )
    )
    found.append(
        Form(
            "imported-module-deletes",
            _in_class(M, after="\n\n" + imported),
            others={"other.py": "from . import mod\n\ndel mod.C.m\n"},
        )
    )
    found.append(
        Form(
            "imported-module-harmless",
            _in_class(M, after="\n\n" + imported),
            others={"other.py": "from .mod import C\n\nREGISTRY = {'m': C.m}\n"},
        )
    )
    found.append(Form("mro-entries-hook", _in_class(M, head=_MRO, cls="class C(E()):")))
    found.append(
        Form(
            "mro-entries-through-name",
            _in_class(M, head=_MRO + "base = E()\n\n\n", cls="class C(base):"),
        )
    )
    found.append(
        Form(
            "mro-entries-other-module",
            _in_class(M, head="from .other import E\n\n\n", cls="class C(E()):"),
            others={"other.py": _MRO},
        )
    )
    for name, mod, other in [
        ("mro-entries-imported-instance", "from .other import inst\n\n\n", _MRO + "inst = E()\n"),
        ("mro-entries-imported-through-module", "from . import other\n\n\n", _MRO + "inst = E()\n"),
        ("imported-alias-base-hook", "from .other import Base\n\n\n", _MRO + "Base = B\n"),
        (
            "imported-alias-base-plain",
            "from .other import Base\n\n\n",
            "class B:\n    pass\n\n\nBase = B\n",
        ),
    ]:
        base = "other.inst" if "through-module" in name else mod.split()[-1]
        found.append(
            Form(name, _in_class(M, head=mod, cls=f"class C({base}):"), others={"other.py": other})
        )
    build_class = (  # replaces how every later class statement builds (this package's) classes
        "import builtins\n\n_build = builtins.__build_class__\n\n\n"
        "def _bc(func, name, *args, **kw):\n    cls = _build(func, name, *args, **kw)\n"
        "    if name == 'C' and func.__globals__['__name__'].startswith(__package__):\n"
        "        cls.m = None\n    return cls\n\n\n"
        "builtins.__build_class__ = _bc\n"
    )
    found.append(Form("build-class-replaced", _in_class(M, head=build_class + "\n\n")))
    found.append(
        Form(
            "build-class-replaced-by-import",
            _in_class(M, head="from . import other  # noqa: F401\n\n\n"),
            others={"other.py": build_class},
        )
    )
    generic = "from typing import Generic, TypeVar\n\nT = TypeVar('T')\n\n\n"
    found.append(
        Form(
            "generic-base-hook",
            _in_class(
                M,
                head=generic
                + "class B(Generic[T]):\n    def __init_subclass__(cls, **kw):\n        cls.m = None\n\n\n",
                cls="class C(B[int]):",
            ),
        )
    )
    found.append(
        Form(
            "generic-base-plain",
            _in_class(
                M, head=generic + "class B(Generic[T]):\n    pass\n\n\n", cls="class C(B[int]):"
            ),
        )
    )
    found.append(
        Form(
            "namedtuple-base",
            _in_class(
                M,
                head="from collections import namedtuple\n\n\n",
                cls="class C(namedtuple('P', 'x y')):",
            ),
        )
    )
    return found


DROP = "def f():\n    del C.m\n\n\n"  # a function that takes the method off its class


def _dunder(name: str, params: str, returns: str, use: str) -> str:
    """A class K of the checkout whose `name` dunder deletes C.m, and a statement that runs it."""
    return (
        f"class K:\n    def {name}(self{params}):\n        del C.m\n        return {returns}\n\n\n"
        f"{use}\n"
    )


def _indirect_forms() -> list[Form]:
    """Module-level code that reaches a deletion or rebinding of C.m only
    indirectly (through an alias, a lambda, a comprehension, a callable handed to a builtin, a
    decorator, a dunder method, a class-creation hook, a default argument, another module of
    the checkout), and look-alikes whose code leaves it alone."""
    after = {
        # aliases and calls through values
        "alias-of-deleter": DROP + "g = f\ng()\n",
        "alias-chain-of-deleter": DROP + "g = f\nh = g\nh()\n",
        "alias-in-tuple": DROP + "g, h = f, len\ng()\n",
        "alias-from-dict": DROP + "TABLE = {'drop': f}\nTABLE['drop']()\n",
        "returned-deleter": DROP + "def get():\n    return f\n\n\nget()()\n",
        "deleter-through-helper": DROP + "def run():\n    f()\n\n\nrun()\n",
        "nulls-through-helper": "def f():\n    C.m = None\n\n\ndef run():\n    f()\n\n\nrun()\n",
        "global-through-alias": "def f():\n    global C\n    C = None\n\n\ng = f\ng()\n",
        "global-del-called": "def f():\n    global C\n    del C\n\n\nf()\n",
        "assign-from-call": DROP + "X = f()\n",
        "if-test-call": DROP + "if f():\n    pass\n",
        # lambdas
        "lambda-called-at-once": "(lambda: delattr(C, 'm'))()\n",
        "lambda-alias-called": "g = lambda: delattr(C, 'm')\ng()\n",
        "lambda-calls-deleter": DROP + "(lambda: f())()\n",
        "lambda-setattr-none": "X = (lambda: setattr(C, 'm', None))()\n",
        # comprehensions and generators
        "listcomp-delattr": "[delattr(C, 'm') for _ in [1]]\n",
        "setcomp-delattr": "X = {delattr(C, 'm') for _ in [1]}\n",
        "dictcomp-delattr": "X = {k: delattr(C, 'm') for k in [1]}\n",
        "genexp-delattr": "list(delattr(C, 'm') for _ in [1])\n",
        "genexp-any-deleter": DROP + "any(f() for _ in [1])\n",
        "listcomp-condition-deleter": DROP + "X = [1 for _ in [1] if f()]\n",
        # callables handed to builtins that call them
        "sorted-key-deleter": DROP.replace("f():", "f(x):") + "sorted([1], key=f)\n",
        "max-key-deleter": DROP.replace("f():", "f(x):") + "max([1, 2], key=f)\n",
        "map-deleter": DROP.replace("f():", "f(x):") + "list(map(f, [1]))\n",
        "filter-deleter": DROP.replace("f():", "f(x):") + "X = list(filter(f, [1]))\n",
        "for-over-map": DROP.replace("f():", "f(x):") + "for _ in map(f, [1]):\n    pass\n",
        "partial-delattr": "import functools\nfunctools.partial(delattr, C, 'm')()\n",
        "partial-from-import": "from functools import partial\npartial(setattr, C, 'm', None)()\n",
        "partial-deleter": "import functools\n" + DROP + "functools.partial(f)()\n",
        "map-delattr": "list(map(delattr, [C], ['m']))\n",
        # builtins reached by another name
        "getattr-builtins-delattr": "import builtins\ngetattr(builtins, 'delattr')(C, 'm')\n",
        "builtins-attribute-delattr": "import builtins\nbuiltins.delattr(C, 'm')\n",
        "builtins-alias-setattr": "import builtins as b\nb.setattr(C, 'm', None)\n",
        "delattr-alias": "drop = delattr\ndrop(C, 'm')\n",
        # decorators
        "decorator-deletes": "def d(g):\n    del C.m\n    return g\n\n\n@d\ndef unrelated():\n    pass\n",
        "decorator-factory-deletes": (
            "def d():\n    del C.m\n    return lambda g: g\n\n\n@d()\ndef unrelated():\n    pass\n"
        ),
        "class-decorator-deletes": (
            "def d(k):\n    del C.m\n    return k\n\n\n@d\nclass Unrelated:\n    pass\n"
        ),
        # dunder methods run by module-level statements on instances of checkout classes
        "dunder-init": _dunder("__init__", "", "None", "K()"),
        "dunder-new": (
            "class K:\n    def __new__(cls):\n        del C.m\n        return object.__new__(cls)\n\n\nK()\n"
        ),
        "dunder-enter": _dunder("__enter__", "", "self", "with K.__new__(K):\n    pass").replace(
            "return self\n", "return self\n\n    def __exit__(self, *a):\n        return None\n"
        ),
        "dunder-bool": _dunder("__bool__", "", "True", "k = K()\nif k:\n    pass"),
        "dunder-add": _dunder("__add__", ", other", "1", "k = K()\nX = k + 1"),
        "dunder-iter": _dunder("__iter__", "", "iter(())", "for _ in K():\n    pass"),
        "dunder-format": _dunder("__format__", ", spec", "''", "k = K()\nX = f'{k}'"),
        "dunder-str": _dunder("__str__", "", "''", "X = str(K())"),
        "dunder-getitem": _dunder("__getitem__", ", key", "1", "X = K()[0]"),
        "dunder-eq": _dunder("__eq__", ", other", "True", "X = K() == 1"),
        "dunder-len": _dunder("__len__", "", "0", "X = len(K())"),
        "dunder-call": _dunder("__call__", "", "None", "k = K()\nk()"),
        "dunder-getattr": _dunder("__getattr__", ", name", "1", "X = K().anything"),
        "property-read": (
            "class K:\n    @property\n    def p(self):\n        del C.m\n        return 1\n\n\n"
            "X = K().p\n"
        ),
        # methods of C itself, and class-creation hooks
        "classmethod-drop": None,
        "staticmethod-drop": None,
        "set-name-descriptor": None,
        "mro-entries": (
            "class K:\n    def __mro_entries__(self, bases):\n        del C.m\n        return (object,)\n\n\n"
            "class E(K()):\n    pass\n"
        ),
        "default-runs-lambda": "def g(x=(lambda: delattr(C, 'm'))()):\n    pass\n",
        "default-calls-deleter": DROP + "def g(x=f()):\n    pass\n",
        "kwonly-default-deleter": DROP + "def g(*, x=f()):\n    pass\n",
        "lambda-default-deleter": DROP + "g = lambda x=f(): x\n",
        # held by code outside the checkout, then run by using what holds it
        "defaultdict-factory-deleter": (
            "import collections\n\nd = collections.defaultdict(lambda: delattr(C, 'm'))\nd['x']\n"
        ),
        "thread-target-deleter": (
            "import threading\n" + DROP + "t = threading.Thread(target=f)\nt.start()\nt.join()\n"
        ),
        "partial-held-then-called": (
            "import functools\n"
            + DROP
            + "HOOKS = [functools.partial(f)]\nfor h in HOOKS:\n    h()\n"
        ),
        "class-getitem-deleter": (
            "class K:\n    def __class_getitem__(cls, item):\n        del C.m\n        return cls\n\n\n"
            "X = K[int]\n"
        ),
        "kept-in-a-list-then-called": DROP + "HOOKS = []\nHOOKS.append(f)\nHOOKS[0]()\n",
        "kept-by-a-function-then-called": (
            DROP + "HOOKS = []\n\n\ndef setup():\n    HOOKS.append(f)\n\n\nsetup()\nHOOKS[0]()\n"
        ),
        "exit-stack-callback": (
            "import contextlib\n"
            + DROP
            + "with contextlib.ExitStack() as stack:\n    stack.callback(f)\n"
        ),
        "finalize-of-garbage": "import weakref\n" + DROP + "weakref.finalize(set(), f)\n",
        "property-of-module-function": (
            "def f(self):\n    del C.m\n    return 1\n\n\nclass K:\n    p = property(f)\n\n\nX = K().p\n"
        ),
        "init-subclass-of-other-class": (
            "class B:\n    def __init_subclass__(cls):\n        del C.m\n\n\nclass E(B):\n    pass\n"
        ),
    }
    found = []
    for name, tail in after.items():
        if tail is not None:
            found.append(Form(name, _in_class(M, after="\n\n" + tail)))
    found.append(
        Form(
            "classmethod-drop",
            _in_class(
                M + "\n    @classmethod\n    def drop(cls):\n        del cls.m\n",
                after="\n\nC.drop()\n",
            ),
        )
    )
    found.append(
        Form(
            "staticmethod-drop",
            _in_class(
                M + "\n    @staticmethod\n    def drop():\n        C.m = None\n",
                after="\n\nC.drop()\n",
            ),
        )
    )
    found.append(
        Form(
            "set-name-descriptor",
            "class D:\n    def __set_name__(self, owner, name):\n        owner.m = None\n\n\n"
            + _in_class(M + "    d = D()\n"),
        )
    )
    # hooks found in another module of the checkout
    drops_hook = "class B:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n        del cls.m\n"
    nulls_hook = "class B:\n    def __init_subclass__(cls):\n        cls.m = None\n"
    meta_drops = (
        "class Meta(type):\n    def __new__(mcs, name, bases, ns):\n        ns.pop('m', None)\n"
        "        return super().__new__(mcs, name, bases, ns)\n\n\nclass B(metaclass=Meta):\n    pass\n"
    )
    meta_nulls = (
        "class Meta(type):\n    def __init__(cls, name, bases, ns):\n        super().__init__(name, bases, ns)\n"
        "        cls.m = None\n\n\nclass B(metaclass=Meta):\n    pass\n"
    )
    through_helper = "def _strip(cls):\n    delattr(cls, 'm')\n\n\nclass B:\n    def __init_subclass__(cls):\n        _strip(cls)\n"
    sub = "from .base import B\n\n\nclass C(B):\n" + M
    for name, base in [
        ("other-module-init-subclass-drops", drops_hook),
        ("other-module-init-subclass-nulls", nulls_hook),
        ("other-module-metaclass-drops", meta_drops),
        ("other-module-metaclass-nulls", meta_nulls),
        ("other-module-hook-through-helper", through_helper),
    ]:
        found.append(Form(name, sub, others={"base.py": base}))
    found.append(
        Form(
            "other-module-base-of-base-hook",
            "from .middle import B\n\n\nclass C(B):\n" + M,
            others={
                "middle.py": "from .base import A\n\n\nclass B(A):\n    pass\n",
                "base.py": drops_hook.replace("class B", "class A"),
            },
        )
    )
    patcher = "def patch(cls):\n    del cls.m\n    return cls\n"
    found.append(
        Form(
            "other-module-patch-call",
            _in_class(M, head="from .base import patch\n\n\n", after="\n\npatch(C)\n"),
            others={"base.py": patcher},
        )
    )
    found.append(
        Form(
            "other-module-patch-decorator",
            "from .base import patch\n\n\n@patch\nclass C:\n" + M,
            others={"base.py": patcher},
        )
    )
    found.append(
        Form(
            "other-module-patch-attribute",
            _in_class(M, head="from . import base\n\n\n", after="\n\nbase.patch(C)\n"),
            others={"base.py": patcher},
        )
    )
    found.append(
        Form(
            "other-module-patch-through-helper",
            _in_class(M, head="from .base import patch\n\n\n", after="\n\npatch(C)\n"),
            others={
                "base.py": "from .helpers import strip\n\n\ndef patch(cls):\n    strip(cls)\n",
                "helpers.py": "def strip(cls):\n    cls.m = None\n",
            },
        )
    )
    found.append(
        Form(
            "package-init-hands-the-class-on",
            _in_class(M),
            others={
                "__init__.py": "from . import mod\nfrom .helpers import strip\n\nstrip(mod.C)\n",
                "helpers.py": "def strip(cls):\n    del cls.m\n",
            },
        )
    )
    found.append(
        Form(
            "other-module-instance-dunder",
            _in_class(M, after="\n\nfrom .base import k\n\nX = k + 1\n"),
            others={
                "base.py": "class K:\n    def __add__(self, other):\n        from . import mod\n\n"
                "        del mod.C.m\n        return 1\n\n\nk = K()\n"
            },
        )
    )
    found.append(
        Form(
            "other-module-set-name",
            "from .base import D\n\n\nclass C:\n" + M + "    d = D()\n",
            others={
                "base.py": "class D:\n    def __set_name__(self, owner, name):\n        owner.m = None\n"
            },
        )
    )
    found.append(
        Form(
            "other-module-class-getitem",
            "from .base import strip\n\n\nclass C:\n" + M + "\n\nX = strip[C]\n",
            others={
                "base.py": "class Strip:\n    def __getitem__(self, cls):\n        del cls.m\n"
                "        return cls\n\n\nstrip = Strip()\n"
            },
        )
    )
    deleting = "\n\n@run_now\ndef unrelated():\n    del C.m\n"
    found.append(
        Form(
            "other-module-decorator-runs-it",
            _in_class(M, head="from .base import run_now\n\n\n", after=deleting),
            others={"base.py": "def run_now(fn):\n    fn()\n    return fn\n"},
        )
    )
    found.append(
        Form(
            "other-module-class-decorator-instantiates",
            _in_class(
                M,
                head="from .base import instantiate\n\n\n",
                after="\n\n@instantiate\nclass K:\n    def __init__(self):\n        del C.m\n",
            ),
            others={"base.py": "def instantiate(cls):\n    cls()\n    return cls\n"},
        )
    )
    found.append(
        Form(
            "other-module-runs-what-it-is-handed",
            _in_class(M, head="from .base import apply\n\n\n", after="\n\n" + DROP + "apply(f)\n"),
            others={"base.py": "def apply(callback):\n    return callback()\n"},
        )
    )
    found.append(
        Form(
            "other-module-wrapping-decorator",
            _in_class(M, head="from .base import run_now\n\n\n", after=deleting),
            others={
                "base.py": "import functools\n\n\ndef run_now(fn):\n    @functools.wraps(fn)\n"
                "    def inner(*args):\n        return fn(*args)\n\n    return inner\n"
            },
        )
    )
    # look-alikes that leave C.m in place: reading keeps them green
    harmless = {
        "alias-of-pure-function": "def f():\n    return 1\n\n\ng = f\nX = g()\n",
        "sorted-key-builtin": "X = sorted(['b', 'a'], key=len)\n",
        "map-pure-lambda": "X = list(map(lambda v: v + 1, [1]))\n",
        "comprehension-pure": "X = [v * 2 for v in range(3)]\n",
        "registering-decorator": "REGISTRY = []\n\n\ndef register(g):\n    REGISTRY.append(g)\n    return g\n\n\n@register\ndef unrelated():\n    pass\n",
        "pure-instance": "class K:\n    def __bool__(self):\n        return True\n\n\nif K():\n    pass\n",
    }
    for name, tail in harmless.items():
        found.append(Form(name, _in_class(M, after="\n\n" + tail)))
    found.append(
        Form(
            "other-module-registering-hook",
            sub,
            others={
                "base.py": "REGISTRY = {}\n\n\nclass B:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n        REGISTRY[cls.__name__] = cls\n"
            },
        )
    )
    found.append(
        Form(
            "other-module-pure-call",
            _in_class(M, head="from .base import flag\n\nENABLED = flag()\n\n\n"),
            others={
                "base.py": "import os\n\n\ndef flag():\n    return os.environ.get('NO_SUCH_VAR_XYZ') is None\n"
            },
        )
    )
    return found
