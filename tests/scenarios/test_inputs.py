"""Which files are a task's inputs (KEY-18): a file a task declares is keyed whether git tracks it
or not, and turbo.json globs select what turbo's do. Real git, real node scripts, real `vx`."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace
from test_turbo import turbo_workspace

# Reads .env (gitignored) into dist, so a stale hit would be visible in the output too.
ENV_BUILD = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/env.txt',fs.readFileSync('.env','utf8'))\""
)


def caches(result) -> dict[str, str]:
    assert result.code == 0, result.err
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


def dry_inputs(repo, *tasks: str) -> dict[str, list[str]]:
    result = repo.vx("run", *tasks, "--dry=json")
    assert result.code == 0, result.err
    return {t["id"]: sorted(t["inputs"] or ()) for t in json.loads(result.out)["tasks"]}


def turbo_repo(repo, tasks: dict, scripts: dict | None = None, extra: dict | None = None):
    turbo = {"tasks": tasks}
    files = turbo_workspace(turbo, scripts=scripts, extra=extra)
    files[".gitignore"] = "node_modules/\ndist/\n.vx/\n.env\n"
    return repo.write(files).commit()


@pytest.mark.feature("KEY-18")
def test_turbo_default_plus_dot_env_keys_a_gitignored_env(repo):
    """turbo's documented `"inputs": ["$TURBO_DEFAULT$", ".env*"]`: the ignored `.env` is keyed."""
    turbo_repo(
        repo,
        {"build": {"inputs": ["$TURBO_DEFAULT$", ".env*"], "outputs": ["dist/**"]}},
        scripts={"a": {"build": ENV_BUILD}},
        extra={"packages/a/.env": "API=1\n"},
    )
    assert caches(repo.vx("run", "build", "-F", "a"))["a#build"] == "miss"
    assert caches(repo.vx("run", "build", "-F", "a"))["a#build"] == "up-to-date"
    (repo.root / "packages/a/.env").write_text("API=2\n")
    again = repo.vx("run", "build", "-F", "a")
    assert caches(again)["a#build"] == "miss"
    assert (repo.root / "packages/a/dist/env.txt").read_text() == "API=2\n"
    assert "matched no files" not in again.err
    assert "packages/a/.env" in dry_inputs(repo, "build")["a#build"]


@pytest.mark.feature("KEY-18")
def test_a_vx_config_naming_a_gitignored_env_keys_it(repo):
    task = build_task(deps=(), command=ENV_BUILD, inputs=("src/**", ".env"))
    files = npm_workspace({"a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    files[".gitignore"] += ".env\n"
    repo.write(files).commit()
    (repo.root / "packages/a/.env").write_text("API=1\n")
    first = repo.vx("run", "build")
    assert caches(first)["a#build"] == "miss" and "matched no files" not in first.err
    (repo.root / "packages/a/.env").write_text("API=2\n")
    assert caches(repo.vx("run", "build"))["a#build"] == "miss"
    assert (repo.root / "packages/a/dist/env.txt").read_text() == "API=2\n"


@pytest.mark.feature("KEY-18")
def test_a_bare_double_star_keeps_to_what_git_lists(repo):
    """`**` alone reaches no ignored file: a tool's cache file beside the sources (`.eslintcache`)
    must not re-key the task on every run."""
    lint = {
        "exec": {
            "command": "node -e \"require('fs').writeFileSync('.eslintcache', String(Date.now()))\""
        },
        "cache": {"inputs": {"files": ["**"]}, "outputs": {"files": []}},
    }
    files = npm_workspace({"a": {"tasks": {"lint": lint}, "files": {"src/a.js": "A;"}}})
    files[".gitignore"] += ".eslintcache\n"
    repo.write(files).commit()
    assert caches(repo.vx("run", "lint"))["a#lint"] == "miss"
    assert caches(repo.vx("run", "lint"))["a#lint"] in ("up-to-date", "local")
    assert "packages/a/.eslintcache" not in dry_inputs(repo, "lint")["a#lint"]


@pytest.mark.feature("KEY-18")
def test_turbo_inputs_naming_gitignored_build_outputs_key_them(repo):
    """floating-ui's `publint`: `"inputs": ["dist/**"]`, the dist the build wrote (gitignored).
    A changed dist is a miss, as under turbo, and no "matched no files" is said."""
    publint = "node -e \"console.log(require('fs').readFileSync('dist/out.js','utf8'))\""
    turbo_repo(
        repo,
        {"build": {"outputs": ["dist/**"]}, "publint": {"inputs": ["dist/**"]}},
        scripts={"a": {"publint": publint}},
    )
    assert caches(repo.vx("run", "build", "-F", "a"))["a#build"] == "miss"
    first = repo.vx("run", "publint", "-F", "a")
    assert caches(first)["a#publint"] == "miss" and "matched no files" not in first.err
    assert caches(repo.vx("run", "publint", "-F", "a"))["a#publint"] == "up-to-date"
    (repo.root / "packages/a/dist/out.js").write_text("patched by hand\n")
    again = repo.vx("run", "publint", "-F", "a")
    assert caches(again)["a#publint"] == "miss"


@pytest.mark.feature("KEY-18")
def test_inputs_a_dependency_writes_during_the_run_are_never_saved_stale(repo):
    """Keys are planned before anything runs: an input glob naming what an upstream task of the
    same run writes (`dist/**` after `build`) sees the files only then. The re-check withholds
    that save rather than cache a key planned without them; no "matched no files" is said, since
    the glob matches by the time the task runs."""
    publint = "node -e \"console.log(require('fs').readFileSync('dist/out.js','utf8'))\""
    turbo_repo(
        repo,
        {
            "build": {"outputs": ["dist/**"]},
            "publint": {"dependsOn": ["build"], "inputs": ["dist/**"]},
        },
        scripts={"a": {"publint": publint}},
    )
    first = repo.vx("run", "publint", "-F", "a")
    assert caches(first)["a#publint"] == "miss" and "matched no files" not in first.err
    assert "not saved to the cache: input changed while it ran: packages/a/dist/" in first.err
    assert (
        caches(repo.vx("run", "publint", "-F", "a"))["a#publint"] == "miss"
    )  # the build a hit: saved
    assert caches(repo.vx("run", "publint", "-F", "a"))["a#publint"] == "up-to-date"


@pytest.mark.feature("KEY-18")
def test_an_ignored_input_changed_while_the_task_ran_withholds_the_save(repo):
    """KEY-21 covers ignored inputs: a task that rewrites the `.env` it reads is not saved."""
    command = "node -e \"require('fs').appendFileSync('.env','X=1\\n')\""
    task = {
        "exec": {"command": command},
        "cache": {"inputs": {"files": ["src/**", ".env"]}, "outputs": {"files": []}},
    }
    files = npm_workspace(
        {"a": {"tasks": {"gen": task}, "files": {"src/a.js": "A;", ".env": "A=1\n"}}}
    )
    files[".gitignore"] += ".env\n"
    repo.write(files).commit()
    result = repo.vx("run", "gen")
    assert result.code == 0, result.err
    assert "input changed while it ran: packages/a/.env" in result.err


@pytest.mark.feature("KEY-18")
def test_a_new_ignored_file_in_a_walked_ignored_dir_withholds_the_save(repo):
    """The re-check re-walks the ignored dirs the globs reach: a file appearing there counts."""
    command = "node -e \"require('fs').writeFileSync('gen/late.js','L;')\""
    task = {
        "exec": {"command": command},
        "cache": {"inputs": {"files": ["gen/**"]}, "outputs": {"files": []}},
    }
    files = npm_workspace({"a": {"tasks": {"gen": task}, "files": {"gen/early.js": "E;"}}})
    files[".gitignore"] += "gen/\n"
    repo.write(files).commit()
    result = repo.vx("run", "gen")
    assert result.code == 0, result.err
    assert "input changed while it ran: packages/a/gen/late.js" in result.err


@pytest.mark.feature("KEY-18")
def test_turbo_character_classes_and_braces_match_as_in_turbo(repo):
    turbo_repo(
        repo,
        {"lint": {"inputs": ["src/**/*.[jt]s", "{conf,cfg}/*.json", "!src/skip.ts"]}},
        extra={
            "packages/a/src/x.ts": "x\n",
            "packages/a/src/y.tsx": "y\n",
            "packages/a/src/skip.ts": "s\n",
            "packages/a/conf/a.json": "{}",
            "packages/a/cfg/b.json": "{}",
            "packages/a/other/c.json": "{}",
        },
    )
    first = repo.vx("run", "lint", "-F", "a")
    assert caches(first)["a#lint"] == "miss" and "matched no files" not in first.err
    (repo.root / "packages/a/src/x.ts").write_text("x2\n")
    assert caches(repo.vx("run", "lint", "-F", "a"))["a#lint"] == "miss"
    got = dry_inputs(repo, "lint")["a#lint"]
    assert got == [
        "package.json",  # the root's, as turbo keys it
        "packages/a/cfg/b.json",
        "packages/a/conf/a.json",
        "packages/a/src/index.js",
        "packages/a/src/x.ts",
    ]


@pytest.mark.feature("KEY-18")
def test_a_turbo_root_task_reaches_into_the_packages(repo):
    """`//#format:check` with `"inputs": ["packages/**"]` keys the packages' files, as turbo does."""
    turbo_repo(repo, {"//#format:check": {"inputs": ["packages/**/*.js", "!**/node_modules/**"]}})
    manifest = json.loads((repo.root / "package.json").read_text())
    manifest["scripts"]["format:check"] = "node -e \"console.log('checked')\""
    (repo.root / "package.json").write_text(json.dumps(manifest))
    repo.commit()
    assert caches(repo.vx("run", "format:check"))["//#format:check"] == "miss"
    assert caches(repo.vx("run", "format:check"))["//#format:check"] == "up-to-date"
    (repo.root / "packages/b/src/index.js").write_text("export const b = 2;\n")
    assert caches(repo.vx("run", "format:check"))["//#format:check"] == "miss"
    got = dry_inputs(repo, "format:check")["//#format:check"]
    assert got == [f"packages/{n}/src/index.js" for n in "abc"]


@pytest.mark.feature("KEY-18")
def test_affected_reaches_a_turbo_root_task_through_its_package_globs(repo):
    """`--affected` seeds `//#format:check` when a package file its `packages/**` inputs name changes."""
    turbo_repo(repo, {"//#format:check": {"inputs": ["packages/**/*.js"]}, "lint": {}})
    manifest = json.loads((repo.root / "package.json").read_text())
    manifest["scripts"]["format:check"] = "node -e \"console.log('checked')\""
    (repo.root / "package.json").write_text(json.dumps(manifest))
    repo.commit()
    repo.git("checkout", "-q", "-b", "feature")
    (repo.root / "packages/b/src/index.js").write_text("export const b = 2;\n")
    result = repo.vx("run", "format:check", "lint", "--affected")
    assert result.code == 0, result.err
    assert "//#format:check" in result.statuses()
