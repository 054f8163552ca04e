"""Render a task's Layout as a bwrap command line (sandbox.md §4.3). Pure: values in, argv out.

bwrap applies mount operations in order, a later one shadowing an earlier one, so the order
is the design: the host read-only, a private /tmp, credential stores hidden, then the
workspace replaced by an empty writable scratch (the deny anchor), then the grants — parents
before children — with each wall cut out of the grant that holds it (a tmpfs made read-only
*after* any re-grant inside it, so a write there fails loudly instead of vanishing).
"""

from __future__ import annotations

from typing import Sequence

from msgspec import Struct

from vx.model import SandboxSpec
from vx.sandbox.grants import Layout

PROCESS_FLAGS = ("--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL")


class Node(Struct, frozen=True):
    path: str
    kind: str  # ro | rw | wall | pin (read-only even inside rw)


def bwrap_argv(
    bwrap: str,
    spec: SandboxSpec,
    layout: Layout,
    *,
    tmpdir: str,
    status_fd: int,
    share_net: bool = False,
    sockets: Sequence[str] = (),
    seccomp_fd: int | None = None,
    private: Sequence[str] = (),
) -> list[str]:
    """The whole bwrap prefix for one attempt; the command to run inside follows it."""
    argv = [
        bwrap,
        *PROCESS_FLAGS,
        *(["--share-net"] if share_net else []),
        "--json-status-fd",
        str(status_fd),
    ]
    argv += ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if _under(spec.home, "/tmp") and not _under(spec.home, spec.root):
        argv += [
            "--ro-bind",
            spec.home,
            spec.home,
        ]  # HOME stays readable when it lives in /tmp (CI)
    argv += _hidden(layout)
    argv += ["--tmpfs", spec.root, "--dir", spec.project]
    argv += tree_ops(layout)
    # A link a read grant was written through, where no bind brought it in already: made again so
    # the path the task uses leads to the bound target (links come outermost first).
    binds = [*layout.ro, *layout.rw]
    argv += [
        op
        for path, target in layout.links
        if not any(_under(path, b) for b in binds)
        for op in ("--symlink", target, path)
    ]
    argv += [
        op
        for path in layout.protected
        if not _walled(path, layout)
        for op in ("--ro-bind", path, path)
    ]
    argv += [
        op for path in private for op in ("--tmpfs", path)
    ]  # vx's temp dirs: every task's, every run's
    argv += ["--bind", tmpdir, tmpdir]
    argv += [op for path in sockets for op in ("--bind", path, path)]
    return argv + ["--chdir", spec.project, "--"]


def _hidden(layout: Layout) -> list[str]:
    """Credential stores: a directory reads empty and refuses writes; a file reads empty."""
    ops: list[str] = []
    for path in layout.hidden_dirs:
        ops += ["--tmpfs", path, "--remount-ro", path]
    for path in layout.hidden_files:
        ops += ["--ro-bind", "/dev/null", path]
    return ops


def tree_ops(layout: Layout) -> list[str]:
    """Binds and walls in one depth-first walk: a parent before its children, a wall's
    `--remount-ro` after everything mounted inside it, covered binds dropped."""
    ops: list[str] = []
    stack: list[Node] = []
    for node in _nodes(layout):
        while stack and not _under(node.path, stack[-1].path):
            _close(stack.pop(), ops)
        parent = stack[-1] if stack else None
        if _covered(node, parent):
            continue
        ops += (
            ["--tmpfs", node.path]
            if node.kind == "wall"
            else [_BIND[node.kind], node.path, node.path]
        )
        stack.append(node)
    while stack:
        _close(stack.pop(), ops)
    return ops


_BIND = {"ro": "--ro-bind", "rw": "--bind", "pin": "--ro-bind"}


def _nodes(layout: Layout) -> list[Node]:
    """One node per path (a write bind wins over a read bind of the same path), in tree order."""
    kinds: dict[str, str] = {}
    for kind, paths in (
        ("ro", layout.ro),
        ("rw", layout.rw),
        ("pin", layout.pinned),
        ("wall", layout.walls),
    ):
        for path in paths:
            if kinds.get(path) != "wall":
                kinds[path] = kind
    return sorted((Node(p, k) for p, k in kinds.items()), key=lambda n: n.path.split("/"))


def _covered(node: Node, parent: Node | None) -> bool:
    """A bind inside a bind that already grants as much adds nothing; a wall needs a grant around it."""
    if parent is None:
        return node.kind == "wall"
    if node.kind == "wall":
        return parent.kind == "wall"
    if node.kind == "pin":
        return parent.kind in ("ro", "pin")
    return parent.kind == "rw" or (parent.kind in ("ro", "pin") and node.kind in ("ro", "pin"))


def _close(node: Node, ops: list[str]) -> None:
    if node.kind == "wall":
        ops += ["--remount-ro", node.path]


def _walled(path: str, layout: Layout) -> bool:
    return any(_under(path, wall) for wall in layout.walls)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")
