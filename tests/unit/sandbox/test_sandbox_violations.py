"""Judging accesses against grants (SB-05, SB-06, SB-07, SB-10, SB-12; sandbox.md §4.10), host faked."""

from __future__ import annotations

import pytest

from vx.model import SandboxConfig, SandboxSpec, Violation
from vx.sandbox.grants import Layout, resolve
from vx.sandbox.trace import Access
from vx.sandbox.violations import Judge

P, ROOT, HOME, TMP = "/w/packages/app", "/w", "/home/u", "/tmp/vx/t-1/tmp"
HOST = {
    f"{P}/src/a.js",
    f"{P}/fixture.json",
    f"{P}/package.json",
    "/w/packages/lib/src/index.js",
    "/w/packages/ui/x.js",
    "/w/package.json",
    "/w/shared/x.js",
    "/w/.git/config",
    f"{P}/nested/src/n.js",
}


LINKS = {"/w/node_modules/lib/src/index.js": "/w/packages/lib/src/index.js"}


def grants(*texts):
    return tuple(g for t in texts for g in resolve(t, P, HOME, realpath=False))


def make_spec(read=("src/**",), write=("dist/",), ignore_read=(), ignore_write=(), withheld=None):
    return SandboxSpec(
        "app#t",
        "packages/app/vx.config.json",
        ROOT,
        P,
        HOME,
        SandboxConfig(),
        grants(*read),
        grants(*write),
        ("/w/.git", "/w/.vx", "/w/packages/lib", "/w/packages/ui", f"{P}/nested"),
        {"/w": "root", "/w/packages/lib": "lib", "/w/packages/ui": "ui", f"{P}/nested": "nested"},
        (),
        withheld or {},
        grants(*ignore_read),
        grants(*ignore_write),
    )


def judge(accesses, **kw):
    return Judge(
        make_spec(**kw),
        Layout(),
        TMP,
        is_file=HOST.__contains__,
        realpath=lambda p: LINKS.get(p, p),
    ).judge(accesses)


def read(path, errno="ENOENT"):
    return Access(1, "read", "openat", path, errno)


def write(path, errno=None):
    return Access(1, "write", "openat", path, errno)


def test_reads_inside_the_project_outside_grants_of_existing_files_count():
    report = judge(
        [
            read(f"{P}/src/a.js", None),
            read(f"{P}/fixture.json"),
            read(f"{P}/nope.json"),
            read(f"{P}/fixture.json"),
        ]
    )
    assert report.violations == [
        Violation("read", "packages/app/fixture.json", 'allow.read "fixture.json"')
    ]


def test_writes_in_the_workspace_outside_write_grants_count_wherever_they_landed():
    report = judge(
        [
            write(f"{P}/dist/o.js"),
            write(f"{P}/out.txt"),
            write(f"{P}/ro.txt", "EROFS"),
            write("/w/packages/ui/dist/x", "EROFS"),
            write(f"{TMP}/scratch"),
        ]
    )
    assert report.violations == [
        Violation("write", "packages/app/out.txt", 'allow.write "out.txt"'),
        Violation("write", "packages/app/ro.txt", 'allow.write "ro.txt"'),
        Violation("write", "packages/ui/dist/x", "none: a task writes only inside its own project"),
    ]


def test_walls_root_files_and_the_outside_are_not_counted():
    report = judge(
        [
            read("/w/.git/config"),
            read("/w/package.json"),
            read("/etc/passwd", None),
            Access(1, "list", "openat", f"{P}/fixture.json", "ENOENT"),
            read("pipe:[12]"),
        ]
    )
    assert report.violations == [] and report.refused_outside == []


def test_a_file_in_a_root_project_directory_is_counted_and_a_root_level_one_is_not():
    """Only root-level files are the sandbox working; `shared/x.js` at the root is a read like a
    sibling's (before, the root project's files were all exempt). A failed read through a link
    counts where the host would have taken it, and so does a refused stat (node's `require`)."""
    LINKS[f"{P}/lib/x.js"] = "/w/shared/x.js"
    try:
        report = judge([read("/w/package.json"), read(f"{P}/lib/x.js")])
        looked = [
            judge([Access(1, "lookup", "newfstatat", path, "ENOENT")]).violations
            for path in ("/w/shared/x.js", f"{P}/lib/x.js", "/w/package.json")
        ]
    finally:
        del LINKS[f"{P}/lib/x.js"]
    found = [Violation("read", "shared/x.js", 'allow.read "../../shared/x.js"')]
    assert report.violations == found
    assert looked == [found, found, []]


@pytest.mark.feature("SB-07")
def test_siblings_nested_projects_and_withheld_linked_packages():
    report = judge(
        [
            read("/w/packages/ui/x.js"),
            read(f"{P}/nested/src/n.js"),
            read("/w/packages/lib/src/index.js"),
        ],
        withheld={"/w/packages/lib": "lib"},
    )
    assert report.violations == [
        Violation("read", "packages/app/nested/src/n.js", 'allow.read "nested/src/n.js"'),
        Violation(
            "read",
            "packages/lib/src/index.js",
            'dependsOn "lib#build": the key folds no task of lib, so the sandbox withholds it',
        ),
        Violation("read", "packages/ui/x.js", 'allow.read "../ui/x.js"'),
    ]


@pytest.mark.feature("SB-10")
def test_ignore_silences_matching_paths():
    report = judge(
        [read(f"{P}/fixture.json"), write(f"{P}/node_modules/.cache/x")],
        ignore_read=("*.json",),
        ignore_write=("node_modules/.cache/**",),
    )
    assert report.violations == []


def test_a_path_written_and_read_back_counts_once_as_a_write():
    report = judge([write(f"{P}/package.json"), read(f"{P}/package.json", None)])
    assert [v.kind for v in report.violations] == ["write"]


@pytest.mark.feature("SB-12")
def test_refused_writes_outside_become_a_hint_for_a_failed_task():  # seed 0.0.217
    spec = make_spec()
    report = Judge(spec, Layout(), TMP, is_file=HOST.__contains__).judge(
        [
            write("/home/u/.cache/t/a", "EROFS"),
            write("/home/u/.cache/t/b", "EROFS"),
            write("/tmp/ok"),
            write("/dev/null"),
        ]
    )
    assert report.violations == [] and report.refused_outside == [
        "/home/u/.cache/t/a",
        "/home/u/.cache/t/b",
    ]
    (hint,) = report.failure_hints(spec)
    assert "~/.cache/t/a, ~/.cache/t/b" in hint and '`allow: { write: ["~/.cache/t/"] }`' in hint


def test_scratch_globs_cover_their_writes():
    spec = make_spec(write=(".*.tmp/**",))
    layout = Layout(scratch=list(spec.writes))
    report = Judge(spec, layout, TMP, is_file=HOST.__contains__).judge([write(f"{P}/.a-0.tmp/f")])
    assert report.violations == []


@pytest.mark.feature("SB-07")
def test_the_project_package_json_and_node_modules_are_always_readable():  # every key folds package.json
    report = judge([read(f"{P}/package.json"), read("/w/node_modules/x/index.js", None)], read=())
    assert report.violations == []


@pytest.mark.feature("SB-07")
def test_a_failed_read_through_a_node_modules_link_is_judged_where_the_link_points():
    report = judge([read("/w/node_modules/lib/src/index.js")], withheld={"/w/packages/lib": "lib"})
    assert [v.path for v in report.violations] == ["packages/lib/src/index.js"]
