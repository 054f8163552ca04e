"""The environment a task gets and what of it its key folds: turbo's framework inference, the
variables keyed whenever they reach a task, and what `--verify=inputs` can say about them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support.commands import needs
from support.npm_packages import installed
from support.workspace import npm_workspace

# Writes every variable of interest the task saw, so a test can tell what reached it.
SEEN = (
    "node -e \"const e=process.env; require('fs').mkdirSync('dist',{recursive:true}); "
    "require('fs').writeFileSync('dist/env.json', JSON.stringify(Object.fromEntries(Object.keys(e)"
    '.filter(k=>/^(NEXT_|VITE_|NODE_ENV|CI$|LANG$|NODE_OPTIONS)/.test(k)).sort().map(k=>[k,e[k]]))))"'
)


def turbo_framework_workspace() -> dict[str, object]:
    """npm workspace: `web` depends on next, `spa` on vite, `lib` on neither; one turbo.json."""
    files: dict[str, object] = {
        "package.json": {
            "name": "root",
            "private": True,
            "workspaces": ["packages/*"],
            "packageManager": "npm@10.0.0",
        },
        "package-lock.json": {
            "name": "root",
            "lockfileVersion": 3,
            "requires": True,
            "packages": {
                "": {"name": "root", "workspaces": ["packages/*"]},
                **{f"packages/{n}": {"name": n, "version": "1.0.0"} for n in ("web", "spa", "lib")},
            },
        },
        ".gitignore": "node_modules/\ndist/\n.vx/\n.turbo/\n",
        "turbo.json": {
            "tasks": {"build": {"outputs": ["dist/**"], "env": ["!NEXT_PUBLIC_SECRET"]}}
        },
    }
    for name, deps in (("web", {"next": "15.0.0"}), ("spa", {"vite": "6.0.0"}), ("lib", {})):
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "devDependencies": deps,
            "scripts": {"build": SEEN},
        }
    return files


def turbo_dry(ws, env: dict[str, str], *flags: str) -> dict[str, dict]:
    """turbo's own plan of `build`, by package: hash and inferred variable names."""
    binary = installed("turbo").parent / ".bin" / "turbo"
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NEXT_", "VITE_", "CI", "TURBO_", "VX_"))
    }
    proc = subprocess.run(
        [str(binary), "run", "build", "--dry=json", *flags],
        cwd=ws.root,
        capture_output=True,
        text=True,
        env={**base, "TURBO_TELEMETRY_DISABLED": "1", "DO_NOT_TRACK": "1", **env},
        timeout=120,
        check=True,
    )
    plan = json.loads(proc.stdout)
    return {
        t["package"]: {
            "hash": t["hash"],
            "inferred": sorted(v.split("=")[0] for v in t["environmentVariables"]["inferred"]),
        }
        for t in plan["tasks"]
    }


def vx_keys(ws, env: dict[str, str], *flags: str) -> dict[str, str]:
    result = ws.vx("run", "build", "--dry=json", *flags, env=env)
    assert result.code == 0, result.err
    return {t["id"].split("#")[0]: t["key"] for t in json.loads(result.out)["tasks"]}


def seen(ws, name: str) -> dict[str, str]:
    return json.loads((ws.root / f"packages/{name}/dist/env.json").read_text())


@pytest.mark.feature("TL-05")
def test_framework_inference_keys_and_passes_what_turbo_infers(repo):
    ws = repo.write(turbo_framework_workspace()).commit()
    one = {"NEXT_PUBLIC_API": "one", "NEXT_PUBLIC_SECRET": "s", "VITE_MODE": "one"}
    two = {**one, "NEXT_PUBLIC_API": "two", "VITE_MODE": "two"}

    # turbo itself: next's and vite's variables are inferred (less the `!` exclusion) and hashed
    t1, t2 = turbo_dry(ws, one), turbo_dry(ws, two)
    assert t1["web"]["inferred"] == ["NEXT_PUBLIC_API"] and t1["spa"]["inferred"] == ["VITE_MODE"]
    assert t1["lib"]["inferred"] == []
    assert t1["web"]["hash"] != t2["web"]["hash"] and t1["spa"]["hash"] != t2["spa"]["hash"]
    assert t1["lib"]["hash"] == t2["lib"]["hash"]

    # vx: the same tasks re-key, the same one does not
    k1, k2 = vx_keys(ws, one), vx_keys(ws, two)
    assert (k1["web"] != k2["web"], k1["spa"] != k2["spa"], k1["lib"] == k2["lib"]) == (
        True,
        True,
        True,
    )

    # and the variables reach the build that bakes them in, nowhere else
    first = ws.vx("run", "build", env=one)
    assert first.code == 0, first.err
    assert seen(ws, "web").get("NEXT_PUBLIC_API") == "one" and "NEXT_PUBLIC_SECRET" not in seen(
        ws, "web"
    )
    assert seen(ws, "spa").get("VITE_MODE") == "one" and "NEXT_PUBLIC_API" not in seen(ws, "spa")
    assert "VITE_MODE" not in seen(ws, "lib") and "NEXT_PUBLIC_API" not in seen(ws, "lib")
    again = ws.vx("run", "build", env=two)
    assert {tid: c == "miss" for tid, (_s, c) in again.statuses().items()} == {
        "web#build": True,
        "spa#build": True,
        "lib#build": False,
    }
    assert seen(ws, "web")["NEXT_PUBLIC_API"] == "two"


@pytest.mark.feature("TL-05")
def test_framework_inference_off_keys_and_passes_none_of_it(repo):
    ws = repo.write(turbo_framework_workspace()).commit()
    one, two = {"NEXT_PUBLIC_API": "one"}, {"NEXT_PUBLIC_API": "two"}
    t1, t2 = (
        turbo_dry(ws, one, "--framework-inference=false"),
        turbo_dry(ws, two, "--framework-inference=false"),
    )
    assert t1["web"]["inferred"] == [] and t1["web"]["hash"] == t2["web"]["hash"]
    off = vx_keys(ws, one, "--framework-inference=false")
    assert (
        off == vx_keys(ws, two, "--framework-inference=false")
        and off["web"] != vx_keys(ws, one)["web"]
    )
    run = ws.vx("run", "build", "--framework-inference=false", env=one)
    assert run.code == 0, run.err
    assert "NEXT_PUBLIC_API" not in seen(ws, "web")  # not keyed, so not passed either
    bad = ws.vx("run", "build", "--framework-inference=no")
    assert bad.code == 2 and "--framework-inference" in bad.err


@pytest.mark.feature("TL-05", "KEY-12")
def test_a_next_package_without_build_keys_its_framework_variables_as_turbo_does(repo):
    """Issue 12 (fuzzer): turbo hashes a task whose script the package lacks (`<NONEXISTENT>`)
    with its framework's variables, and its dependants fold that hash; vx's implicit group for
    it keyed none of them, so `app` hit where turbo misses after NEXT_PUBLIC_API changed."""
    files = turbo_framework_workspace()
    del files["packages/web/package.json"]["scripts"]  # a Next package with nothing to build
    files["packages/lib/package.json"]["dependencies"] = {"web": "*"}
    files["turbo.json"]["tasks"]["build"]["dependsOn"] = ["^build"]
    ws = repo.write(files).commit()
    one, two = {"NEXT_PUBLIC_API": "one"}, {"NEXT_PUBLIC_API": "two"}

    t1, t2 = turbo_dry(ws, one), turbo_dry(ws, two)
    assert t1["web"]["inferred"] == ["NEXT_PUBLIC_API"]
    assert t1["web"]["hash"] != t2["web"]["hash"] and t1["lib"]["hash"] != t2["lib"]["hash"]
    off = [turbo_dry(ws, e, "--framework-inference=false")["lib"]["hash"] for e in (one, two)]
    assert off[0] == off[1]

    k1, k2 = vx_keys(ws, one), vx_keys(ws, two)
    assert (k1["web"] != k2["web"], k1["lib"] != k2["lib"]) == (True, True)
    off = [vx_keys(ws, e, "--framework-inference=false")["lib"] for e in (one, two)]
    assert off[0] == off[1]

    first = ws.vx("run", "build", env=one)
    assert first.code == 0, first.err
    again = ws.vx("run", "build", env=two)
    assert again.statuses()["lib#build"][1] == "miss", again.err


@pytest.mark.feature("TL-05")
def test_a_ci_vendor_prefix_is_left_out_of_the_inferred_variables(repo):
    ws = repo.write(turbo_framework_workspace()).commit()
    base = {"TURBO_CI_VENDOR_ENV_KEY": "NEXT_PUBLIC_VERCEL_", "NEXT_PUBLIC_API": "x"}
    assert (
        vx_keys(ws, {**base, "NEXT_PUBLIC_VERCEL_URL": "a"})["web"]
        == vx_keys(ws, {**base, "NEXT_PUBLIC_VERCEL_URL": "b"})["web"]
    )
    assert (
        vx_keys(ws, {**base, "NEXT_PUBLIC_API": "y"})["web"] != vx_keys(ws, base)["web"]
    )  # the rest still keys
    assert turbo_dry(ws, {**base, "NEXT_PUBLIC_VERCEL_URL": "a"})["web"]["inferred"] == [
        "NEXT_PUBLIC_API"
    ]


# ---------------------------------------------------------------- keyed whenever they reach a task

MODE = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/mode.json',JSON.stringify({NODE_ENV:process.env.NODE_ENV,CI:process.env.CI,"
    'LANG:process.env.LANG,NODE_OPTIONS:process.env.NODE_OPTIONS}))"'
)


def mode_workspace(repo, command=MODE, pass_through=("NODE_ENV",)):
    task = {
        "exec": {"command": command, "env": {"passThrough": list(pass_through)}},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    return repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    ).commit()


def built(ws, env: dict[str, str]) -> tuple[str, dict]:
    result = ws.vx("run", "app#build", env=env)
    assert result.code == 0, result.err
    return result.task("app#build")["cache"], json.loads(
        (ws.root / "packages/app/dist/mode.json").read_text()
    )


@pytest.mark.feature("KEY-07")
def test_a_passed_node_env_is_keyed_so_a_dev_build_never_replays_production(repo):
    ws = mode_workspace(repo)
    cache, seen_env = built(ws, {"NODE_ENV": "production"})
    assert (cache, seen_env["NODE_ENV"]) == ("miss", "production")
    cache, seen_env = built(ws, {"NODE_ENV": "development"})
    assert (cache, seen_env["NODE_ENV"]) == ("miss", "development")
    assert built(ws, {"NODE_ENV": "production"})[0] != "miss"  # both modes are kept
    assert built(ws, {"NODE_ENV": "development"})[1]["NODE_ENV"] == "development"


@pytest.mark.feature("KEY-07")
def test_node_options_and_lang_are_keyed_and_ci_is_not_passed_undeclared(repo):
    ws = mode_workspace(repo, pass_through=())
    base = {"LANG": "C.UTF-8", "NODE_OPTIONS": "--no-warnings"}
    assert built(ws, base)[0] == "miss"
    assert built(ws, {**base, "NODE_OPTIONS": "--no-deprecation"})[0] == "miss"
    assert built(ws, {**base, "LANG": "en_US.UTF-8"})[0] == "miss"
    # a heap size builds nothing else; CI does not reach the task, so it cannot change it either
    cache, seen_env = built(
        ws, {**base, "NODE_OPTIONS": "--no-warnings --max-old-space-size=2048", "CI": "true"}
    )
    assert cache != "miss" and "CI" not in seen_env
    declared = mode_workspace(repo, pass_through=("CI",))
    assert built(declared, {**base, "CI": "true"}) == ("miss", {**base, "CI": "true"})
    assert built(declared, {**base, "CI": "1"})[0] == "miss"


@pytest.mark.feature("KEY-07")
@needs("strace")
def test_verify_names_unkeyed_variables_a_task_read_through_proc_environ(repo):
    reads_all = (
        "node -e \"const fs=require('fs');const e=fs.readFileSync('/proc/self/environ','utf8');"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.txt',String(e.length))\""
    )
    ws = mode_workspace(repo, command=reads_all, pass_through=("AWS_REGION", "NODE_ENV"))
    res = ws.vx(
        "run",
        "app#build",
        "--verify=inputs",
        env={"AWS_REGION": "eu-west-1", "NODE_ENV": "production"},
    )
    assert res.code == 1, res.err
    assert res.out.splitlines()[-4:] == [
        "app#build read 1 undeclared input:",
        '  $AWS_REGION  add cache.inputs.env: ["AWS_REGION"] (it read /proc/self/environ)',
        "",
        "verify: 1 undeclared input in 1 of 1 traced task",
    ]  # NODE_ENV is keyed: not named
    quiet = mode_workspace(repo, pass_through=("AWS_REGION",))
    res = quiet.vx("run", "app#build", "--verify=inputs", env={"AWS_REGION": "eu-west-1"})
    assert res.code == 0, res.err
    assert "note: app#build gets AWS_REGION (passThrough) outside its key" in res.out


@pytest.mark.feature("TL-05")
def test_a_vx_config_task_in_a_next_package_is_told_about_public_variables_it_was_not_given(
    repo,
):
    task = {
        "exec": {"command": SEEN},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    files = npm_workspace({"web": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    files["packages/web/package.json"]["dependencies"] = {"next": "15.0.0"}
    ws = repo.write(files).commit()
    res = ws.vx("run", "web#build", env={"NEXT_PUBLIC_API": "x"})
    assert res.code == 0, res.err
    assert (
        "web#build: NEXT_PUBLIC_API set but not given to the task: nextjs builds NEXT_PUBLIC_* in; to use it, "
        "list it in exec.env.passThrough and cache.inputs.env"
    ) in res.out + res.err
    task["exec"]["env"] = {"passThrough": ["NEXT_PUBLIC_API"]}
    task["cache"]["inputs"]["env"] = ["NEXT_PUBLIC_API"]
    ws.write({"packages/web/vx.config.json": {"tasks": {"build": task}}}).commit()
    res = ws.vx("run", "web#build", env={"NEXT_PUBLIC_API": "x"})
    assert res.code == 0 and "not given to the task" not in res.out + res.err
    assert seen(ws, "web")["NEXT_PUBLIC_API"] == "x"


@pytest.mark.feature("TL-05")
def test_vx_show_names_the_inferred_framework_and_its_variables(repo):
    ws = repo.write(turbo_framework_workspace()).commit()
    shown = ws.vx("show", "web#build", "--format=json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["tasks"]["build"]["inferredEnv"] == {
        "framework": "nextjs",
        "variables": ["NEXT_PUBLIC_*", "NEXT_DEPLOYMENT_ID"],
    }
    assert (
        "inferredEnv"
        not in json.loads(ws.vx("show", "lib#build", "--format=json").out)["tasks"]["build"]
    )
