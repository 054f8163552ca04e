"""A Turborepo repository runs under vx with nothing written (TL-05): turbo.json's task
definitions and the packages' package.json scripts, real git, real node scripts."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

# One build script for every package: concatenates src/*.js into dist/out.js, after checking its
# workspace dependencies are built, and writes which of the variables the tests set it saw.
BUILD = """const fs = require('fs'), path = require('path');
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
for (const dep of Object.keys(pkg.dependencies || {})) {
  if (!fs.existsSync(path.join('..', dep, 'dist', 'out.js'))) { console.error('unbuilt ' + dep); process.exit(3); }
}
fs.mkdirSync('dist', {recursive: true});
const src = fs.readdirSync('src').sort().map(f => fs.readFileSync('src/' + f, 'utf8')).join('');
fs.writeFileSync('dist/out.js', src);
const seen = Object.keys(process.env).filter(k => /^(API_|NEXT_PUBLIC_|SECRET)/.test(k)).sort();
fs.writeFileSync('dist/env.json', JSON.stringify(seen));
"""

TURBO = {
    "$schema": "https://turborepo.com/schema.json",
    "globalDependencies": ["scripts/**"],
    "tasks": {
        "build": {
            "dependsOn": ["^build"],
            "inputs": ["$TURBO_DEFAULT$", "!README.md"],
            "outputs": ["dist/**"],
        },
        "test": {"dependsOn": ["build"], "outputs": []},
        "lint": {},
        "dev": {"cache": False, "persistent": True},
        "//#check": {"cache": False},
    },
}


def turbo_workspace(turbo=None, scripts=None, extra=None) -> dict[str, object]:
    """npm workspace a <- b <- c (c depends on b depends on a), turbo.json and scripts only."""
    scripts = scripts or {}
    files: dict[str, object] = {
        "package.json": {
            "name": "root",
            "private": True,
            "workspaces": ["packages/*"],
            "scripts": {
                "build": "turbo run build",
                "check": "node -e \"console.log('root check')\"",
            },
        },
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
        "turbo.json": turbo if turbo is not None else TURBO,
        "scripts/build.js": BUILD,
    }
    deps = {"a": [], "b": ["a"], "c": ["b"]}
    for name, on in deps.items():
        own = {
            "build": "node ../../scripts/build.js",
            "dev": 'node -e "setInterval(()=>{},1000)"',
            **({"test": f"node -e \"console.log('test {name}')\""} if name != "c" else {}),
            **({"lint": "node -e \"console.log('lint')\""} if name == "a" else {}),
            **scripts.get(name, {}),
        }
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": {d: "*" for d in on},
            "scripts": own,
        }
        files[f"packages/{name}/src/index.js"] = f"export const {name} = 1;\n"
        files[f"packages/{name}/README.md"] = f"# {name}\n"
    files.update(extra or {})
    return files


@pytest.fixture
def ws(repo):
    return repo.write(turbo_workspace()).commit()


def statuses(result) -> dict[str, str]:
    assert result.code == 0, result.err
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


@pytest.mark.feature("TL-05")
def test_a_turbo_repo_builds_in_dependency_order_and_caches(ws):
    first = ws.vx("run", "build")
    assert statuses(first) == {"a#build": "miss", "b#build": "miss", "c#build": "miss"}
    assert (
        ws.root / "packages/c/dist/out.js"
    ).read_text() == "export const c = 1;\n"  # b and a were built first
    for name in "abc":
        (ws.root / f"packages/{name}/dist/out.js").unlink()
    again = ws.vx("run", "build")
    assert set(statuses(again).values()) == {"local"}
    assert (ws.root / "packages/a/dist/out.js").is_file()
    assert (
        "turbo run build" not in first.out + first.err
    )  # the root's own `build` script is not a turbo task


@pytest.mark.feature("TL-05")
def test_tasks_run_only_where_a_script_exists_and_same_package_deps_hold(ws):
    result = ws.vx("run", "test", "lint")
    got = statuses(result)
    # c has no test script: its c#test is turbo's no-op, which still waits for c#build (a group,
    # not in the summary); only a lints; each test's `build` (same package) and `^build` came along.
    assert set(got) == {"a#build", "b#build", "c#build", "a#test", "b#test", "a#lint"}


@pytest.mark.feature("TL-05")
def test_root_tasks_are_only_the_double_slash_ones(ws):
    result = ws.vx("run", "check")
    assert statuses(result) == {"//#check": "no-cache"}
    assert "root check" in result.out + result.err


@pytest.mark.feature("TL-05")
def test_inputs_default_and_negations_and_global_dependencies(ws):
    statuses(ws.vx("run", "build"))
    (ws.root / "packages/a/README.md").write_text(
        "# a, edited\n"
    )  # `!README.md`: not an input of build
    assert set(statuses(ws.vx("run", "build")).values()) == {"up-to-date"}
    (ws.root / "packages/a/notes.txt").write_text(
        "new\n"
    )  # $TURBO_DEFAULT$: every other package file
    got = statuses(ws.vx("run", "build"))
    assert got["a#build"] == "miss" and got["c#build"] == "miss"  # and its dependants
    (ws.root / "scripts/build.js").write_text(BUILD + "\n// touched\n")  # globalDependencies
    assert set(statuses(ws.vx("run", "build")).values()) == {"miss"}


@pytest.mark.feature("TL-05")
def test_a_changed_script_or_definition_is_a_miss(ws):
    statuses(ws.vx("run", "build"))
    manifest = json.loads((ws.root / "packages/b/package.json").read_text())
    manifest["scripts"]["build"] = "node ../../scripts/build.js && echo extra"
    (ws.root / "packages/b/package.json").write_text(json.dumps(manifest))
    assert statuses(ws.vx("run", "build"))["b#build"] == "miss"
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["build"]["outputs"] = ["dist/**", "types/**"]
    (ws.root / "turbo.json").write_text(json.dumps(turbo))
    assert set(statuses(ws.vx("run", "build")).values()) == {"miss"}


@pytest.mark.feature("TL-05")
def test_env_patterns_key_the_task_and_reach_it_and_nothing_else_does(repo):
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["build"]["env"] = ["API_URL", "NEXT_PUBLIC_*", "!NEXT_PUBLIC_SECRET"]
    ws = repo.write(turbo_workspace(turbo)).commit()
    env = {"API_URL": "one", "NEXT_PUBLIC_A": "x", "NEXT_PUBLIC_SECRET": "s", "SECRET_TOKEN": "t"}
    first = ws.vx("run", "build", env=env)
    statuses(first)
    seen = json.loads((ws.root / "packages/a/dist/env.json").read_text())
    assert seen == ["API_URL", "NEXT_PUBLIC_A"]  # matched and passed through; the rest stays out
    assert set(
        statuses(
            ws.vx("run", "build", env={**env, "NEXT_PUBLIC_SECRET": "changed", "SECRET_TOKEN": "u"})
        ).values()
    ) == {"up-to-date"}  # excluded and unlisted values are not keyed
    assert set(statuses(ws.vx("run", "build", env={**env, "NEXT_PUBLIC_B": "new"})).values()) == {
        "miss"
    }
    assert set(
        statuses(
            ws.vx("run", "build", env={**env, "NEXT_PUBLIC_B": "new", "API_URL": "two"})
        ).values()
    ) == {"miss"}


@pytest.mark.feature("TL-05")
def test_package_overrides_pkg_hash_task_and_own_turbo_json(repo):
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["b#build"] = {"dependsOn": ["^build"], "outputs": ["dist/**"], "cache": False}
    own = {
        "extends": ["//"],
        "tasks": {"build": {"outputs": ["$TURBO_EXTENDS$", "types/**"], "inputs": ["src/**"]}},
    }
    types = (
        "node ../../scripts/build.js && node -e \"require('fs').mkdirSync('types',{recursive:true});"
        "require('fs').writeFileSync('types/c.d.ts','export {}')\""
    )
    ws = repo.write(
        turbo_workspace(
            turbo, scripts={"c": {"build": types}}, extra={"packages/c/turbo.json": own}
        )
    ).commit()
    statuses(ws.vx("run", "build"))
    again = statuses(ws.vx("run", "build"))
    assert again["b#build"] == "no-cache" and again["a#build"] == "up-to-date"
    (ws.root / "packages/c/notes.txt").write_text("not an input of c: its own inputs are src/**\n")
    assert statuses(ws.vx("run", "build"))["c#build"] == "up-to-date"
    (ws.root / "packages/c/types/c.d.ts").unlink()  # an output through $TURBO_EXTENDS$: restored
    assert statuses(ws.vx("run", "build"))["c#build"] == "local"
    assert (ws.root / "packages/c/types/c.d.ts").read_text() == "export {}"


@pytest.mark.feature("TL-05")
def test_a_vx_config_wins_over_turbo_json(repo):
    ws = repo.write(
        turbo_workspace(
            extra={
                "packages/a/vx.config.json": {
                    "tasks": {
                        "build": {
                            "exec": {
                                "command": "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
                                "require('fs').writeFileSync('dist/out.js','native')\""
                            },
                            "cache": {
                                "inputs": {"files": ["src/**"]},
                                "outputs": {"files": ["dist/**"]},
                            },
                        }
                    }
                }
            }
        )
    ).commit()
    statuses(ws.vx("run", "build"))
    assert (ws.root / "packages/a/dist/out.js").read_text() == "native"
    assert (ws.root / "packages/b/dist/out.js").read_text() == "export const b = 1;\n"


@pytest.mark.feature("TL-05")
def test_npm_pre_and_post_hooks_run_around_the_script(repo):
    hooks = {"prebuild": "echo pre > hook.log", "postbuild": "echo post >> hook.log"}
    ws = repo.write(turbo_workspace(scripts={"a": hooks})).commit()
    statuses(ws.vx("run", "a#build"))
    assert (ws.root / "packages/a/hook.log").read_text().split() == ["pre", "post"]


@pytest.mark.feature("TL-05")
def test_a_persistent_task_is_a_persistent_vx_task(ws):
    """turbo.json `persistent: true` is exec.persistent (EX-07): planned, never cached."""
    result = ws.vx("run", "b#dev", "--dry=json")
    assert result.code == 0, result.err
    planned = {t["id"]: t for t in json.loads(result.out)["tasks"]}
    assert planned["b#dev"]["predicted"] == "no-cache", planned


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "mend, field, said",
    [
        (
            lambda t: t["tasks"]["build"].update(ouputs=["dist/**"]),
            "tasks.build.ouputs",
            "did you mean `outputs`",
        ),
        (lambda t: t["tasks"]["build"].update(cache="yes"), "tasks.build.cache", "true or false"),
        (
            lambda t: t["tasks"]["build"].update(dependsOn=["^"]),
            "tasks.build.dependsOn[0]",
            "dependsOn entry",
        ),
        (
            lambda t: t["tasks"]["build"].update(env=["NOT-A-NAME"]),
            "tasks.build.env[0]",
            "not an env var name",
        ),
        (lambda t: t.update(globalEnvv=["X"]), "globalEnvv", "did you mean `globalEnv`"),
        (
            lambda t: t["tasks"]["build"].update(outputs=["$TURBO_EXTENDS$"]),
            "tasks.build.outputs",
            "nothing to extend",
        ),
    ],
)
def test_a_bad_turbo_json_is_refused_with_file_field_and_hint(repo, mend, field, said):
    turbo = json.loads(json.dumps(TURBO))
    mend(turbo)
    ws = repo.write(turbo_workspace(turbo)).commit()
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert (
        f"in: turbo.json, {field}" in result.err
        and said in result.err
        and "Traceback" not in result.err
    )


@pytest.mark.feature("TL-05")
def test_a_package_turbo_json_must_extend_the_root(repo):
    ws = repo.write(
        turbo_workspace(extra={"packages/b/turbo.json": {"tasks": {"build": {}}}})
    ).commit()
    result = ws.vx("run", "build")
    assert (
        result.code == 2
        and "in: packages/b/turbo.json, extends" in result.err
        and '["//"]' in result.err
    )


@pytest.mark.feature("TL-05")
def test_editing_turbo_json_or_adding_a_package_one_is_seen_by_a_replay(ws):
    """A replayed run (a receipt) holds only while every file planning read holds: turbo.json is one,
    and so is whether a package has a turbo.json of its own."""
    for _ in range(2):  # the first builds, the second writes the receipt
        assert ws.vx("run", "build", summary=False).code == 0
        time.sleep(0.06)  # past the racy window of what the run wrote
    replay = ws.vx("run", "build", summary=False, env={"VX_TIMING": "1"})
    assert replay.code == 0 and "receipt check" in replay.err, replay.err
    (ws.root / "packages/b/turbo.json").write_text(
        json.dumps(
            {"extends": ["//"], "tasks": {"build": {"outputs": ["$TURBO_EXTENDS$", "types/**"]}}}
        )
    )
    changed = ws.vx("run", "build", env={"VX_TIMING": "1"})
    assert changed.code == 0 and "discover" in changed.err, changed.err
    assert statuses(changed)["b#build"] == "miss"


def _pnpm_turbo_workspace(root_fields: dict, extra: dict) -> dict[str, object]:
    """turbo_workspace as a pnpm workspace (pnpm-workspace.yaml, workspace: specs), package `a`
    with edge-runtime's hooks: `prebuild` wipes dist, `postbuild` leaves a mark."""
    files = turbo_workspace(
        scripts={
            "a": {
                "prebuild": "rm -rf dist && echo pre >> ../../hooks.log",
                "postbuild": "echo post >> ../../hooks.log",
            }
        }
    )
    files["package.json"] = {**files["package.json"], **root_fields}
    files["package.json"].pop("workspaces")
    files["pnpm-workspace.yaml"] = "packages:\n  - 'packages/*'\n"
    files[".gitignore"] += "hooks.log\n"
    files.update(extra)
    return files


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "root_fields, extra, runs",
    [
        ({"packageManager": "pnpm@9.15.9"}, {}, True),  # on by default from pnpm 9
        ({"packageManager": "pnpm@9.15.9"}, {".npmrc": "enable-pre-post-scripts=false\n"}, False),
        ({"packageManager": "pnpm@8.4.0"}, {}, False),  # off by default before pnpm 9
        (
            {"packageManager": "pnpm@8.4.0"},
            {".npmrc": "enable-pre-post-scripts=true\n"},
            True,
        ),  # edge-runtime
        ({}, {"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, False),  # the lockfile tells pnpm 8
        ({}, {"pnpm-lock.yaml": "lockfileVersion: '9.0'\n"}, True),
        (
            {"packageManager": "pnpm@10.0.0"},
            {"pnpm-workspace.yaml": "packages:\n  - 'packages/*'\nenablePrePostScripts: false\n"},
            False,
        ),
    ],
)
def test_pnpm_hooks_follow_its_version_and_settings(repo, root_fields, extra, runs):
    ws = repo.write(_pnpm_turbo_workspace(root_fields, extra)).commit()
    stale = ws.root / "packages/a/dist/stale.js"
    stale.parent.mkdir(parents=True)
    stale.write_text("left by an earlier build")
    result = ws.vx("run", "a#build", "--no-cache")
    assert result.code == 0, result.err
    log = ws.root / "hooks.log"
    assert (log.read_text().split() if log.exists() else []) == (["pre", "post"] if runs else [])
    assert (
        stale.exists() is not runs
    )  # edge-runtime's `prebuild: rm -rf dist` wipes what vx did not


@pytest.mark.feature("TL-05")
def test_pnpm_hooks_as_the_real_pnpm_runs_them(repo):
    """The same workspace under pnpm 9 itself (`pnpm run build` in the package), with and without
    the .npmrc setting: vx folds the hooks exactly when pnpm runs them."""
    from support.npm_packages import installed

    pnpm = installed("pnpm").parent / ".bin" / "pnpm"
    for npmrc, runs in (("", True), ("enable-pre-post-scripts=false\n", False)):
        ws = repo.write(
            _pnpm_turbo_workspace({"packageManager": "pnpm@9.15.9"}, {".npmrc": npmrc})
        ).commit()
        log = ws.root / "hooks.log"
        subprocess.run(
            [str(pnpm), "run", "build"],
            cwd=ws.root / "packages/a",
            check=True,
            capture_output=True,
            env={
                **os.environ,
                "COREPACK_ENABLE_STRICT": "0",
                "npm_config_manage_package_manager_versions": "false",
            },
        )
        by_pnpm = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        assert ws.vx("run", "a#build", "--no-cache").code == 0
        by_vx = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        assert by_vx == by_pnpm == (["pre", "post"] if runs else [])


def test_issue17_a_missing_task_says_script_or_task_and_who_has_one(repo):
    """`vx run a#deploy`: a has no `deploy` script or task; b has the script, but turbo.json does
    not define it, so it is no task: the refusal says both."""
    repo.write(turbo_workspace(scripts={"b": {"deploy": "echo deploying"}})).commit()
    missing = repo.vx("run", "a#deploy")
    assert missing.code == 2, missing.err
    assert "package `a` has no task `deploy` (no `deploy` script or task)" in missing.err
    assert (
        "a package.json script (no vx task) in: b" in missing.err and "Traceback" not in missing.err
    )


@pytest.mark.feature("TL-05")
def test_inputs_that_climb_out_of_the_package_key_the_files_they_name(repo):
    """turbo takes `../` in `inputs` (a shared lint config beside the packages); vx refused the
    whole run. Each package's `../` leads from its own directory, and the file it names keys it."""
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["lint"] = {"inputs": ["src/**", "../../tools/lint/**"]}
    files = turbo_workspace(turbo, extra={"tools/lint/rules.js": "one\n"})
    ws = repo.write(files).commit()
    assert statuses(ws.vx("run", "lint")) == {"a#lint": "miss"}
    assert statuses(ws.vx("run", "lint")) == {"a#lint": "up-to-date"}
    (ws.root / "tools/lint/rules.js").write_text("two\n")
    assert statuses(ws.vx("run", "lint")) == {"a#lint": "miss"}


@pytest.mark.feature("TL-05")
def test_an_input_that_climbs_out_of_the_workspace_is_refused(repo):
    """A `../` input of the root project leads outside the workspace: refused, not dropped."""
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["//#check"] = {"inputs": ["../elsewhere/**"]}
    ws = repo.write(turbo_workspace(turbo)).commit()
    result = ws.vx("run", "check")
    assert result.code == 2, result.err
    assert (
        "leaves the workspace" in result.err
        and 'in: turbo.json, tasks["//#check"].inputs' in result.err
    )
    assert "Traceback" not in result.err


@pytest.mark.feature("TL-05", "KEY-18")
def test_the_root_package_json_keys_every_turbo_task(ws):
    """turbo folds the root package.json into every task's hash (when there is no lockfile; vx
    always does); vx keyed only the package's own, so a `browserslist` (read by every package's
    bundler, walking up) changed at the root was a hit on outputs built for the old browsers."""
    assert set(statuses(ws.vx("run", "build")).values()) == {"miss"}
    manifest = json.loads((ws.root / "package.json").read_text())
    manifest["browserslist"] = ["last 1 chrome version"]
    (ws.root / "package.json").write_text(json.dumps(manifest))
    assert set(statuses(ws.vx("run", "build")).values()) == {"miss"}


@pytest.mark.feature("TL-05", "LC-08")
def test_outputs_beside_committed_sources_leave_the_sources_alone(repo):
    """`outputs: ["src/**/*.js"]` for a compiler writing beside the sources, with a committed
    `src/legacy.js`: turbo never deletes it; vx's wipe of the outputs did, before the run."""
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["emit"] = {"outputs": ["src/**/*.js"]}
    emit = "node -e \"require('fs').writeFileSync('src/index.js', 'built')\""
    files = turbo_workspace(
        turbo, scripts={"a": {"emit": emit}}, extra={"packages/a/src/legacy.js": "old\n"}
    )
    ws = repo.write(files).commit()
    assert statuses(ws.vx("run", "emit")) == {"a#emit": "miss"}
    assert (ws.root / "packages/a/src/legacy.js").read_text() == "old\n"


@pytest.mark.feature("TL-05", "KEY-18")
def test_a_file_named_outright_keys_the_task_whatever_the_negations_say(repo):
    """`["src/**/*.js", "!src/**/*.test.js", "src/setup.test.js"]`: turbo hashes the file named
    outright; vx let the negation take it back, so an edit to it was a hit."""
    turbo = json.loads(json.dumps(TURBO))
    turbo["tasks"]["lint"] = {"inputs": ["src/**/*.js", "!src/**/*.test.js", "src/setup.test.js"]}
    files = turbo_workspace(turbo, extra={"packages/a/src/setup.test.js": "one\n"})
    ws = repo.write(files).commit()
    assert statuses(ws.vx("run", "lint")) == {"a#lint": "miss"}
    (ws.root / "packages/a/src/setup.test.js").write_text("two\n")
    assert statuses(ws.vx("run", "lint")) == {"a#lint": "miss"}
