"""Configs written as code (WS-05, WS-06): vx.config.{mjs,js,cjs,ts,mts} evaluated by the
workspace's own Node in one batch, kept until a file they loaded or a variable they read changes.
Real node, real TypeScript (the pinned npm package), real git."""

from __future__ import annotations

import json
import os
import time

import pytest
from support.npm_packages import installed
from support.workspace import npm_workspace

PRESET = """import fs from 'node:fs';
fs.appendFileSync(new URL('./evaluations.log', import.meta.url), 'x');  // counts evaluations
export const build = (name) => ({
  exec: { command: `node -e "require('fs').mkdirSync('dist',{recursive:true});require('fs').writeFileSync('dist/out.js','${name}')"` },
  cache: { inputs: { files: ['src/**'] }, outputs: { files: ['dist/**'] } },
});
"""


def code_workspace(repo, configs: dict[str, str], extra: dict | None = None):
    packages = {
        name: {"files": {"src/index.js": f"export const {name} = 1;\n", f"vx.config.{ext}": text}}
        for name, (ext, text) in configs.items()
    }
    files = npm_workspace(packages)
    files[".gitignore"] = "node_modules/\ndist/\n.vx/\nevaluations.log\n"
    files["preset.mjs"] = PRESET
    files.update(extra or {})
    return repo.write(files).commit()


def mjs(name: str) -> tuple[str, str]:
    return (
        "mjs",
        f"import {{ build }} from '../../preset.mjs';\nexport default {{ tasks: {{ build: build('{name}') }} }};\n",
    )


def evaluations(ws) -> int:
    path = ws.root / "evaluations.log"
    return len(path.read_text()) if path.exists() else 0


@pytest.mark.feature("WS-05")
def test_mjs_configs_evaluate_in_one_batch_and_run(repo):
    ws = code_workspace(
        repo,
        {
            "a": mjs("a"),
            "b": ("js", "module.exports = { tasks: { lint: { exec: { command: 'true' } } } };\n"),
            "c": mjs("c"),
        },
    )
    result = ws.vx("run", "build", "lint")
    assert result.code == 0, result.err
    assert set(result.statuses()) == {"a#build", "c#build", "b#lint"}
    assert (ws.root / "packages/a/dist/out.js").read_text() == "a"
    assert evaluations(ws) == 1  # the preset was imported once: both configs in one Node process
    kept = list((ws.root / ".vx/configs").glob("*.json"))
    assert len(kept) == 1 and len(json.loads(kept[0].read_text())["results"]) == 3


@pytest.mark.feature("WS-05")
def test_a_kept_evaluation_is_reused_until_a_file_it_loaded_changes(repo):
    ws = code_workspace(repo, {"a": mjs("a")})
    assert ws.vx("run", "build").code == 0
    time.sleep(0.06)  # past the racy window: the evaluation is kept from here on
    assert ws.vx("run", "build").code == 0
    kept_after = evaluations(ws)
    again = ws.vx("run", "build")
    assert again.code == 0 and evaluations(ws) == kept_after  # no Node process: the kept objects
    preset = (ws.root / "preset.mjs").read_text().replace("'${name}'", "'${name}!'")
    (ws.root / "preset.mjs").write_text(preset)  # an imported file, not the config itself
    changed = ws.vx("run", "build")
    assert changed.code == 0 and evaluations(ws) == kept_after + 1
    assert changed.statuses()["a#build"] == (
        "success",
        "miss",
    )  # the evaluated object is what is keyed
    assert (ws.root / "packages/a/dist/out.js").read_text() == "a!"


@pytest.mark.feature("WS-05")
def test_a_variable_read_at_load_is_part_of_the_evaluation(repo):
    config = "export default { tasks: { build: { exec: { command: 'echo ' + (process.env.FLAVOUR ?? 'plain') } } } };\n"
    ws = code_workspace(repo, {"a": ("mjs", config)})
    plain = ws.vx("run", "build", "--dry=json")
    spiced = ws.vx("run", "build", "--dry=json", env={"FLAVOUR": "spicy"})
    assert plain.code == 0 and spiced.code == 0, plain.err + spiced.err
    commands = [json.loads(r.out)["tasks"][0]["command"] for r in (plain, spiced)]
    assert commands == ["echo plain", "echo spicy"]


@pytest.fixture
def typescript(repo):
    """The workspace's own `typescript` (5.x), linked into its node_modules as an install would."""

    def link(ws):
        (ws.root / "node_modules").mkdir(exist_ok=True)
        os.symlink(installed("typescript"), ws.root / "node_modules" / "typescript")
        return ws

    return link


@pytest.mark.feature("WS-05")
def test_a_typescript_config_with_types_satisfies_and_a_ts_preset(repo, typescript):
    config = (
        "import type { Shape } from '../../shape';\n"
        "import { lint } from '../../preset-ts';\n"
        "const config = { tasks: { lint: lint(`node -e \"console.log('ts')\"`) } } satisfies Shape;\n"
        "export default config;\n"
    )
    ws = typescript(
        code_workspace(
            repo,
            {"a": ("ts", config)},
            extra={
                "shape.ts": "export type Shape = { tasks: Record<string, unknown> };\n",
                "preset-ts.ts": "export const lint = (command: string): { exec: { command: string } } => ({ exec: { command } });\n",
            },
        )
    )
    result = ws.vx("run", "lint")
    assert result.code == 0, result.err
    assert result.statuses() == {"a#lint": ("success", "no-cache")}


@pytest.mark.feature("WS-05")
def test_a_typescript_config_without_a_transpiler_is_refused_with_a_hint(repo):
    ws = code_workspace(repo, {"a": ("ts", "export default { tasks: {} } satisfies object;\n")})
    result = ws.vx("run", "build")
    assert result.code == 2 and "Traceback" not in result.err
    assert "in: packages/a/vx.config.ts" in result.err and "typescript" in result.err


@pytest.mark.feature("WS-05")
def test_a_typescript_syntax_error_names_the_line(repo, typescript):
    ws = typescript(
        code_workspace(repo, {"a": ("ts", "const x: number = ;\nexport default {};\n")})
    )
    result = ws.vx("run", "build")
    assert (
        result.code == 2
        and "packages/a/vx.config.ts:1:" in result.err
        and "Traceback" not in result.err
    )


@pytest.mark.feature("WS-06")
@pytest.mark.parametrize(
    "body, field, said",
    [
        (
            "{ tasks: { build: { exec: { command: () => 'x' } } } }",
            "tasks.build.exec.command",
            "a function",
        ),
        (
            "{ tasks: { build: { exec: { command: 'x', timeout: Infinity } } } }",
            "tasks.build.exec.timeout",
            "Infinity",
        ),
        (
            "{ tasks: { build: { dependsOn: ['^build', undefined] } } }",
            "tasks.build.dependsOn[1]",
            "undefined",
        ),
        ("{ tasks: new Map() }", "tasks", "Map object"),
        (
            "(() => { const o = { tasks: {} }; o.tasks.self = o; return o; })()",
            "tasks.self",
            "cycle",
        ),
    ],
)
def test_what_json_cannot_carry_is_refused_with_its_field(repo, body, field, said):
    ws = code_workspace(repo, {"a": ("mjs", f"export default {body};\n")})
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert f"in: packages/a/vx.config.mjs, {field}" in result.err and said in result.err
    assert "Traceback" not in result.err


@pytest.mark.feature("WS-06")
def test_undefined_properties_mean_absent_and_validation_still_applies(repo):
    ws = code_workspace(
        repo,
        {
            "a": (
                "mjs",
                "export default { tasks: { build: { exec: { command: 'true' }, "
                "description: undefined, dependsOn: undefined, ouputs: 1 } } };\n",
            )
        },
    )
    result = ws.vx("run", "build")
    assert result.code == 2 and "in: packages/a/vx.config.mjs, tasks.build.ouputs" in result.err


@pytest.mark.feature("WS-05")
def test_a_config_that_throws_is_refused_naming_it(repo):
    ws = code_workspace(repo, {"a": ("mjs", "throw new Error('no secrets file');\n")})
    result = ws.vx("run", "build")
    assert (
        result.code == 2
        and "no secrets file" in result.err
        and "packages/a/vx.config.mjs" in result.err
    )
    assert "Traceback" not in result.err


@pytest.mark.feature("WS-05")
def test_editing_a_preset_is_seen_by_a_replay(repo):
    """A replay (receipt) holds only while every file planning read holds: a config's imports count."""
    ws = code_workspace(repo, {"a": mjs("a")})
    for _ in range(2):  # the first builds, the second writes the receipt
        assert ws.vx("run", "build", summary=False).code == 0
        time.sleep(0.06)
    replay = ws.vx("run", "build", summary=False, env={"VX_TIMING": "1"})
    assert replay.code == 0 and "receipt check" in replay.err, replay.err
    (ws.root / "preset.mjs").write_text((ws.root / "preset.mjs").read_text() + "\n// edited\n")
    changed = ws.vx("run", "build", summary=False, env={"VX_TIMING": "1"})
    assert changed.code == 0 and "discover" in changed.err, changed.err


@pytest.mark.feature("WS-05")
def test_a_file_the_config_reads_itself_is_part_of_the_evaluation(repo):
    config = (
        "import { readFileSync } from 'node:fs';\n"
        "const command = readFileSync(new URL('./cmd.txt', import.meta.url), 'utf8').trim();\n"
        "console.log('loading the config');  // a config may print: it reaches vx's stderr\n"
        "export default { tasks: { build: { exec: { command } } } };\n"
    )
    ws = code_workspace(repo, {"a": ("mjs", config)}, extra={"packages/a/cmd.txt": "echo one\n"})
    first = ws.vx("run", "build", "--dry=json")
    assert first.code == 0 and "loading the config" in first.err, first.err
    time.sleep(0.06)
    assert (
        json.loads(ws.vx("run", "build", "--dry=json").out)["tasks"][0]["command"] == "echo one"
    )  # kept now
    (ws.root / "packages/a/cmd.txt").write_text("echo two\n")
    assert json.loads(ws.vx("run", "build", "--dry=json").out)["tasks"][0]["command"] == "echo two"


@pytest.mark.feature("WS-05")
def test_a_kept_evaluation_holds_digests_not_values_and_none_that_read_the_whole_env(repo):
    named = "export default { tasks: { build: { exec: { command: 'echo ' + process.env.MY_TOKEN.length } } } };\n"
    ws = code_workspace(repo, {"a": ("mjs", named)})
    for _ in range(2):
        assert ws.vx("run", "build", "--dry", env={"MY_TOKEN": "hunter2-canary"}).code == 0
        time.sleep(0.06)
    kept = list((ws.root / ".vx/configs").glob("*.json"))
    assert kept and all(b"hunter2-canary" not in k.read_bytes() for k in kept)
    assert all(oct(k.stat().st_mode & 0o777) == "0o600" for k in kept)
    whole = "export default { tasks: { build: { exec: { command: 'echo ' + Object.keys(process.env).length } } } };\n"
    (ws.root / "packages/a/vx.config.mjs").write_text(whole)
    for _ in range(2):
        assert ws.vx("run", "build", "--dry", env={"MY_TOKEN": "hunter2-canary"}).code == 0
        time.sleep(0.06)
    assert len(list((ws.root / ".vx/configs").glob("*.json"))) == len(kept)  # never kept


@pytest.mark.feature("WS-18")
@pytest.mark.parametrize(
    "write",
    [
        "process.env.LEAK = 'from-a';",
        "Object.assign(process.env, { LEAK: 'from-a' });",
        "delete process.env.HOME;",
    ],
)
def test_a_config_that_writes_the_environment_is_refused_at_its_line(repo, write):
    """A config that sets (or deletes) a variable is refused with the file, the line and a hint;
    before, the write was accepted and every config evaluated after it saw the value."""
    reader = (
        "export default { tasks: { build: { exec: { command: `echo ${process.env.LEAK}` } } } };\n"
    )
    ws = code_workspace(
        repo,
        {
            "a": ("mjs", f"const x = 1;\n{write}\nexport default {{ tasks: {{}} }};\n"),
            "b": ("mjs", reader),
        },
    )
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert (
        "packages/a/vx.config.mjs" in result.err and "may not write the environment" in result.err
    )
    assert "vx.config.mjs:2:" in result.err, result.err  # the line that wrote
    assert "Traceback" not in result.err


@pytest.mark.feature("WS-07")
def test_the_typing_helpers_import_without_vx_s_npm_package_installed(repo):
    """`import { defineProject } from '@vx-build/vx/config'` evaluates in a workspace that has not
    installed vx's npm package (a pip-installed vx): the loader supplies the helpers. Before, Node
    refused the import (ERR_MODULE_NOT_FOUND) and the run exited 2."""
    config = (
        "import { defineProject, definePlugin } from '@vx-build/vx/config';\n"
        "export default defineProject({ tasks: { build: { exec: { command: 'echo typed' } } } });\n"
    )
    ws = code_workspace(repo, {"a": ("mjs", config)})
    assert not (ws.root / "node_modules/@vx-build").exists()
    result = ws.vx("run", "build", "--dry=json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["tasks"][0]["command"] == "echo typed"
