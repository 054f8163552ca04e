"""Nx executors (TL-05, issue #28 §2): a target of any executor runs as `nx run P:T` runs it — one
process of vx's runner calling the executor through the workspace's own `nx`, options merged with
the configuration (`-c`, else `defaultConfiguration`) and the forwarded args as Nx merges them —
and is cached, restored byte for byte and its log replayed; one that cannot be resolved is refused
by name. The real Nx (21.6.4) and @nx/js from npm (the pinned `nx-plugins` bundle) are the oracle:
the same target run by `nx run` on a copy of the workspace writes the same bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.npm_packages import bundle_or_skip
from support.nx import OFFLINE, inferred_workspace, link_modules, nx_cli

RUN_TIMEOUT = 300

WRITE_JS = """const fs = require('node:fs');
const path = require('node:path');

module.exports = async function write(options, context) {
  console.log(`write: ${context.projectName}:${context.targetName}` +
    `:${context.configurationName || '-'} -> ${options.out}`);
  if (options.fail) {
    console.error('write: asked to fail');
    return { success: false };
  }
  const out = path.join(context.root, options.out);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const seen = { ...options };
  delete seen.__overrides_unparsed__;
  fs.writeFileSync(out, JSON.stringify({
    options: seen,
    project: context.projectName,
    target: context.targetName,
    configuration: context.configurationName,
    root: context.projectsConfigurations.projects[context.projectName].root,
    graph: Object.keys(context.projectGraph.nodes).sort(),
    release: context.nxJsonConfiguration.release || null,
  }, null, 2) + '\\n');
  return { success: true };
};
"""

SCHEMA = {
    "version": 2,
    "type": "object",
    "properties": {
        "out": {"type": "string"},
        "message": {"type": "string"},
        "mode": {"type": "string", "default": "dev"},
        "level": {"type": "number", "default": 1},
        "fail": {"type": "boolean", "default": False},
    },
    "required": ["out"],
}


def local_workspace() -> dict[str, object]:
    """An app whose `build` runs a local plugin's executor (`@ws/tools:write`, found through a
    tsconfig path as Nx finds it), and a lib whose `build` is @nx/js:tsc."""
    return {
        "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*", "tools/*"]},
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "nx.json": {"targetDefaults": {"build": {"cache": True}}},
        "tsconfig.base.json": {
            "compilerOptions": {
                "target": "es2022",
                "module": "commonjs",
                "strict": True,
                "skipLibCheck": True,
                "baseUrl": ".",
                "paths": {"@ws/tools": ["tools/plugin/src/index.js"]},
            }
        },
        "tools/plugin/package.json": {
            "name": "@ws/tools",
            "version": "0.0.1",
            "executors": "./executors.json",
        },
        "tools/plugin/executors.json": {
            "executors": {
                "write": {
                    "implementation": "./src/write.js",
                    "schema": "./src/write.schema.json",
                    "description": "writes its options",
                },
                "watch": {"implementation": "./src/write.js", "schema": "./src/watch.schema.json"},
            }
        },
        "tools/plugin/src/index.js": "module.exports = {};\n",
        "tools/plugin/src/write.js": WRITE_JS,
        "tools/plugin/src/write.schema.json": SCHEMA,
        "tools/plugin/src/watch.schema.json": {**SCHEMA, "continuous": True},
        "packages/app/package.json": {"name": "app", "version": "1.0.0"},
        "packages/app/project.json": {
            "name": "app",
            "targets": {
                "build": {
                    "executor": "@ws/tools:write",
                    "options": {"out": "{projectRoot}/dist/out.json", "message": "hello"},
                    "configurations": {"prod": {"mode": "prod", "level": 3}},
                    "outputs": ["{projectRoot}/dist"],
                },
                "broken": {"executor": "@ws/tools:write", "options": {"out": "x", "fail": True}},
                "missing": {"executor": "@ws/nowhere:write"},
                "watch": {"executor": "@ws/tools:watch", "options": {"out": "x"}},
            },
        },
        "packages/app/src/main.txt": "app\n",
        "packages/lib/package.json": {"name": "lib", "version": "1.0.0"},
        "packages/lib/project.json": {
            "name": "lib",
            "sourceRoot": "packages/lib/src",
            "targets": {
                "build": {
                    "executor": "@nx/js:tsc",
                    "outputs": ["{options.outputPath}"],
                    "options": {
                        "outputPath": "dist/packages/lib",
                        "main": "packages/lib/src/index.ts",
                        "tsConfig": "packages/lib/tsconfig.lib.json",
                    },
                }
            },
        },
        "packages/lib/tsconfig.lib.json": {
            "extends": "../../tsconfig.base.json",
            "compilerOptions": {"outDir": "../../dist/out-tsc", "declaration": True},
            "include": ["src/**/*.ts"],
        },
        "packages/lib/src/index.ts": "export const lib = (n: number): number => n * 2;\n",
    }


@pytest.fixture(scope="module")
def plugins_modules():
    return bundle_or_skip("nx-plugins")


@pytest.fixture
def ws(repo, plugins_modules):
    repo.write(local_workspace())
    link_modules(repo.root, plugins_modules)
    return repo.commit()


def on_a_copy(ws, tmp_path: Path) -> Path:
    """The workspace copied as it is committed, for Nx to run in."""
    copy = tmp_path / "nx-copy"
    shutil.copytree(ws.root, copy, symlinks=True, ignore=shutil.ignore_patterns(".vx", ".git"))
    return copy


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.feature("TL-05")
def test_a_local_executor_runs_as_nx_runs_it_caches_and_replays(ws, tmp_path):
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "app:build", "-c", "prod", "--message=forwarded", "--level=7")
    theirs = (copy / "packages/app/dist/out.json").read_bytes()

    first = ws.vx(
        "run",
        "app:build",
        "-c",
        "prod",
        "--output-logs=full",
        "--",
        "--message=forwarded",
        "--level=7",
        timeout=RUN_TIMEOUT,
    )
    assert first.code == 0, first.err + first.out
    assert first.statuses()["app#build:prod"][1] == "miss"
    out = ws.root / "packages/app/dist/out.json"
    assert out.read_bytes() == theirs
    seen = json.loads(theirs)
    assert seen["options"]["mode"] == "prod" and seen["options"]["level"] == 7
    assert seen["options"]["message"] == "forwarded"
    assert "write: app:build:prod -> packages/app/dist/out.json" in first.out

    out.unlink()
    again = ws.vx(
        "run",
        "app:build",
        "-c",
        "prod",
        "--output-logs=full",
        "--",
        "--message=forwarded",
        "--level=7",
    )
    assert again.code == 0, again.err
    assert again.statuses()["app#build:prod"][1] == "local"
    assert out.read_bytes() == theirs
    assert "write: app:build:prod -> packages/app/dist/out.json" in again.out  # the log, replayed

    # another forwarded value is another key, and the options it merges
    other = ws.vx("run", "app:build", "-c", "prod", "--", "--message=other")
    assert other.code == 0, other.err
    assert other.statuses()["app#build:prod"][1] == "miss"
    assert json.loads(out.read_bytes())["options"]["message"] == "other"

    # the local plugin's executor edited: a miss, as an upgraded npm executor would be
    write_js = ws.root / "tools/plugin/src/write.js"
    write_js.write_text(write_js.read_text() + "// edited\n")
    edited = ws.vx("run", "app:build", "-c", "prod", "--", "--message=other")
    assert edited.code == 0, edited.err
    assert edited.statuses()["app#build:prod"][1] == "miss"


@pytest.mark.feature("TL-05")
def test_an_executor_is_keyed_on_the_nx_json_its_context_holds(ws, tmp_path):
    """An executor is handed nx.json whole (`context.nxJsonConfiguration`): an edit to a part no
    target declares (`release`) may change what it writes, so it is a miss, as under Nx (which
    misses every task on any nx.json edit); whitespace changes nothing it is handed, and hits."""
    out = ws.root / "packages/app/dist/out.json"
    first = ws.vx("run", "app:build", timeout=RUN_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert json.loads(out.read_text())["release"] is None
    nx_json = ws.root / "nx.json"
    doc = json.loads(nx_json.read_text())
    doc["release"] = {"projects": ["app"]}
    nx_json.write_text(json.dumps(doc))
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "app:build")
    edited = ws.vx("run", "app:build", timeout=RUN_TIMEOUT)
    assert edited.code == 0, edited.err
    assert edited.statuses()["app#build"][1] == "miss"
    assert out.read_bytes() == (copy / "packages/app/dist/out.json").read_bytes()
    assert json.loads(out.read_text())["release"] == {"projects": ["app"]}
    nx_json.write_text(json.dumps(doc, indent=4) + "\n\n")
    spaced = ws.vx("run", "app:build")
    assert spaced.code == 0, spaced.err
    assert spaced.statuses()["app#build"][1] != "miss"


@pytest.mark.feature("TL-05")
def test_a_failing_executor_fails_its_task(ws):
    result = ws.vx("run", "app:broken", "--output-logs=full", timeout=RUN_TIMEOUT)
    assert result.code == 1, result.err + result.out
    assert "write: asked to fail" in result.out + result.err


@pytest.mark.feature("TL-05")
def test_nx_js_tsc_builds_what_nx_run_builds(ws, tmp_path):
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "lib:build")
    theirs = tree(copy / "dist/packages/lib")
    assert "src/index.js" in theirs and "src/index.d.ts" in theirs

    first = ws.vx("run", "lib:build", timeout=RUN_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert tree(ws.root / "dist/packages/lib") == theirs
    shutil.rmtree(ws.root / "dist")
    again = ws.vx("run", "lib:build")
    assert again.code == 0, again.err
    assert again.statuses()["lib#build"][1] == "local"
    assert tree(ws.root / "dist/packages/lib") == theirs


@pytest.mark.feature("TL-05")
def test_an_executor_that_cannot_be_resolved_is_refused_by_name(ws):
    result = ws.vx("run", "app:missing")
    assert result.code == 2, result.err + result.out
    assert "`app:missing` runs the executor `@ws/nowhere:write`" in result.err
    assert "in: packages/app/project.json, targets.missing.executor" in result.err
    assert "npm i -D @ws/nowhere" in result.err
    assert "Traceback" not in result.err


@pytest.mark.feature("TL-05")
def test_migrate_writes_an_executor_target_as_nx_run(ws):
    live = ws.vx("run", "app:build", "-c", "prod", timeout=RUN_TIMEOUT)
    assert live.code == 0, live.err + live.out
    out = ws.root / "packages/app/dist/out.json"
    built = out.read_bytes()
    (ws.root / "packages/app/project.json").write_text(
        (ws.root / "packages/app/project.json")
        .read_text()
        .replace('"missing": {\n        "executor": "@ws/nowhere:write"\n      }', '"missing": {}')
    )
    migrated = ws.vx("migrate", "--from", "nx")
    assert migrated.code == 0, migrated.err
    written = (ws.root / "packages/app/vx.config.json").read_text()
    assert (
        '"command": "nx run app:build:prod --exclude-task-dependencies --skip-nx-cache"' in written
    )
    assert "runs the Nx executor `@ws/tools:write` through `nx run`" in written
    ws.commit("migrated")
    out.unlink()
    again = ws.vx("run", "app:build:prod", "--force", timeout=RUN_TIMEOUT)
    assert again.code == 0, again.err + again.out
    assert out.read_bytes() == built


@pytest.mark.feature("TL-05")
def test_an_executor_continuous_by_its_schema_is_persistent(ws):
    # Nx's normalizeTarget reads `continuous` from the executor's schema when the target says nothing
    shown = ws.vx("show", "app#watch", "--format", "json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["tasks"]["watch"]["exec"]["persistent"] == {}


@pytest.mark.feature("TL-05")
def test_an_nx_style_option_before_the_dashes_is_refused_with_where_it_goes(ws):
    result = ws.vx("run", "app:build", "-c", "prod", "--level=7")
    assert result.code == 2, result.err + result.out
    assert "unknown flag `--level` for `vx run`" in result.err
    assert "A task's own arguments go after `--`: `vx run … -- --level=7`" in result.err


@pytest.mark.feature("TL-05")
def test_an_executor_in_a_workspace_of_inference_plugins(repo, plugins_modules, tmp_path):
    """Where nx.json declares `plugins`, the runner is handed Nx's own resolved projects."""
    files = inferred_workspace()
    files["packages/lib-c/project.json"] = {
        "name": "lib-c",
        "sourceRoot": "packages/lib-c/src",
        "targets": {
            "compile": {
                "executor": "@nx/js:tsc",
                "cache": True,
                "outputs": ["{options.outputPath}"],
                "options": {
                    "outputPath": "dist/lib-c",
                    "main": "{projectRoot}/src/index.ts",
                    "tsConfig": "{projectRoot}/tsconfig.compile.json",
                },
            }
        },
    }
    files["packages/lib-c/tsconfig.compile.json"] = {
        "extends": "../../tsconfig.base.json",
        "compilerOptions": {
            "outDir": "../../dist/out-tsc",
            "module": "commonjs",
            "moduleResolution": "node",
            "composite": False,
        },
        "include": ["src/**/*.ts"],
    }
    files["packages/lib-c/src/index.ts"] = "export const c = (s: string): string => s + 'c';\n"
    repo.write(files)
    link_modules(repo.root, plugins_modules)
    ws = repo.commit()
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "lib-c:compile")
    theirs = tree(copy / "dist/lib-c")
    assert "src/index.js" in theirs

    first = ws.vx("run", "lib-c:compile", timeout=RUN_TIMEOUT)
    assert first.code == 0, first.err + first.out
    assert tree(ws.root / "dist/lib-c") == theirs
    shutil.rmtree(ws.root / "dist/lib-c")
    again = ws.vx("run", "lib-c:compile", timeout=RUN_TIMEOUT)
    assert again.code == 0, again.err
    assert again.statuses()["lib-c#compile"][1] == "local"
    assert tree(ws.root / "dist/lib-c") == theirs


@pytest.mark.feature("TL-05")
def test_without_its_context_file_the_runner_asks_nx_for_the_graph(ws):
    assert ws.vx("run", "app:build", timeout=RUN_TIMEOUT).code == 0
    out = ws.root / "packages/app/dist/out.json"
    built = out.read_bytes()
    out.unlink()
    runner = Path(__file__).resolve().parents[2] / "src/vx/config/nxexec.cjs"
    proc = subprocess.run(
        ["node", str(runner), ".vx/nx-exec/gone.json", "app", "build", ""],
        cwd=ws.root,
        env={**OFFLINE, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.read_bytes() == built


COPY_JS = """const fs = require('node:fs');
const path = require('node:path');
const { createBuilder } = require('@angular-devkit/architect');

module.exports = createBuilder(async (options, context) => {
  context.logger.info(`copy: ${context.target.project}:${context.target.target}` +
    `:${context.target.configuration || '-'} -> ${options.out}`);
  const out = path.join(context.workspaceRoot, options.out);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify({ options, target: context.target }, null, 2) + '\\n');
  return { success: true };
});
"""


def builder_workspace() -> dict[str, object]:
    """An app whose `build` runs a local Angular builder (a package's `builders`, written with
    @angular-devkit/architect's createBuilder, as @angular/build:application is)."""
    return {
        "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*", "tools/*"]},
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "nx.json": {"targetDefaults": {"build": {"cache": True}}},
        "tsconfig.base.json": {
            "compilerOptions": {"baseUrl": ".", "paths": {"@ws/ng": ["tools/ng/src/index.js"]}}
        },
        "tools/ng/package.json": {
            "name": "@ws/ng",
            "version": "0.0.1",
            "builders": "./builders.json",
        },
        "tools/ng/builders.json": {
            "builders": {
                "copy": {
                    "implementation": "./src/copy.js",
                    "schema": "./src/copy.schema.json",
                    "description": "writes its options",
                }
            }
        },
        "tools/ng/src/index.js": "module.exports = {};\n",
        "tools/ng/src/copy.js": COPY_JS,
        "tools/ng/src/copy.schema.json": {
            "type": "object",
            "properties": {
                "out": {"type": "string"},
                "mode": {"type": "string", "default": "dev"},
                "level": {"type": "number", "default": 1},
            },
            "required": ["out"],
        },
        "packages/app/package.json": {"name": "app", "version": "1.0.0"},
        "packages/app/project.json": {
            "name": "app",
            "targets": {
                "build": {
                    "executor": "@ws/ng:copy",
                    "options": {"out": "packages/app/dist/out.json"},
                    "configurations": {"prod": {"mode": "prod", "level": 3}},
                    "defaultConfiguration": "prod",
                    "outputs": ["{projectRoot}/dist"],
                }
            },
        },
        "packages/app/src/main.txt": "app\n",
    }


@pytest.mark.feature("TL-05")
def test_an_angular_builder_runs_as_nx_runs_it_and_is_cached(repo, tmp_path):
    """Nx runs a `builders` entry through its Angular CLI adapter (@nx/angular's apps' `build` is
    `@angular/build:application`); vx refused it by name (exit 2) where `nx run` builds."""
    modules = bundle_or_skip("nx-angular")
    repo.write(builder_workspace())
    link_modules(repo.root, modules)
    ws = repo.commit()
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "app:build", "--level=7")
    theirs = (copy / "packages/app/dist/out.json").read_bytes()

    first = ws.vx("run", "app:build", "--output-logs=full", "--", "--level=7", timeout=RUN_TIMEOUT)
    assert first.code == 0, first.err + first.out
    out = ws.root / "packages/app/dist/out.json"
    assert out.read_bytes() == theirs
    assert json.loads(theirs)["options"] == {
        "out": "packages/app/dist/out.json",
        "mode": "prod",
        "level": 7,
    }
    assert "copy: app:build:prod -> packages/app/dist/out.json" in first.out + first.err

    out.unlink()
    again = ws.vx("run", "app:build", "--", "--level=7")
    assert again.code == 0, again.err
    assert again.statuses()["app#build"][1] == "local"
    assert out.read_bytes() == theirs


EXECUTOR = """const fs = require('node:fs');
const path = require('node:path');
module.exports = async function (options, context) {
  const out = path.join(context.root, options.outputPath);
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'built.txt'), `${context.projectName} ${options.greeting}\\n`);
  return { success: true };
};
"""


@pytest.mark.feature("TL-05")
def test_an_executor_runs_under_nx_19_as_nx_runs_it(repo, tmp_path):
    """Nx 18 and 19 have no `parseExecutor` (Nx 20 added it): every executor target of an Nx 19
    workspace failed under vx ("parseExecutor is not a function", nrwl/nx-console's
    `@nx/esbuild:esbuild` builds), where `nx run` builds."""
    modules = bundle_or_skip("nx19-jest")
    schema = {"type": "object", "properties": {"greeting": {"type": "string", "default": "hi"}}}
    repo.write(
        {
            "package.json": {"name": "ws", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\n.nx\n.vx\ndist\n",
            "nx.json": {"targetDefaults": {"build": {"cache": True}}},
            "packages/app/package.json": {"name": "app", "version": "1.0.0"},
            "packages/app/project.json": {
                "name": "app",
                "targets": {
                    "build": {
                        "executor": "hello-executor:write",
                        "outputs": ["{workspaceRoot}/dist/app"],
                        "options": {"outputPath": "dist/app", "greeting": "hello"},
                    }
                },
            },
            "node_modules/hello-executor/package.json": {
                "name": "hello-executor",
                "version": "1.0.0",
                "executors": "executors.json",
            },
            "node_modules/hello-executor/executors.json": {
                "executors": {"write": {"implementation": "./write.js", "schema": "./schema.json"}}
            },
            "node_modules/hello-executor/schema.json": schema,
            "node_modules/hello-executor/write.js": EXECUTOR,
        }
    )
    for entry in modules.iterdir():
        (repo.root / "node_modules" / entry.name).symlink_to(entry)
    ws = repo.commit()
    copy = on_a_copy(ws, tmp_path)
    nx_cli(copy, "run", "app:build")
    theirs = (copy / "dist/app/built.txt").read_bytes()
    assert theirs == b"app hello\n"
    first = ws.vx("run", "app:build", timeout=300)
    assert first.code == 0, first.err + first.out
    assert (ws.root / "dist/app/built.txt").read_bytes() == theirs
