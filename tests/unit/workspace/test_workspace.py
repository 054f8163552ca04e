"""Workspace discovery, member globs and the package graph (WS-01..04, WS-20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vx.errors import ConfigError, WorkspaceError
from vx.model import ROOT_PROJECT
from vx.workspace.discover import discover
from vx.workspace.semver import satisfies


def write_tree(root: Path, files: dict[str, object]) -> Path:
    """Write `files` (path -> dict for JSON, or str) under `root`."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return root


def pkg(name: str, version: str = "1.0.0", **fields: object) -> dict[str, object]:
    return {"name": name, "version": version, **fields}


def npm_repo(tmp_path: Path, members: dict[str, dict], globs: object = ("packages/*",)) -> Path:
    files: dict[str, object] = {
        "package.json": {"name": "root", "workspaces": list(globs)}
        if isinstance(globs, tuple)
        else {"name": "root", "workspaces": globs}
    }
    files.update({f"{d}/package.json": m for d, m in members.items()})
    return write_tree(tmp_path, files)


# ---------------------------------------------------------------- WS-01 root discovery


@pytest.mark.feature("WS-01")
def test_npm_workspaces_found_from_inside_a_member(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a"), "packages/b": pkg("b")})
    (tmp_path / "packages/a/src/deep").mkdir(parents=True)
    ws = discover(tmp_path / "packages/a/src/deep")
    assert ws.root == tmp_path.resolve()
    assert sorted(ws.packages) == [ROOT_PROJECT, "a", "b"]
    assert ws.packages["a"].dir == "packages/a"
    assert ws.packages["a"].manifest_path == "packages/a/package.json"
    assert ws.member_globs == ("packages/*",)


@pytest.mark.feature("WS-01")
def test_yarn_workspaces_packages_object(tmp_path):
    npm_repo(tmp_path, {"apps/web": pkg("web")}, globs={"packages": ["apps/*"]})
    ws = discover(tmp_path / "apps/web")
    assert ws.root == tmp_path.resolve()
    assert "web" in ws.packages


@pytest.mark.feature("WS-01")
def test_pnpm_workspace_yaml(tmp_path):
    write_tree(
        tmp_path,
        {
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n  - apps/**\n",
            "package.json": {"name": "root"},
            "packages/a/package.json": pkg("a"),
            "apps/x/y/package.json": pkg("y"),
        },
    )
    ws = discover(tmp_path / "apps/x/y")
    assert ws.root == tmp_path.resolve()
    assert ws.manager == "pnpm"
    assert ws.packages["y"].dir == "apps/x/y"


@pytest.mark.feature("WS-01")
@pytest.mark.parametrize("yaml_text", ["packages: [unclosed\n", "packages: packages/*\n", "- a\n"])
def test_broken_pnpm_workspace_yaml_is_a_config_error(tmp_path, yaml_text):
    write_tree(tmp_path, {"pnpm-workspace.yaml": yaml_text, "package.json": {"name": "r"}})
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    assert err.value.file == "pnpm-workspace.yaml" and err.value.hint


@pytest.mark.feature("WS-01")
def test_pnpm_workspace_yaml_stops_the_walk(tmp_path):
    write_tree(
        tmp_path,
        {
            "package.json": {"name": "outer", "workspaces": ["inner", "inner/*"]},
            "inner/pnpm-workspace.yaml": "packages: []\n",
            "inner/package.json": {"name": "inner"},
            "inner/tool/x.js": "",
        },
    )
    ws = discover(tmp_path / "inner/tool")  # the outer root would claim `inner`
    assert ws.root == (tmp_path / "inner").resolve()
    assert sorted(ws.packages) == [ROOT_PROJECT]


@pytest.mark.feature("WS-01")
def test_unclaimed_nested_package_is_its_own_root(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a"), "tools/x": pkg("x")})
    ws = discover(tmp_path / "tools/x")
    assert ws.root == (tmp_path / "tools/x").resolve()
    assert list(ws.packages) == [ROOT_PROJECT]


@pytest.mark.feature("WS-01")
def test_plain_subdirectory_of_the_root_belongs_to_the_root(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a")})
    (tmp_path / "scripts").mkdir()
    assert discover(tmp_path / "scripts").root == tmp_path.resolve()


@pytest.mark.feature("WS-01")
def test_single_package_repo(tmp_path):
    write_tree(tmp_path, {"package.json": pkg("solo", scripts={"build": "tsc"}), "src/x.ts": ""})
    ws = discover(tmp_path / "src")
    assert list(ws.packages) == [ROOT_PROJECT]
    root = ws.packages[ROOT_PROJECT]
    assert (root.dir, root.manifest_path, dict(root.scripts)) == (
        "",
        "package.json",
        {"build": "tsc"},
    )
    assert ws.member_globs == ()


@pytest.mark.feature("WS-01")
def test_no_root_is_a_workspace_error_with_a_hint(tmp_path, monkeypatch):
    import vx.workspace.discover as workspace

    monkeypatch.setattr(workspace, "_candidate", lambda here: None)
    with pytest.raises(WorkspaceError) as err:
        discover(tmp_path)
    assert "no workspace root" in err.value.render()
    assert err.value.hint and "package.json" in err.value.hint


# ---------------------------------------------------------------- WS-02 member globs


@pytest.mark.feature("WS-02")
def test_bang_excludes_a_member_and_its_tree(tmp_path):
    npm_repo(
        tmp_path,
        {
            "packages/a": pkg("a"),
            "packages/legacy": pkg("legacy"),
            "packages/legacy/sub": pkg("sub"),
        },
        globs=("packages/**", "!packages/legacy"),
    )
    assert sorted(discover(tmp_path).packages) == [ROOT_PROJECT, "a"]


@pytest.mark.feature("WS-02")
def test_spellings_are_normalised(tmp_path):
    npm_repo(
        tmp_path,
        {"packages/a": pkg("a"), "libs/b": pkg("b")},
        globs=("./packages/*/", "libs//b", "!./packages/zzz"),
    )
    ws = discover(tmp_path)
    assert sorted(ws.packages) == [ROOT_PROJECT, "a", "b"]
    assert ws.member_globs == ("packages/*", "libs/b", "!packages/zzz")


@pytest.mark.feature("WS-02")
def test_braces_and_double_star_and_node_modules_skipped(tmp_path):
    npm_repo(
        tmp_path,
        {
            "apps/web": pkg("web"),
            "libs/ui": pkg("ui"),
            "other/no": pkg("no"),
            "libs/ui/node_modules/dep": pkg("dep"),
            "libs/.hidden": pkg("hidden"),
        },
        globs=("{apps,libs}/**",),
    )
    assert sorted(discover(tmp_path).packages) == [ROOT_PROJECT, "ui", "web"]


@pytest.mark.feature("WS-02")
def test_directory_without_package_json_is_not_a_member(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a")})
    (tmp_path / "packages/empty").mkdir()
    assert sorted(discover(tmp_path).packages) == [ROOT_PROJECT, "a"]


@pytest.mark.feature("WS-02")
def test_extglob_refused_with_a_rewrite(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a")}, globs=("packages/!(legacy|old)",))
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    text = err.value.render()
    assert "extglob" in text and "package.json, workspaces[0]" in text
    assert '"packages/*", "!packages/legacy", "!packages/old"' in text


@pytest.mark.feature("WS-02")
def test_member_outside_the_root_refused(tmp_path):
    npm_repo(tmp_path / "repo", {"packages/a": pkg("a")}, globs=("../elsewhere/*",))
    with pytest.raises(ConfigError) as err:
        discover(tmp_path / "repo")
    assert "outside the workspace root" in err.value.render()
    assert err.value.field == "workspaces[0]"


@pytest.mark.feature("WS-02")
def test_workspaces_must_be_a_glob_list(tmp_path):
    write_tree(tmp_path, {"package.json": {"name": "r", "workspaces": "packages/*"}})
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    assert err.value.file == "package.json" and err.value.hint


# ---------------------------------------------------------------- WS-03 / WS-04 projects


@pytest.mark.feature("WS-03")
def test_duplicate_names_name_both_manifests(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("same"), "packages/b": pkg("same")})
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    text = err.value.render()
    assert "packages/a/package.json" in text and "packages/b/package.json" in text
    assert err.value.hint


@pytest.mark.feature("WS-04")
def test_a_member_named_like_the_root_is_that_member_and_the_root_stays_the_root(tmp_path):
    """The root is `//` whatever its package.json calls itself, so a member of its name is no
    duplicate (turbo runs such a repo, npm links the member for the name)."""
    npm_repo(
        tmp_path, {"packages/a": pkg("root"), "packages/b": pkg("b", dependencies={"root": "*"})}
    )
    ws = discover(tmp_path)
    assert ws.packages["root"].dir == "packages/a" and ws.packages[ROOT_PROJECT].dir == ""
    assert ws.packages["b"].deps == ("root",)


@pytest.mark.feature("WS-03")
@pytest.mark.parametrize("name", [None, 42, "a#b", " padded", "trail ", ""])
def test_bad_package_names_refused(tmp_path, name):
    member = {"version": "1.0.0"} if name is None else {"name": name, "version": "1.0.0"}
    npm_repo(tmp_path, {"packages/a": member})
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    assert (err.value.file, err.value.field) == ("packages/a/package.json", "name")
    assert err.value.hint


@pytest.mark.feature("WS-03")
def test_broken_manifest_names_file_line_and_column(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a")})
    (tmp_path / "packages/a/package.json").write_text('{\n  "name": "a",\n}')
    with pytest.raises(ConfigError) as err:
        discover(tmp_path)
    assert err.value.file == "packages/a/package.json"
    assert err.value.field.startswith("line 3")


@pytest.mark.feature("WS-04")
def test_root_project_is_present_as_double_slash(tmp_path):
    npm_repo(tmp_path, {"packages/a": pkg("a")})
    root_manifest = json.loads((tmp_path / "package.json").read_text())
    root_manifest.update(devDependencies={"a": "*"}, scripts={"lint": "eslint ."})
    (tmp_path / "package.json").write_text(json.dumps(root_manifest))
    root = discover(tmp_path).packages[ROOT_PROJECT]
    assert (root.name, root.dir, root.deps) == (ROOT_PROJECT, "", ("a",))
    assert root.scripts == {"lint": "eslint ."}


# ---------------------------------------------------------------- WS-20 package graph


def deps_of(tmp_path: Path, spec: str, version: str = "2.0.0", field: str = "dependencies"):
    npm_repo(
        tmp_path,
        {
            "packages/lib": pkg("lib", version),
            "packages/app": pkg("app", **{field: {"lib": spec, "react": "^18"}}),
        },
    )
    return discover(tmp_path).packages["app"].deps


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize(
    "spec",
    [
        "workspace:*",
        "workspace:^",
        "workspace:~",
        "workspace:^2.0.0",
        "*",
        "",
        "^2",
        "~2.0.0",
        ">=1",
        "2.0.0",
        "2.x",
        "file:../lib",
        "link:../lib",
    ],
)
def test_linked_specs_are_edges(tmp_path, spec):
    assert deps_of(tmp_path, spec) == ("lib",)


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize(
    "spec",
    ["^1", "~1.2.0", "<2", "1.x", "latest", "npm:other@^2", "file:../elsewhere", "github:user/lib"],
)
def test_registry_specs_are_not_edges(tmp_path, spec):
    assert deps_of(tmp_path, spec) == ()


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize("field", ["devDependencies", "optionalDependencies"])
def test_every_dependency_field_counts(tmp_path, field):
    assert deps_of(tmp_path, "workspace:*", field=field) == ("lib",)


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize("tool", ["", "turbo.json", "nx.json turbo.json"])
def test_a_peer_dependency_is_no_edge_as_in_turbo(tmp_path, tool):
    """turbo 2's package graph takes dependencies, devDependencies and optionalDependencies, and
    so do vx's own configs; a turbo.json beside an nx.json gives the tasks, so turbo's rule."""
    for name in tool.split():
        (tmp_path / name).write_text("{}")
    assert deps_of(tmp_path, "workspace:*", field="peerDependencies") == ()
    assert deps_of(tmp_path, ">=1.0.0", field="peerDependencies") == ()


@pytest.mark.feature("WS-20")
def test_a_peer_dependency_is_an_edge_in_an_nx_workspace_as_in_nx(tmp_path):
    (tmp_path / "nx.json").write_text("{}")
    assert deps_of(tmp_path, "workspace:*", field="peerDependencies") == ("lib",)


@pytest.mark.feature("WS-20")
def test_workspace_alias_links_the_named_package(tmp_path):
    npm_repo(
        tmp_path,
        {
            "packages/lib": pkg("@scope/lib"),
            "packages/app": pkg("app", dependencies={"alias": "workspace:@scope/lib@*"}),
        },
    )
    assert discover(tmp_path).packages["app"].deps == ("@scope/lib",)


@pytest.mark.feature("WS-20")
def test_peer_dependency_closing_a_cycle_is_dropped(tmp_path):
    (tmp_path / "nx.json").write_text("{}")  # peers are edges only in an Nx workspace
    npm_repo(
        tmp_path,
        {
            "packages/core": pkg("core", peerDependencies={"plugin": "*", "extra": "*"}),
            "packages/plugin": pkg("plugin", dependencies={"core": "*"}),
            "packages/extra": pkg("extra"),
        },
    )
    packages = discover(tmp_path).packages
    assert packages["plugin"].deps == ("core",)
    assert packages["core"].deps == ("extra",)  # the peer edge to plugin would close a cycle


@pytest.mark.feature("WS-20")
def test_deps_are_sorted_and_self_reference_ignored(tmp_path):
    npm_repo(
        tmp_path,
        {
            "packages/z": pkg("z"),
            "packages/b": pkg("b"),
            "packages/a": pkg("a", dependencies={"z": "*", "b": "*", "a": "*"}),
        },
    )
    assert discover(tmp_path).packages["a"].deps == ("b", "z")


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize(
    "version,spec,ok",
    [
        ("2.0.0", "^1", False),
        ("1.5.0", "^1", True),
        ("1.2.9", "~1.2.0", True),
        ("1.3.0", "~1.2.0", False),
        ("0.2.5", "^0.2.1", True),
        ("0.3.0", "^0.2.1", False),
        ("0.0.4", "^0.0.3", False),
        ("1.2.3", ">=1.0.0 <2", True),
        ("2.0.0", ">=1.0.0 <2", False),
        ("2.1.0", "1.x || 2.x", True),
        ("1.4.9", "1.0.0 - 1.4", True),
        ("1.5.0", "1.0.0 - 1.4", False),
        ("1.0.0-beta.2", "^1.0.0-beta.1", True),
        ("1.0.1-beta", "^1.0.0", False),
        ("1.2.3", "=1.2.3", True),
        ("1.2.3", "1.2.4", False),
        ("2.0.0", ">1", True),
        ("1.9.0", ">1", False),
        ("1.2.3", "latest", False),
        ("1.2.3", "*", True),
    ],
)
def test_semver_range_check(version, spec, ok):
    assert satisfies(version, spec) is ok


# ---------------------------------------------------------------- package manager


@pytest.mark.parametrize(
    "files,manager",
    [
        ({"pnpm-lock.yaml": ""}, "pnpm"),
        ({"yarn.lock": ""}, "yarn"),
        ({"bun.lockb": ""}, "bun"),
        ({"bun.lock": ""}, "bun"),
        ({}, "npm"),
    ],
)
def test_manager_from_lockfile(tmp_path, files, manager):
    npm_repo(tmp_path, {"packages/a": pkg("a")})
    write_tree(tmp_path, files)
    assert discover(tmp_path).manager == manager


def test_manager_from_package_manager_field_wins(tmp_path):
    write_tree(
        tmp_path,
        {"package.json": {"name": "r", "packageManager": "yarn@4.1.0"}, "pnpm-lock.yaml": ""},
    )
    assert discover(tmp_path).manager == "yarn"


# ---------------------------------------------------------------- WS-20 pnpm linking


def pnpm_repo(tmp_path: Path, files: dict):
    write_tree(
        tmp_path,
        {
            "package.json": {"name": "root", "private": True},
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
            "packages/lib/package.json": pkg("@scope/lib", "1.0.0"),
            **files,
        },
    )
    return discover(tmp_path).packages["app"].deps


LOCK_9 = """lockfileVersion: '9.0'

importers:

  .: {}

  packages/app:
    dependencies:
      '@scope/lib':
        specifier: %s
        version: %s

packages:

  x@1.0.0:
    resolution: {integrity: sha512-x}
"""

LOCK_5 = """lockfileVersion: 5.4

importers:

  packages/app:
    specifiers:
      '@scope/lib': ^1.0.0
    dependencies:
      '@scope/lib': %s
"""


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize(
    "lock,deps",
    [
        (LOCK_9 % ("^1.0.0", "1.0.0"), ()),  # pnpm installed the registry's
        (LOCK_9 % ("^1.0.0", "link:../lib"), ("@scope/lib",)),
        (
            LOCK_9 % ("^0.9.0", "link:../lib"),
            (),
        ),  # stale: the manifest's spec changed since; pnpm 9's rule
        (LOCK_5 % "link:../lib", ("@scope/lib",)),
        (LOCK_5 % "1.0.0", ()),
    ],
)
def test_pnpm_lockfile_importers_decide(tmp_path, lock, deps):
    app = pkg("app", dependencies={"@scope/lib": "^1.0.0"})
    assert pnpm_repo(tmp_path, {"packages/app/package.json": app, "pnpm-lock.yaml": lock}) == deps


@pytest.mark.feature("WS-20")
@pytest.mark.parametrize(
    "files,deps",
    [
        ({}, ()),  # pnpm 9 and later: only workspace:, link:, file:
        ({".npmrc": "link-workspace-packages = true\n"}, ("@scope/lib",)),
        ({".npmrc": "link-workspace-packages=deep\n"}, ("@scope/lib",)),
        (
            {
                ".npmrc": "link-workspace-packages=false\n",
                "package.json": {"name": "r", "packageManager": "pnpm@8.1.0"},
            },
            (),
        ),
        (
            {"package.json": {"name": "r", "packageManager": "pnpm@8.1.0"}},
            ("@scope/lib",),
        ),  # pnpm 8's default
        ({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, ("@scope/lib",)),  # written by pnpm 8
        (
            {"pnpm-workspace.yaml": "packages:\n  - 'packages/*'\nlinkWorkspacePackages: true\n"},
            ("@scope/lib",),
        ),
        (
            {
                "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\nlinkWorkspacePackages: true\n",
                "package.json": {"name": "r", "packageManager": "pnpm@9.15.9"},
            },
            (),
        ),  # pnpm 9 reads only .npmrc
    ],
)
def test_pnpm_link_workspace_packages_setting(tmp_path, files, deps):
    app = pkg("app", dependencies={"@scope/lib": "^1.0.0", "x": "workspace:*"})
    write_tree(tmp_path, {"packages/x/package.json": pkg("x")})
    assert pnpm_repo(tmp_path, {"packages/app/package.json": app, **files}) == tuple(
        sorted({"x", *deps})
    )


@pytest.mark.feature("WS-20")
def test_a_file_spec_is_an_edge_whatever_pnpm_locked(
    tmp_path,
):  # pnpm may inject a `file:` member
    app = pkg("app", dependencies={"@scope/lib": "file:../lib"})
    lock = LOCK_9 % ("file:../lib", "file:packages/lib")
    assert pnpm_repo(tmp_path, {"packages/app/package.json": app, "pnpm-lock.yaml": lock}) == (
        "@scope/lib",
    )
