"""JSONC reading, config schema validation and loading (section 2, WS-06/08/09/11, GR-01, KEY-10/16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vx.config import jsonc
from vx.config.loader import load_all, load_project, load_workspace
from vx.config.schema import validate_project, validate_workspace
from vx.errors import ConfigError
from vx.model import ROOT_PROJECT, Package, Workspace, WorkspaceConfig

FILE = "packages/app/vx.config.json"


def task(**fields: object) -> dict[str, object]:
    return {"exec": {"command": "tsc"}, **fields}


def cached(inputs: object = None, outputs: object = None, **fields: object) -> dict[str, object]:
    cache = {
        "inputs": {"files": ["src/**"]} if inputs is None else inputs,
        "outputs": {"files": ["dist/**"]} if outputs is None else outputs,
    }
    return task(cache=cache, **fields)


def refusal(config: object, validate=validate_project) -> ConfigError:
    """The ConfigError a config gets; every refusal must name the file, a field and a hint."""
    with pytest.raises(ConfigError) as err:
        validate(config, FILE)
    text = err.value.render()
    assert f"in: {FILE}" in text and err.value.hint and "hint:" in text
    return err.value


def tasks_refusal(body: object, name: str = "build") -> ConfigError:
    return refusal({"tasks": {name: body}})


# ---------------------------------------------------------------- JSONC


def test_jsonc_comments_trailing_commas_and_strings_that_look_like_comments():
    text = """{
      // line comment
      "a": "http://x/*not a comment*/", /* block
      comment */ "b": [1, 2,],
      "c": {"d": "\\"//still a string",},
    }"""
    assert jsonc.loads(text, "f") == {
        "a": "http://x/*not a comment*/",
        "b": [1, 2],
        "c": {"d": '"//still a string'},
    }


@pytest.mark.parametrize(
    "text,message,where",
    [
        ('{\n  "a": 1\n  "b": 2\n}', "Expecting ','", "line 3, column 3"),
        ('{"a": 1,\n "a": 2}', "duplicate key `a`", "line 2, column 2"),
        ('{"a": NaN}', "`NaN` is not JSON data", "line 1, column 7"),
        ('{\n "a": 1 /* open', "unterminated /* comment", "line 2, column 9"),
        ("[,]", "Expecting value", "line 1, column 2"),
        ("", "Expecting value", "line 1, column 1"),
    ],
)
def test_jsonc_errors_name_file_line_and_column(text, message, where):
    with pytest.raises(ConfigError) as err:
        jsonc.loads(text, "pkg/vx.config.json")
    assert message in err.value.message
    assert f"in: pkg/vx.config.json, {where}" in err.value.render()
    assert err.value.hint


def test_jsonc_error_positions_survive_comments():
    with pytest.raises(ConfigError) as err:
        jsonc.loads('{\n /* a\n b */ "x": 1,\n "x": 2 // dup\n}', "f")
    assert err.value.field == "line 4, column 2"


# ---------------------------------------------------------------- the happy shape (2.2-2.6)


def test_full_project_config_becomes_model_values():
    config = validate_project(
        {
            "$schema": "https://example/vx.json",
            "tags": ["frontend"],
            "tasks": {
                "build": {
                    "description": "compile",
                    "dependsOn": ["^build", "codegen", "//#setup", "ui#build", "test.*", "^lint.*"],
                    "exec": {
                        "command": "tsc -b",
                        "timeout": 60000,
                        "retries": 2,
                        "env": {
                            "passThrough": ["HOME"],
                            "define": {"NODE_ENV": "production"},
                            "secret": ["NPM_TOKEN"],
                        },
                    },
                    "cache": {
                        "inputs": {
                            "files": ["src/**", "!src/**/*.test.ts"],
                            "workspaceFiles": ["tsconfig.base.json"],
                            "env": ["API_URL"],
                            "tasks": ["^build", "!codegen"],
                        },
                        "outputs": {"files": ["dist/**"], "workspaceFiles": ["out/x.txt"]},
                    },
                },
                "codegen": {"exec": {"command": "gen"}},
                "setup-all": {"dependsOn": []},
            },
        },
        FILE,
    )
    assert config.source == FILE and config.tags == ("frontend",)
    build = config.tasks["build"]
    assert build.exec.timeout_ms == 60000 and build.exec.retries == 2
    assert build.exec.env.pass_through == ("HOME",) and build.exec.env.define == {
        "NODE_ENV": "production"
    }
    assert build.exec.env.secret == ("NPM_TOKEN",)
    assert build.cache.input_files == ("src/**", "!src/**/*.test.ts")
    assert build.cache.input_workspace_files == ("tsconfig.base.json",)
    assert build.cache.output_workspace_files == ("out/x.txt",)
    assert build.cache.input_env == ("API_URL",) and build.cache.input_tasks == (
        "^build",
        "!codegen",
    )
    assert build.depends_on[0] == "^build" and build.description == "compile"
    assert config.tasks["setup-all"].is_group and config.tasks["setup-all"].depends_on == ()
    assert config.tasks["codegen"].cache is None


def test_canonical_is_sorted_compact_json_without_schema():
    body = {"exec": {"command": "tsc", "$schema": "x"}, "dependsOn": ["^build"]}
    built = validate_project({"tasks": {"build": body}}, FILE).tasks["build"]
    assert built.canonical == '{"dependsOn":["^build"],"exec":{"command":"tsc"}}'
    assert built.canonical == json.dumps(
        {"exec": {"command": "tsc"}, "dependsOn": ["^build"]}, sort_keys=True, separators=(",", ":")
    )


def test_empty_config_and_absent_input_tasks_defaults():
    assert validate_project({}, FILE).tasks == {}
    built = validate_project({"tasks": {"b": cached()}}, FILE).tasks["b"]
    assert built.cache.input_tasks is None and built.cache.input_env == ()


# ---------------------------------------------------------------- WS-08 unknown keys


@pytest.mark.feature("WS-08")
@pytest.mark.parametrize(
    "body,field,hint",
    [
        (
            task(outputs=["dist/**"]),
            "tasks.build.outputs",
            "turbo's spelling; in vx it is cache.outputs.files",
        ),
        (task(inputs=["src/**"]), "tasks.build.inputs", "cache.inputs.files"),
        (task(env=["X"]), "tasks.build.env", "cache.inputs.env"),
        (
            task(executor="@nx/js:tsc"),
            "tasks.build.executor",
            "nx's spelling; in vx it is exec.command",
        ),
        (task(options={}), "tasks.build.options", "nx's spelling"),
        (
            {"command": "tsc", "dependsOn": []},
            "tasks.build.command",
            "wireit's spelling; in vx it is exec.command",
        ),
        (
            task(files=["src/**"]),
            "tasks.build.files",
            "wireit's spelling; in vx it is cache.inputs.files",
        ),
        (
            task(output=["dist/**"]),
            "tasks.build.output",
            "wireit's spelling; in vx it is cache.outputs.files",
        ),
        (task(dependOn=["^build"]), "tasks.build.dependOn", "did you mean `dependsOn`?"),
        (
            {"exec": {"command": "x", "dependsOn": []}},
            "tasks.build.exec.dependsOn",
            "belongs on the task",
        ),
        ({"exec": {"comand": "x"}}, "tasks.build.exec.comand", "did you mean `command`?"),
        (
            cached(inputs={"files": [], "fils": []}),
            "tasks.build.cache.inputs.fils",
            "did you mean `files`?",
        ),
    ],
)
def test_unknown_task_keys_name_the_vx_home(body, field, hint):
    err = tasks_refusal(body)
    assert err.field == field
    assert "allowed:" in err.message and hint in err.hint


@pytest.mark.feature("WS-08")
@pytest.mark.parametrize(
    "config,field,hint",
    [
        ({"targets": {}}, "targets", "nx's spelling; in vx it is tasks"),
        ({"pipeline": {}}, "pipeline", "turbo's spelling"),
        ({"dependsOn": ["^build"]}, "dependsOn", "tasks.<name>.dependsOn"),
        ({"outputs": ["dist/**"]}, "outputs", "tasks.<name>.cache.outputs.files"),
        ({"task": {}}, "task", "did you mean `tasks`?"),
    ],
)
def test_unknown_project_keys(config, field, hint):
    err = refusal(config)
    assert err.field == field and hint in err.hint
    assert "tags, tasks" in err.message


@pytest.mark.feature("RC-10")
def test_exec_remote_takes_true_false_or_only():
    """Remote execution: a `remote` that is not true, false or "only" is refused by field."""
    err = tasks_refusal({"exec": {"command": "x", "remote": {}}})
    assert err.field == "tasks.build.exec.remote"
    assert '`remote` must be true, false or "only", got {}' in err.message


@pytest.mark.feature("EX-07")
def test_persistent_and_interactive_are_read():
    config = validate_project(
        {
            "tasks": {
                "dev": {"exec": {"command": "vite", "persistent": {"readyWhen": "ready in \\d+"}}},
                "watch": {"exec": {"command": "tsc -w", "persistent": {}}},
                "ask": {"exec": {"command": "npm init", "interactive": True}},
            }
        },
        FILE,
    )
    assert config.tasks["dev"].exec.persistent.ready_when == "ready in \\d+"
    assert config.tasks["watch"].exec.persistent.ready_when is None
    assert config.tasks["ask"].exec.interactive and config.tasks["ask"].exec.persistent is None


@pytest.mark.feature("EX-07", "EX-09")
@pytest.mark.parametrize(
    "exec_, field, words",
    [
        ({"persistent": True}, "tasks.build.exec.persistent", "turbo's spelling"),
        (
            {"persistent": {"readyWhen": "("}},
            "tasks.build.exec.persistent.readyWhen",
            "not a valid regular expression",
        ),
        ({"persistent": {"readyWhen": ""}}, "tasks.build.exec.persistent.readyWhen", "is empty"),
        ({"persistent": {"ready": "x"}}, "tasks.build.exec.persistent.ready", "unknown key"),
        ({"persistent": {}, "retries": 1}, "tasks.build.exec.retries", "never retried"),
        ({"persistent": {}, "sandbox": {}}, "tasks.build.exec.sandbox", "not supported yet"),
        ({"interactive": "yes"}, "tasks.build.exec.interactive", "true or false"),
        ({"interactive": True, "sandbox": {}}, "tasks.build.exec.sandbox", "real terminal"),
        (
            {"interactive": True, "persistent": {"readyWhen": "x"}},
            "tasks.build.exec.persistent.readyWhen",
            "unread",
        ),
        ({"continuous": True}, "tasks.build.exec.continuous", "unknown key"),
    ],
)
def test_bad_persistent_and_interactive_fields_are_refused(exec_, field, words):
    err = tasks_refusal({"exec": {"command": "x", **exec_}})
    assert err.field == field and words in err.message and err.hint


@pytest.mark.feature("EX-07")
def test_cache_on_a_persistent_task_is_refused():
    err = tasks_refusal(
        {
            "exec": {"command": "x", "persistent": {}},
            "cache": {"inputs": {"files": []}, "outputs": {"files": []}},
        }
    )
    assert err.field == "tasks.build.cache" and "persistent task" in err.message


@pytest.mark.feature("WS-08")
def test_turbo_persistent_on_the_task_points_at_exec():
    err = tasks_refusal(task(persistent=True))
    assert "exec.persistent" in err.hint


@pytest.mark.feature("WS-08")
@pytest.mark.parametrize("value", [False, True])
def test_turbo_cache_boolean_refused_with_vx_shape(value):
    err = tasks_refusal(task(cache=value))
    assert err.field == "tasks.build.cache" and "turbo's spelling" in err.message
    assert "outputs" in err.hint


@pytest.mark.feature("WS-08")
def test_schema_key_is_allowed_everywhere():
    config = validate_project(
        {"$schema": "x", "tasks": {"$schema": "x", "b": cached(**{"$schema": "x"})}}, FILE
    )
    assert list(config.tasks) == ["b"]
    assert validate_workspace({"$schema": "x"}, "vx.workspace.json") == WorkspaceConfig(
        source="vx.workspace.json"
    )


# ---------------------------------------------------------------- types


@pytest.mark.parametrize(
    "body,field,words",
    [
        (
            {"exec": {"command": "x", "timeout": "10"}},
            "tasks.build.exec.timeout",
            "integer, got a string",
        ),
        ({"exec": {"command": "x", "timeout": 0}}, "tasks.build.exec.timeout", "1..2147483647"),
        (
            {"exec": {"command": "x", "timeout": 2**31}},
            "tasks.build.exec.timeout",
            "got 2147483648",
        ),
        (
            {"exec": {"command": "x", "timeout": 1.5}},
            "tasks.build.exec.timeout",
            "integer, got a number",
        ),
        (
            {"exec": {"command": "x", "retries": True}},
            "tasks.build.exec.retries",
            "integer, got a boolean",
        ),
        (
            {"exec": {"command": "x", "retries": -1}},
            "tasks.build.exec.retries",
            "must be in 0..100, got -1",
        ),
        (
            {"exec": {"command": "x", "retries": 10**20}},
            "tasks.build.exec.retries",
            "must be in 0..100",
        ),
        ({"exec": "tsc"}, "tasks.build.exec", "got a string"),
        ({"exec": {"command": ["tsc"]}}, "tasks.build.exec.command", "string, got an array"),
        (task(dependsOn="^build"), "tasks.build.dependsOn", "array of strings, got a string"),
        (task(description=3), "tasks.build.description", "string, got a number"),
        (
            cached(inputs={"files": "src/**"}),
            "tasks.build.cache.inputs.files",
            "array of glob strings",
        ),
        (
            cached(inputs={"files": ["src/**", 3]}),
            "tasks.build.cache.inputs.files[1]",
            "got a number",
        ),
        (cached(outputs=["dist/**"]), "tasks.build.cache.outputs", "object, got an array"),
    ],
)
def test_wrong_types_say_expected_and_got(body, field, words):
    err = tasks_refusal(body)
    assert err.field == field and words in err.message


def test_tasks_must_be_an_object_and_timeout_hint_explains_the_limit():
    assert refusal({"tasks": [task()]}).field == "tasks"
    err = tasks_refusal({"exec": {"command": "x", "timeout": 2**31}})
    assert "2^31-1" in err.hint


# ---------------------------------------------------------------- WS-09 / GR-01 names


@pytest.mark.feature("WS-09")
@pytest.mark.parametrize("name", ["", " build", "build ", "a#b", "b*", "^b", "!b"])
def test_task_names_refused(name):
    err = tasks_refusal(task(), name=name)
    assert err.field == f"tasks.{name}" and "task name" in err.message


@pytest.mark.feature("GR-01")
@pytest.mark.parametrize(
    "entry", ["*", "^*", "!build", "", "^pkg#build", "#build", "pkg#", "a*b", " build", 3]
)
def test_bad_depends_on_entries(entry):
    err = tasks_refusal(task(dependsOn=["ok", entry]))
    assert err.field == "tasks.build.dependsOn[1]" and "dependsOn entry" in err.message


@pytest.mark.feature("GR-01")
def test_star_entries_point_at_inputs_tasks():
    assert "cache.inputs.tasks" in tasks_refusal(task(dependsOn=["^*"])).message


# ---------------------------------------------------------------- exec and env


@pytest.mark.parametrize("command", ["", "   ", "a\0b"])
def test_empty_or_nul_command_refused(command):
    assert tasks_refusal({"exec": {"command": command}}).field == "tasks.build.exec.command"


def test_exec_needs_a_command():
    assert tasks_refusal({"exec": {}}).field == "tasks.build.exec"


@pytest.mark.parametrize(
    "env,field,hint",
    [
        ({"passThrough": ["OK", "A-B"]}, "tasks.build.exec.env.passThrough[1]", "[A-Za-z_]"),
        ({"secret": ["1X"]}, "tasks.build.exec.env.secret[0]", "[A-Za-z_]"),
        ({"passThrough": ["VITE_*"]}, "tasks.build.exec.env.passThrough[0]", "wildcards"),
        ({"passThrough": ["!X"]}, "tasks.build.exec.env.passThrough[0]", "turbo's exclusion"),
        ({"define": {"A=B": "x"}}, "tasks.build.exec.env.define.A=B", "[A-Za-z_]"),
        ({"set": {}}, "tasks.build.exec.env.set", "`define`"),
    ],
)
def test_env_names(env, field, hint):
    err = tasks_refusal({"exec": {"command": "x", "env": env}})
    assert err.field == field and hint in err.hint


def test_define_values_must_be_strings():
    err = tasks_refusal({"exec": {"command": "x", "env": {"define": {"A": 1}}}})
    assert err.field == "tasks.build.exec.env.define.A" and "got a number" in err.message


def test_input_env_names_checked():
    err = tasks_refusal(cached(inputs={"files": [], "env": ["GOOD", "BAD NAME"]}))
    assert err.field == "tasks.build.cache.inputs.env[1]"


# ---------------------------------------------------------------- 2.8 load-time refusals


def test_task_with_neither_exec_nor_depends_on():
    err = tasks_refusal({"description": "nothing"})
    assert "neither `exec` nor `dependsOn`" in err.message and err.field == "tasks.build"


def test_cache_on_a_group_refused():
    err = tasks_refusal(
        {"dependsOn": ["^build"], "cache": {"inputs": {"files": []}, "outputs": {"files": []}}}
    )
    assert err.field == "tasks.build.cache" and "group" in err.message


@pytest.mark.parametrize(
    "cache,field",
    [
        ({"inputs": {"files": []}}, "tasks.build.cache"),
        ({"outputs": {"files": []}}, "tasks.build.cache"),
        ({"inputs": {}, "outputs": {"files": []}}, "tasks.build.cache.inputs"),
        ({"inputs": {"files": []}, "outputs": {"workspaceFiles": []}}, "tasks.build.cache.outputs"),
    ],
)
def test_cache_needs_both_input_and_output_files(cache, field):
    assert tasks_refusal(task(cache=cache)).field == field


@pytest.mark.feature("KEY-16")
@pytest.mark.parametrize(
    "inputs,outputs,field",
    [
        ({"files": ["src/**", "../x"]}, None, "tasks.build.cache.inputs.files[1]"),
        (
            {"files": ["src/**"], "workspaceFiles": ["/abs"]},
            None,
            "tasks.build.cache.inputs.workspaceFiles[0]",
        ),
        ({"files": ["$TURBO_DEFAULT$"]}, None, "tasks.build.cache.inputs.files[0]"),
        ({"files": ["."]}, None, "tasks.build.cache.inputs.files[0]"),
        ({"files": ["!!x"]}, None, "tasks.build.cache.inputs.files[0]"),
        (None, {"files": ["dist/@(a|b)"]}, "tasks.build.cache.outputs.files[0]"),
        ({"files": ["src/**", ""]}, None, "tasks.build.cache.inputs.files[1]"),
    ],
)
def test_invalid_globs_refused_via_glob_error(inputs, outputs, field):
    assert tasks_refusal(cached(inputs=inputs, outputs=outputs)).field == field


def test_only_negation_glob_list_refused():
    err = tasks_refusal(cached(inputs={"files": ["!src/**/*.test.ts"]}))
    assert err.field == "tasks.build.cache.inputs.files" and "selects nothing" in err.message


@pytest.mark.parametrize(
    "glob",
    ["**", "*", "*.json", "**/*.json", "vx.config.json", "{dist,package.json}"],
)
def test_outputs_covering_the_manifest_or_config_refused(glob):
    err = tasks_refusal(cached(outputs={"files": ["dist/**", glob]}))
    assert err.field == "tasks.build.cache.outputs.files[1]" and "covers" in err.message


def test_outputs_not_covering_own_files_and_negations_pass():
    built = validate_project(
        {"tasks": {"b": cached(outputs={"files": ["dist/**", "*.tsbuildinfo", "!dist/keep"]})}},
        FILE,
    )
    assert built.tasks["b"].cache.output_files[1] == "*.tsbuildinfo"


def test_package_json_named_outright_is_an_output():
    """A build that rewrites its manifest (trpc's) names it: the wipe spares it, a hit restores it."""
    built = validate_project(
        {"tasks": {"b": cached(outputs={"files": ["package.json", "dist/**"]})}}, FILE
    )
    assert built.tasks["b"].cache.output_files == ("package.json", "dist/**")


@pytest.mark.feature("KEY-10")
@pytest.mark.parametrize(
    "depends_on,entry",
    [
        (["^build"], "build"),
        (["build"], "^build"),
        ([], "codegen"),
        (["^build"], "ui#lint"),
        (["ui#build"], "web#build"),
    ],
)
def test_exact_input_task_not_named_by_depends_on_refused(depends_on, entry):
    err = tasks_refusal(cached(inputs={"files": [], "tasks": [entry]}, dependsOn=depends_on))
    assert (
        err.field == "tasks.build.cache.inputs.tasks[0]"
        and "names no task in dependsOn" in err.message
    )


@pytest.mark.feature("KEY-10")
@pytest.mark.parametrize(
    "depends_on,entries",
    [
        (["^build"], ["^build"]),
        (["^build"], ["ui#build"]),
        (["codegen"], ["codegen", "!codegen"]),
        ([], ["*", "^*", "^gen.*", "!x"]),
        (["test.*"], ["test.unit"]),
        (["ui#build"], ["ui#build"]),
        ([], []),
    ],
)
def test_input_task_filters_accepted(depends_on, entries):
    body = cached(inputs={"files": [], "tasks": entries}, dependsOn=depends_on)
    assert validate_project({"tasks": {"b": body}}, FILE).tasks["b"].cache.input_tasks == tuple(
        entries
    )


@pytest.mark.feature("KEY-10")
@pytest.mark.parametrize("entry", ["", "!", "^", "#x", "x#"])
def test_malformed_input_task_filters(entry):
    err = tasks_refusal(cached(inputs={"files": [], "tasks": [entry]}))
    assert err.field.startswith("tasks.build.cache.inputs.tasks")


@pytest.mark.feature("WS-10")
@pytest.mark.parametrize("tags", [["a*"], ["web..."], ["x[ref]"], [""], "frontend"])
def test_tags_are_labels_not_patterns(tags):
    assert refusal({"tags": tags}).field.startswith("tags")


# ---------------------------------------------------------------- WS-11 workspace config


@pytest.mark.feature("WS-11")
def test_workspace_config_fields():
    config = validate_workspace(
        {"concurrency": 4, "cacheDir": "~/.cache/vx", "timeout": 1000}, "vx.workspace.json"
    )
    assert config == WorkspaceConfig("vx.workspace.json", 4, "~/.cache/vx", 1000)


@pytest.mark.feature("WS-12")
def test_rules_exclusive_outputs():
    assert validate_workspace({}, "vx.workspace.json").exclusive_outputs is True
    assert (
        validate_workspace(
            {"rules": {"exclusiveOutputs": False}}, "vx.workspace.json"
        ).exclusive_outputs
        is False
    )


@pytest.mark.feature("WS-11")
@pytest.mark.parametrize(
    "data,field,words",
    [
        ({"concurrency": 0}, "concurrency", ">= 1"),
        ({"concurrency": "4"}, "concurrency", "got a string"),
        ({"cacheDir": ""}, "cacheDir", "empty"),
        ({"timeout": 2**31}, "timeout", "1..2147483647"),
        ({"plugins": "vx.plugins.otel"}, "plugins", "must be a list"),
        ({"plugins": [{"name": "a", "option": {}}]}, "plugins[0].option", "unknown key"),
        ({"plugins": ["a", "a"]}, "plugins[1]", "declared twice"),
        ({"plugins": ["not a name"]}, "plugins[0]", "not a plugin name"),
        ({"rules": {"upfrontKeys": False}}, "rules.upfrontKeys", "not supported yet"),
        ({"rules": {"exclusiveOutputs": "no"}}, "rules.exclusiveOutputs", "true or false"),
        ({"rules": {"exclusiveOutput": False}}, "rules.exclusiveOutput", "unknown key"),
        ({"cacheRetention": {}}, "cacheRetention", "bounds nothing"),
        ({"cacheRetention": {"olderThan": "0d"}}, "cacheRetention.olderThan", "zero"),
        ({"cacheRetention": {"maxAge": "1d"}}, "cacheRetention.maxAge", "olderThan"),
        ({"affectedBase": "--all"}, "affectedBase", "not a ref"),
        ({"affectedBase": 3}, "affectedBase", "must be a string"),
        ({"cacheScope": "pr 5"}, "cacheScope", "holds ' '"),
        ({"cacheScope": 5}, "cacheScope", "must be a string"),
        ({"cacheDirectory": ".c"}, "cacheDirectory", "unknown key"),
        ({"pipeline": {}}, "pipeline", "unknown key"),
    ],
)
def test_workspace_refusals(data, field, words):
    err = refusal(data, validate_workspace)
    assert err.field == field and words in err.message


@pytest.mark.feature("PL-01")
def test_plugins_in_a_project_config_point_at_the_workspace():
    err = refusal({"plugins": ["vx.plugins.otel"]}, validate_project)
    assert err.field == "plugins" and "vx.workspace.json" in (err.hint or "")


@pytest.mark.feature("WS-11")
def test_foreign_workspace_key_hints():
    assert "`cacheDir`" in refusal({"cacheDirectory": ".c"}, validate_workspace).hint
    assert "vx.config.json" in refusal({"pipeline": {}}, validate_workspace).hint


# ---------------------------------------------------------------- loader


def make_ws(root: Path, dirs: dict[str, str]) -> Workspace:
    packages = {
        name: Package(name, d, (), f"{d}/package.json" if d else "package.json")
        for name, d in dirs.items()
    }
    for d in dirs.values():
        (root / d).mkdir(parents=True, exist_ok=True)
    return Workspace(root=root, manager="npm", packages=packages)


def test_load_all_reads_json_and_jsonc_and_leaves_others_empty(tmp_path):
    ws = make_ws(
        tmp_path, {ROOT_PROJECT: "", "a": "packages/a", "b": "packages/b", "c": "packages/c"}
    )
    (tmp_path / "vx.config.json").write_text(json.dumps({"tasks": {"lint": task()}}))
    (tmp_path / "packages/a/vx.config.json").write_text(json.dumps({"tasks": {"build": task()}}))
    (tmp_path / "packages/b/vx.config.jsonc").write_text(
        '{"tasks": {"test": {"exec": {"command": "t"},},}} // c'
    )
    configs = load_all(ws)
    assert (
        configs[ROOT_PROJECT].source == "vx.config.json" and "lint" in configs[ROOT_PROJECT].tasks
    )
    assert configs["a"].source == "packages/a/vx.config.json" and "build" in configs["a"].tasks
    assert configs["b"].source == "packages/b/vx.config.jsonc" and "test" in configs["b"].tasks
    assert configs["c"].source == "" and configs["c"].tasks == {}


def test_identical_config_texts_keep_their_own_source(tmp_path):
    ws = make_ws(tmp_path, {"a": "a", "b": "b"})
    text = json.dumps({"tasks": {"build": task()}})
    for d in ("a", "b"):
        (tmp_path / d / "vx.config.json").write_text(text)
    configs = load_all(ws)
    assert (configs["a"].source, configs["b"].source) == ("a/vx.config.json", "b/vx.config.json")


def test_config_without_build_stays_without_build(tmp_path):
    ws = make_ws(tmp_path, {"a": "a"})
    (tmp_path / "a/vx.config.json").write_text(json.dumps({"tasks": {"lint": task()}}))
    assert list(load_project(tmp_path, ws.packages["a"]).tasks) == ["lint"]


def test_a_cts_config_is_refused_with_the_forms_that_work(tmp_path):
    ws = make_ws(tmp_path, {"a": "a"})
    (tmp_path / "a/vx.config.cts").write_text("module.exports = {}")
    with pytest.raises(ConfigError) as err:
        load_project(tmp_path, ws.packages["a"])
    assert err.value.file == "a/vx.config.cts" and "vx.config.ts" in err.value.hint


def test_two_config_files_refused(tmp_path):
    ws = make_ws(tmp_path, {"a": "a"})
    (tmp_path / "a/vx.config.json").write_text("{}")
    (tmp_path / "a/vx.config.ts").write_text("export default {}")
    with pytest.raises(ConfigError) as err:
        load_project(tmp_path, ws.packages["a"])
    assert "a/vx.config.json" in err.value.message and "a/vx.config.ts" in err.value.message


def test_loader_errors_name_the_workspace_relative_file(tmp_path):
    ws = make_ws(tmp_path, {"a": "packages/a"})
    (tmp_path / "packages/a/vx.config.json").write_text(
        '{"tasks": {"build": {"exec": {"command": "x", "timeout": "1"}}}}'
    )
    with pytest.raises(ConfigError) as err:
        load_all(ws)
    assert err.value.file == "packages/a/vx.config.json"
    assert err.value.field == "tasks.build.exec.timeout"


def test_load_workspace_defaults_and_file(tmp_path):
    assert load_workspace(tmp_path) == WorkspaceConfig()
    (tmp_path / "vx.workspace.jsonc").write_text('{"concurrency": 2, // two\n}')
    assert load_workspace(tmp_path) == WorkspaceConfig(source="vx.workspace.jsonc", concurrency=2)
    (tmp_path / "vx.workspace.jsonc").unlink()
    (tmp_path / "vx.workspace.mjs").write_text("export default { concurrency: 3, timeout: NaN }")
    with pytest.raises(ConfigError) as err:
        load_workspace(tmp_path)  # evaluated by node, and NaN is no JSON (WS-06)
    assert err.value.file == "vx.workspace.mjs" and err.value.field == "timeout"


def test_each_code_config_reads_what_its_imports_reach_and_every_untied_file():
    from vx.config.evaluation import per_config

    root = "/ws"
    a, b, preset, base, listed = (
        f"{root}/{p}"
        for p in ("a/vx.config.mjs", "b/vx.config.mjs", "preset.mjs", "base.mjs", "list.json")
    )
    edges = [[a, preset], [b, preset], [preset, base]]  # b imports the preset a loaded first
    reads = per_config(root, [a, b], [a, b, preset, base, listed, "/elsewhere/x.mjs"], edges)
    assert reads == {
        a: ["base.mjs", "list.json", "preset.mjs"],
        b: ["base.mjs", "list.json", "preset.mjs"],
    }
    assert per_config(root, [a], [a, preset], [])[a] == ["preset.mjs"]  # untied: counts for all
