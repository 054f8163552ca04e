"""docs/architecture.md is held to the tree: every module it names exists, and every module is named
(a subpackage's empty `__init__.py` aside). Every such `__init__.py` is empty but for a docstring."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src" / "vx"
DOC = ROOT / "docs" / "architecture.md"
# A backticked module path relative to src/vx, e.g. `proc/executor.py` or `model.py`.
NAMED = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)`")
WITH_CODE = {"__init__.py", "store/remote/__init__.py"}  # the version; which remote layer to open
GENERATED = "store/remote/reapi_pb/"  # protoc's output, named on the page as one directory


def modules() -> set[str]:
    out = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")}
    return {
        m
        for m in out
        if (not m.endswith("/__init__.py") or m in WITH_CODE) and not m.startswith(GENERATED)
    }


def _named() -> set[str]:
    """The modules the page names; test files (`tests/...`, `test_*.py`) are checked from the root."""
    return {m for m in NAMED.findall(DOC.read_text()) if not m.startswith(("tests/", "test_"))}


def test_every_module_the_page_names_exists():
    missing = sorted(m for m in _named() if not (SRC / m).is_file())
    text = DOC.read_text()
    missing += sorted(
        m for m in NAMED.findall(text) if m.startswith("tests/") and not (ROOT / m).is_file()
    )
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_module_is_on_the_page():
    absent = sorted(modules() - _named())
    assert not absent, f"add these to docs/architecture.md: {absent}"


def test_package_inits_hold_nothing_but_a_docstring():
    for path in SRC.rglob("__init__.py"):
        rel = str(path.relative_to(SRC))
        if rel in WITH_CODE:
            continue
        body = ast.parse(path.read_text()).body
        code = [
            n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        assert not code, f"src/vx/{rel} holds code: importing a module of its folder would run it"
