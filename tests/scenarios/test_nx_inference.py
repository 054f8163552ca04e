"""Nx workspaces as Nx 18+ makes them (TL-05): targets that no file spells out, inferred by the
`plugins` nx.json declares (@nx/js/typescript, @nx/vite/plugin, @nx/jest/plugin, @nx/eslint/plugin,
the real ones, pinned in npm_packages.py), resolve as the workspace's own Nx resolves them, run and cache; the
resolution is kept until a file a plugin reads changes; a plugin that cannot run is refused by
name. The real `nx show project NAME --json` is the oracle."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from support.npm_packages import bundle_or_skip
from support.nx import VITE_CONFIG, inferred_workspace, link_modules, nx_cli, nx_projects, nx_show

INFER_TIMEOUT = 300  # a cold inference loads Nx and three plugins on a loaded machine


@pytest.fixture(scope="module")
def plugins_modules():
    return bundle_or_skip("nx-plugins")


@pytest.fixture
def ws(repo, plugins_modules):
    repo.write(inferred_workspace())
    link_modules(repo.root, plugins_modules)
    return repo.commit()


def kept(ws) -> dict[str, int]:
    """The kept resolutions (.vx/nx/), each file's mtime."""
    directory = ws.root / ".vx" / "nx"
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.json")}


def shown_as_nx(ws, name: str) -> dict:
    """`vx show project NAME --json` equals `nx show project NAME --json`: Nx's answer."""
    theirs = nx_show(ws.root, name)
    ours = ws.vx("show", "project", name, "--json", timeout=INFER_TIMEOUT)
    assert ours.code == 0, ours.err
    assert json.loads(ours.out) == theirs
    return theirs


@pytest.mark.feature("TL-05")
def test_inferred_targets_resolve_as_nx_resolves_them(ws):
    names = nx_projects(ws.root)
    assert names == ["@tw/lib-a", "@tw/lib-b", "@tw/web"]
    for name in names:
        shown_as_nx(ws, name)
    plan = ws.vx("run-many", "-t", "build", "test", "--dry=json", timeout=INFER_TIMEOUT)
    assert plan.code == 0, plan.err
    rows = {t["id"]: t for t in json.loads(plan.out)["tasks"]}
    assert {"@tw/lib-a#build", "@tw/web#build", "@tw/lib-b#test"} <= set(rows)
    assert "@tw/lib-a#build" in rows["@tw/web#build"]["deps"]  # the plugin's `^build`
    assert rows["@tw/web#build"]["command"] == "vite build"


@pytest.mark.feature("TL-05")
def test_an_inferred_build_runs_caches_and_restores(ws):
    first = ws.vx("run", "@tw/lib-a:build", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert first.statuses()["@tw/lib-a#build"][1] == "miss"
    built = ws.root / "packages/lib-a/dist/index.js"
    text = built.read_bytes()
    assert b"export const a" in text
    # typecheck writes declarations into the build's dist: Nx lets them share it, so does vx
    both = ws.vx("run", "@tw/lib-a:typecheck", timeout=INFER_TIMEOUT)
    assert both.code == 0, both.err + both.out
    assert built.read_bytes() == text
    built.unlink()
    again = ws.vx("run", "@tw/lib-a:build")
    assert again.code == 0, again.err
    assert again.statuses()["@tw/lib-a#build"][1] == "local"
    assert built.read_bytes() == text


@pytest.mark.feature("TL-05")
def test_a_config_a_plugin_reads_is_what_infers_again(ws):
    assert ws.vx("run-many", "-t", "build", "--dry", timeout=INFER_TIMEOUT).code == 0
    before = kept(ws)
    assert len(before) == 1
    # nothing changed: the kept resolution holds, Nx does not run
    assert ws.vx("run-many", "-t", "build", "--dry").code == 0
    assert kept(ws) == before
    # a source edit asks Nx again (its project graph's edges come from the sources' imports);
    # undone, the first resolution is found again by content
    source = ws.root / "packages/lib-a/src/index.ts"
    text = source.read_text()
    source.write_text("export const a = (): string => 'b';\n")
    assert ws.vx("run-many", "-t", "build", "--dry", timeout=INFER_TIMEOUT).code == 0
    assert len(kept(ws)) == 2
    source.write_text(text)
    assert ws.vx("run-many", "-t", "build", "--dry").code == 0
    assert len(kept(ws)) == 2
    assert {k: v for k, v in kept(ws).items() if k in before} == before  # not written again
    # moving vite's outDir moves the inferred build's outputs on the next run
    (ws.root / "packages/web/vite.config.ts").write_text(
        inferred_workspace(out_dir="build")["packages/web/vite.config.ts"]  # type: ignore[arg-type]
    )
    shown = ws.vx("show", "project", "@tw/web", "--json", timeout=INFER_TIMEOUT)
    assert shown.code == 0, shown.err
    ours = json.loads(shown.out)
    assert ours["targets"]["build"]["outputs"] == ["{projectRoot}/build"]
    assert ours == nx_show(ws.root, "@tw/web")
    assert len(kept(ws)) == 3
    plan = ws.vx("show", "@tw/web#build", "--format", "json")
    assert json.loads(plan.out)["tasks"]["build"]["cache"]["outputs"]["files"] == ["build"]


@pytest.mark.feature("TL-05")
def test_a_plugin_that_throws_is_refused_by_name(ws):
    (ws.root / "packages/web/vite.config.ts").write_text("export default defineConfig({ build: ")
    result = ws.vx("run", "@tw/lib-a:build", timeout=INFER_TIMEOUT)
    assert result.code == 2, result.err + result.out
    assert "the Nx plugin `@nx/vite/plugin` failed on packages/web/vite.config.ts" in result.err
    assert "Unexpected end of file" in result.err  # Nx's (esbuild's) own message
    assert "in: packages/web/vite.config.ts" in result.err
    assert "Traceback" not in result.err


@pytest.mark.feature("TL-05")
def test_plugins_without_nx_installed_are_refused(repo):
    repo.write(inferred_workspace()).commit()
    result = repo.vx("run", "@tw/lib-a:build")
    assert result.code == 2, result.err + result.out
    assert "the workspace's `nx` is not installed" in result.err
    assert "in: nx.json, plugins" in result.err
    assert not os.path.exists(repo.root / "packages/lib-a/dist")


@pytest.mark.feature("TL-05")
def test_a_broken_nx_install_is_refused_with_node_s_error(repo):
    """Nx installed, one of its own modules missing: the refusal names the missing module (Node's
    message), not the last frame of the stack under it."""
    repo.write(inferred_workspace()).commit()
    nx = repo.root / "node_modules" / "nx"
    (nx / "src" / "utils").mkdir(parents=True)
    (nx / "package.json").write_text('{"name": "nx", "version": "21.6.4"}')
    (nx / "src" / "utils" / "workspace-context.js").write_text("require('vx-gone-module');\n")
    result = repo.vx("run", "@tw/lib-a:build")
    assert result.code == 2, result.err + result.out
    assert "Cannot find module 'vx-gone-module'" in result.err.splitlines()[0], result.err
    assert "in: nx.json, plugins" in result.err
    assert "Traceback" not in result.err


def import_workspace() -> dict[str, object]:
    """Two libs, `b` importing `a` through a tsconfig path alias and nothing in any package.json:
    only Nx's analysis of source imports makes the `b -> a` edge."""
    build = {
        "command": "node -e \"require('fs').mkdirSync('{projectRoot}/dist',{recursive:true})\""
    }
    return {
        # @nx/js among the root's devDependencies: Nx analyses source files (as in every
        # workspace create-nx-workspace makes)
        "package.json": {"name": "ws", "private": True, "devDependencies": {"@nx/js": "21.6.4"}},
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "nx.json": {
            "plugins": ["@nx/js/typescript"],
            "targetDefaults": {"build": {"dependsOn": ["^build"], "cache": True}},
        },
        "tsconfig.base.json": {
            "compilerOptions": {"baseUrl": ".", "paths": {"@ws/a": ["libs/a/src/index.ts"]}}
        },
        "libs/a/project.json": {"name": "a", "targets": {"build": build}},
        "libs/a/src/index.ts": "export const a = 1;\n",
        "libs/b/project.json": {"name": "b", "targets": {"build": build}},
        "libs/b/src/index.ts": "import { a } from '@ws/a';\nexport const b = a + 1;\n",
    }


@pytest.mark.feature("TL-05")
def test_a_source_import_is_an_edge_as_in_nx_s_graph(repo, plugins_modules):
    repo.write(import_workspace())
    link_modules(repo.root, plugins_modules)
    ws = repo.commit()
    nx_cli(ws.root, "run", "b:build", "--graph=tg.json")
    assert "a:build" in (ws.root / "tg.json").read_text()  # the oracle has the edge
    (ws.root / "tg.json").unlink()
    plan = ws.vx("run", "b:build", "--dry=json", timeout=INFER_TIMEOUT)
    assert plan.code == 0, plan.err
    rows = {t["id"]: t for t in json.loads(plan.out)["tasks"]}
    assert "a#build" in rows["b#build"]["deps"]
    first = ws.vx("run", "b:build", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert first.statuses()["b#build"][1] == "miss"
    assert ws.vx("run", "b:build").statuses()["b#build"][1] in ("local", "up-to-date")
    # a's source is b's input through the edge (`^default`): b misses, as under Nx
    (ws.root / "libs/a/src/index.ts").write_text("export const a = 2;\n")
    again = ws.vx("run", "b:build", timeout=INFER_TIMEOUT)
    assert again.code == 0, again.err + again.out
    assert again.statuses()["b#build"][1] == "miss"
    # Nx's graph, written as Nx writes it (@nx/enforce-module-boundaries reads it)
    assert (ws.root / ".nx/workspace-data/project-graph.json").exists()


@pytest.mark.feature("TL-05")
def test_a_plugin_s_input_glob_that_matches_nothing_is_not_warned_on(repo):
    """@nx/eslint/plugin puts `{workspaceRoot}/tools/eslint-rules/**/*` in every lint target's
    inputs, a folder most workspaces do not have. Nx says nothing of it; vx named it on every run
    that planned (once per project), about a glob nobody in the workspace wrote."""
    modules = bundle_or_skip("nx-eslint")
    flat = "export default [{ files: ['**/*.js'], rules: { 'no-unused-vars': 'error' } }];\n"
    repo.write(
        {
            "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\n.nx\n.vx\n",
            "nx.json": {"plugins": [{"plugin": "@nx/eslint/plugin", "options": {}}]},
            "eslint.config.mjs": flat,
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/eslint.config.mjs": "export { default } from '../../eslint.config.mjs';\n",
            "packages/a/src/index.js": "export const a = 1;\n",
            "packages/b/package.json": {"name": "b", "version": "1.0.0"},
            "packages/b/eslint.config.mjs": "export { default } from '../../eslint.config.mjs';\n",
            "packages/b/src/index.js": "export const b = 2;\n",
        }
    )
    link_modules(repo.root, modules)
    ws = repo.commit()
    lint = nx_show(ws.root, "a")["targets"]["lint"]
    assert "{workspaceRoot}/tools/eslint-rules/**/*" in lint["inputs"]  # the oracle's input
    first = ws.vx("run", "lint", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert first.statuses()["a#lint"][1] == "miss"
    assert "tools/eslint-rules" not in first.err, first.err
    assert "matches no file" not in first.err, first.err
    # a rule file there is an input all the same: the lint misses, as under Nx
    (ws.root / "tools/eslint-rules").mkdir(parents=True)
    (ws.root / "tools/eslint-rules/index.js").write_text("module.exports = {};\n")
    again = ws.vx("run", "lint", timeout=INFER_TIMEOUT)
    assert again.code == 0, again.err + again.out
    assert again.statuses()["a#lint"][1] == "miss"


def vitest_workspace(repo):
    """One project whose only config is a vite.config.mjs with a `test` block: @nx/vite/plugin
    infers `test` (vitest) and the `build-deps` / `watch-deps` no-ops, and no project has a
    `build` for their `^build` to reach."""
    modules = bundle_or_skip("nx-vitest")
    repo.write(
        {
            "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\n.nx\n.vx\ntest-output\n",
            "nx.json": {"plugins": [{"plugin": "@nx/vite/plugin", "options": {}}]},
            "packages/a/package.json": {"name": "a", "version": "1.0.0", "type": "module"},
            "packages/a/vite.config.mjs": "import { defineConfig } from 'vite';\n"
            "export default defineConfig({ root: import.meta.dirname, test: {\n"
            "  include: ['src/**/*.test.js'],\n"
            "  coverage: { reportsDirectory: './test-output/vitest/coverage' },\n"
            "} });\n",
            "packages/a/src/a.test.js": "import { test, expect } from 'vitest';\n"
            "test('a', () => expect(1).toBe(1));\n",
        }
    )
    link_modules(repo.root, modules)
    return repo.commit()


@pytest.mark.feature("TL-05")
def test_a_noop_whose_dependencies_reach_no_task_runs_nothing_as_in_nx(repo):
    """@nx/vite/plugin infers `build-deps` as `nx:noop` with `dependsOn: ["^build"]`; where no
    project has a `build`, vx dropped the dependency and then refused the no-op as a task with
    neither exec nor dependsOn: every `vx run` of the workspace exited 2, where Nx runs."""
    ws = vitest_workspace(repo)
    target = nx_show(ws.root, "a")["targets"]["build-deps"]
    assert target["executor"] == "nx:noop" and target["dependsOn"] == ["^build"]  # the oracle's
    nx_cli(ws.root, "run", "a:build-deps")
    ran = ws.vx("run", "a:build-deps", timeout=INFER_TIMEOUT)
    assert ran.code == 0, ran.err + ran.out
    tests = ws.vx("run", "test", timeout=INFER_TIMEOUT)
    assert tests.code == 0, tests.err + tests.out
    assert tests.statuses()["a#test"][1] == "miss"


@pytest.mark.feature("TL-05")
def test_a_plugin_s_output_the_task_does_not_write_is_not_warned_on(repo):
    """@nx/vite/plugin's inferred `test` declares `{projectRoot}/test-output/vitest/coverage`,
    which vitest writes only with coverage on. Nx says nothing; vx named it on every test miss."""
    ws = vitest_workspace(repo)
    target = nx_show(ws.root, "a")["targets"]["test"]
    assert target["outputs"] == ["{projectRoot}/test-output/vitest/coverage"]  # the oracle's
    first = ws.vx("run", "a:test", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert first.statuses()["a#test"][1] == "miss"
    assert "no output files found" not in first.err, first.err
    assert ws.vx("run", "a:test").statuses()["a#test"][1] in ("local", "up-to-date")


WRITE = (
    "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
    "require('fs').writeFileSync('dist/NAME.txt','NAME')\""
)


@pytest.mark.feature("TL-05")
def test_the_root_project_named_in_implicit_dependencies_is_an_edge_as_in_nx(repo, plugins_modules):
    """An e2e project's `implicitDependencies: ["app"]` naming the workspace's root project (a
    project.json at the root, as in Nx's standalone presets) is an edge in Nx's graph; vx named
    its root project `//` only and refused the entry ("names no project")."""
    repo.write(
        {
            "package.json": {"name": "ws", "private": True},
            ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
            "nx.json": {"targetDefaults": {"build": {"cache": True}}},
            "project.json": {
                "name": "app",
                "targets": {
                    "build": {
                        "command": WRITE.replace("NAME", "app"),
                        "outputs": ["{workspaceRoot}/dist/app.txt"],
                    }
                },
            },
            "e2e/project.json": {
                "name": "e2e",
                "implicitDependencies": ["app"],
                "targets": {
                    "e2e": {
                        "command": "node -e \"require('fs').statSync('../dist/app.txt')\"",
                        "options": {"cwd": "e2e"},
                        "dependsOn": ["^build"],
                    }
                },
            },
        }
    )
    link_modules(repo.root, plugins_modules)
    ws = repo.commit()
    nx_cli(ws.root, "run", "e2e:e2e", "--graph=tg.json")
    assert "app:build" in (ws.root / "tg.json").read_text()  # the oracle has the edge
    (ws.root / "tg.json").unlink()
    plan = ws.vx("run", "e2e:e2e", "--dry=json", timeout=INFER_TIMEOUT)
    assert plan.code == 0, plan.err
    rows = {t["id"]: t for t in json.loads(plan.out)["tasks"]}
    assert "//#build" in rows["e2e#e2e"]["deps"]
    shutil.rmtree(ws.root / "dist", ignore_errors=True)
    ran = ws.vx("run", "e2e:e2e", timeout=INFER_TIMEOUT)
    assert ran.code == 0, ran.err + ran.out  # app's build ran first: e2e finds its output
    assert (ws.root / "dist/app.txt").read_text() == "app"


WRITE_EXECUTOR = """const fs = require('node:fs');
const path = require('node:path');
module.exports = async (options, context) => {
  fs.writeFileSync(path.join(context.root, options.out), `${context.projectName}:${context.targetName}`);
  return { success: true };
};
"""


LOCAL_PLUGIN = """const path = require('node:path');
exports.createNodes = [
  '**/thing.json',
  (file, options) => {
    const root = path.dirname(file);
    return {
      projects: {
        [root]: {
          name: path.basename(root),
          targets: { build: { command: 'echo ' + options.word, cache: true, inputs: ['{projectRoot}/**/*'] } },
        },
      },
    };
  },
];
"""


@pytest.mark.feature("TL-05")
def test_plugins_resolve_with_nx_18_as_nx_18_resolves_them(repo):
    """Nx 17 and 18.0 load plugins through src/utils/nx-plugin.js (no getPlugins) and key the
    projects they resolve by name; vx asked for get-plugins.js and refused every such workspace
    ("the workspace's Nx could not resolve the projects")."""
    modules = bundle_or_skip("nx-18")
    repo.write(
        {
            "package.json": {"name": "ws", "private": True},
            ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
            "nx.json": {"plugins": [{"plugin": "./tools/plugin.js", "options": {"word": "hi"}}]},
            "tools/plugin.js": LOCAL_PLUGIN,
            "libs/a/thing.json": {},
            "libs/a/src/a.txt": "a\n",
            "libs/b/project.json": {
                "name": "b",
                "implicitDependencies": ["a"],
                "targets": {
                    "write": {"executor": "@ws/tools:write", "options": {"out": "libs/b/w.txt"}}
                },
            },
            "libs/b/thing.json": {},
            "tsconfig.base.json": {
                "compilerOptions": {"paths": {"@ws/tools": ["tools/executor/index.js"]}}
            },
            "tools/executor/package.json": {"name": "@ws/tools", "executors": "./executors.json"},
            "tools/executor/executors.json": {
                "executors": {"write": {"implementation": "./write.js", "schema": "./schema.json"}}
            },
            "tools/executor/schema.json": {
                "type": "object",
                "properties": {"out": {"type": "string"}},
            },
            "tools/executor/index.js": "module.exports = {};\n",
            "tools/executor/project.json": {"name": "tools"},  # Nx 18 finds a local plugin in one
            "tools/executor/write.js": WRITE_EXECUTOR,
        }
    )
    link_modules(repo.root, modules)
    ws = repo.commit()
    assert nx_projects(ws.root) == ["a", "b", "tools"]
    for name in ("a", "b"):
        shown_as_nx(ws, name)
    first = ws.vx("run", "b:build", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    # an executor target, run through Nx 18's own functions (it has no parseExecutor)
    nx_cli(ws.root, "run", "b:write")
    theirs = (ws.root / "libs/b/w.txt").read_text()
    (ws.root / "libs/b/w.txt").unlink()
    wrote = ws.vx("run", "b:write", "--output-logs=full", timeout=INFER_TIMEOUT)
    assert wrote.code == 0, wrote.err + wrote.out
    assert (ws.root / "libs/b/w.txt").read_text() == theirs == "b:write"


@pytest.mark.feature("TL-05")
def test_an_nx_19_workspace_s_plugins_resolve_as_nx_resolves_them(repo):
    """Nx 18 and 19 load nx.json's plugins with `loadNxPlugins` (Nx 20 added `getPlugins`): vx
    refused every Nx 19 workspace with plugins ("Cannot find module …/get-plugins.js"), where
    `nx show project` answers (found on nrwl/nx-console, Nx 19.0.4)."""
    modules = bundle_or_skip("nx19-jest")
    repo.write(
        {
            "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\n.nx\n.vx\n",
            "nx.json": {
                "targetDefaults": {"test": {"cache": True}},
                "plugins": [{"plugin": "@nx/jest/plugin", "options": {"targetName": "test"}}],
            },
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/jest.config.cjs": "module.exports = { testEnvironment: 'node' };\n",
            "packages/a/src/index.js": "exports.a = 1;\n",
        }
    )
    link_modules(repo.root, modules)
    ws = repo.commit()
    theirs = shown_as_nx(ws, "a")
    assert "jest" in json.dumps(theirs["targets"]["test"])  # the oracle infers it


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize("minor", ["18.1", "18.2", "18.3"])
def test_an_nx_18_minor_workspace_s_inferred_targets_resolve_and_run_as_nx_s(repo, minor):
    """Each Nx 18 minor resolves projects its own way: 18.1 as 18.0 (src/utils/nx-plugin.js),
    18.2 the same with createProjectConfigurations moved to project-configuration-utils.js (vx
    refused the workspace: "createProjectConfigurations is not a function"), 18.3 through
    plugins/internal-api.js as Nx 19 but with the targets normalized only as the project graph's
    nodes (`vx show project` lacked the `configurations: {}` `nx show project` prints). The
    @nx/vite/plugin build of each is shown as that Nx shows it, runs and is restored."""
    modules = bundle_or_skip(f"nx{minor}-vite")
    repo.write(
        {
            "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
            "nx.json": {
                "targetDefaults": {"build": {"cache": True}},
                "plugins": [{"plugin": "@nx/vite/plugin", "options": {"buildTargetName": "build"}}],
            },
            "packages/web/package.json": {"name": "web", "version": "1.0.0", "private": True},
            "packages/web/vite.config.ts": VITE_CONFIG.replace("OUT", "dist"),
            "packages/web/index.html": "<!doctype html><script type=module src=./src/main.js></script>\n",
            "packages/web/src/main.js": "console.log('web');\n",
        }
    )
    link_modules(repo.root, modules)
    ws = repo.commit()
    theirs = shown_as_nx(ws, "web")
    assert "vite build" in json.dumps(theirs["targets"]["build"])  # the oracle infers it
    first = ws.vx("run", "web:build", timeout=INFER_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert first.statuses()["web#build"][1] == "miss"
    built = ws.root / "packages/web/dist/index.html"
    text = built.read_bytes()
    shutil.rmtree(ws.root / "packages/web/dist")
    again = ws.vx("run", "web:build", timeout=INFER_TIMEOUT)
    assert again.code == 0, again.err
    assert again.statuses()["web#build"][1] == "local"
    assert built.read_bytes() == text
