#!/usr/bin/env python3
"""Drop feature IDs (`KEY-21`, `GR-09, LC-07`) from the comments and docstrings of src/vx.

    python3 dev/strip_feature_ids.py           # rewrite, then list what is left for a person
    python3 dev/strip_feature_ids.py --check   # only list

The IDs belong to tests (`@pytest.mark.feature`) and docs/features.md; in code they resolve
nowhere a reader is. Parenthesised ID lists go whole (`the key (KEY-12).` -> `the key.`), an ID
beside other words in parentheses goes with its comma, and a comment that opens with IDs loses
them. An ID used as a word of a sentence (`KEY-21's window`) is listed, not changed: it needs a
plain phrase written by hand. Strings that are not docstrings (messages) are never touched.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "vx"
FAMILY = r"(?:WS|GR|EX|KEY|LC|RC|SB|CLI|OBS|TL|PL|LG)"
ID = rf"{FAMILY}-\d{{2,}}"
# One ID or a range (`SB-01..SB-07`, `CLI-50..56`, `RC-01–RC-03`).
ONE = rf"{ID}(?:\s*(?:\.\.|–|-)\s*(?:{FAMILY}-)?\d{{2,}})?"
LIST = rf"{ONE}(?:(?:\s*[,;/]\s*|\s+and\s+|\s+)(?:{ONE}))*"
ANY_ID = re.compile(rf"\b{ID}\b")


def _whole_group(m: re.Match) -> str:
    """A group that opened a line leaves its punctuation on the line before."""
    if "\n" in m["pre"]:
        return m["punct"] + m["pre"]
    return m["punct"] + m["post"]


RULES: list[tuple[re.Pattern[str], Any]] = [
    # ` (KEY-12, LC-07)`: the whole group goes.
    (
        re.compile(rf"(?P<pre>\n[ \t]*|[ \t]*)\(\s*{LIST}\s*\)(?P<punct>[.,:;]?)(?P<post>[ \t]*)"),
        _whole_group,
    ),
    # `(KEY-12, text)` and `(KEY-12: text)`: the IDs and their separator go.
    (re.compile(rf"\(\s*{LIST}\s*[,;:]\s*"), "("),
    # `(text, KEY-12)` and `(text; KEY-12)`.
    (re.compile(rf"\s*[,;]\s*{LIST}\s*\)"), ")"),
    # `(text, KEY-12, text)`.
    (re.compile(rf",\s*{LIST}\s*,"), ","),
]
# A comment that opens with IDs: `# KEY-21: the re-check` -> `# the re-check`.
LEAD = re.compile(rf"^(#\s*){LIST}\s*(?:[:,;—–-]\s*)?")


def strip_text(text: str) -> str:
    for pattern, repl in RULES:
        text = pattern.sub(repl, text)
    return text


def docstring_lines(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(first.lineno)
    return found


def strip_python(text: str) -> str:
    docs = docstring_lines(ast.parse(text))
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        is_doc = tok.type == tokenize.STRING and tok.start[0] in docs
        if not (tok.type == tokenize.COMMENT or is_doc) or not ANY_ID.search(tok.string):
            continue
        new = strip_text(tok.string)
        if tok.type == tokenize.COMMENT:
            new = LEAD.sub(r"\1", new)
        if new != tok.string:
            start = offsets[tok.start[0] - 1] + tok.start[1]
            end = offsets[tok.end[0] - 1] + tok.end[1]
            edits.append((start, end, new))
    for start, end, new in reversed(edits):
        if new.strip() == "#":  # the comment was IDs only
            line_start = text.rfind("\n", 0, start) + 1
            if text[line_start:start].strip() == "":  # a line of its own: it goes whole
                line_end = text.find("\n", end)
                text = text[:line_start] + text[line_end + 1 :]
                continue
            text = text[:start].rstrip(" ") + text[end:]
            continue
        text = text[:start] + new + text[end:]
    return text


def strip_js(text: str) -> str:
    """Comments of the Node-side helpers: `// …` lines and `/* … */` blocks."""

    def comment(m: re.Match) -> str:
        return strip_text(m[0])

    return re.sub(r"//[^\n]*|/\*.*?\*/", comment, text, flags=re.S)


def leftovers(path: Path, text: str) -> list[str]:
    out = []
    if path.suffix == ".py":
        docs = docstring_lines(ast.parse(text))
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            is_doc = tok.type == tokenize.STRING and tok.start[0] in docs
            if tok.type == tokenize.COMMENT or is_doc:
                for m in ANY_ID.finditer(tok.string):
                    line = tok.start[0] + tok.string[: m.start()].count("\n")
                    out.append(f"{path.relative_to(ROOT)}:{line}: {m[0]}")
    else:
        for m in re.finditer(r"//[^\n]*|/\*.*?\*/", text, flags=re.S):
            for i in ANY_ID.finditer(m[0]):
                line = text[: m.start() + i.start()].count("\n") + 1
                out.append(f"{path.relative_to(ROOT)}:{line}: {i[0]}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list the IDs")
    args = parser.parse_args()
    left: list[str] = []
    changed = 0
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in (".py", ".mjs", ".js") or not path.is_file():
            continue
        text = path.read_text()
        new = text if args.check else (strip_python if path.suffix == ".py" else strip_js)(text)
        if new != text:
            path.write_text(new)
            changed += 1
        left += leftovers(path, new)
    for line in left:
        print(line)
    print(f"{changed} files changed, {len(left)} IDs left", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
