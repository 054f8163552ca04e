"""Mapping turbo.json definitions and package scripts to vx tasks (TL-05): the pure part."""

from __future__ import annotations

import pytest

from vx.config.turbo import TurboRoot, _checked_root, project
from vx.errors import ConfigError
from vx.model import ROOT_PROJECT, Package


def pkg(name="web", **scripts) -> Package:
    return Package(
        name=name,
        dir="" if name == ROOT_PROJECT else f"apps/{name}",
        deps=(),
        manifest_path="package.json",
        scripts=scripts or {"build": "tsc -b"},
    )


def root(**tasks) -> TurboRoot:
    return _checked_root({"tasks": tasks}, "turbo.json")


@pytest.mark.feature("TL-05")
def test_a_definition_becomes_a_task_running_the_script():
    task = project(
        root(build={"dependsOn": ["^build"], "outputs": ["dist/**"]}), pkg(), "npm", None, ""
    ).tasks["build"]
    assert task.exec.command == "tsc -b" and task.depends_on == ("^build",)
    assert task.cache.input_files == ("**",) and task.cache.output_files == ("dist/**",)


@pytest.mark.feature("TL-05")
def test_no_script_is_a_keyed_noop_and_deps_on_undefined_tasks_drop():
    config = project(
        root(build={"dependsOn": ["codegen", "^build"]}, lint={"dependsOn": ["build"]}),
        pkg(),
        "npm",
        None,
        "",
    )
    assert set(config.tasks) == {"build", "lint"} and config.tasks["build"].depends_on == (
        "^build",
    )
    lint = config.tasks["lint"]  # no script: turbo's no-op, which still waits for its dependsOn
    assert lint.is_group and lint.implicit and lint.depends_on == ("build",)
    assert lint.cache.input_files == ("**",)  # keyed on the package's files, as turbo hashes it


@pytest.mark.feature("TL-05")
def test_root_project_takes_only_double_slash_definitions():
    turbo = root(build={}, **{"//#check": {"cache": False}})
    config = project(
        turbo, pkg(ROOT_PROJECT, build="turbo run build", check="eslint ."), "npm", None, ""
    )
    assert set(config.tasks) == {"check"} and config.tasks["check"].cache is None


@pytest.mark.feature("TL-05")
def test_pkg_hash_replaces_and_a_package_file_merges_field_by_field():
    turbo = root(
        build={"outputs": ["dist/**"], "inputs": ["src/**"]},
        **{"web#build": {"outputs": ["out/**"]}},
    )
    own = {
        "tasks": {"build": {"outputs": ["$TURBO_EXTENDS$", "types/**"]}},
        "tags": ["ui"],
        "text": "(its text)",
    }
    config = project(turbo, pkg(), "npm", own, "apps/web/turbo.json")
    task = config.tasks["build"]
    assert task.cache.output_files == ("out/**", "types/**")
    assert task.cache.input_files == ("**",)  # web#build replaced the generic one whole, inputs too
    assert config.source == "apps/web/turbo.json" and config.tags == ("ui",)


@pytest.mark.feature("TL-05")
def test_turbo_root_globs_and_global_dependencies_are_workspace_files():
    turbo = _checked_root(
        {
            "globalDependencies": [".env"],
            "tasks": {
                "build": {
                    "inputs": ["$TURBO_DEFAULT$", "$TURBO_ROOT$/tsconfig.base.json", "!README.md"],
                    "outputs": ["dist/**", "$TURBO_ROOT$/coverage/web/**"],
                }
            },
        },
        "turbo.json",
    )
    cache = project(turbo, pkg(), "npm", None, "").tasks["build"].cache
    assert cache.input_files == ("**", "!README.md")
    assert cache.input_workspace_files == ("package.json", ".env", "tsconfig.base.json")
    assert cache.output_workspace_files == ("coverage/web/**",)


@pytest.mark.feature("TL-05")
def test_env_lists_key_and_pass_and_fold_into_the_declaration():
    turbo = _checked_root(
        {
            "globalEnv": ["CI_SHA"],
            "globalPassThroughEnv": ["AWS_*"],
            "tasks": {
                "build": {
                    "env": ["NEXT_PUBLIC_*", "!NEXT_PUBLIC_SECRET"],
                    "passThroughEnv": ["HOME_DIR"],
                    "dependsOn": ["$LEGACY"],
                }
            },
        },
        "turbo.json",
    )
    task = project(turbo, pkg(), "npm", None, "").tasks["build"]
    assert task.cache.input_env == ("CI_SHA", "NEXT_PUBLIC_*", "!NEXT_PUBLIC_SECRET", "LEGACY")
    assert task.exec.env.pass_through == (
        "CI_SHA",
        "NEXT_PUBLIC_*",
        "!NEXT_PUBLIC_SECRET",
        "LEGACY",
        "AWS_*",
        "HOME_DIR",
    )
    plain = project(root(build={}), pkg(), "npm", None, "").tasks["build"]
    assert (
        "NEXT_PUBLIC_*" in task.canonical and task.canonical != plain.canonical
    )  # the key sees the lists


@pytest.mark.feature("TL-05")
def test_npm_hooks_fold_around_the_script_other_managers_do_not():
    web = pkg(build="tsc -b # types", prebuild="rm -rf dist", postbuild="echo done")
    npm = project(root(build={}), web, "npm", None, "").tasks["build"].exec.command
    assert (
        npm == "(\nrm -rf dist\n) && (\ntsc -b # types\n) && (\necho done\n)"
    )  # the comment cannot eat a `)`
    assert (
        project(root(build={}), web, "pnpm", None, "").tasks["build"].exec.command
        == "tsc -b # types"
    )
    assert (
        project(root(build={}), web, "yarn-classic", None, "")
        .tasks["build"]
        .exec.command.startswith("(\nrm")
    )
    assert (
        project(root(build={}), web, "yarn", None, "").tasks["build"].exec.command
        == "tsc -b # types"
    )
    plain = pkg(build="tsc -b", prebuild="rm -rf dist")
    assert (
        project(root(build={}), plain, "npm", None, "").tasks["build"].exec.command
        == "rm -rf dist && tsc -b"
    )


@pytest.mark.feature("TL-05")
def test_persistent_and_interactive_map_to_exec_and_never_cache():
    config = project(
        root(dev={"persistent": True, "outputs": ["x/**"]}, ask={"interactive": True}),
        pkg(dev="vite", ask="x"),
        "npm",
        None,
        "",
    )
    dev, ask = config.tasks["dev"], config.tasks["ask"]
    assert (
        dev.exec.persistent is not None
        and dev.exec.persistent.ready_when is None
        and dev.cache is None
    )
    assert ask.exec.interactive and ask.cache is None


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "data, field",
    [
        ({"tasks": {"build": {"outputs": "dist/**"}}}, "tasks.build.outputs"),
        ({"tasks": {"build": {"outputs": ["dist/**", "!!dist/x"]}}}, "tasks.build.outputs[1]"),
        (
            {"tasks": {"build": {"inputs": ["$TURBO_ROOT$/{workspaceRoot}/x"]}}},
            "tasks.build.inputs[0]",
        ),
        ({"tasks": {"build": {"inputs": ["!README.md"]}}}, "tasks.build.inputs"),
        ({"tasks": [], "pipeline": {}}, "pipeline"),
        ({"tasks": {"#build": {}}}, "tasks.#build"),
        ({"tasks": {"build": {"exec": {"command": "x"}}}}, "tasks.build.exec"),
    ],
)
def test_refusals_name_the_turbo_field(data, field):
    with pytest.raises(ConfigError) as caught:
        _checked_root(data, "turbo.json")
    assert caught.value.file == "turbo.json" and caught.value.field == field


@pytest.mark.feature("TL-05")
def test_yarn_1_runs_hooks_yarn_2_does_not(tmp_path):
    from vx.config.turbo import hook_manager

    assert hook_manager("yarn", tmp_path) == "yarn-classic"
    (tmp_path / ".yarnrc.yml").write_text("nodeLinker: node-modules\n")
    assert hook_manager("yarn", tmp_path) == "yarn"


@pytest.mark.feature("TL-05")
def test_pnpm_runs_hooks_from_9_on_or_as_its_settings_say(tmp_path):
    from vx.config.turbo import hook_manager

    assert hook_manager("pnpm", tmp_path) == "pnpm-hooks"  # no version to tell: today's pnpm
    (tmp_path / "package.json").write_text('{"packageManager": "pnpm@8.15.9"}')
    assert hook_manager("pnpm", tmp_path) == "pnpm"
    (tmp_path / ".npmrc").write_text("registry=x\n enable-pre-post-scripts = true\n")
    assert hook_manager("pnpm", tmp_path) == "pnpm-hooks"
    (tmp_path / ".npmrc").write_text(
        "enable-pre-post-scripts=true\nenable-pre-post-scripts=false\n"
    )
    assert hook_manager("pnpm", tmp_path) == "pnpm"  # the last one wins, as in any .npmrc
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / ".npmrc").unlink()
    (tmp_path / "pnpm-lock.yaml").write_text("---\nlockfileVersion: '6.0'\n")
    assert hook_manager("pnpm", tmp_path) == "pnpm"
    (tmp_path / "pnpm-lock.yaml").write_text("lockfileVersion: '9.0'\n")
    assert hook_manager("pnpm", tmp_path) == "pnpm-hooks"
    (tmp_path / "pnpm-workspace.yaml").write_text("packages: []\nenablePrePostScripts: false\n")
    assert hook_manager("pnpm", tmp_path) == "pnpm"  # pnpm 10's own settings file


def test_the_loader_looks_for_the_turbo_files_turbo_reads():
    from vx.config import loader, turbo

    assert loader.TURBO_FILES == turbo.FILE_NAMES


@pytest.mark.feature("KEY-23")
def test_a_mapped_task_knows_the_turbo_json_fields_its_globs_were_written_in():
    """What a warning names: the definition's `inputs` and `outputs` (`pkg#name`'s, or the
    package's own turbo.json when it sets them) and `globalDependencies`, not vx's fields."""
    turbo = _checked_root(
        {
            "globalDependencies": ["tsconfig.base.json"],
            "tasks": {
                "build": {"inputs": ["src/**"], "outputs": ["dist/**"]},
                "web#lint": {"inputs": ["src/**"]},
                "test": {},
            },
        },
        "turbo.json",
    )
    own = {"tasks": {"test": {"inputs": ["test/**"]}}, "tags": [], "text": "own"}
    config = project(turbo, pkg(build="b", lint="l", test="t"), "npm", own, "apps/web/turbo.json")
    assert config.located("tasks.build.cache.inputs.files[0]") == (
        "turbo.json",
        "tasks.build.inputs",
    )
    assert config.located("tasks.build.cache.outputs") == ("turbo.json", "tasks.build.outputs")
    assert config.located("tasks.lint.cache.inputs.files[0]") == (
        "turbo.json",
        'tasks["web#lint"].inputs',
    )
    assert config.located("tasks.test.cache.inputs.files[0]") == (
        "apps/web/turbo.json",
        "tasks.test.inputs",
    )
    assert config.located("tasks.test.cache.outputs") == ("turbo.json", "tasks.test.outputs")
    wide = config.tasks["build"].cache.input_workspace_files
    i = wide.index("tsconfig.base.json")
    assert config.located(f"tasks.build.cache.inputs.workspaceFiles[{i}]") == (
        "turbo.json",
        "globalDependencies",
    )
    # packages with the same scripts and own turbo.json text share one mapping: each names its file
    for name in ("api", "docs"):
        other = project(
            turbo, pkg(name, build="b", lint="l", test="t"), "npm", own, f"apps/{name}/turbo.json"
        )
        assert other.located("tasks.test.cache.inputs")[0] == f"apps/{name}/turbo.json"
