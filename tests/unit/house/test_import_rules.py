"""The import rules of docs/architecture.md, held by walking every module's imports (ast)."""

import ast
from collections.abc import Mapping, Set
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "vx"

# module -> the vx modules it may import (a package allows all of its modules). Stdlib is always fine.
ALLOWED = {
    "model": set(),
    "errors": set(),
    "events": {"model"},
    "plan.graph": {"model", "errors"},
    "plan.ownership": {"model", "errors", "files.globs"},
    "plan.keys": {"model"},
    "plan.forwarding": set(),
    "plan.environment": {"errors", "workspace.frameworks"},
    "engine.scheduler": {"model", "events"},
    "engine.schedule": {"model"},
    "engine.verdicts": {"model"},
    "proc.executor": {"model", "errors", "proc.spawn", "proc.descendants", "proc.warden"},
    "proc.masking": {"model"},
    "proc.spawn": {"proc.descendants", "proc.warden"},
    "proc.warden": set(),
    "proc.descendants": set(),
    "workspace.discover": {
        "model",
        "errors",
        "workspace.semver",
        "witness",
        "workspace.frameworks",
        "workspace.nxprojects",
    },
    "workspace.nxprojects": {
        "model",
        "errors",
        "witness",
        "config",
    },  # only in a workspace with nx.json
    "workspace.frameworks": set(),
    "workspace.semver": set(),
    "files.globs": {"errors"},
    "files.index": {
        "model",
        "errors",
        "files.globs",
        "files.blobs",
        "files.git",
        "files.tree",
        "witness",
        "files.links",
    },
    "files.links": {"witness"},
    "files.blobs": {"model", "errors", "files.globs", "witness"},
    "files.git": {"model", "errors", "files.globs", "files.tree", "files.attributes", "witness"},
    "files.attributes": {"files.blobs", "dotvx"},
    "files.tree": {"model", "errors", "files.globs", "witness"},
    "files.outputs": {"model", "errors", "files.globs", "files.tree", "witness"},
    # Leaves the replay of a receipt loads before anything else: they may import no vx module.
    "witness": set(),
    "style": set(),
    "stages": set(),
    "runlock": set(),
    "install": set(),
    "fastpath.receipt": {"witness", "dotvx"},
    "dotvx": set(),
    "fastpath.restores": {"store", "errors"},  # the reader (store.unpacking) and what it raises
    "fastpath.replay": {
        "fastpath.receipt",
        "dotvx",  # the digest of the GIT_* variables a vouched-for index was read under
        "witness",
        "style",
        "stages",
        "runlock",
        "fastpath.restores",
        "store.rows",
        "store.runs",
    },
}
# msgspec is the record base everywhere (Struct builds a class in C, ~40x cheaper than a frozen
# dataclass's generated methods: docs/optimizations.md); it does no I/O, so pure modules may use it.
PURE_THIRD_PARTY = {
    "plan.graph": {"msgspec"},
    "plan.keys": {"xxhash", "msgspec"},
    "model": {"msgspec"},
    "errors": {"msgspec"},
    "engine.scheduler": {"msgspec"},
    "engine.schedule": {"msgspec"},
}
CLI = {"cli", "__main__", "api"}  # the front ends: the command line and vx as a library
REPORT = {"report"}
VALUES = {
    "model",
    "events",
    "errors",
    "engine.verdicts",
    "style",
    "install",  # how vx starts itself again: the TUI's view is a process of it
}  # what report/ may import besides itself

# ---------------------------------------------------------------- the graph and its layers
# docs/architecture.md describes these. Every import, lazy ones included, points at a leaf, at its
# own layer or at one below; and no chain of imports comes back to where it started.

# Leaves: import no vx module but other leaves (the replay of a receipt loads nothing else), so
# any layer may use them.
LEAVES = {
    "model",
    "install",
    "errors",
    "events",
    "engine.verdicts",
    "workspace.semver",
    "workspace.frameworks",
    "plan.forwarding",
    "witness",
    "style",
    "stages",
    "runlock",
    "dotvx",
    "fastpath.receipt",
    "proc.spawn",
    "proc.warden",
    "proc.descendants",
    "proc.masking",
    "files.lockfile",
}
LAYERS = [  # bottom first: (layer, the packages and modules in it)
    ("process", {"proc"}),
    ("files", {"files"}),
    ("store", {"store"}),
    ("sandbox", {"sandbox"}),
    ("config", {"config"}),
    ("workspace", {"workspace"}),
    ("plan", {"plan"}),
    ("engine", {"engine"}),
    ("report", {"report"}),
    ("fastpath", {"fastpath"}),
    ("plugins", {"plugins"}),
    ("pipeline", {"pipeline", "prepare"}),
    ("cli", CLI),
]
# The imports that point up a layer, each named in docs/architecture.md with its reason; type-only
# imports count. Nothing may join this list without a line there.
UPWARD = {
    ("config.nx", "workspace.nxprojects"),  # Nx's projects are found and read in one place
    ("model", "files.outputs"),  # TaskPlan.outputs is typed by the spec it holds (type only)
}
# ---------------------------------------------------------------- (end of the tables)


def within(module: str, names) -> bool:
    """Whether `module` (without `vx.`) is one of `names` or inside one of them."""
    return any(module == n or module.startswith(n + ".") for n in names)


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree but those under `if TYPE_CHECKING:` (imports for annotations only,
    never executed)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


# The tree is parsed once for the whole module: every rule below reads the same files.
@lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@lru_cache(maxsize=None)
def imports_of(path: Path) -> frozenset[str]:
    """Every `vx.*` module imported anywhere in the file (top level or lazily), without the `vx.`;
    imports for type checking only do not count."""
    out = set()
    modules = {m.removeprefix("vx.") for m in _module_names()}
    for node in _runtime_nodes(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vx":
            base = node.module[3:]
            # `from vx.pkg import mod` imports the module; `from vx.mod import name`, the module
            out |= {
                f"{base}.{a.name}".strip(".") if f"{base}.{a.name}".strip(".") in modules else base
                for a in node.names
            }
        elif isinstance(node, ast.Import):
            out |= {a.name[3:] for a in node.names if a.name.startswith("vx.")}
    return frozenset(m for m in out if m and m not in ("__version__", "CACHE_VERSION"))


def third_party_of(path: Path) -> set[str]:
    import sys

    names = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("vx", "__future__")}


@lru_cache(maxsize=None)
def module_files() -> tuple[tuple[str, Path], ...]:
    return tuple(
        (".".join(path.relative_to(SRC).with_suffix("").parts), path) for path in SRC.rglob("*.py")
    )


def test_layered_modules_import_only_what_they_may():
    for name, path in module_files():
        if name in ALLOWED:
            bad = {m for m in imports_of(path) if not within(m, ALLOWED[name])}
            assert not bad, f"vx.{name} may not import {sorted(bad)}"


def test_pure_modules_use_no_third_party_beyond_their_own():
    for name, allowed in PURE_THIRD_PARTY.items():
        extra = third_party_of(SRC / (name.replace(".", "/") + ".py")) - allowed
        assert not extra, f"vx.{name} imports {sorted(extra)}"


def test_only_the_entry_points_import_cli():
    for name, path in module_files():
        # the package's own `__init__` hands out `vx.run` (vx.api) when it is first asked for
        if not within(name, CLI) and not (name == "__init__" and imports_of(path) == {"api"}):
            assert not any(within(m, CLI) for m in imports_of(path)), f"vx.{name} imports the CLI"


# A plugin vx ships that reports a run, as the CLI does: called with the run's events by the seam,
# loaded only where a workspace declares it.
REPORTING_PLUGINS = {"plugins.ci"}


def test_core_never_imports_report():
    for name, path in module_files():
        if not within(name, REPORT | CLI | REPORTING_PLUGINS):
            bad = {m for m in imports_of(path) if within(m, REPORT) and m not in LEAVES}
            assert not bad, f"vx.{name} imports {sorted(bad)}"


def test_report_depends_only_on_values():
    for name, path in module_files():
        if within(name, REPORT):
            bad = {m for m in imports_of(path) if not within(m, REPORT | VALUES)}
            assert not bad, f"vx.{name} may not import {sorted(bad)}"


@lru_cache(maxsize=None)
def _module_names() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@lru_cache(maxsize=None)
def import_graph(types: bool = False) -> dict[str, frozenset[str]]:
    """module -> the vx modules it imports at run time (top level or inside a function), each
    resolved to the module or package file that exists; with `types`, the imports for type
    checking only too."""
    names = _module_names()

    def resolve(name: str) -> str:
        while name not in names:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in names.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        out = set()
        tree = parsed(path)
        for node in ast.walk(tree) if types else _runtime_nodes(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] == "vx":
                    out |= {resolve(f"{base}.{alias.name}") for alias in node.names}
            elif isinstance(node, ast.Import):
                out |= {resolve(a.name) for a in node.names if a.name.split(".")[0] == "vx"}
        graph[module] = frozenset(out - {module, "vx"})
    return graph


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_finds_a_lazy_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle_even_through_lazy_imports():
    assert cycles(import_graph()) == []


def _layer(module: str) -> int | None:
    """The rank of the layer holding `module` (without `vx.`): its longest listed prefix."""
    best = None
    for rank, (_, members) in enumerate(LAYERS):
        for name in members:
            if within(module, {name}) and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    return None if best is None else best[0]


def test_every_module_has_a_layer():
    unplaced = sorted(
        m
        for m in import_graph()
        if m != "vx"
        and m.removeprefix("vx.") not in LEAVES
        and _layer(m.removeprefix("vx.")) is None
    )
    assert not unplaced, f"add these to LAYERS (and docs/architecture.md): {unplaced}"


def test_no_cycle_even_through_type_checking_imports():
    assert cycles(import_graph(types=True)) == []


def test_leaves_import_only_leaves():
    for module, imported in import_graph(types=True).items():
        name = module.removeprefix("vx.")
        if name in LEAVES:
            bad = sorted(
                m
                for m in imported
                if m.removeprefix("vx.") not in LEAVES
                and (name, m.removeprefix("vx.")) not in UPWARD
            )
            assert not bad, f"{module} is a leaf and may import only leaves, not {bad}"


def test_imports_point_down_the_layers():
    """Type-checking imports included: a type named from a layer above is a leaf out of place."""
    bad = []
    for module, imported in import_graph(types=True).items():
        name = module.removeprefix("vx.")
        if module == "vx" or name in LEAVES:
            continue
        for other in imported:
            if other.removeprefix("vx.") in LEAVES or (name, other.removeprefix("vx.")) in UPWARD:
                continue
            low, high = _layer(other.removeprefix("vx.")), _layer(name)
            if low is not None and high is not None and low > high:
                bad.append(f"{module} ({LAYERS[high][0]}) -> {other} ({LAYERS[low][0]})")
    assert not bad, "imports that point up:\n" + "\n".join(sorted(bad))


def test_every_upward_import_is_still_there():
    """A listed exception that no import uses any more leaves the list."""
    graph = import_graph(types=True)
    gone = sorted(f"{a} -> {b}" for a, b in UPWARD if f"vx.{b}" not in graph.get(f"vx.{a}", ()))
    assert not gone, f"drop these from UPWARD (and docs/architecture.md): {gone}"


def private_crossings() -> list[str]:
    """Every `_name` one module takes from another: `from vx.m import _x`, or `m._x` on a module
    it imported. A helper two modules share is public (CONTRIBUTING.md)."""
    names = _module_names()
    found = []
    for module, path in names.items():
        tree = ast.parse(path.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vx":
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in names:
                        aliases[a.asname or a.name] = full
                    elif a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{module} imports {node.module}.{a.name}")
            elif isinstance(node, ast.Import):
                aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in names}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{module} uses {aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_private_name_crosses_a_module():
    crossing = private_crossings()
    assert not crossing, "give these a public name:\n" + "\n".join(crossing)
