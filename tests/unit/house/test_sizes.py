"""The size ratchet: no function over 80 lines and no record over 20 fields in `src/vx`, except the
few listed here, which may only shrink. The growth the house reviews found happened exactly where
no test looked; a function or a record that outgrows these bounds is split, not listed."""

import ast
import functools
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "vx"
GENERATED = "store/remote/reapi_pb"
MAX_FUNCTION_LINES = 80
MAX_RECORD_FIELDS = 20

# "path:qualified name" -> the most lines it may have. Each entry is a debt; lower it as it shrinks.
LONG_FUNCTIONS: dict[str, int] = {}

# "path:class" -> the most fields it may have.
WIDE_RECORDS: dict[str, int] = {
    "prepare.py:Prepared": 22,  # the world read once, as the execution half and the CLI read it
    "prepare.py:RunRequest": 23,  # what a `vx run` command line asks, flag by flag
    "store/pending.py:Invocation": 27,  # a row of the `invocations` table, column by column (tags: 27)
}


def _sources():
    return _parsed(SRC)


@functools.cache
def _parsed(src: Path) -> list[tuple[str, ast.AST]]:
    """Each module once per test session: (path relative to src/vx, its tree)."""
    out = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if not rel.startswith(GENERATED):
            out.append((rel, ast.parse(path.read_text())))
    return out


def _definitions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and class, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _definitions(node, name + ".")


def function_lengths() -> dict[str, int]:
    return {
        f"{rel}:{name}": node.end_lineno - node.lineno + 1
        for rel, tree in _sources()
        for name, node in _definitions(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def record_widths() -> dict[str, int]:
    """Annotated class-level fields of each class (a msgspec Struct's fields, a Protocol's
    attributes)."""
    return {
        f"{rel}:{name}": sum(isinstance(s, ast.AnnAssign) for s in node.body)
        for rel, tree in _sources()
        for name, node in _definitions(tree)
        if isinstance(node, ast.ClassDef)
    }


def _over(sizes: dict[str, int], bound: int, allowed: dict[str, int]) -> list[str]:
    return sorted(
        f"{name}: {size}" + (f" (listed at {allowed[name]})" if name in allowed else "")
        for name, size in sizes.items()
        if size > max(bound, allowed.get(name, 0))
    )


def test_no_function_is_over_80_lines_but_the_listed_ones():
    over = _over(function_lengths(), MAX_FUNCTION_LINES, LONG_FUNCTIONS)
    assert not over, "split these (a listed one may only shrink):\n" + "\n".join(over)


def test_no_record_has_over_20_fields_but_the_listed_ones():
    over = _over(record_widths(), MAX_RECORD_FIELDS, WIDE_RECORDS)
    assert not over, "split these by what changes when:\n" + "\n".join(over)


def test_the_lists_shrink_as_the_code_does():
    """An entry that is gone or fits the bound leaves the list; one that shrank is listed lower."""
    lengths, widths = function_lengths(), record_widths()
    stale = [
        f"{name}: listed {limit}, is {sizes.get(name, 'gone')}"
        for table, sizes, bound in (
            (LONG_FUNCTIONS, lengths, MAX_FUNCTION_LINES),
            (WIDE_RECORDS, widths, MAX_RECORD_FIELDS),
        )
        for name, limit in table.items()
        if sizes.get(name, 0) != limit or limit <= bound
    ]
    assert not stale, "update the ratchet:\n" + "\n".join(stale)


def test_the_ratchet_lists_stay_short():
    assert len(LONG_FUNCTIONS) <= 10 and len(WIDE_RECORDS) <= 5


def test_the_ratchet_sees_a_long_function_and_a_wide_record(tmp_path, monkeypatch):
    """The measures themselves: a function of 81 lines and a record of 21 fields are caught."""
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    fields = "\n".join(f"    f{i}: int" for i in range(21))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\n\nclass Wide:\n{fields}\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert function_lengths() == {"m.py:long": 81}
    assert _over(function_lengths(), MAX_FUNCTION_LINES, {}) == ["m.py:long: 81"]
    assert _over(record_widths(), MAX_RECORD_FIELDS, {}) == ["m.py:Wide: 21"]
