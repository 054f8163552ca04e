"""The import rules of ARCHITECTURE.md, held by walking every module's imports (ast)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "vx"

# module -> the vx modules it may import (a prefix allows the whole package). Stdlib is always fine.
ALLOWED = {
    "model": set(),
    "errors": set(),
    "graph": {"model", "errors"},
    "ownership": {"model", "errors", "globs"},
    "keys": {"model"},
    "scheduler": {"model", "events"},
    "events": {"model"},
    "globs": {"errors"},
    "workspace": {"model", "errors", "semver", "witness", "frameworks", "nxprojects"},
    "nxprojects": {"model", "errors", "witness", "config"},  # only in a workspace with nx.json
    "frameworks": set(),
    "semver": set(),
    "verdicts": {"model"},
    "forwarding": set(),
    "files": {"model", "errors", "globs", "blobs", "listing", "walk", "witness", "links"},
    "links": {"witness"},
    "blobs": {"model", "errors", "globs", "witness"},
    "listing": {"model", "errors", "globs", "walk", "witness"},
    "walk": {"model", "errors", "globs", "witness"},
    "outputs": {"model", "errors", "globs", "walk", "witness"},
    "executor": {"model", "errors", "spawn"},
    "spawn": set(),
    "environment": {"errors", "frameworks"},
    # Leaves the replay of a receipt loads before anything else: they may import no vx module.
    "witness": set(),
    "style": set(),
    "stages": set(),
    "runlock": set(),
    "receipt": {"witness"},
    "restores": {"store", "errors"},  # the reader (store.unpacking) and what it raises
    "replay": {"receipt", "witness", "style", "stages", "runlock", "restores", "store"},  # store.rows
}
# msgspec is the record base everywhere (Struct builds a class in C, ~40x cheaper than a frozen
# dataclass's generated methods: docs/optimizations.md); it does no I/O, so pure modules may use it.
PURE_THIRD_PARTY = {"graph": {"msgspec"}, "keys": {"xxhash", "msgspec"}, "model": {"msgspec"}, "errors": {"msgspec"},
                    "scheduler": {"msgspec"}}


def imports_of(path: Path) -> set[str]:
    """Every `vx.*` module imported anywhere in the file (top level or lazily), without the `vx.`."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vx":
            base = node.module[3:]
            out |= {f"{base}.{a.name}".strip(".") if not base else base for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name[3:] for a in node.names if a.name.startswith("vx.")}
    return {m for m in out if m and m not in ("__version__", "CACHE_VERSION")}


def third_party_of(path: Path) -> set[str]:
    import sys

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("vx", "__future__")}


def module_files():
    for path in SRC.rglob("*.py"):
        yield ".".join(path.relative_to(SRC).with_suffix("").parts), path


def test_layered_modules_import_only_what_they_may():
    for name, path in module_files():
        if name in ALLOWED:
            bad = {m for m in imports_of(path) if m.split(".")[0] not in ALLOWED[name]}
            assert not bad, f"vx.{name} may not import {sorted(bad)}"


def test_pure_modules_use_no_third_party_beyond_their_own():
    for name, allowed in PURE_THIRD_PARTY.items():
        extra = third_party_of(SRC / f"{name}.py") - allowed
        assert not extra, f"vx.{name} imports {sorted(extra)}"


def test_only_the_entry_points_import_cli():
    for name, path in module_files():
        if name not in ("cli", "__main__"):
            assert not any(m.split(".")[0] == "cli" for m in imports_of(path)), f"vx.{name} imports vx.cli"


def test_core_never_imports_report():
    for name, path in module_files():
        if name.split(".")[0] not in ("report", "cli"):
            assert not any(m.split(".")[0] == "report" for m in imports_of(path)), f"vx.{name} imports vx.report"


def test_report_depends_only_on_values():
    for name, path in module_files():
        if name.startswith("report"):
            bad = {m for m in imports_of(path)
                   if m.split(".")[0] not in ("model", "events", "errors", "report", "verdicts", "style")}
            assert not bad, f"vx.{name} may not import {sorted(bad)}"
