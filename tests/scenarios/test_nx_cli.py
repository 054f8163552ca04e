"""Nx's command-line habits (TL-05), held against the real Nx (21.6.4, pinned): `-p` and
`--exclude` take Nx's project patterns (names, globs on names and on roots, `tag:`, `!`); an
nx.json edit makes every project affected, as `nx show projects --affected` says; the root
project answers to its Nx name (`root:test:sherif`) and every package carries Nx's `npm:` tags;
a `continuous` target is a server its dependants wait for."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.npm_packages import installed_or_skip
from support.nx import nx_cli, nx_projects, nx_show

SHOWN = ("root", "name", "tags", "implicitDependencies")
TARGET_FIELDS = ("executor", "options", "configurations", "dependsOn", "cache", "continuous")


@pytest.fixture(scope="module")
def nx_package() -> Path:
    return installed_or_skip("nx")


def package(name: str, **extra) -> dict:
    return {"name": name, "version": "1.0.0", "scripts": {"build": f"echo built {name}"}, **extra}


def workspace(repo, nx_package: Path, extra: dict | None = None):
    """packages/{a,b} and examples/{demo,docs}: every one builds; a is private with keywords, b
    depends on a; the root package.json is a project (its `nx` block) with a `test:sherif`."""
    files = {
        "package.json": {
            "name": "root",
            "private": True,
            "workspaces": ["packages/*", "examples/*"],
            "keywords": ["monorepo"],
            "scripts": {"test:sherif": "echo sherif ok > sherif.txt"},
            "nx": {},
        },
        ".gitignore": "node_modules\n.vx\n.nx\nsherif.txt\n",
        "nx.json": {"targetDefaults": {"build": {"dependsOn": ["^build"]}}},
        "packages/a/package.json": package("@ws/a", private=True, keywords=["lib", "core"]),
        "packages/b/package.json": package("@ws/b", dependencies={"@ws/a": "*"}),
        "examples/demo/package.json": package("demo", private=True),
        "examples/docs/package.json": package("docs-site", private=True),
        **(extra or {}),
    }
    repo.write(files)
    (repo.root / "node_modules").mkdir()
    (repo.root / "node_modules" / "nx").symlink_to(nx_package)
    return repo.commit()


def nx_planned(repo, *args: str) -> set[str]:
    """The projects `nx run-many ARGS` would run a task of (from its --graph file)."""
    out = repo.root.parent / "graph.json"
    nx_cli(repo.root, "run-many", *args, f"--graph={out}")
    return {t["target"]["project"] for t in json.loads(out.read_text())["tasks"]["tasks"].values()}


def vx_planned(repo, *args: str) -> set[str]:
    result = repo.vx("run-many", *args, "--dry=json")
    assert result.code == 0, result.err
    return {t["project"] for t in json.loads(result.out)["tasks"] if not t.get("implicit")}


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "args",
    [
        ("--exclude=examples/**",),  # a glob on roots, as a real repo's build:all uses it
        ("-p", "packages/*"),
        ("-p", "directory:examples/*"),
        ("-p", "examples/demo"),  # a root
        ("-p", "tag:npm:lib"),  # a package.json keyword
        ("-p", "tag:npm:*"),
        ("-p", "@ws/*", "--exclude", "@ws/a"),
        ("-p", "*,!tag:npm:private"),
        ("-p", "!demo"),  # an exclusion first: from every project
        ("-p", "demo"),
        ("-p", "Demo"),  # a name, whatever its case
        ("-p", "a"),  # a word of `@ws/a`
        ("-p", "@ws"),
        ("--exclude", "tag:npm:public"),
    ],
)
def test_project_patterns_select_what_nx_selects(repo, nx_package, args):
    ws = workspace(repo, nx_package)
    theirs = nx_planned(ws, "-t", "build", *args)
    ours = vx_planned(ws, "-t", "build", *args)
    assert theirs  # a parity over nothing proves nothing
    assert ours == theirs


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "pattern",
    [
        "examples",  # a directory is no name: Nx wants a glob or `directory:`
        "docs",  # no word of `docs-site`: `-` joins
        "*a*",  # `*` stops at the `/` of `@ws/a`
        "{demo",  # an unclosed brace is itself, not every project
    ],
)
def test_a_pattern_nx_matches_nothing_with_selects_nothing(repo, nx_package, pattern):
    ws = workspace(repo, nx_package)
    assert nx_planned(ws, "-t", "build", "-p", pattern) == set()
    result = ws.vx("run-many", "-t", "build", "-p", pattern, "--dry=json")
    assert result.code == 0, result.err
    assert [t for t in json.loads(result.out)["tasks"] if not t.get("implicit")] == []
    assert f"`{pattern}` matches no project" in result.err


@pytest.mark.feature("TL-05")
def test_a_pattern_that_matches_nothing_is_said_once(repo, nx_package):
    ws = workspace(repo, nx_package)
    result = ws.vx("run-many", "-t", "build", "-p", "@ws/*", "--exclude", "nothing/**")
    assert result.code == 0, result.err
    assert result.err.count("`nothing/**` matches no project") == 1
    assert set(result.statuses()) == {"@ws/a#build", "@ws/b#build"}


@pytest.mark.feature("TL-05")
def test_an_nx_json_edit_affects_every_project_as_in_nx(repo, nx_package):
    ws = workspace(repo, nx_package)
    nx_json = ws.root / "nx.json"
    nx_json.write_text(json.dumps({"targetDefaults": {"build": {"dependsOn": []}}}))
    ws.commit("nx.json edited")
    theirs = json.loads(
        nx_cli(
            ws.root, "show", "projects", "--affected", "--base=HEAD~1", "--head=HEAD", "--json"
        ).stdout
    )
    result = ws.vx("run-many", "-t", "build", "--affected=HEAD~1", "--dry=json")
    assert result.code == 0, result.err
    ours = {t["project"] for t in json.loads(result.out)["tasks"] if not t.get("implicit")}
    assert len(theirs) == 5  # every project, the root included
    assert ours == {"@ws/a", "@ws/b", "demo", "docs-site"}  # the root has no build


@pytest.mark.feature("TL-05")
def test_the_root_project_answers_to_its_nx_name_with_nx_s_tags(repo, nx_package):
    ws = workspace(repo, nx_package)
    run = ws.vx("run", "root:test:sherif")
    assert run.code == 0, run.err
    assert (ws.root / "sherif.txt").read_text() == "sherif ok\n"
    for name in ("root", "@ws/a", "@ws/b", "demo"):
        ours = json.loads(ws.vx("show", "project", name, "--json").out)
        theirs = nx_show(ws.root, name)
        assert {k: ours[k] for k in SHOWN} == {k: theirs[k] for k in SHOWN}
        assert {
            t: {k: b[k] for k in TARGET_FIELDS if k in b} for t, b in ours["targets"].items()
        } == {t: {k: b[k] for k in TARGET_FIELDS if k in b} for t, b in theirs["targets"].items()}
    assert nx_show(ws.root, "@ws/a")["tags"] == ["npm:private", "npm:lib", "npm:core"]
    assert vx_planned(ws, "-t", "test:sherif", "-p", "root") == {"//"}


@pytest.mark.feature("TL-05")
def test_show_projects_json_lists_nx_s_project_names(repo, nx_package):
    """`nx show projects --json` is a JSON list of the project names: the root by its Nx name."""
    ws = workspace(repo, nx_package)
    shown = ws.vx("show", "projects", "--json")
    assert shown.code == 0, shown.err
    assert sorted(json.loads(shown.out)) == nx_projects(ws.root)
    del (doc := json.loads((ws.root / "package.json").read_text()))["nx"]
    (ws.root / "package.json").write_text(json.dumps(doc))  # the root is no project of Nx's now
    assert sorted(json.loads(ws.vx("show", "projects", "--json").out)) == nx_projects(ws.root)


@pytest.mark.feature("TL-05")
def test_a_continuous_target_is_a_server_its_dependants_wait_for(repo, nx_package):
    server = (
        "node -e \"console.log('listening'); require('http').createServer((q, s) => s.end('hi'))"
        ".listen(0, function () { require('fs').writeFileSync('port', String(this.address().port)) })\""
    )
    client = (
        "node -e \"require('http').get('http://127.0.0.1:' + require('fs').readFileSync('port', "
        "'utf8'), r => r.on('data', d => { require('fs').writeFileSync('got.txt', d); }))\""
    )
    ws = workspace(
        repo,
        nx_package,
        {
            "packages/a/project.json": {
                "targets": {
                    "serve": {
                        "command": server,
                        "continuous": True,
                        "options": {"cwd": "packages/a", "readyWhen": "listening"},
                    },
                    "e2e": {
                        "command": client,
                        "options": {"cwd": "packages/a"},
                        "dependsOn": ["serve"],
                    },
                }
            }
        },
    )
    result = ws.vx("run", "@ws/a:e2e", timeout=120)
    assert result.code == 0, result.err + result.out
    assert (ws.root / "packages/a/got.txt").read_text() == "hi"
    shown = nx_show(ws.root, "@ws/a")["targets"]["serve"]
    assert shown["continuous"] is True


TSC = "node ../../node_modules/typescript/bin/tsc -p tsconfig.json --outDir dist"


@pytest.mark.feature("TL-05")
def test_the_root_tsconfig_moves_every_key_where_nx_s_hash_moves(repo, nx_package):
    """Nx folds the root tsconfig (tsconfig.base.json, without `paths`) into every task's hash: a
    `target` edit there rebuilds a library that extends it, under vx as under Nx; a new path alias
    or a reformat is a hit in both. Each edit's hit or miss is Nx's own, asked of `nx run`."""
    base = {"compilerOptions": {"target": "es2015", "paths": {"@ws/a": ["./packages/a/src"]}}}
    ws = workspace(
        repo,
        nx_package,
        {
            "tsconfig.base.json": base,
            "packages/a/tsconfig.json": {"extends": "../../tsconfig.base.json"},
            "packages/a/src/index.ts": "export const f = async () => 1;\n",
            "packages/a/project.json": {
                "targets": {
                    "build": {
                        "command": TSC,
                        "options": {"cwd": "packages/a"},
                        "cache": True,
                        "outputs": ["{projectRoot}/dist"],
                    }
                }
            },
        },
    )
    (ws.root / "node_modules" / "typescript").symlink_to(installed_or_skip("typescript"))
    (ws.root / ".gitignore").write_text((ws.root / ".gitignore").read_text() + "dist\n")
    built = ws.root / "packages/a/dist/index.js"

    def both() -> tuple[bool, bool]:
        """Whether Nx, then vx, took the build from its cache."""
        theirs = nx_cli(ws.root, "run", "@ws/a:build", cache=True)
        nx_hit = "from the cache" in theirs.stdout + theirs.stderr
        nx_output = built.read_text()
        ours = ws.vx("run", "@ws/a:build")
        assert ours.code == 0, ours.err
        assert built.read_text() == nx_output  # the same bytes, hit or miss
        return nx_hit, ours.statuses()["@ws/a#build"][1] != "miss"

    def edit(change) -> None:
        config = json.loads((ws.root / "tsconfig.base.json").read_text())
        change(config["compilerOptions"])
        (ws.root / "tsconfig.base.json").write_text(json.dumps(config, indent=4))

    assert both() == (False, False)
    assert both() == (True, True)
    edit(lambda o: o["paths"].update({"@ws/b": ["./packages/b/src"]}))  # and reformatted
    assert both() == (True, True)
    edit(lambda o: o.update(target="es2022"))
    assert both() == (False, False)
    assert "async () =>" in built.read_text()  # es2022 output, not es2015's generator


@pytest.mark.feature("TL-05")
def test_an_nx_json_edit_moves_every_key_as_in_nx_and_a_reformat_none(repo, nx_package):
    """Nx folds nx.json into every task's hash: a `targetDefaults` entry for another target (one
    the build never reads) is a miss under Nx, so under vx too — a task's command may read
    nx.json, which vx cannot rule out. Whitespace changes nothing a reader of nx.json parses: a
    hit under vx, where Nx, hashing the bytes, misses (output-neutral by construction)."""
    ws = workspace(repo, nx_package)
    nx_json = ws.root / "nx.json"
    doc = {"targetDefaults": {"build": {"dependsOn": ["^build"], "cache": True}}}
    nx_json.write_text(json.dumps(doc))

    def both() -> tuple[bool, bool]:
        """Whether Nx, then vx, took `@ws/a:build` from its cache."""
        theirs = nx_cli(ws.root, "run", "@ws/a:build", cache=True)
        ours = ws.vx("run", "@ws/a:build")
        assert ours.code == 0, ours.err
        nx_hit = "from the cache" in theirs.stdout + theirs.stderr
        status = ours.statuses()["@ws/a#build"][1]
        assert status in ("miss", "local", "up-to-date"), status
        return nx_hit, status != "miss"

    assert both() == (False, False)
    assert both() == (True, True)
    doc["targetDefaults"]["lint"] = {"cache": True}
    nx_json.write_text(json.dumps(doc))
    assert both() == (False, False)
    nx_json.write_text(json.dumps(doc, indent=4) + "\n\n")
    assert both() == (False, True)


@pytest.mark.feature("TL-05")
def test_a_build_that_empties_the_dir_its_typecheck_wrote_is_cached_as_in_nx(repo, nx_package):
    """An Nx library's inferred `typecheck` writes declarations into the `dist` its vite `build`
    empties before writing (create-nx-workspace's react app and libraries). Nx caches the build
    and hits it on the next run; vx refused to save a task that removed a file it shares with
    another, so the build missed on every run after an edit, where Nx hit."""
    ws = workspace(
        repo,
        nx_package,
        {
            "packages/a/project.json": {
                "name": "@ws/a",
                "targets": {
                    "typecheck": {
                        "command": "mkdir -p dist && echo decl > dist/index.d.ts",
                        "options": {"cwd": "packages/a"},
                        "cache": True,
                        "outputs": ["{projectRoot}/dist/**/*.d.ts"],
                    },
                    "build": {
                        "command": "rm -rf dist && mkdir dist && echo code > dist/index.js",
                        "options": {"cwd": "packages/a"},
                        "cache": True,
                        "dependsOn": ["typecheck"],
                        "outputs": ["{projectRoot}/dist"],
                    },
                },
            },
            "packages/a/src/index.js": "export const a = 1;\n",
        },
    )
    (ws.root / ".gitignore").write_text((ws.root / ".gitignore").read_text() + "dist\n")
    ws.commit("dist ignored")

    def both() -> tuple[bool, bool]:
        """Whether Nx, then vx, took `@ws/a:build` from its cache."""
        theirs = nx_cli(ws.root, "run", "@ws/a:build", cache=True)
        nx_hit = "[local cache]" in theirs.stdout or "existing outputs match" in theirs.stdout
        ours = ws.vx("run", "@ws/a:build")
        assert ours.code == 0, ours.err
        assert "not saved" not in ours.err, ours.err
        return nx_hit, ours.statuses()["@ws/a#build"][1] != "miss"

    assert both() == (False, False)
    assert both() == (True, True)
    (ws.root / "packages/a/src/index.js").write_text("export const a = 2;\n")
    assert both() == (False, False)
    assert both() == (True, True)
    assert (ws.root / "packages/a/dist/index.js").read_text() == "code\n"


@pytest.mark.feature("TL-05")
def test_a_project_json_under_an_nxignored_directory_is_no_project_as_in_nx(repo, nx_package):
    """Nx's walk leaves out what .nxignore names (nrwl/nx-console keeps test workspaces, each with
    its project.json files, under apps/vscode-e2e/testworkspaces, named there): vx made a
    project of every project.json under it."""
    ws = workspace(
        repo,
        nx_package,
        {
            ".nxignore": "examples/fixtures\n",
            "examples/fixtures/app1/project.json": {"name": "app1", "targets": {}},
            "examples/fixtures/lib1/project.json": {"name": "lib1", "targets": {}},
        },
    )
    names = nx_projects(ws.root)
    assert "app1" not in names and "@ws/a" in names
    shown = ws.vx("show", "--format", "json")
    assert shown.code == 0, shown.err
    ours = {p["name"] for p in json.loads(shown.out)["projects"]} - {"//"}
    assert sorted(ours) == sorted(set(names) - {"root"})


@pytest.mark.feature("TL-05")
def test_a_warm_run_many_replays_every_time_in_a_workspace_that_does_not_ignore_dot_vx(
    repo, nx_package
):
    """An Nx workspace's .gitignore names `.nx`, never `.vx` (nx-recipes' angular-monorepo):
    `git status --ignored=matching`, which a receipt digests, then lists vx's own files, and a
    replay leaves the index's WAL and the pending history there, so 2 of every 3 warm runs went
    the whole pipeline. Each warm `vx run-many` must be replayed, as Nx hits each time."""
    ws = workspace(
        repo,
        nx_package,
        {
            "nx.json": {"targetDefaults": {"build": {"dependsOn": ["^build"], "cache": True}}},
            "packages/a/project.json": {
                "name": "@ws/a",
                "targets": {
                    "build": {
                        "command": "mkdir -p dist && echo code > dist/index.js",
                        "options": {"cwd": "packages/a"},
                        "cache": True,
                        "outputs": ["{projectRoot}/dist"],
                    }
                },
            },
        },
    )
    (ws.root / ".gitignore").write_text("node_modules\n.nx\ndist\nsherif.txt\n")
    ws.commit("as an Nx workspace ignores")

    def replayed() -> bool:
        time.sleep(0.06)  # past the racy window of what the last run wrote, as settle() does
        result = ws.vx("run-many", "-t", "build", summary=False, env={"VX_TIMING": "1"})
        assert result.code == 0, result.err
        return "receipt check" in result.err

    assert [replayed() for _ in range(3)] == [False, False, True]  # cold, then the receipt
    assert [replayed() for _ in range(4)] == [True] * 4
    nx_cli(ws.root, "run-many", "-t", "build", cache=True)
    theirs = nx_cli(ws.root, "run-many", "-t", "build", cache=True).stdout
    assert theirs.count("[local cache]") + theirs.count("existing outputs match") == 4, theirs


@pytest.mark.feature("TL-05")
def test_build_passes_over_a_project_without_one_and_keys_only_what_its_dependant_names(
    repo, nx_package
):
    """Nx's `^build` passes over a project that has no `build` (a types-only library): the
    dependant's `^production` input alone decides which of that project's files its hash folds.
    vx gave every project without `build` one of its own, keyed on all of its files, so a spec
    edit in the library missed its dependants' builds where Nx hit (nx-recipes' angular
    workspaces). Each edit's hit or miss is Nx's own, asked of `nx run`."""
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\n.vx\n.nx\nout\n",
            "nx.json": {
                "namedInputs": {
                    "default": ["{projectRoot}/**/*"],
                    "production": ["default", "!{projectRoot}/**/*.spec.ts"],
                },
                "targetDefaults": {
                    "build": {
                        "dependsOn": ["^build"],
                        "inputs": ["production", "^production"],
                        "outputs": ["{projectRoot}/out"],
                        "cache": True,
                    }
                },
            },
            "packages/core/package.json": package("@ws/core"),
            "packages/types/package.json": {
                "name": "@ws/types",
                "version": "1.0.0",
                "dependencies": {"@ws/core": "*"},
            },
            "packages/types/src/index.ts": "export type Id = string;\n",
            "packages/types/src/index.spec.ts": "test('id', () => {});\n",
            "packages/app/package.json": package(
                "@ws/app",
                dependencies={"@ws/types": "*"},
                scripts={"build": "mkdir -p out && cat ../types/src/index.ts > out/types.txt"},
            ),
        }
    )
    (repo.root / "node_modules").mkdir()
    (repo.root / "node_modules" / "nx").symlink_to(nx_package)
    ws = repo.commit()
    built = ws.root / "packages/app/out/types.txt"

    def both() -> tuple[bool, bool]:
        """Whether Nx, then vx, took `@ws/app:build` from its cache."""
        theirs = nx_cli(ws.root, "run", "@ws/app:build", cache=True)
        ours = ws.vx("run", "@ws/app:build")
        assert ours.code == 0, ours.err
        assert built.read_text() == (ws.root / "packages/types/src/index.ts").read_text()
        status = ours.statuses()
        assert status["@ws/core#build"][0] == "success"  # reached through types, as Nx reaches it
        line = next(x for x in theirs.stdout.splitlines() if "nx run @ws/app:build" in x)
        return "[local cache]" in line or "existing outputs" in line, status["@ws/app#build"][
            1
        ] != "miss"

    assert both() == (False, False)
    assert both() == (True, True)
    (ws.root / "packages/types/src/index.spec.ts").write_text("test('id', () => { 1; });\n")
    assert both() == (True, True)  # not in `^production`: a hit under both
    (ws.root / "packages/types/src/index.ts").write_text("export type Id = number;\n")
    assert both() == (False, False)
    graph = ws.vx("run", "@ws/app:build", "--dry=json")
    rows = {t["id"]: t for t in json.loads(graph.out)["tasks"]}
    assert rows["@ws/types#build"]["implicit"] and rows["@ws/types#build"]["inputs"] is None
    assert rows["@ws/types#build"]["deps"] == ["@ws/core#build"]
