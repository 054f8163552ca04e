"""Mapping an Nx workspace to vx tasks (`vx.config.nx`), through its entry points: `find_root`
reads nx.json, `project` maps one project's package.json and project.json targets, and
`shown_project` is `nx show project NAME --json`. Files on disk, no process: the scenarios
(test_nx.py, test_nx_parity.py) hold the same against real runs and the real Nx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vx.config.nx import GROUP, find_root, project, shown_project
from vx.errors import ConfigError
from vx.model import ROOT_PROJECT, Package, ProjectConfig, Workspace


class NxWorkspace:
    """nx.json and project files written under `root`, and the packages vx would discover."""

    def __init__(self, root: Path, nx: dict, projects: dict[str, dict], root_manifest=None):
        self.root = root
        manifest = root_manifest or {"name": "root", "private": True}
        (root / "nx.json").write_text(json.dumps(nx))
        (root / "package.json").write_text(json.dumps(manifest))
        self.packages = {
            ROOT_PROJECT: Package(ROOT_PROJECT, "", (), "package.json", manifest.get("scripts", {}))
        }
        for directory, files in projects.items():
            (root / directory).mkdir(parents=True)
            for name, body in files.items():
                (root / directory / name).write_text(json.dumps(body))
            scripts = files.get("package.json", {}).get("scripts", {})
            name = (
                files.get("project.json", {}).get("name")
                or files.get("package.json", {}).get("name")
                or directory.rpartition("/")[2]
            )
            self.packages[name] = Package(name, directory, (), f"{directory}/package.json", scripts)

    def project(self, name: str, manager: str = "npm") -> ProjectConfig:
        return project(find_root(str(self.root), self.packages), self.packages[name], manager)


def one(tmp_path, targets: dict, nx: dict | None = None, **files) -> ProjectConfig:
    """The mapped config of `libs/a`, a project.json project with `targets`."""
    files = {"project.json": {"name": "a", "targets": targets}, **files}
    return NxWorkspace(tmp_path, nx or {}, {"libs/a": files}).project("a")


def refusal(call) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value


# ---------------------------------------------------------------- nx.json


@pytest.mark.feature("TL-05")
def test_a_mistyped_nx_json_key_is_refused_with_the_key_it_meant(tmp_path):
    ws = NxWorkspace(tmp_path, {"targetdefaults": {}}, {})
    err = refusal(lambda: find_root(str(tmp_path), ws.packages))
    assert err.file == "nx.json" and "unknown key `targetdefaults`" in err.message
    assert "targetDefaults" in (err.hint or "")


@pytest.mark.feature("TL-05")
def test_nx_json_keys_for_nx_alone_are_passed_over(tmp_path):
    nx = {"nxCloudId": "x", "defaultBase": "main", "plugins": [], "generators": {}}
    config = one(tmp_path, {"build": {"command": "tsc"}}, nx)
    assert set(config.tasks) == {"build"}


@pytest.mark.feature("TL-05")
def test_cacheable_operations_cache_the_targets_they_name(tmp_path):
    nx = {"tasksRunnerOptions": {"default": {"options": {"cacheableOperations": ["build"]}}}}
    config = one(tmp_path, {"build": {"command": "tsc"}, "lint": {"command": "eslint ."}}, nx)
    assert config.tasks["build"].cache is not None
    assert config.tasks["lint"].cache is None


@pytest.mark.feature("TL-05")
def test_only_cache_true_caches_a_target(tmp_path):
    config = one(
        tmp_path, {"build": {"command": "tsc", "cache": True}, "lint": {"command": "eslint ."}}
    )
    assert config.tasks["build"].cache is not None and config.tasks["lint"].cache is None


# ---------------------------------------------------------------- targetDefaults


@pytest.mark.feature("TL-05")
def test_a_target_default_is_found_by_executor_then_name_then_the_longest_glob(tmp_path):
    nx = {
        "targetDefaults": {
            "nx:run-script": {"dependsOn": ["by-executor"]},
            "e2e": {"dependsOn": ["by-name"]},
            "e2e-*": {"dependsOn": ["short-glob"]},
            "e2e-ci*": {"dependsOn": ["long-glob"]},
        }
    }
    scripts = {"by-executor": "true", "by-name": "true", "short-glob": "true", "long-glob": "true"}
    ws = NxWorkspace(
        tmp_path,
        nx,
        {
            "libs/a": {
                "package.json": {"name": "a", "scripts": scripts},
                "project.json": {
                    "name": "a",
                    "targets": {
                        "e2e": {"command": "e"},
                        "e2e-ci--a": {"command": "ea"},
                        "e2e-x": {"command": "ex"},
                    },
                },
            }
        },
    )
    tasks = ws.project("a").tasks
    assert tasks["by-name"].depends_on == ("by-executor",)  # a script: nx:run-script's default
    assert tasks["e2e"].depends_on == ("by-name",)
    assert tasks["e2e-ci--a"].depends_on == ("long-glob",)
    assert tasks["e2e-x"].depends_on == ("short-glob",)


@pytest.mark.feature("TL-05")
def test_a_target_default_fills_only_what_the_target_leaves_unset(tmp_path):
    nx = {
        "targetDefaults": {
            "build": {
                "cache": True,
                "dependsOn": ["prebuild"],
                "outputs": ["{projectRoot}/dist"],
                "options": {"command": "tsc", "args": "--from-default"},
            }
        }
    }
    targets = {
        "build": {"executor": "nx:run-commands", "outputs": ["{projectRoot}/lib"]},
        "prebuild": {"command": "gen"},
    }
    build = one(tmp_path, targets, nx).tasks["build"]
    assert build.cache.output_files == ("lib",)  # its own outputs win
    assert build.depends_on == ("prebuild", f"^{GROUP}default")  # the default's, where it has none
    assert build.exec.command.endswith("tsc --from-default")  # options filled key by key


@pytest.mark.feature("TL-05")
def test_a_target_defaults_options_resolve_project_root_for_each_project(tmp_path):
    nx = {"targetDefaults": {"build": {"options": {"cwd": "{projectRoot}"}}}}
    ws = NxWorkspace(
        tmp_path,
        nx,
        {
            "libs/a": {"project.json": {"name": "a", "targets": {"build": {"command": "tsc"}}}},
            "libs/b": {"project.json": {"name": "b", "targets": {"build": {"command": "tsc"}}}},
        },
    )
    assert ws.project("a").tasks["build"].exec.command == "tsc"  # run in the project: no cd
    assert ws.project("b").tasks["build"].exec.command == "tsc"


@pytest.mark.feature("TL-05")
def test_a_field_a_target_default_gave_is_located_in_nx_json(tmp_path):
    nx = {"targetDefaults": {"build": {"cache": True, "outputs": ["{projectRoot}/dist"]}}}
    config = one(tmp_path, {"build": {"command": "tsc"}}, nx)
    assert config.located("tasks.build.cache.outputs.files[0]") == (
        "nx.json",
        "targetDefaults.build.outputs",
    )
    assert config.located("tasks.build.exec") == ("libs/a/project.json", "targets.build")


# ---------------------------------------------------------------- one project's targets


@pytest.mark.feature("TL-05")
def test_scripts_then_package_json_nx_targets_then_project_json_targets_merge_in_order(tmp_path):
    ws = NxWorkspace(
        tmp_path,
        {},
        {
            "libs/a": {
                "package.json": {
                    "name": "a",
                    "scripts": {"build": "tsc", "test": "jest"},
                    "nx": {"targets": {"build": {"outputs": ["{projectRoot}/out"], "cache": True}}},
                },
                "project.json": {
                    "name": "a",
                    "targets": {
                        "build": {"dependsOn": ["test"]},  # merges: no executor of its own
                        "test": {"command": "vitest"},  # another executor: replaces the script
                    },
                },
            }
        },
    )
    tasks = ws.project("a").tasks
    assert tasks["build"].exec.command == "tsc"
    assert tasks["build"].depends_on == ("test", f"^{GROUP}default")
    assert tasks["build"].cache.output_files == ("out",)
    assert tasks["test"].exec.command.endswith("vitest")


@pytest.mark.feature("TL-05")
def test_included_scripts_limit_the_scripts_that_become_targets(tmp_path):
    manifest = {
        "name": "a",
        "scripts": {"build": "tsc", "postinstall": "patch-package"},
        "nx": {"includedScripts": ["build"]},
    }
    ws = NxWorkspace(tmp_path, {}, {"libs/a": {"package.json": manifest}})
    assert set(ws.project("a").tasks) == {"build"}


@pytest.mark.feature("TL-05")
def test_a_script_target_runs_its_hooks_as_the_package_manager_does(tmp_path):
    scripts = {"prebuild": "gen", "build": "tsc", "postbuild": "check"}
    ws = NxWorkspace(tmp_path, {}, {"libs/a": {"package.json": {"name": "a", "scripts": scripts}}})
    assert ws.project("a").tasks["build"].exec.command == "gen && tsc && check"


@pytest.mark.feature("TL-05")
def test_tags_follow_whether_the_package_is_published(tmp_path):
    ws = NxWorkspace(
        tmp_path,
        {},
        {
            "libs/a": {"package.json": {"name": "a", "private": True, "nx": {"tags": ["ui"]}}},
            "libs/b": {
                "package.json": {"name": "b"},
                "project.json": {"name": "b", "tags": ["scope:b"]},
            },
        },
    )
    assert ws.project("a").tags == ("npm:private", "ui")
    assert ws.project("b").tags == ("npm:public", "scope:b")


@pytest.mark.feature("TL-05")
def test_command_and_executor_together_are_refused(tmp_path):
    err = refusal(lambda: one(tmp_path, {"build": {"command": "tsc", "executor": "nx:noop"}}))
    assert err.file == "libs/a/project.json" and "both `command` and `executor`" in err.message


@pytest.mark.feature("TL-05")
def test_an_unknown_target_key_is_refused_naming_its_field(tmp_path):
    err = refusal(lambda: one(tmp_path, {"build": {"command": "tsc", "dependson": ["x"]}}))
    assert (err.file, err.field) == ("libs/a/project.json", "targets.build.dependson")


# ---------------------------------------------------------------- nx:run-commands


@pytest.mark.feature("TL-05")
def test_run_commands_run_at_the_workspace_root_unless_a_cwd_says_otherwise(tmp_path):
    config = one(
        tmp_path,
        {
            "root": {"command": "tsc"},
            "here": {"command": "tsc", "options": {"cwd": "{projectRoot}"}},
            "beside": {"command": "tsc", "options": {"cwd": "libs/b"}},
        },
    )
    assert config.tasks["root"].exec.command == "cd ../.. || exit 1\ntsc"
    assert config.tasks["here"].exec.command == "tsc"
    assert config.tasks["beside"].exec.command == "cd ../b || exit 1\ntsc"


@pytest.mark.feature("TL-05")
def test_a_cwd_outside_the_workspace_is_refused(tmp_path):
    target = {"command": "tsc", "options": {"cwd": "../elsewhere"}}
    err = refusal(lambda: one(tmp_path, {"build": target}))
    assert "outside the workspace" in err.message and err.field.endswith("options.cwd")


@pytest.mark.feature("TL-05")
def test_commands_run_in_parallel_unless_told_otherwise(tmp_path):
    here = {"cwd": "{projectRoot}"}
    config = one(
        tmp_path,
        {
            "both": {"executor": "nx:run-commands", "options": {"commands": ["a", "b"], **here}},
            "chain": {
                "executor": "nx:run-commands",
                "options": {"commands": ["a", "b"], "parallel": False, **here},
            },
        },
    )
    both = config.tasks["both"].exec.command
    assert (
        both == "(\na\n) & p0=$!\n(\nb\n) & p1=$!\ns=0\nwait $p0 || s=1\nwait $p1 || s=1\nexit $s"
    )
    assert config.tasks["chain"].exec.command == "(\na\n) && (\nb\n)"


@pytest.mark.feature("TL-05")
def test_args_are_forwarded_or_placed_where_the_command_names_them(tmp_path):
    here = {"cwd": "{projectRoot}"}
    config = one(
        tmp_path,
        {
            "forwarded": {"command": "jest", "options": {"args": "--ci", **here}},
            "named": {
                "command": "vite --port={args.port}",
                "options": {"args": "--port 4200", **here},
            },
            "kept": {
                "command": "eslint .",
                "options": {"args": "--fix", "forwardAllArgs": False, **here},
            },
        },
    )
    assert config.tasks["forwarded"].exec.command == "jest --ci"
    assert config.tasks["named"].exec.command == "vite --port=4200"
    assert config.tasks["kept"].exec.command == "eslint ."


@pytest.mark.feature("TL-05")
def test_run_commands_env_is_defined_and_an_env_file_is_sourced_and_keyed(tmp_path):
    options = {"cwd": "{projectRoot}", "env": {"NODE_ENV": "production"}, "envFile": ".env.ci"}
    build = one(tmp_path, {"build": {"command": "vite build", "options": options, "cache": True}})
    task = build.tasks["build"]
    assert task.exec.env.define == {"NODE_ENV": "production"}
    assert task.exec.command == (
        "if [ -f ../../.env.ci ]; then set -a; . ../../.env.ci; set +a; fi\nvite build"
    )
    assert task.cache.input_workspace_files == (".env.ci",)


@pytest.mark.feature("TL-05")
def test_run_commands_without_a_command_is_refused(tmp_path):
    err = refusal(lambda: one(tmp_path, {"build": {"executor": "nx:run-commands"}}))
    assert "needs `command` or `commands`" in err.message


# ---------------------------------------------------------------- inputs


@pytest.mark.feature("TL-05")
def test_default_inputs_are_every_project_file_and_the_dependencies_default(tmp_path):
    build = one(tmp_path, {"build": {"command": "tsc", "cache": True}}).tasks["build"]
    assert build.cache.input_files == ("**/*",)
    assert f"^{GROUP}default" in build.depends_on  # `^default`, through the input group


@pytest.mark.feature("TL-05")
def test_named_inputs_expand_with_negations_and_workspace_files(tmp_path):
    nx = {
        "namedInputs": {
            "production": ["default", "!{projectRoot}/**/*.spec.ts", "sharedGlobals"],
            "sharedGlobals": ["{workspaceRoot}/babel.config.json"],
        }
    }
    target = {"command": "tsc", "cache": True, "inputs": ["production"]}
    build = one(tmp_path, {"build": target}, nx).tasks["build"]
    assert build.cache.input_files == ("**/*", "!**/*.spec.ts")
    assert build.cache.input_workspace_files == ("babel.config.json",)


@pytest.mark.feature("TL-05")
def test_a_projects_own_named_input_wins_over_nx_json(tmp_path):
    nx = {"namedInputs": {"production": ["{projectRoot}/src/**/*"]}}
    files = {
        "project.json": {
            "name": "a",
            "namedInputs": {"production": ["{projectRoot}/lib/**/*"]},
            "targets": {"build": {"command": "tsc", "cache": True, "inputs": ["production"]}},
        }
    }
    config = NxWorkspace(tmp_path, nx, {"libs/a": files}).project("a")
    assert config.tasks["build"].cache.input_files == ("lib/**/*",)


@pytest.mark.feature("TL-05")
def test_a_caret_input_keys_the_dependencies_through_an_input_group(tmp_path):
    nx = {"namedInputs": {"production": ["{projectRoot}/src/**/*"]}}
    target = {"command": "tsc", "cache": True, "inputs": ["production", "^production"]}
    config = one(tmp_path, {"build": target}, nx)
    assert f"^{GROUP}production" in config.tasks["build"].depends_on
    group = config.tasks[GROUP + "production"]
    assert group.is_group and group.implicit
    assert group.cache.input_files == ("src/**/*",)
    assert group.depends_on == (f"^{GROUP}production",)  # transitive, as Nx hashes `^production`
    assert config.located(f"tasks.{GROUP}production") == ("nx.json", "namedInputs.production")


@pytest.mark.feature("TL-05")
def test_an_env_input_keys_the_variable(tmp_path):
    target = {"command": "tsc", "cache": True, "inputs": ["default", {"env": "API_URL"}]}
    assert one(tmp_path, {"build": target}).tasks["build"].cache.input_env == ("API_URL",)


@pytest.mark.feature("TL-05")
def test_a_runtime_input_makes_the_target_not_runnable_naming_where(tmp_path):
    target = {"command": "tsc", "cache": True, "inputs": ["default", {"runtime": "node -v"}]}
    config = one(tmp_path, {"build": target})
    assert "build" not in config.tasks
    message, file, field, _hint = config.not_runnable["build"]
    assert "a `runtime` input" in message
    assert (file, field) == ("libs/a/project.json", "targets.build.inputs[1].runtime")


@pytest.mark.feature("TL-05")
def test_a_named_input_that_includes_itself_is_refused(tmp_path):
    nx = {"namedInputs": {"loop": ["default", "loop"]}}
    target = {"command": "tsc", "cache": True, "inputs": ["loop"]}
    err = refusal(lambda: one(tmp_path, {"build": target}, nx))
    assert "named input `loop` includes itself" in err.message


@pytest.mark.feature("TL-05")
def test_an_unknown_named_input_is_refused(tmp_path):
    target = {"command": "tsc", "cache": True, "inputs": ["nope"]}
    err = refusal(lambda: one(tmp_path, {"build": target}))
    assert "`nope` is no named input" in err.message
    assert (err.file, err.field) == ("libs/a/project.json", "targets.build.inputs[0]")


@pytest.mark.feature("TL-05")
def test_a_fileset_without_a_root_token_is_refused(tmp_path):
    target = {"command": "tsc", "cache": True, "inputs": ["src/**/*"]}
    err = refusal(lambda: one(tmp_path, {"build": target}))
    assert "starts with neither {projectRoot} nor {workspaceRoot}" in err.message


# ---------------------------------------------------------------- outputs


@pytest.mark.feature("TL-05")
def test_outputs_resolve_project_root_options_and_the_workspace_root(tmp_path):
    target = {
        "command": "tsc",
        "cache": True,
        "options": {"outputPath": "dist/libs/a"},
        "outputs": [
            "{projectRoot}/lib",
            "{options.outputPath}",
            "{workspaceRoot}/coverage/{projectName}",
            "{options.unset}",  # dropped, as Nx drops it
        ],
    }
    build = one(tmp_path, {"build": target}).tasks["build"]
    assert build.cache.output_files == ("lib",)
    assert build.cache.output_workspace_files == ("dist/libs/a", "coverage/a")


@pytest.mark.feature("TL-05")
def test_a_build_without_outputs_takes_nx_s_fallbacks(tmp_path):
    build = one(tmp_path, {"build": {"command": "tsc", "cache": True}}).tasks["build"]
    assert build.cache.output_files == ("dist", "build")
    assert build.cache.output_workspace_files == ("dist/libs/a",)


@pytest.mark.feature("TL-05")
def test_an_output_outside_the_workspace_is_refused(tmp_path):
    target = {"command": "tsc", "cache": True, "outputs": ["{workspaceRoot}/../x"]}
    err = refusal(lambda: one(tmp_path, {"build": target}))
    assert "outside the workspace" in err.message


# ---------------------------------------------------------------- dependsOn


@pytest.mark.feature("TL-05")
def test_depends_on_entries_map_to_vx_entries(tmp_path):
    ws = NxWorkspace(
        tmp_path,
        {},
        {
            "libs/a": {
                "project.json": {
                    "name": "a",
                    "targets": {
                        "build": {
                            "command": "tsc",
                            "dependsOn": [
                                "^build",
                                "b:gen",
                                {"target": "lint", "projects": "tag:ui"},
                                {"target": "test", "dependencies": True},
                                "gen-*",
                            ],
                        },
                        "gen-types": {"command": "gen"},
                        "gen-docs": {"command": "gen"},
                    },
                }
            },
            "libs/b": {
                "project.json": {
                    "name": "b",
                    "tags": ["ui"],
                    "targets": {
                        "build": {"command": "tsc"},
                        "gen": {"command": "gen"},
                        "lint": {"command": "eslint ."},
                        "test": {"command": "jest"},
                    },
                }
            },
        },
    )
    assert ws.project("a").tasks["build"].depends_on == (
        "^build",
        "b#gen",
        "b#lint",
        "^test",
        "gen-docs",
        "gen-types",
    )


@pytest.mark.feature("TL-05")
def test_a_caret_entry_no_project_can_satisfy_is_dropped(tmp_path):
    target = {"command": "tsc", "dependsOn": ["^build", "^codegen"]}
    assert one(tmp_path, {"build": target}).tasks["build"].depends_on == ("^build",)


@pytest.mark.feature("TL-05")
def test_a_depends_on_project_that_does_not_exist_is_refused(tmp_path):
    target = {"command": "tsc", "dependsOn": [{"target": "build", "projects": ["ghost"]}]}
    err = refusal(lambda: one(tmp_path, {"build": target}))
    assert "`ghost` names no project" in err.message


# ---------------------------------------------------------------- configurations, refusals


@pytest.mark.feature("TL-05")
def test_each_configuration_is_a_task_and_the_default_one_shapes_the_plain_target(tmp_path):
    target = {
        "command": "vite build",
        "options": {"cwd": "{projectRoot}", "args": "--mode=dev"},
        "configurations": {"production": {"args": "--mode=prod"}, "ci": {"args": "--mode=ci"}},
        "defaultConfiguration": "production",
    }
    tasks = one(tmp_path, {"build": target}).tasks
    assert tasks["build"].exec.command == "vite build --mode=prod"
    assert tasks["build:production"].exec.command == "vite build --mode=prod"
    assert tasks["build:ci"].exec.command == "vite build --mode=ci"


@pytest.mark.feature("TL-05")
def test_targets_vx_cannot_run_are_refused_by_name_with_their_dependants(tmp_path):
    config = one(
        tmp_path,
        {
            "lint": {"executor": "@nx/eslint:lint"},
            "serve": {"command": "vite", "continuous": True},
            "check": {"command": "tsc", "dependsOn": ["lint"]},
            "build": {"command": "tsc"},
        },
    )
    assert set(config.tasks) == {"build", "serve"}  # continuous: a persistent task
    assert config.tasks["serve"].exec.persistent is not None
    assert config.not_runnable["lint"][1:3] == ("libs/a/project.json", "targets.lint.executor")
    assert config.not_runnable["check"][0].startswith("`check` depends on `lint`")


@pytest.mark.feature("TL-05")
def test_a_continuous_target_is_persistent_and_waits_for_one_ready_when_string(tmp_path):
    def server(ready):
        return {
            "command": "vite",
            "continuous": True,
            "cache": True,
            "options": {"readyWhen": ready},
        }

    config = one(
        tmp_path,
        {
            "one": server("ready in (1) ms"),
            "both": server(["Local:", "Network:"]),  # may print on separate lines
            "none": {"command": "vite", "continuous": True},
        },
    )
    persistent = {n: config.tasks[n].exec.persistent for n in ("one", "both", "none")}
    assert persistent["one"] is not None and persistent["one"].ready_when == r"ready\ in\ \(1\)\ ms"
    assert persistent["both"] is not None and persistent["both"].ready_when is None
    assert persistent["none"] is not None and persistent["none"].ready_when is None
    assert config.tasks["one"].cache is None  # a server's output is never kept


@pytest.mark.feature("TL-05")
def test_a_project_with_nothing_to_run_maps_to_an_empty_config(tmp_path):
    ws = NxWorkspace(tmp_path, {}, {"libs/a": {"project.json": {"name": "a"}}})
    assert ws.project("a") == ProjectConfig(source="", nx=True)


# ---------------------------------------------------------------- vx show project NAME --json


@pytest.mark.feature("TL-05")
def test_shown_project_is_the_resolved_project_as_nx_shows_it(tmp_path):
    nx = {"targetDefaults": {"build": {"cache": True, "dependsOn": ["^build"]}}}
    ws = NxWorkspace(
        tmp_path,
        nx,
        {
            "libs/a": {
                "package.json": {"name": "a", "private": True, "scripts": {"build": "tsc"}},
                "project.json": {"name": "a", "tags": ["ui"], "implicitDependencies": ["b"]},
            },
            "libs/b": {"package.json": {"name": "b"}},
        },
    )
    workspace = Workspace(root=tmp_path, manager="npm", packages=ws.packages)
    assert shown_project(workspace, "a") == {
        "root": "libs/a",
        "name": "a",
        "tags": ["npm:private", "ui"],
        "implicitDependencies": ["b"],
        "targets": {
            "build": {
                "executor": "nx:run-script",
                "options": {"script": "build"},
                "cache": True,
                "dependsOn": ["^build"],
                "configurations": {},
                "parallelism": True,
            }
        },
    }
