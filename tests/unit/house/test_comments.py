"""Code comments say why: measured times live in docs/optimizations.md, feature IDs in test
markers and docs/features.md (house review)."""

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "vx"
# `~7 ms`, `~1.5 µs`, `(64 MiB: 42 against 342 ms here)`: a figure someone measured, not a setting.
MEASURED = re.compile(
    r"~\s?\d[\d.,]*(?:[–-]\d[\d.,]*)?\s?(?:ms|µs|s)\b|\d\s?(?:ms|µs)\b[^.\n]*\bhere\b"
)


def prose(path: Path):
    text = path.read_text()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                yield node.body[0].lineno, doc


def test_no_comment_or_docstring_quotes_a_measured_time():
    found = [
        f"{path.relative_to(SRC.parents[1])}:{line}: {m[0]}"
        for path in sorted(SRC.rglob("*.py"))
        for line, text in prose(path)
        for m in MEASURED.finditer(text)
    ]
    assert not found, (
        "measured times go to docs/optimizations.md; the comment keeps the why and the entry's "
        "number:\n" + "\n".join(found)
    )


def test_no_comment_or_docstring_cites_a_feature_id():
    """IDs live in test markers and docs/features.md; in code they point nowhere a reader is."""
    spec = importlib.util.spec_from_file_location(
        "strip", SRC.parents[1] / "dev/strip_feature_ids.py"
    )
    assert spec is not None and spec.loader is not None
    strip = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(strip)
    found = [
        line
        for path in sorted(SRC.rglob("*"))
        if path.suffix in (".py", ".mjs") and path.is_file()
        for line in strip.leftovers(path, path.read_text())
    ]
    assert not found, (
        "say it in words (docs/features.md has the ID); `python3 dev/strip_feature_ids.py` drops "
        "parenthesised ones:\n" + "\n".join(found)
    )
