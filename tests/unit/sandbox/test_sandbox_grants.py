"""Grants: resolving config text, coverage, plan-time refusals and start-time expansion (SB-02..SB-07, SB-11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vx.errors import ConfigError
from vx.model import SandboxConfig
from vx.sandbox.grants import expand, folded_packages, linked_packages, plan_sandbox, resolve

P, HOME = "/w/packages/app", "/home/u"


def one(text: str):
    (grant,) = resolve(text, P, HOME, realpath=False)
    return grant


@pytest.mark.parametrize(
    "text, base, pattern, directory",
    [
        ("src/**", "/w/packages/app/src", None, True),  # SB-03: dir/** is dir
        ("src/**/*", "/w/packages/app/src", None, True),
        ("dist/", "/w/packages/app/dist", None, True),
        (".", "/w/packages/app", None, True),
        ("tsconfig.json", "/w/packages/app/tsconfig.json", None, False),
        ("../../tsconfig.base.json", "/w/tsconfig.base.json", None, False),
        ("~/.cache/tool/", "/home/u/.cache/tool", None, True),
        ("/opt/sdk/**", "/opt/sdk", None, True),
        ("src/**/*.ts", "/w/packages/app/src", "**/*.ts", False),
        ("*.tsbuildinfo", "/w/packages/app", "*.tsbuildinfo", False),
    ],
)
def test_resolve(text, base, pattern, directory):
    grant = one(text)
    assert (grant.base, grant.pattern.patterns[0] if grant.pattern else None, grant.directory) == (
        base,
        pattern,
        directory,
    )


def test_braces_make_one_grant_per_alternative():
    assert [g.base for g in resolve("{src,test}/**", P, HOME, realpath=False)] == [
        f"{P}/src",
        f"{P}/test",
    ]


def test_coverage_of_literals_globs_and_directory_globs():
    assert one("src/**").covers(f"{P}/src/a/b.js") and not one("src/**").covers(f"{P}/srcx")
    assert one("tsconfig.json").covers(f"{P}/tsconfig.json") and not one("tsconfig.json").covers(
        f"{P}/x"
    )
    ts = one("src/**/*.ts")
    assert ts.covers(f"{P}/src/a/b.ts") and not ts.covers(f"{P}/src/a/b.json")
    tmp = one(".*.tmp/**")
    assert tmp.dir_glob and tmp.covers(f"{P}/.ab-00.tmp/deep/f") and not tmp.covers(f"{P}/src/a")


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "w"
    for d in (
        "packages/app/src",
        "packages/app/e2e/fixture",
        "packages/lib/src",
        "packages/ui",
        ".git",
        ".vx",
    ):
        (root / d).mkdir(parents=True)
    return root


PROJECTS = {
    "": "root",
    "packages/app": "app",
    "packages/app/e2e/fixture": "fixture",
    "packages/lib": "lib",
    "packages/ui": "ui",
}


def plan(root: Path, config: SandboxConfig, **kw):
    args = dict(
        root=root,
        project_rel="packages/app",
        task="app#build",
        task_name="build",
        projects=PROJECTS,
        linked=["lib", "ui"],
        folded=None,
        cache_dir=root / ".vx" / "cache",
        home=str(root.parent / "home"),
    )
    args.update(kw)
    return plan_sandbox(config, **args)


@pytest.mark.feature("SB-05")
def test_walls_are_other_projects_git_and_vx(tmp_path):
    root = workspace(tmp_path)
    spec = plan(root, SandboxConfig())
    assert {os.path.relpath(w, root) for w in spec.walls} == {
        ".git",
        ".vx",
        ".vx/cache",
        "packages/app/e2e/fixture",
        "packages/lib",
        "packages/ui",
    }


@pytest.mark.feature("SB-07")
def test_a_cached_task_gets_only_the_linked_packages_its_key_folds(tmp_path):
    root = workspace(tmp_path)
    spec = plan(root, SandboxConfig(), folded=["lib"])
    assert spec.linked == (str(root / "packages/lib"),)
    assert spec.withheld == {str(root / "packages/ui"): "ui"}
    assert plan(root, SandboxConfig()).linked == (
        str(root / "packages/lib"),
        str(root / "packages/ui"),
    )


@pytest.mark.feature("SB-04")
@pytest.mark.parametrize(
    "grant, words",
    [
        ("e2e/fixture/out/", "would make packages/app/e2e/fixture writable"),
        ("link/", "leaves the project"),
    ],
)
def test_write_grants_into_walls_or_through_links_out_are_refused(tmp_path, grant, words):
    root = workspace(tmp_path)
    (root / "packages/app/link").symlink_to(root / "packages/lib")
    with pytest.raises(ConfigError) as err:
        plan(root, SandboxConfig(write=(grant,)))
    assert (
        words in err.value.message and err.value.field == "tasks.build.exec.sandbox.allow.write[0]"
    )
    assert err.value.file == "packages/app/vx.config.json"


@pytest.mark.feature("SB-04")
def test_expand_creates_write_grants_and_records_placeholders(tmp_path):
    root = workspace(tmp_path)
    spec = plan(
        root, SandboxConfig(read=("src/**", "missing.json"), write=("dist/", "out/stats.json"))
    )
    layout = expand(spec)
    app = root / "packages/app"
    assert (app / "dist").is_dir() and (app / "out/stats.json").is_file()
    assert set(layout.placeholders) == {
        str(app / "dist"),
        str(app / "out"),
        str(app / "out/stats.json"),
    }
    assert str(app / "src") in layout.ro and str(app / "missing.json") not in layout.ro
    assert set(layout.rw) == {
        str(app / "dist"),
        str(app / "out"),
    }  # a file grant widens to its directory


def test_a_directory_glob_that_matched_nothing_is_scratch_unless_a_read_bind_holds_it(
    tmp_path,
):  # seed 0.0.217
    root = workspace(tmp_path)
    assert [g.text for g in expand(plan(root, SandboxConfig(write=(".*.tmp/**",)))).scratch] == [
        ".*.tmp/**"
    ]
    held = expand(plan(root, SandboxConfig(read=(".",), write=(".*.tmp/**",))))
    assert held.scratch == [] and [g.text for g in held.mountless] == [".*.tmp/**"]
    (root / "packages/app/.ab.tmp").mkdir()
    assert expand(plan(root, SandboxConfig(write=(".*.tmp/**",)))).rw == [
        str(root / "packages/app/.ab.tmp")
    ]


@pytest.mark.feature("SB-05")
def test_walls_apply_only_inside_a_bind(tmp_path):
    root = workspace(tmp_path)
    assert expand(plan(root, SandboxConfig(read=("src/**",)))).walls == []
    assert expand(plan(root, SandboxConfig(read=(".",)))).walls == [
        str(root / "packages/app/e2e/fixture")
    ]


@pytest.mark.feature("SB-06")
def test_credential_stores_are_hidden_unless_granted(tmp_path):
    root = workspace(tmp_path)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".npmrc").write_text("t")
    layout = expand(plan(root, SandboxConfig()))
    assert layout.hidden_dirs == [str(home / ".ssh")] and layout.hidden_files == [
        str(home / ".npmrc")
    ]
    assert expand(plan(root, SandboxConfig(read=("~/.ssh/known_hosts",)))).hidden_dirs == []


@pytest.mark.feature("SB-11")
def test_protected_config_files_inside_write_grants_stay_read_only(tmp_path):
    root = workspace(tmp_path)
    (root / "packages/app/dist/sub").mkdir(parents=True)
    (root / "packages/app/dist/sub/.bashrc").write_text("x")
    layout = expand(plan(root, SandboxConfig(write=("dist/",))))
    assert layout.protected == [str(root / "packages/app/dist/sub/.bashrc")]


class Pkg:
    def __init__(self, deps):
        self.deps = deps


def test_linked_packages_are_transitive():
    packages = {"app": Pkg(["ui"]), "ui": Pkg(["core", "react"]), "core": Pkg([])}
    assert linked_packages(packages, "app") == {"ui", "core"}


class Node:
    def __init__(self, tid, deps, group=False, tasks=None):
        self.id, self.deps, self.is_group = tid, deps, group
        self.config = type(
            "C",
            (),
            {"cache": type("K", (), {"input_tasks": tasks})() if tasks is not None else None},
        )


class Tid(tuple):
    @property
    def package(self):
        return self[0]


def test_folded_packages_follow_the_key_through_groups_and_filters():
    a, b, g, c = (
        Tid(("app", "build")),
        Tid(("ui", "build")),
        Tid(("app", "all")),
        Tid(("core", "build")),
    )
    nodes = {a: Node(a, [g]), g: Node(g, [b], group=True), b: Node(b, [c]), c: Node(c, [])}
    select = lambda owner, deps, pats: list(deps)  # noqa: E731  (keys.select_upstream with the default filter)
    # the group keys nothing of app's own (the task's own project is never withheld anyway)
    assert folded_packages(nodes, a, select) == {"ui", "core"}
    assert folded_packages(nodes, a, lambda owner, deps, pats: []) == set()


def test_a_group_keyed_on_nothing_of_its_own_folds_its_deps_but_not_its_package():
    """An Nx project's implicit `build` passes over it to its dependencies' builds: `lib#build`
    in dependsOn keys none of lib's files, so lib is not folded; vx's own implicit `build` (a
    group keyed on the project's files) folds it."""
    a, lib, core = Tid(("app", "build")), Tid(("lib", "build")), Tid(("core", "build"))
    select = lambda owner, deps, pats: list(deps)  # noqa: E731
    nodes = {a: Node(a, [lib]), lib: Node(lib, [core], group=True), core: Node(core, [])}
    assert folded_packages(nodes, a, select) == {"core"}
    nodes[lib] = Node(lib, [core], group=True, tasks=())  # a cache: keyed on lib's files
    assert folded_packages(nodes, a, select) == {"lib", "core"}


@pytest.mark.feature("SB-18")
def test_a_project_path_with_glob_characters_stays_literal():  # no refusal needed on Linux
    (grant,) = resolve("src/*.ts", "/w/odd*[dir]", HOME, realpath=False)
    assert grant.base == "/w/odd*[dir]/src" and grant.covers("/w/odd*[dir]/src/a.ts")
