"""--verify=inputs, the pure parts: what counts as read, which entry covers a file, the report (LG-03)."""

from pathlib import Path

import pytest

from vx.engine.verify import parse_mode
from vx.engine.verify_findings import Undeclared, Verdict, VerifyReport, render
from vx.engine.verify_judge import _walls, collapse, project_relative, read_paths
from vx.errors import UsageError
from vx.model import TaskId
from vx.sandbox.trace import Access

ROOT = Path("/ws")


def test_reads_are_workspace_files_read_or_executed_before_the_task_wrote_them():
    accesses = [
        Access(1, "read", "openat", "/ws/pkg/src/a.js", real="/ws/pkg/src/a.js"),
        Access(1, "write", "openat", "/ws/pkg/tmp/x"),
        Access(1, "read", "openat", "/ws/pkg/tmp/x"),  # its own scratch file: not an input
        Access(
            1, "read", "openat", "/ws/pkg/link.js", real="/ws/shared/real.js"
        ),  # the target counts
        Access(2, "exec", "execve", "/ws/pkg/run.sh"),
        Access(2, "read", "openat", "/ws/pkg/missing", errno="ENOENT"),
        Access(2, "list", "openat", "/ws/pkg/src"),
        Access(2, "read", "openat", "/usr/lib/node.so"),
        Access(2, "read", "openat", "/ws-other/x"),
        Access(3, "read", "openat", "/ws/pkg/src/a.js", real="/ws/pkg/src/a.js"),  # once
    ]
    assert read_paths(accesses, ROOT) == ["pkg/src/a.js", "shared/real.js", "pkg/run.sh"]


def test_a_directory_is_collapsed_when_every_file_under_it_was_read():
    listed = {
        "p/src": ["p/src/a", "p/src/b", "p/src/deep/c"],
        "p/src/deep": ["p/src/deep/c"],
        "p/lib": ["p/lib/x", "p/lib/y"],
        "p/one": ["p/one/z"],
    }
    seen = {"p/src/a", "p/src/b", "p/src/deep/c", "p/lib/x", "p/one/z"}

    def whole(d):
        return all(f in seen for f in listed[d])

    paths = ["p/src/a", "p/src/b", "p/src/deep/c", "p/lib/x", "p/one/z", "p/top.json"]
    assert collapse(paths, "p", whole, _walls(())) == [
        (
            "src/**",
            ["p/src/a", "p/src/b", "p/src/deep/c"],
            None,
        ),  # the highest directory read whole
        ("lib/x", ["p/lib/x"], None),  # lib/y was not read
        ("one/z", ["p/one/z"], None),  # one file stays a file
        ("top.json", ["p/top.json"], None),
    ]
    # a nested project is never swallowed, and outside a project no glob takes one in
    assert collapse(["p/src/a", "p/src/b"], "p", whole, _walls(["p/src"])) == [
        ("src/a", ["p/src/a"], None),
        ("src/b", ["p/src/b"], None),
    ]
    assert (
        collapse(["p/src/a", "p/src/b"], "", whole, _walls(["p/src"], strict=True))[0][0]
        == "p/src/**"
    )
    assert collapse(["p/src/a", "p/src/b"], "", whole, _walls(["p/src/deep"], strict=True)) == [
        ("p/src/a", ["p/src/a"], None),
        ("p/src/b", ["p/src/b"], None),
    ]


def test_many_reads_in_one_top_directory_are_one_glob_with_the_count():
    files = [f"p/src/f{i}" for i in range(9)]
    listed = {"p/src": [*files, "p/src/unread"]}
    out = collapse(files, "p", lambda d: False, _walls(()), listed=lambda d: listed[d])
    assert out == [("src/**", files, 10)]
    assert (
        len(collapse(files[:7], "p", lambda d: False, _walls(()), listed=lambda d: listed[d])) == 7
    )


@pytest.mark.parametrize(
    "glob, project, right",
    [
        ("packages/**/src/**", "packages/dom", "src/**"),
        ("packages/*/package.json", "packages/dom", "package.json"),
        ("packages/dom/src/*.ts", "packages/dom", "src/*.ts"),
        ("apps/**/src/**", "packages/dom", None),  # does not lead to the project
        ("src/**", "packages/dom", None),
    ],
)
def test_a_root_relative_glob_is_respelt_from_the_project_dir_if_it_leads_there(
    glob, project, right
):
    assert project_relative(glob, project) == right


def test_modes():
    assert parse_mode("") == parse_mode("inputs") == "inputs" and parse_mode(None) is None
    assert parse_mode("determinism") == "determinism"
    with pytest.raises(UsageError, match="not implemented yet"):
        parse_mode("fingerprint")
    with pytest.raises(UsageError, match="not a mode"):
        parse_mode("inptus")


def test_render_counts_and_blocks():
    app, lib = TaskId("app", "build"), TaskId("lib", "build")
    report = VerifyReport(
        (Verdict(lib, ()), Verdict(app, (Undeclared("x", "../x", 'cache.inputs.files: ["x"]'),))),
        untraced=(TaskId("b", "build"),),
    )
    assert render(report) == [
        "app#build read 1 undeclared input:",
        '  ../x  add cache.inputs.files: ["x"]',
        "",
        "verify: 1 undeclared input in 1 of 2 traced tasks",
        "verify: not traced (did not run): b#build",
    ]
    assert report.exit_code == 1 and VerifyReport((Verdict(lib, ()),)).exit_code == 0


def test_a_caret_edge_is_checked_in_the_project_graph_too():
    from vx.engine.verify_judge import _edge_fix, _Run
    from vx.model import Package, TaskConfig, TaskGraph, TaskNode

    a, b = TaskId("a", "build"), TaskId("b", "build")
    cfg = TaskConfig("build", "{}")
    graph = TaskGraph(
        {a: TaskNode(a, cfg, "a", ()), b: TaskNode(b, cfg, "b", ())}, (a, b), {}, (a,)
    )

    class Index:
        @staticmethod
        def could_be_input(path):
            return False

    def fix(b_deps):
        packages = {
            "a": Package("a", "a", ("b",), "a/package.json"),
            "b": Package("b", "b", b_deps, "b/package.json"),
        }
        return _edge_fix(
            _Run(ROOT, graph, {}, Index(), packages, {}), graph.nodes[a], b, "b/types/x.d.ts"
        )

    assert fix(()) is None  # `^build` on a is sound: b does not depend on a
    assert fix(("a",)).startswith(
        "no edge: b#build outputs it and depends on this task"
    )  # a workspace cycle
