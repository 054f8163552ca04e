#!/usr/bin/env python3
"""Turn feature IDs spelled in test names into `@pytest.mark.feature(...)` markers.

    python3 dev/feature_markers.py            # convert tests/, then refresh docs/features.md
    python3 dev/feature_markers.py --check    # say what would change, change nothing (exit 1 if any)

A test named `test_ex05_stop_reaches_the_group` (or `test_stop_reaches_the_group_ex05`, or a def
line ending in `# EX-05`) becomes `test_stop_reaches_the_group` under `@pytest.mark.feature("EX-05")`.
A module-level test with no ID of its own, under a section comment naming IDs
(`# ------ timeouts (EX-05)`), is marked with those; the section comment stays.
Other text naming an old test name (docs, tests, code) is rewritten to the new name. Running it
again changes nothing; run it after merging branches that add ID-prefixed tests.

It then rewrites the Tests column of docs/features.md from the markers: each feature's row lists
the test files that hold it. A marked feature without a row gets one whose description is `?`,
to be written by hand (tests/unit/house/test_features_doc.py refuses the `?`).
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FEATURES = ROOT / "docs" / "features.md"

FAMILIES = ("ws", "gr", "ex", "key", "lc", "rc", "sb", "cli", "obs", "tl", "pl", "lg", "in")
_FAMILY = "|".join(FAMILIES)
# `ex05` or `ex_05` in a name: a family and two or more digits, between underscores.
NAME_ID = rf"(?:{_FAMILY})_?\d{{2,}}"
PREFIX = re.compile(rf"^test_((?:{NAME_ID}_)+)(.+)$")
SUFFIX = re.compile(rf"^(test_.+?)((?:_{NAME_ID})+)$")
# `EX-05` in prose.
TEXT_ID = re.compile(rf"\b(?:{_FAMILY.upper()})-\d{{2,}}\b")
# A trailing comment on a def's last signature line.
COMMENT = re.compile(r"^(?P<code>.*?:)(?P<gap>\s+)#\s*(?P<text>.*)$")
SECTION = re.compile(r"^# -{8,}")
MARKER = re.compile(r"^(?P<indent>\s*)@pytest\.mark\.feature\((?P<args>[^)]*)\)\s*$")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".sh", ""}


def spelled(token: str) -> str:
    """`ex05` -> `EX-05`."""
    m = re.match(r"([a-z]+)_?(\d+)", token)
    assert m is not None
    return f"{m[1].upper()}-{m[2]}"


def split_name(name: str) -> tuple[str, list[str]]:
    """The name without its ID prefix/suffix, and those IDs."""
    ids: list[str] = []
    m = PREFIX.match(name)
    if m:
        ids += [spelled(t) for t in re.findall(NAME_ID, m[1])]
        name = "test_" + m[2]
    m = SUFFIX.match(name)
    if m:
        ids += [spelled(t) for t in re.findall(NAME_ID, m[2])]
        name = m[1]
    return name, ids


def comment_ids(text: str) -> tuple[list[str], str]:
    """The IDs in a trailing comment, and what the comment says besides."""
    ids = TEXT_ID.findall(text)
    rest = TEXT_ID.sub("", text)
    rest = re.sub(r"^[\s,;:()]+|[\s,;:(]+$", "", rest)
    rest = re.sub(r"\(\s*\)", "", rest).strip()
    rest = re.sub(r"\s*,\s*,", ",", rest)
    return ids, rest


def section_ids(lines: list[str]) -> dict[int, list[str]]:
    """The IDs of the section comment (`# ------ KEY-21 ...`) each line of the module is under."""
    found: dict[int, list[str]] = {}
    current: list[str] = []
    for number, line in enumerate(lines, 1):
        if SECTION.match(line):
            current = TEXT_ID.findall(line)
        found[number] = current
    return found


def signature_colons(text: str) -> dict[int, int]:
    """The line of each `def`'s closing colon, by the def's line."""
    found: dict[int, int] = {}
    depth = 0
    open_def: int | None = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == "def" and open_def is None:
            open_def, depth = tok.start[0], 0
        elif open_def is not None and tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            elif tok.string == ":" and depth == 0:
                found[open_def] = tok.start[0]
                open_def = None
    return found


def marked_ids(decorator_line: str) -> list[str]:
    m = MARKER.match(decorator_line)
    return re.findall(r'"([^"]+)"', m["args"]) if m else []


def test_defs(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    """Every test function with the names beside it (its module's or its class's)."""
    found: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]] = []

    def scope(body: list[ast.stmt]) -> None:
        names = {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        names |= {n.name for n in body if isinstance(n, ast.ClassDef)}
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test_"):
                    found.append((node, names))
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                scope(node.body)

    scope(tree.body)
    return found


def convert(path: Path, renames: dict[str, str], problems: list[str]) -> str | None:
    """The file's new text, or None when nothing changes."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    colons = signature_colons(text)
    edits: list[tuple[int, int, list[str]]] = []  # (first line index, end index, replacement)
    sections = section_ids(lines)
    for node, names in test_defs(tree):
        new_name, ids = split_name(node.name)
        last_sig = colons[node.lineno]  # 1-based line of the def's closing `:`
        sig_line = lines[last_sig - 1]
        new_sig = sig_line
        cm = COMMENT.match(sig_line.rstrip("\n"))
        if cm and TEXT_ID.search(cm["text"]):
            more, rest = comment_ids(cm["text"])
            ids += more
            new_sig = cm["code"] + (f"  # {rest}" if rest else "") + "\n"
        first = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        section = sections.get(node.lineno, []) if node.col_offset == 0 else []
        own = set(ids) | {i for k in range(first, node.lineno - 1) for i in marked_ids(lines[k])}
        if section and not own:
            ids += section  # a test the section's IDs describe, having none of its own
        if not ids:
            continue
        if new_name != node.name:
            if new_name in names:
                problems.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} -> {new_name} clashes"
                )
                continue
            if not new_name.removeprefix("test_").strip("_"):
                problems.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} has no name left"
                )
                continue
            renames[node.name] = new_name
            names.add(new_name)
        first = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        indent = " " * node.col_offset
        existing = []
        marker_at = None
        for i in range(first, node.lineno - 1):
            if MARKER.match(lines[i]):
                existing = marked_ids(lines[i])
                marker_at = i
        all_ids = list(dict.fromkeys(existing + ids))
        quoted = ", ".join(f'"{i}"' for i in all_ids)
        marker = f"{indent}@pytest.mark.feature({quoted})\n"
        block = lines[first:last_sig]
        block[last_sig - 1 - first] = new_sig
        def_at = node.lineno - 1 - first
        block[def_at] = re.sub(rf"\bdef {node.name}\b", f"def {new_name}", block[def_at], count=1)
        if marker_at is not None:
            block[marker_at - first] = marker
        else:
            block.insert(0, marker)
        edits.append((first, last_sig, block))
    if not edits:
        return None
    for first, end, block in sorted(edits, reverse=True):
        lines[first:end] = block
    out = "".join(lines)
    if out == text:
        return None
    if not re.search(r"^import pytest$", out, re.M):
        out = add_import(out)
    return out


def add_import(text: str) -> str:
    """`import pytest` among the module's first imports (ruff's isort order: stdlib, third party)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    if not imports:
        at = tree.body[0].end_lineno if isinstance(tree.body[0], ast.Expr) else 0
        lines.insert(at or 0, "\nimport pytest\n")
        return "".join(lines)
    third = [n for n in imports if not _stdlib(n)]
    at = (third[0].lineno - 1) if third else (imports[-1].end_lineno or 0)
    lines.insert(at, "import pytest\n" if third else "\nimport pytest\n")
    return "".join(lines)


def _stdlib(node: ast.Import | ast.ImportFrom) -> bool:
    name = node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
    if isinstance(node, ast.ImportFrom) and node.level:
        return False
    return name.split(".")[0] in sys.stdlib_module_names or name == "__future__"


def rename_references(renames: dict[str, str], skip: set[Path]) -> dict[Path, str]:
    """Other files' text naming a renamed test, with the new name."""
    if not renames:
        return {}
    pattern = re.compile(
        r"\b(" + "|".join(map(re.escape, sorted(renames, key=len, reverse=True))) + r")\b"
    )
    changed: dict[Path, str] = {}
    for top in ("src", "tests", "docs", "bench", "dev", "README.md", "CONTRIBUTING.md"):
        base = ROOT / top
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in paths:
            if p in skip or p.suffix not in TEXT_SUFFIXES or "node_modules" in p.parts:
                continue
            try:
                text = p.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            new = pattern.sub(lambda m: renames[m[1]], text)
            if new != text:
                changed[p] = new
    return changed


# ---------------------------------------------------------------- docs/features.md


def markers() -> dict[str, list[str]]:
    """Feature ID -> the test files (relative to tests/) with a test marked with it."""
    held: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        for node, _ in test_defs(ast.parse(path.read_text())):
            for ident in feature_ids(node):
                held.setdefault(ident, set()).add(path.relative_to(TESTS).as_posix())
    return {k: sorted(v) for k, v in held.items()}


def feature_ids(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    ids = []
    for d in node.decorator_list:
        if (
            isinstance(d, ast.Call)
            and ast.unparse(d.func) == "pytest.mark.feature"
            and all(isinstance(a, ast.Constant) for a in d.args)
        ):
            ids += [a.value for a in d.args if isinstance(a, ast.Constant)]
    return ids


ROW = re.compile(r"^\| (?P<id>[A-Z]+-\d+) \| (?P<what>.*?) \| (?P<tests>.*?) \|$")


def _order(ident: str) -> tuple[int, int]:
    family, number = ident.split("-")
    return FAMILIES.index(family.lower()), int(number)


def refresh_features(text: str, held: dict[str, list[str]]) -> str:
    """docs/features.md with its Tests column as the markers say; new features get a `?` row."""
    out: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            seen.add(m["id"])
            tests = ", ".join(f"`{t}`" for t in held.get(m["id"], []))
            line = f"| {m['id']} | {m['what']} | {tests} |"
        out.append(line)
    new = sorted((i for i in held if i not in seen), key=_order)
    if new:
        # Rows stay in inventory order: put each new one after the last row that sorts before it.
        for ident in new:
            row = f"| {ident} | ? | {', '.join(f'`{t}`' for t in held[ident])} |"
            at = max(
                (
                    k
                    for k, line in enumerate(out)
                    if (m := ROW.match(line)) and _order(m["id"]) < _order(ident)
                ),
                default=max(k for k, line in enumerate(out) if line.startswith("|---")),
            )
            out.insert(at + 1, row)
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if something would"
    )
    args = parser.parse_args()
    renames: dict[str, str] = {}
    problems: list[str] = []
    changed: dict[Path, str] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        new = convert(path, renames, problems)
        if new is not None:
            changed[path] = new
    # Referencing text is read from the converted versions where a file was converted.
    for path, new in changed.items():
        if renames:
            pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
            changed[path] = pattern.sub(lambda m: renames[m[1]], new)
    changed.update(rename_references(renames, skip=set(changed)))
    for path, new in changed.items():
        print(f"{'would change' if args.check else 'changed'} {path.relative_to(ROOT)}")
        if not args.check:
            path.write_text(new)
    if changed and not args.check:
        # The inserted imports sorted and the shortened signatures joined, as ./dev/test wants them.
        py = [str(p) for p in changed if p.suffix == ".py"]
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", "--fix", "--select", "I", *py])
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", *py])
    for p in problems:
        print(f"left alone: {p}", file=sys.stderr)
    if FEATURES.exists():
        held = markers()
        text = FEATURES.read_text()
        fresh = refresh_features(text, held)
        if fresh != text:
            print(f"{'would change' if args.check else 'changed'} docs/features.md")
            if not args.check:
                FEATURES.write_text(fresh)
            changed[FEATURES] = fresh
    print(
        f"{len(renames)} tests renamed, {len(changed)} files {'to change' if args.check else 'changed'}"
    )
    return 1 if (args.check and changed) or problems else 0


if __name__ == "__main__":
    sys.exit(main())
