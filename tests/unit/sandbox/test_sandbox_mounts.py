"""The bwrap mount plan (sandbox.md §4.3): order, walls around re-grants, covered binds dropped."""

from __future__ import annotations

import pytest

from vx.model import SandboxConfig, SandboxSpec
from vx.sandbox.grants import Layout
from vx.sandbox.mounts import bwrap_argv, tree_ops


def spec(home="/home/u") -> SandboxSpec:
    return SandboxSpec(
        "app#t",
        "packages/app/vx.config.json",
        "/w",
        "/w/p/app",
        home,
        SandboxConfig(),
        (),
        (),
        (),
        {},
        (),
        {},
    )


def test_parents_before_children_and_a_wall_is_remounted_after_its_regrants():
    layout = Layout(
        ro=["/w/p/app", "/w/node_modules", "/w/p/app/e2e/fx/dist"],
        rw=["/w/p/app/dist"],
        walls=["/w/p/app/e2e/fx"],
    )
    assert tree_ops(layout) == [
        "--ro-bind",
        "/w/node_modules",
        "/w/node_modules",
        "--ro-bind",
        "/w/p/app",
        "/w/p/app",
        "--bind",
        "/w/p/app/dist",
        "/w/p/app/dist",
        "--tmpfs",
        "/w/p/app/e2e/fx",
        "--ro-bind",
        "/w/p/app/e2e/fx/dist",
        "/w/p/app/e2e/fx/dist",
        "--remount-ro",
        "/w/p/app/e2e/fx",
    ]


def test_covered_binds_are_dropped_and_write_wins_over_read():
    layout = Layout(
        ro=["/w/p/app/src", "/w/p/app/src/lib", "/w/p/app/dist"],
        rw=["/w/p/app/dist", "/w/p/app/out"],
    )
    assert tree_ops(Layout(ro=["/w/p/app/out/x"], rw=["/w/p/app/out"])) == [
        "--bind",
        "/w/p/app/out",
        "/w/p/app/out",
    ]
    assert tree_ops(layout) == [
        "--bind",
        "/w/p/app/dist",
        "/w/p/app/dist",
        "--bind",
        "/w/p/app/out",
        "/w/p/app/out",
        "--ro-bind",
        "/w/p/app/src",
        "/w/p/app/src",
    ]


def test_a_read_grant_inside_a_write_bind_is_pinned_read_only_and_a_write_inside_it_reapplied():  # item 2
    layout = Layout(
        ro=["/w/p/app/src"], rw=["/w/p/app", "/w/p/app/src/gen"], pinned=["/w/p/app/src"]
    )
    assert tree_ops(layout) == [
        "--bind",
        "/w/p/app",
        "/w/p/app",
        "--ro-bind",
        "/w/p/app/src",
        "/w/p/app/src",
        "--bind",
        "/w/p/app/src/gen",
        "/w/p/app/src/gen",
    ]


def test_a_wall_outside_every_bind_needs_no_mount():
    assert tree_ops(Layout(walls=["/w/.git"])) == []


def test_argv_order_host_ro_private_tmp_stores_anchor_grants_tmpdir_cwd():
    layout = Layout(
        ro=["/w/p/app/src"],
        hidden_dirs=["/home/u/.ssh"],
        hidden_files=["/home/u/.npmrc"],
        protected=["/w/p/app/dist/.bashrc"],
        rw=["/w/p/app/dist"],
    )
    argv = bwrap_argv("bwrap", spec(), layout, tmpdir="/tmp/vx-s/t-1/tmp", status_fd=9)
    assert argv[:10] == [
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--json-status-fd",
        "9",
        "--ro-bind",
        "/",
    ]
    joined = " ".join(argv)
    order = [
        "--tmpfs /tmp",
        "--tmpfs /home/u/.ssh --remount-ro /home/u/.ssh",
        "--ro-bind /dev/null /home/u/.npmrc",
        "--tmpfs /w --dir /w/p/app",
        "--bind /w/p/app/dist",
        "--ro-bind /w/p/app/dist/.bashrc",
        "--bind /tmp/vx-s/t-1/tmp",
        "--chdir /w/p/app --",
    ]
    positions = [joined.index(part) for part in order]
    assert positions == sorted(positions) and argv[-1] == "--"
    assert "--share-net" not in argv  # no network by default (SB-08)


def test_home_under_tmp_stays_readable_and_net_can_be_shared():
    argv = bwrap_argv(
        "bwrap", spec(home="/tmp/ci/home"), Layout(), tmpdir="/tmp/t", status_fd=4, share_net=True
    )
    joined = " ".join(argv)
    assert "--share-net" in argv and joined.index("--tmpfs /tmp") < joined.index(
        "--ro-bind /tmp/ci/home"
    )


@pytest.mark.feature("SB-09")
def test_the_unix_socket_filter_is_handed_to_bwrap_when_asked():
    argv = bwrap_argv("bwrap", spec(), Layout(), tmpdir="/tmp/t", status_fd=4, seccomp_fd=7)
    assert argv[argv.index("--seccomp") + 1] == "7"
    assert "--seccomp" not in bwrap_argv("bwrap", spec(), Layout(), tmpdir="/tmp/t", status_fd=4)
