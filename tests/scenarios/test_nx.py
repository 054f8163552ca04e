"""An Nx workspace runs under vx with nothing written (TL-05): nx.json, project.json and
package.json targets, real git, real node scripts."""

from __future__ import annotations

import json

import pytest

# Writes dist/out.txt from src/*, after checking the projects it names are built.
BUILD = """const fs = require('fs'), path = require('path');
const [dir, ...needs] = process.argv.slice(2);
for (const n of needs) {
  if (!fs.existsSync(path.join(n, 'dist', 'out.txt'))) { console.error('unbuilt ' + n); process.exit(3); }
}
fs.mkdirSync(path.join(dir, 'dist'), {recursive: true});
const src = fs.readdirSync(path.join(dir, 'src')).sort().map(f => fs.readFileSync(path.join(dir, 'src', f), 'utf8'));
fs.writeFileSync(path.join(dir, 'dist', 'out.txt'), src.join('') + (process.env.MODE || '') + '\\n');
"""

NX = {
    "namedInputs": {
        "default": ["{projectRoot}/**/*", "sharedGlobals"],
        "sharedGlobals": ["{workspaceRoot}/tools/**/*"],
        "production": ["default", "!{projectRoot}/**/*.md"],
    },
    "targetDefaults": {
        "build": {
            "dependsOn": ["^build"],
            "inputs": ["production", "^production"],
            "outputs": ["{projectRoot}/dist"],
            "cache": True,
        },
    },
}


def nx_workspace(nx=None, extra=None) -> dict[str, object]:
    """libs/a (package.json scripts) <- libs/b (project.json only, implicitDependencies) <- apps/web
    (project.json over package.json, renamed, configurations, an executor vx cannot run)."""
    files: dict[str, object] = {
        "package.json": {"name": "root", "private": True, "workspaces": ["libs/a", "apps/*"]},
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
        "nx.json": nx if nx is not None else NX,
        "tools/build.js": BUILD,
        "libs/a/package.json": {
            "name": "@org/a",
            "version": "1.0.0",
            "private": True,
            "scripts": {
                "build": "node ../../tools/build.js .",
                "prebuild": "mkdir -p dist && echo pre > dist/pre.txt",
            },
        },
        "libs/a/src/index.js": "a1;",
        "libs/a/README.md": "# a\n",
        "libs/b/project.json": {
            "implicitDependencies": ["@org/a"],
            "tags": ["scope:shared"],
            "targets": {
                "build": {
                    "executor": "nx:run-commands",
                    "dependsOn": ["^build"],
                    "options": {"command": "node tools/build.js libs/b libs/a"},
                }
            },
        },
        "libs/b/src/index.js": "b1;",
        "apps/web/package.json": {
            "name": "web-pkg",
            "version": "1.0.0",
            "private": True,
            "dependencies": {},
        },
        "apps/web/project.json": {
            "name": "web",
            "implicitDependencies": ["b"],
            "targets": {
                "build": {
                    "command": "node tools/build.js apps/web libs/b",
                    "dependsOn": ["^build"],
                    "configurations": {"production": {"env": {"MODE": "prod"}}},
                },
                "lint": {"executor": "@nx/eslint:lint"},
                "serve": {"command": "node -e 'setInterval(()=>{},1000)'", "continuous": True},
                "e2e": {"command": "echo e2e", "dependsOn": ["lint"]},
            },
        },
        "apps/web/src/main.js": "web1;",
    }
    files.update(extra or {})
    return files


@pytest.fixture
def ws(repo):
    return repo.write(nx_workspace()).commit()


def statuses(result) -> dict[str, str]:
    assert result.code == 0, result.err + result.out
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


@pytest.mark.feature("TL-05")
def test_nx_projects_build_in_order_cache_and_restore(ws):
    first = ws.vx("run", "web:build")
    assert statuses(first) == {"@org/a#build": "miss", "b#build": "miss", "web#build": "miss"}
    assert (ws.root / "libs/a/dist/pre.txt").is_file()  # npm runs prebuild before build, so does vx
    assert (ws.root / "apps/web/dist/out.txt").read_text() == "web1;\n"
    for d in ("libs/a", "libs/b", "apps/web"):
        (ws.root / d / "dist/out.txt").unlink()
    again = ws.vx("run", "web:build")
    assert set(statuses(again).values()) == {"local"}
    assert (ws.root / "libs/b/dist/out.txt").read_text() == "b1;\n"


@pytest.mark.feature("TL-05")
def test_named_inputs_negations_and_dependencies_production_files(ws):
    statuses(ws.vx("run", "build", "--all"))
    (ws.root / "libs/a/README.md").write_text("# a, edited\n")  # `!{projectRoot}/**/*.md`
    assert set(statuses(ws.vx("run", "build", "--all")).values()) == {"up-to-date"}
    (ws.root / "libs/a/src/index.js").write_text(
        "a2;"
    )  # a's production: a and, by ^production, b and web
    got = statuses(ws.vx("run", "build", "--all"))
    assert got == {"@org/a#build": "miss", "b#build": "miss", "web#build": "miss"}
    (ws.root / "tools/build.js").write_text(
        BUILD + "\n// touched\n"
    )  # sharedGlobals: {workspaceRoot}/tools
    assert set(statuses(ws.vx("run", "build", "--all")).values()) == {"miss"}


@pytest.mark.feature("TL-05")
def test_an_edit_to_a_project_json_target_is_a_miss(ws):
    statuses(ws.vx("run", "build", "--all"))
    project = json.loads((ws.root / "libs/b/project.json").read_text())
    project["targets"]["build"]["options"]["command"] += " && echo again"
    (ws.root / "libs/b/project.json").write_text(json.dumps(project))
    got = statuses(ws.vx("run", "build", "--all"))
    assert got["b#build"] == "miss" and got["@org/a#build"] == "up-to-date"


@pytest.mark.feature("TL-05")
def test_an_executor_that_cannot_be_resolved_is_refused_naming_file_and_field(ws):
    # no node_modules: neither the executor's package nor the `nx` that would run it
    result = ws.vx("run", "web:lint")
    assert result.code == 2
    assert "`web:lint` runs the executor `@nx/eslint:lint`" in result.err
    assert "apps/web/project.json, targets.lint.executor" in result.err
    assert "npm i -D nx" in result.err  # the hint
    dependant = ws.vx("run", "web:e2e")  # e2e depends on lint: refused too, never run without it
    assert dependant.code == 2 and "targets.lint.executor" in dependant.err
    continuous = ws.vx("show", "web#serve", "--format", "json")  # a server: persistent in vx
    assert json.loads(continuous.out)["tasks"]["serve"]["exec"]["persistent"] == {}


@pytest.mark.feature("TL-05")
def test_an_unrunnable_target_is_refused_not_skipped_in_a_run_everywhere(repo):
    files = nx_workspace()
    files["libs/b/project.json"]["targets"]["build"] = {
        "executor": "@nx/js:tsc",
        "options": {"outputPath": "dist/libs/b"},
    }
    repo.write(files).commit()
    result = repo.vx("run", "build", "--all")
    assert result.code == 2
    assert (
        "libs/b/project.json, targets.build.executor" in result.err and "@nx/js:tsc" in result.err
    )
    reached = repo.vx("run", "web:build")  # through ^build: refused, never bridged over
    assert reached.code == 2 and "@nx/js:tsc" in reached.err


@pytest.mark.feature("TL-05")
def test_configurations_and_the_configuration_flag(ws):
    plain = statuses(ws.vx("run", "web:build"))
    assert plain["web#build"] == "miss"
    assert (ws.root / "apps/web/dist/out.txt").read_text() == "web1;\n"
    prod = statuses(ws.vx("run", "web:build:production"))
    assert prod["web#build:production"] == "miss" and prod["b#build"] == "up-to-date"
    assert (ws.root / "apps/web/dist/out.txt").read_text() == "web1;prod\n"
    flag = statuses(ws.vx("run", "build", "--all", "--configuration=production"))
    # web has the configuration, the others run their default one
    assert flag == {
        "@org/a#build": "up-to-date",
        "b#build": "up-to-date",
        "web#build:production": "up-to-date",
    }


@pytest.mark.feature("TL-05")
def test_cache_false_always_runs(repo):
    files = nx_workspace()
    files["libs/b/project.json"]["targets"]["build"]["cache"] = False
    repo.write(files).commit()
    statuses(repo.vx("run", "b:build"))
    again = statuses(repo.vx("run", "b:build"))
    assert again == {"@org/a#build": "up-to-date", "b#build": "no-cache"}


@pytest.mark.feature("TL-05")
def test_target_defaults_by_executor_come_before_by_name(repo):
    nx = json.loads(json.dumps(NX))
    nx["targetDefaults"]["nx:run-commands"] = {"cache": True, "outputs": ["{projectRoot}/dist"]}
    files = nx_workspace(nx)
    del files["libs/b/project.json"]["targets"]["build"]["dependsOn"]
    repo.write(files).commit()
    # b's build is an nx:run-commands target: the executor's defaults apply, not build's (no ^build)
    result = repo.vx("run", "b:build")
    assert result.code == 1 and "unbuilt libs/a" in result.out + result.err
    assert statuses(repo.vx("run", "@org/a:build")) == {
        "@org/a#build": "miss"
    }  # a script: build's defaults
    assert statuses(repo.vx("run", "b:build")) == {"b#build": "miss"}
    assert statuses(repo.vx("run", "b:build")) == {"b#build": "up-to-date"}


@pytest.mark.feature("TL-05")
def test_run_commands_commands_parallel_cwd_args_env_file_and_env_inputs(repo):
    target = {
        "executor": "nx:run-commands",
        "cache": True,
        "inputs": ["default", {"env": "NX_TEST_FLAVOUR"}],
        "outputs": ["{projectRoot}/out"],
        "options": {
            "cwd": "libs/c",
            "parallel": False,
            "envFile": "libs/c/.env.build",
            "args": "--name=vx",
            "commands": [
                {"command": "mkdir -p out", "forwardAllArgs": False},
                "node -e \"require('fs').writeFileSync('out/one.txt', process.argv[1] + ' ' + process.env.GREETING)\""
                " {args.name}",
                {"command": "sh -c 'printf %s \"$*\" > out/two.txt' two", "forwardAllArgs": True},
            ],
        },
    }
    files = nx_workspace(
        extra={
            "libs/c/project.json": {"targets": {"gen": target}},
            "libs/c/.env.build": "GREETING=hello\n",
        }
    )
    repo.write(files).commit()
    assert statuses(repo.vx("run", "c:gen")) == {"c#gen": "miss"}
    assert (repo.root / "libs/c/out/one.txt").read_text() == "vx hello"
    assert (repo.root / "libs/c/out/two.txt").read_text() == "--name=vx"
    assert statuses(repo.vx("run", "c:gen")) == {"c#gen": "up-to-date"}
    assert statuses(repo.vx("run", "c:gen", env={"NX_TEST_FLAVOUR": "x"})) == {
        "c#gen": "miss"
    }  # { env }
    (repo.root / "libs/c/.env.build").write_text("GREETING=bye\n")  # the envFile is an input
    assert statuses(repo.vx("run", "c:gen", env={"NX_TEST_FLAVOUR": "x"})) == {"c#gen": "miss"}
    assert (repo.root / "libs/c/out/one.txt").read_text() == "vx bye"


@pytest.mark.feature("TL-05")
def test_parallel_commands_all_run_and_any_failure_fails(repo):
    target = {
        "executor": "nx:run-commands",
        "options": {"commands": ["touch libs/d/one", "touch libs/d/two && exit 4"]},
    }
    repo.write(nx_workspace(extra={"libs/d/project.json": {"targets": {"both": target}}})).commit()
    result = repo.vx("run", "d:both")
    assert result.code == 1
    assert (repo.root / "libs/d/one").exists() and (repo.root / "libs/d/two").exists()


@pytest.mark.feature("TL-05")
def test_depends_on_object_forms_and_tags(repo):
    files = nx_workspace(
        extra={
            "libs/e/project.json": {
                "targets": {
                    "check": {
                        "command": "echo check",
                        "dependsOn": [
                            {"target": "build", "projects": ["b"]},
                            {"target": "build", "dependencies": True},
                        ],
                    }
                },
                "implicitDependencies": ["@org/a"],
            }
        }
    )
    repo.write(files).commit()
    got = statuses(repo.vx("run", "e:check"))
    assert set(got) == {"b#build", "@org/a#build", "e#check"}
    tagged = statuses(repo.vx("run", "build", "--filter", "tag:scope:shared"))
    assert set(tagged) == {"b#build", "@org/a#build"}


@pytest.mark.feature("TL-05")
def test_nx_cli_habits(ws):
    many = statuses(ws.vx("run-many", "-t", "build", "--exclude", "web"))
    assert set(many) == {"@org/a#build", "b#build"}
    only = statuses(ws.vx("run-many", "--targets=build", "-p", "b"))
    assert set(only) == {"@org/a#build", "b#build"}
    skip = statuses(ws.vx("run", "b:build", "--skip-nx-cache", "--parallel=1"))
    assert skip == {"@org/a#build": "miss", "b#build": "miss"}
    (ws.root / "libs/b/src/index.js").write_text("b2;")
    affected = statuses(ws.vx("affected", "-t", "build", "--base=HEAD"))
    assert affected == {
        "@org/a#build": "up-to-date",
        "b#build": "miss",
        "web#build": "miss",
    }  # a: b's dependency
    head = ws.vx("affected", "-t", "build", "--head=main~1")
    assert head.code == 2 and "--head" in head.err


@pytest.mark.feature("TL-05")
def test_a_misspelt_target_field_is_refused(repo):
    files = nx_workspace()
    files["libs/b/project.json"]["targets"]["build"]["ouputs"] = ["{projectRoot}/dist"]
    repo.write(files).commit()
    result = repo.vx("run", "b:build")
    assert result.code == 2
    assert "libs/b/project.json, targets.build.ouputs" in result.err and "outputs" in result.err


@pytest.mark.feature("TL-05")
def test_a_vx_config_wins_for_its_project(ws):
    ws.write(
        {"libs/b/vx.config.json": {"tasks": {"build": {"exec": {"command": "echo own > own.txt"}}}}}
    ).commit()
    result = ws.vx("run", "b:build")
    assert statuses(result) == {"b#build": "no-cache"}
    assert (ws.root / "libs/b/own.txt").read_text() == "own\n"


@pytest.mark.feature("TL-05")
def test_a_refusal_from_a_target_default_names_nx_json(repo):
    nx = json.loads(json.dumps(NX))
    nx["targetDefaults"]["build"]["inputs"] = ["production", {"runtime": "node -v"}]
    repo.write(nx_workspace(nx)).commit()
    # a's build is refused, not replaced by vx's implicit build of a project without one
    result = repo.vx("run", "@org/a:build")
    assert result.code == 2
    assert "in: nx.json, targetDefaults.build.inputs[1].runtime" in result.err
    nx["targetDefaults"]["build"]["inputs"] = ["production", 3]
    repo.write({"nx.json": nx}).commit()
    bad = repo.vx("run", "@org/a:build")
    assert bad.code == 2 and "in: nx.json, targetDefaults.build.inputs[1]" in bad.err
    assert "Traceback" not in bad.err


@pytest.mark.feature("TL-05")
def test_a_script_target_is_named_by_its_script(repo):
    files = nx_workspace()
    files["libs/a/project.json"] = {
        "targets": {"build": {"executor": "nx:run-script", "options": {"script": "bundle"}}}
    }
    repo.write(files).commit()
    result = repo.vx("run", "@org/a:build")
    assert result.code == 2
    assert (
        "in: libs/a/project.json, targets.build.options.script" in result.err
        and "`bundle`" in result.err
    )


@pytest.mark.feature("TL-05")
def test_the_nx_example_runs_warm_restores_and_misses_on_an_edit(repo):
    import shutil
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "nx"
    shutil.copytree(
        example,
        repo.root,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("node_modules", ".vx", ".nx", "dist"),
    )
    repo.commit()
    first = statuses(repo.vx("run-many", "-t", "build", "test", "lint"))
    assert len(first) == 9 and set(first.values()) == {"miss"}
    assert set(statuses(repo.vx("run-many", "-t", "build", "test", "lint")).values()) == {
        "up-to-date"
    }
    shutil.rmtree(repo.root / "libs/core/dist")
    restored = statuses(repo.vx("run", "app:build"))
    assert restored["core#build"] == "local" and (repo.root / "libs/core/dist/index.js").is_file()
    (repo.root / "libs/core/README.md").write_text(
        "# core, edited\n"
    )  # not production: builds hold
    assert set(statuses(repo.vx("run", "app:build")).values()) == {"up-to-date"}
    (repo.root / "libs/utils/src/math.js").write_text(
        "exports.add = (a, b) => b + a;\nexports.check = () => exports.add(2, 3) === 5;\n"
    )
    edited = statuses(repo.vx("run-many", "-t", "build", "test"))
    assert {t for t, c in edited.items() if c == "miss"} == {
        "utils#build",
        "core#build",
        "app#build",
        "utils#test",
        "core#test",
        "app#test",
    }
    serve = repo.vx("show", "app#serve", "--format", "json")  # continuous: a persistent task
    assert json.loads(serve.out)["tasks"]["serve"]["exec"]["persistent"] == {}


@pytest.mark.feature("TL-05")
def test_vx_init_leaves_an_nx_workspace_as_it_is(ws):
    result = ws.vx("init")
    assert result.code == 0 and "Nx workspace" in result.err + result.out
    assert not list(ws.root.glob("**/vx.config.json"))


@pytest.mark.feature("TL-05")
def test_a_remembered_cached_run_sees_nx_edits(ws):
    """A fully cached run is replayed from its receipt only while what planning read holds: an
    edited project.json or nx.json, or a new project.json, is a new plan (no `--summarize`: a run
    that writes a summary keeps no receipt)."""

    def missed(result) -> set[str]:
        assert result.code == 0, result.err
        return {line.split()[-1] for line in result.err.splitlines() if " miss " in line}

    def remembered() -> None:
        assert missed(ws.vx("run", "build", "--all", summary=False)) == set()
        assert list((ws.root / ".vx" / "receipts").iterdir())  # the next run may replay it
        assert missed(ws.vx("run", "build", "--all", summary=False)) == set()

    ws.vx("run", "build", "--all", summary=False)
    remembered()
    project = json.loads((ws.root / "libs/b/project.json").read_text())
    project["targets"]["build"]["options"]["command"] += " && echo again"
    (ws.root / "libs/b/project.json").write_text(json.dumps(project))
    assert missed(ws.vx("run", "build", "--all", summary=False)) == {"b#build", "web#build"}
    remembered()
    nx = json.loads(json.dumps(NX))
    nx["namedInputs"]["production"].append(
        "!{projectRoot}/src/**/*.txt"
    )  # a new default: every key moves
    (ws.root / "nx.json").write_text(json.dumps(nx))
    assert missed(ws.vx("run", "build", "--all", summary=False)) == {
        "@org/a#build",
        "b#build",
        "web#build",
    }
    remembered()
    ws.write(
        {
            "libs/deep/x/project.json": {
                "targets": {"build": {"command": "mkdir -p libs/deep/x/dist", "cache": True}}
            }
        }
    )
    assert missed(ws.vx("run", "build", "--all", summary=False)) == {"x#build"}


@pytest.mark.feature("TL-05")
def test_ready_when_is_refused_and_parallel_spellings_are_understood(repo):
    files = nx_workspace()
    files["libs/b/project.json"]["targets"]["start"] = {
        "executor": "nx:run-commands",
        "options": {"commands": ["node -e 'setInterval(()=>{},1000)'"], "readyWhen": "listening"},
    }
    repo.write(files).commit()
    result = repo.vx("run", "b:start")
    assert result.code == 2 and "libs/b/project.json, targets.start.options.readyWhen" in result.err
    for spelling in (["--parallel"], ["--parallel=false"], ["--parallel", "2"], ["--parallel=3"]):
        assert set(statuses(repo.vx("run-many", "-t", "build", *spelling))) == {
            "@org/a#build",
            "b#build",
            "web#build",
        }, spelling


@pytest.mark.feature("TL-05")
def test_an_input_projects_field_of_the_wrong_kind_is_refused_not_a_crash(repo):
    """`{"input": "production", "projects": 5}` crashed the mapping (TypeError) instead of naming it."""
    nx = json.loads(json.dumps(NX))
    nx["targetDefaults"]["build"]["inputs"] = [{"input": "production", "projects": 5}]
    ws = repo.write(nx_workspace(nx=nx)).commit()
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert "`projects` must be a project name or a list of them, got 5" in result.err
    assert (
        "nx.json, targetDefaults.build.inputs[0].projects" in result.err
        and "Traceback" not in result.err
    )


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "change, where",
    [
        (  # validated when the config loads: an output glob covering the project's package.json
            {
                "apps/web/project.json": {
                    "name": "web",
                    "targets": {
                        "build": {
                            "command": "true",
                            "cache": True,
                            "outputs": ["{projectRoot}/*.json"],
                        }
                    },
                }
            },
            "in: apps/web/project.json, targets.build.outputs",
        ),
        (  # the same, given by a target default
            {
                "nx.json": {
                    **NX,
                    "targetDefaults": {
                        "build": {"cache": True, "outputs": ["{projectRoot}/*.json"]}
                    },
                }
            },
            "in: nx.json, targetDefaults.build.outputs",
        ),
        (  # checked when the graph is built: a target that names itself
            {
                "apps/web/project.json": {
                    "name": "web",
                    "targets": {"build": {"command": "true", "dependsOn": ["build"]}},
                }
            },
            "in: apps/web/project.json, targets.build.dependsOn",
        ),
    ],
)
def test_a_mapped_refusal_names_the_nx_file_and_field_not_the_vx_one(repo, change, where):
    """Reviewer finding (issue 18): a refusal of what a target maps to named `tasks.build.
    cache.outputs.files[0]` in project.json, a field the user never wrote."""
    repo.write(nx_workspace(extra=change)).commit()
    result = repo.vx("run", "web:build", "web:pack" if "pack" in where else "web:build")
    assert result.code == 2, result.out + result.err
    assert where in result.err, result.err
    assert "tasks." not in result.err and "Traceback" not in result.err
