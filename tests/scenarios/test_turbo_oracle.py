"""What a Turborepo team's CI job sees is what real turbo (2.11.11, pinned) would have it see: the
same exit for a selection with nothing in it, and the flags of `turbo run` accepted with turbo's
meaning or refused with the reason. The real turbo runs beside vx on the same repository."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from support.remote_servers import CANARY, clone
from support.turbo import small_turborepo, turbo, turbo_binary
from support.workspace import cached_build, npm_workspace


@pytest.fixture(scope="module")
def turbo_bin() -> str:
    return turbo_binary()


@pytest.fixture
def touched_readme(repo):
    """The small Turborepo on `main`, then a branch whose one commit touches only README.md."""
    repo.write(small_turborepo()).commit("init")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write({"README.md": "# the repo, edited\n"}).commit("readme")
    return repo


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args",
    [
        ["--filter=...[HEAD^1]"],  # the CI line of the README, after a README-only commit
        ["--filter=[HEAD^1]"],
        ["--filter=//"],  # only the root, which has no build
        ["--filter=a[HEAD^1]"],
        ["--filter=@nobody/*"],  # a glob that matches no name
        ["--filter=!a", "--filter=!b"],  # excludes that remove everything
        ["--affected"],  # against main: only README.md changed
    ],
)
def test_a_selection_with_nothing_in_it_exits_0_as_in_turbo(touched_readme, turbo_bin, args):
    oracle = turbo(touched_readme, turbo_bin, "run", "build", *args)
    assert oracle.code == 0 and "No tasks were executed" in oracle.out + oracle.err, oracle
    result = touched_readme.vx("run", "build", *args)
    assert result.code == 0, result.err
    assert result.summary is not None and result.summary["tasks"] == []
    said = [line for line in result.err.splitlines() if line.startswith("vx: nothing")]
    assert len(said) == 1, result.err  # one line saying so
    assert not (touched_readme.root / "packages/a/dist").exists()


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args, said",
    [
        (["build", "--filter=nope"], "no package named `nope`"),
        (["build", "--filter=!nope"], "no package named `nope`"),
        (["build", "--filter=...nope[HEAD^1]"], "no package named `nope`"),
        (["build", "--filter=./nowhere"], "no directory `./nowhere`"),
        (["nosuch", "--filter=a"], "no project declares a task named `nosuch`"),
    ],
)
def test_a_filter_naming_what_does_not_exist_is_refused_as_in_turbo(
    touched_readme, turbo_bin, args, said
):
    oracle = turbo(touched_readme, turbo_bin, "run", *args)
    assert oracle.code != 0, oracle  # turbo says 1; vx's refusals exit 2 (docs/cli.md)
    result = touched_readme.vx("run", *args)
    assert result.code == 2 and said in result.err, result.err
    assert "Traceback" not in result.err


# ---------------------------------------------------------------- turbo's flags

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
# a value for each turbo flag that takes one (any other gets "x")
VALUES = {
    "--cache": "local:rw",
    "--cache-workers": "4",
    "--cache-dir": ".vx/other-cache",
    "--concurrency": "2",
    "--filter": "a",
    "--output-logs": "full",
    "--log-order": "grouped",
    "--log-prefix": "auto",
    "--api": "http://127.0.0.1:9",
    "--cwd": "packages/a",
    "--ui": "stream",
    "--remote-cache-timeout": "5",
    "--team": "the-team",
    "--token": "a-token-never-shown",
}


def turbo_flags(repo, binary: str) -> dict[str, bool]:
    """Every long flag of the installed turbo's `turbo run --help`: whether it needs a value."""
    text = turbo(repo, binary, "run", "--help").out
    found = {
        m.group(1): m.group(2) == " <"
        for m in re.finditer(r"^\s+(?:-\w, )?(--[a-z0-9-]+)( <)?", text, re.M)
    }
    assert len(found) > 40, text  # the help was read
    return found


def documented() -> dict[str, str]:
    """docs/cli.md § turbo's flags: each flag of a row's first cell -> the row's vx cell."""
    section = CLI_DOC.read_text().split("## turbo's flags", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `-") and len(cells) >= 2:
            for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][a-z0-9-]*)", cells[0]):
                rows[flag] = cells[1]
    return rows


@pytest.mark.feature("TL-05")
def test_the_flag_table_names_every_flag_of_the_installed_turbo(repo, turbo_bin):
    missing = sorted(set(turbo_flags(repo, turbo_bin)) - set(documented()))
    assert not missing, f"docs/cli.md § turbo's flags has no row for {missing}"


@pytest.mark.feature("TL-05")
def test_every_turbo_flag_is_taken_or_refused_with_its_reason(touched_readme, turbo_bin):
    """Never a did-you-mean of another meaning (`--no-daemon` is not `--no-cache`, `--token` not
    `--only`): what the table says is refused is refused with the reason, the rest runs."""
    rows = documented()
    for flag, takes in sorted(turbo_flags(touched_readme, turbo_bin).items()):
        args = [f"{flag}={VALUES.get(flag, 'x')}"] if takes else [flag]
        result = touched_readme.vx("run", "build", *args, summary=False)
        said = f"{flag}: exit {result.code}\n{result.err}"
        assert "did you mean" not in result.err and "unknown flag" not in result.err, said
        assert "Traceback" not in result.err, said
        if rows[flag].startswith("refused"):
            assert result.code == 2 and "hint: " in result.err, said
        else:
            assert result.code == 0, said


@pytest.mark.feature("TL-05")
def test_token_team_and_api_reach_the_remote_and_the_token_is_never_shown(
    repo, tmp_path, turbo_bin, turbo_server, team
):
    """turbo's `--api --token --team` (CI jobs pass the secret this way) point vx at the same
    remote cache as TURBO_API / TURBO_TOKEN / TURBO_TEAM, and no output, record or history of
    vx holds the token."""
    repo.write(small_turborepo()).commit()
    flags = ["--api", turbo_server.url, f"--token={CANARY}", "--team", team]
    oracle = turbo(repo, turbo_bin, "run", "build", *flags, env={"CI": "true"})
    assert oracle.code == 0 and "Remote caching enabled" in oracle.out, oracle
    first = repo.vx("run", "build", *flags, "--format", "json", env={"CI": "true"})
    assert first.code == 0, first.err
    elsewhere = clone(repo, tmp_path / "elsewhere")
    second = elsewhere.vx("run", "build", "--token", CANARY, *flags[:2], f"--team={team}")
    assert second.code == 0, second.err
    assert set(second.statuses().values()) == {("success", "remote")}, second.err
    last = elsewhere.vx("last")
    record = elsewhere.vx("last", "--format", "json")
    assert "--token '***'" in last.out and "--token '***'" in record.out, last.out
    for said in (first.out, first.err, second.out, second.err, last.out, record.out):
        assert CANARY not in said and CANARY[:12] not in said


# ---------------------------------------------------------------- warnings


def shared_typecheck(inputs: list[str]) -> dict[str, object]:
    """create-turbo's build (`$TURBO_DEFAULT$` and `.env*`, no .env anywhere) and floating-ui's
    shared typecheck, in three packages of which only `a` has tests."""
    files = small_turborepo()
    files["packages/c/package.json"] = {
        **json.loads(json.dumps(files["packages/a/package.json"])),
        "name": "c",
    }
    files["packages/c/src/index.js"] = "export const c = 1;\n"
    for name in ("a", "b", "c"):
        manifest = files[f"packages/{name}/package.json"]
        manifest["scripts"]["typecheck"] = "node -e \"console.log('checked')\""  # type: ignore[index]
        files[f"packages/{name}/tsconfig.json"] = "{}"
    files["packages/a/test/a.test.js"] = "test();\n"
    files["turbo.json"] = {
        "tasks": {
            "build": {
                "dependsOn": ["^build"],
                "inputs": ["$TURBO_DEFAULT$", ".env*"],
                "outputs": ["dist/**"],
            },
            "typecheck": {"dependsOn": ["^typecheck"], "inputs": inputs},
        }
    }
    return files


def warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "warning" in line.lower()]


@pytest.mark.feature("KEY-23")
def test_a_shared_glob_that_matches_nothing_in_some_packages_is_not_warned(repo, turbo_bin):
    """`.env*` beside `$TURBO_DEFAULT$` matches nothing anywhere, `test/**` nothing in b and c:
    both are normal in turbo's model, and neither turbo nor vx says a word, on any miss."""
    repo.write(shared_typecheck(["src/**", "test/**", "tsconfig.json"])).commit()
    oracle = turbo(repo, turbo_bin, "run", "build", "typecheck", "--force")
    assert oracle.code == 0, oracle
    assert ".env" not in oracle.out + oracle.err and "test/**" not in oracle.out + oracle.err
    for _ in range(2):
        result = repo.vx("run", "build", "typecheck", "--force")
        assert result.code == 0, result.err
        assert warnings(result.err) == [], result.err


@pytest.mark.feature("KEY-23")
def test_a_shared_glob_that_matches_nothing_anywhere_is_one_line_naming_turbo_json(repo):
    """A typo in a shared definition (`tests/**` for `test/**`) matches nothing in any package:
    one line for the run, naming turbo.json's field, not vx's `cache.inputs` once per package."""
    repo.write(shared_typecheck(["src/**", "tests/**", "tsconfig.json"])).commit()
    result = repo.vx("run", "typecheck")
    assert result.code == 0, result.err
    assert warnings(result.err) == [
        'vx: warning: turbo.json tasks.typecheck.inputs: "tests/**" matches no file in any '
        "package that runs it"
    ], result.err
    assert repo.vx("run", "typecheck").err.count("warning") == 0  # a hit says nothing


@pytest.mark.feature("KEY-23")
def test_turbo_outputs_that_match_nothing_are_named_per_miss_as_turbo_does(repo, turbo_bin):
    """turbo 2 says `no output files found for task a#build` after each miss whose outputs matched
    nothing, and nothing on a hit; vx says it for the same tasks, naming turbo.json's field."""
    files = small_turborepo()
    files["turbo.json"]["tasks"]["build"]["outputs"] = ["out/**"]  # type: ignore[index]
    repo.write(files).commit()
    for args in (["--force"], []):
        oracle = turbo(repo, turbo_bin, "run", "build", *args)
        assert oracle.code == 0, oracle
        told = re.findall(r"no output files found for task (\S+)\.", oracle.out + oracle.err)
        result = repo.vx("run", "build", *args)
        assert result.code == 0, result.err
        said = re.findall(r"no output files found for task (\S+):", result.err)
        assert sorted(said) == sorted(told) == (["a#build", "b#build"] if args else [])
        for line in warnings(result.err):
            assert line.endswith('check turbo.json tasks.build.outputs ("out/**")'), line


# ---------------------------------------------------------------- shapes of public Turborepos

REWRITE = """const fs = require('fs');
fs.mkdirSync('dist', { recursive: true });
fs.writeFileSync('dist/index.js', fs.readFileSync('src/index.js'));
const manifest = JSON.parse(fs.readFileSync('package.json', 'utf8'));
manifest.exports = { '.': './dist/index.js' };
fs.writeFileSync('package.json', JSON.stringify(manifest, null, 2) + '\\n');
console.log('built');
"""


def rewrites_its_manifest() -> dict[str, object]:
    """trpc's shape: a's build writes dist/ and rewrites its own package.json (adds `exports`),
    and its turbo.json declares both as outputs."""
    files = small_turborepo()
    files["packages/a/package.json"]["scripts"]["build"] = "node build.js"  # type: ignore[index]
    files["packages/a/build.js"] = REWRITE
    files["packages/a/turbo.json"] = {
        "extends": ["//"],
        "tasks": {"build": {"outputs": ["package.json", "dist/**"]}},
    }
    return files


@pytest.mark.feature("LC-08")
def test_a_build_that_rewrites_its_package_json_runs_and_its_entry_gives_it_back(repo, turbo_bin):
    """turbo runs it and caches package.json with dist/; so does vx. The wipe before the miss
    never deletes the tracked package.json (the build reads it), the entry holds the rewritten
    one, and a checkout of the committed one plus a hit gives back the same bytes, as turbo's."""
    repo.write(rewrites_its_manifest()).commit()
    manifest = repo.root / "packages/a/package.json"
    committed = manifest.read_bytes()
    oracle = turbo(repo, turbo_bin, "run", "build")
    assert oracle.code == 0, oracle
    rewritten = manifest.read_bytes()
    assert b'"exports"' in rewritten and rewritten != committed
    repo.git("checkout", "--", ".")
    repo.git("clean", "-fdxq")

    first = repo.vx("run", "build")
    assert first.code == 0, first.err
    assert first.task("a#build")["cache"] == "miss" and "not saved" not in first.err, first.err
    assert manifest.read_bytes() == rewritten  # the build's, never deleted before it ran
    repo.git("checkout", "--", "packages/a/package.json")  # what a fresh CI checkout holds
    shutil.rmtree(repo.root / "packages/a/dist")
    restored = repo.vx("run", "build")
    assert restored.code == 0, restored.err
    assert restored.task("a#build")["cache"] == "local", restored.err
    assert manifest.read_bytes() == rewritten
    assert (repo.root / "packages/a/dist/index.js").read_text() == "export const a = 1;\n"
    # The key folds package.json: the rewritten one is another key (as in turbo), saved once.
    again = [repo.vx("run", "build").task("a#build")["cache"] for _ in range(2)]
    assert again == ["miss", "up-to-date"]
    assert manifest.read_bytes() == rewritten


def named_like_the_root() -> dict[str, object]:
    """The root package.json and packages/a both named `x`; the root has a `check` of its own."""
    files = small_turborepo()
    files["package.json"]["name"] = "x"  # type: ignore[index]
    check = "node -e \"console.log('root checked')\""
    files["package.json"]["scripts"] = {"check": check}  # type: ignore[index]
    files["packages/a/package.json"]["name"] = "x"  # type: ignore[index]
    files["packages/b/package.json"]["dependencies"] = {"x": "*"}  # type: ignore[index]
    files["turbo.json"]["tasks"]["//#check"] = {}  # type: ignore[index]
    return files


@pytest.mark.feature("WS-04")
def test_a_member_named_like_the_root_runs_as_in_turbo(repo, turbo_bin):
    """turbo calls the root `//`, never by its package.json name, so a member named like it is
    that member (`x#build`), and the root's own task stays `//#check`."""
    repo.write(named_like_the_root()).commit()
    oracle = turbo(repo, turbo_bin, "run", "build", "--dry=json")
    assert oracle.code == 0, oracle
    planned = {t["taskId"]: sorted(t["dependencies"]) for t in json.loads(oracle.out)["tasks"]}
    assert planned == {"x#build": [], "b#build": ["x#build"]}, planned
    result = repo.vx("run", "build")
    assert result.code == 0, result.err
    assert sorted(result.statuses()) == ["b#build", "x#build"]
    assert (repo.root / "packages/a/dist/o").exists()
    root = repo.vx("run", "//#check", "--output-logs=full")
    assert root.code == 0 and "root checked" in root.out + root.err, root.err


@pytest.mark.feature("WS-04")
def test_a_member_named_like_the_root_under_vx_configs_is_that_member(repo):
    """The same with vx's own configs: the root is `//` there too, addressed as `//#name`."""
    files = npm_workspace(
        {"a": {"tasks": {"build": cached_build()}}, "b": {"tasks": {"build": cached_build()}}},
        root_extra={"name": "a"},
    )
    files["vx.config.json"] = {"tasks": {"hello": {"exec": {"command": "echo root-hello"}}}}
    repo.write(files).commit()
    result = repo.vx("run", "build", "//#hello", "--all", "--output-logs=full")
    assert result.code == 0, result.err
    assert sorted(result.statuses()) == ["//#hello", "a#build", "b#build"]
    assert "root-hello" in result.out + result.err
    assert (repo.root / "packages/a/dist/o").exists()


def climbing_input(demo_builds: bool) -> dict[str, object]:
    """`../../shared.config.ts` in the root build's inputs: the workspace's file from packages/a,
    a file outside the repository from `demo` (one level deep), whose build is a no-op unless
    `demo_builds`."""
    files = small_turborepo()
    del files["packages/b/package.json"], files["packages/b/src/index.js"]
    files["package.json"]["workspaces"] = ["packages/*", "demo"]  # type: ignore[index]
    files["turbo.json"] = {"tasks": {"build": {"inputs": ["src/**", "../../shared.config.ts"]}}}
    files["shared.config.ts"] = "export default {};\n"
    scripts = {"build": files["packages/a/package.json"]["scripts"]["build"]}  # type: ignore[index]
    files["demo/package.json"] = {"name": "demo", "version": "1.0.0"}
    if demo_builds:
        files["demo/package.json"]["scripts"] = scripts  # type: ignore[index]
    files["demo/src/index.js"] = "export const demo = 1;\n"
    return files


@pytest.mark.feature("TL-05")
def test_an_input_leaving_the_workspace_refuses_only_a_task_the_run_runs(repo, turbo_bin):
    """turbo runs `--filter=./packages/*` whatever demo's inputs say; so does vx, and a run of
    everything too while demo's build is a no-op. Once demo has a build, turbo keys a file outside
    the repository for it; vx refuses a run that reaches demo#build (exit 2, naming turbo.json's
    field) and still runs one that does not."""
    (repo.root.parent / "shared.config.ts").write_text("outside\n")
    repo.write(climbing_input(demo_builds=False)).commit()
    for args in (["--filter=./packages/*"], []):
        oracle = turbo(repo, turbo_bin, "run", "build", *args)
        assert oracle.code == 0, oracle
        result = repo.vx("run", "build", *args)
        assert result.code == 0, result.err
        assert sorted(result.statuses()) == ["a#build"], result.err

    repo.write(climbing_input(demo_builds=True)).commit("demo builds")
    oracle = turbo(repo, turbo_bin, "run", "build", "--filter=demo", "--dry=json")
    assert oracle.code == 0, oracle
    (demo,) = json.loads(oracle.out)["tasks"]
    assert "../../shared.config.ts" in demo["inputs"]  # outside the repository
    for argv in (["build", "--filter=demo"], ["build"], ["demo#build"]):
        refused = repo.vx("run", *argv)
        assert refused.code == 2, refused.err
        assert (
            "input `../../shared.config.ts` of demo#build leaves the workspace" in refused.err
            and "in: turbo.json, tasks.build.inputs" in refused.err
            and "hint: " in refused.err
            and "Traceback" not in refused.err
        ), refused.err
    kept = repo.vx("run", "build", "--filter=./packages/*")
    assert kept.code == 0 and sorted(kept.statuses()) == ["a#build"], kept.err


def dry_plan(text: str, id_key: str, deps_key: str) -> dict[str, list[str]]:
    return {t[id_key]: sorted(t.get(deps_key) or []) for t in json.loads(text)["tasks"]}


@pytest.mark.feature("WS-20")
def test_a_peer_dependency_is_no_package_graph_edge_as_in_turbo(repo, turbo_bin):
    """analytics-next's shape: b lists a (optionally) as a peer only. turbo 2 builds its package
    graph from dependencies, devDependencies and optionalDependencies, so b#build does not wait
    for a#build; vx plans the same, and an optional dependency stays an edge in both."""
    files = small_turborepo()
    b = files["packages/b/package.json"]
    b["dependencies"] = {}  # type: ignore[index]
    b["peerDependencies"] = {"a": ">=1.0.0"}  # type: ignore[index]
    b["peerDependenciesMeta"] = {"a": {"optional": True}}  # type: ignore[index]
    repo.write(files).commit()
    oracle = turbo(repo, turbo_bin, "run", "build", "--dry=json")
    assert oracle.code == 0, oracle
    planned = dry_plan(repo.vx("run", "build", "--dry=json").out, "id", "deps")
    assert planned == dry_plan(oracle.out, "taskId", "dependencies")
    assert planned == {"a#build": [], "b#build": []}

    b["optionalDependencies"] = {"a": "*"}  # type: ignore[index]
    repo.write(files).commit("optional")
    oracle = turbo(repo, turbo_bin, "run", "build", "--dry=json")
    planned = dry_plan(repo.vx("run", "build", "--dry=json").out, "id", "deps")
    assert planned == dry_plan(oracle.out, "taskId", "dependencies")
    assert planned == {"a#build": [], "b#build": ["a#build"]}


def linked_pages(repo) -> None:
    """packages/site's `pages/docs -> ../docs` (inside the package), `pages/shared ->
    ../../../shared` (a workspace folder) holding `away -> ../other`, a link met below a link;
    `build` keys turbo's default inputs, `lint` the explicit `pages/**`. Committed, then an
    untracked `pages/notes -> ../docs` beside them."""
    files = small_turborepo()
    del files["packages/b/package.json"], files["packages/b/src/index.js"]
    files["packages/a/package.json"]["scripts"]["lint"] = "echo lint"  # type: ignore[index]
    files["turbo.json"]["tasks"] = {"build": {}, "lint": {"inputs": ["pages/**"]}}  # type: ignore[index]
    files.update(
        {
            "packages/a/pages/index.md": "index\n",
            "packages/a/docs/guide.md": "guide\n",
            "shared/s.md": "shared\n",
            "other/o.md": "one\n",
        }
    )
    repo.write(files)
    os.symlink("../docs", repo.root / "packages/a/pages/docs")
    os.symlink("../../../shared", repo.root / "packages/a/pages/shared")
    os.symlink("../other", repo.root / "shared/away")
    repo.commit()
    os.symlink("../docs", repo.root / "packages/a/pages/notes")


def input_sets(repo, turbo_bin) -> tuple[dict, dict, dict, dict]:
    """turbo's and vx's inputs of a#build and a#lint, package-relative, and each one's key."""
    oracle = turbo(repo, turbo_bin, "run", "build", "lint", "--dry=json")
    assert oracle.code == 0, oracle
    dry = repo.vx("run", "build", "lint", "--dry=json")
    assert dry.code == 0, dry.err
    theirs = {t["taskId"]: t["inputs"] for t in json.loads(oracle.out)["tasks"]}
    ours = {
        t["id"]: {
            p.removeprefix("packages/a/"): i
            for p, i in t["inputs"].items()
            if p.startswith("packages/a/")
        }
        for t in json.loads(dry.out)["tasks"]
    }
    hashes = {t["taskId"]: t["hash"] for t in json.loads(oracle.out)["tasks"]}
    keys = {t["id"]: t["key"] for t in json.loads(dry.out)["tasks"]}
    return theirs, ours, hashes, keys


@pytest.mark.feature("KEY-12")
def test_inputs_through_directory_links_are_turbos_and_more(repo, turbo_bin):
    """turbo follows a link to a directory, and a link met below one; vx keys every file turbo
    keys, by the same content, and besides only the links themselves (an untracked link turbo
    keys alone, vx follows too): more keys, never fewer. An edit behind the link below a link
    moves both."""
    linked_pages(repo)
    theirs, ours, hashes, keys = input_sets(repo, turbo_bin)
    for task in ("a#build", "a#lint"):
        for path, ident in theirs[task].items():
            if path == "package.json":  # every vx key folds it, unlisted (caching.md)
                continue
            assert path in ours[task], (task, path, sorted(ours[task]))
            if not path.startswith("pages/notes") and not ours[task][path].startswith("120000:"):
                assert ours[task][path] == ident, (task, path)
        extra = set(ours[task]) - set(theirs[task])
        assert all(
            ours[task][p].startswith("120000:") or p.startswith("pages/notes/") for p in extra
        )
    assert "pages/shared/away/o.md" in ours["a#lint"]
    (repo.root / "other/o.md").write_text("two\n")
    _, _, moved, rekeyed = input_sets(repo, turbo_bin)
    assert moved["a#lint"] != hashes["a#lint"] and rekeyed["a#lint"] != keys["a#lint"]


@pytest.mark.feature("KEY-12")
def test_a_link_out_of_the_workspace_under_default_inputs_is_keyed_as_the_link_as_in_turbo(
    repo, turbo_bin, tmp_path
):
    """turbo's default inputs are git's view, where a committed link to a directory outside the
    workspace is one blob: turbo keys it so, and so does vx (it refused the task). An explicit
    glob that reaches through it is still refused: turbo hashes the files out there."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.js").write_text("O;")
    files = small_turborepo()
    files["packages/a/package.json"]["scripts"]["lint"] = "echo lint"  # type: ignore[index]
    files["turbo.json"]["tasks"]["lint"] = {"inputs": ["ext/**"]}  # type: ignore[index]
    repo.write(files)
    os.symlink(str(outside), repo.root / "packages/a/ext")
    repo.commit()
    oracle = turbo(repo, turbo_bin, "run", "build", "--filter=a", "--dry=json")
    assert oracle.code == 0, oracle
    theirs = json.loads(oracle.out)["tasks"][0]["inputs"]
    dry = repo.vx("run", "build", "--filter=a", "--dry=json")
    assert dry.code == 0, dry.err
    ours = json.loads(dry.out)["tasks"][0]["inputs"]
    assert "ext" in theirs and not any(p.startswith("ext/") for p in theirs)
    assert "packages/a/ext" in ours and not any(p.startswith("packages/a/ext/") for p in ours)
    assert repo.vx("run", "build", "--filter=a").code == 0
    (outside / "x.js").write_text("O2;")  # as in turbo, what is out there keys nothing
    assert repo.vx("run", "build", "--filter=a").task("a#build")["cache"] != "miss"
    lint = repo.vx("run", "lint", "--filter=a")
    assert lint.code == 2 and "input packages/a/ext is a symlink to" in lint.err, lint.err
    assert "out of the task's inputs in turbo.json with `!ext` and `!ext/**`" in lint.err


def cross_project_depends_on() -> dict[str, object]:
    """a <- b by package.json; c and d link to nothing, but turbo.json makes c#build run after
    a#build and d#test after c#test."""
    files = small_turborepo()
    for name in "abcd":
        manifest = files.setdefault(
            f"packages/{name}/package.json", {"name": name, "version": "1.0.0", "scripts": {}}
        )
        assert isinstance(manifest, dict)
        manifest["scripts"] = {"build": "echo built", "test": "echo tested"}
    files["turbo.json"] = {
        "tasks": {
            "build": {"dependsOn": ["^build"]},
            "test": {},
            "c#build": {"dependsOn": ["a#build"]},
            "d#test": {"dependsOn": ["c#test"]},
        }
    }
    return files


@pytest.mark.feature("CLI-40")
def test_filter_walks_follow_package_edges_and_not_depends_on_as_in_turbo(repo, turbo_bin):
    """`...a` is a and the packages that depend on it by package.json, in turbo 2 as in vx: a
    `c#build` that runs after `a#build` brings a#build into a run of c, never c into `...a`. Under
    vx's own configs (migrated) the walks are the same."""
    repo.write(cross_project_depends_on()).commit("init")
    cases = [
        ["build", "--filter=...a"],  # not c, whose build runs after a's
        ["test", "--filter=...c"],  # not d, whose test runs after c's
        ["test", "--filter=d..."],  # d, and c#test as its task's dependency
        ["build", "--filter=c..."],  # c, and a#build as its task's dependency
        ["test", "--filter=...^a"],
    ]
    oracle = {}
    for args in cases:
        dry = turbo(repo, turbo_bin, "run", *args, "--dry=json")
        assert dry.code == 0, dry
        oracle[" ".join(args)] = sorted(t["taskId"] for t in json.loads(dry.out)["tasks"])
    assert oracle["build --filter=...a"] == ["a#build", "b#build"]  # what turbo does, pinned
    for migrated in (False, True):
        if migrated:
            assert repo.vx("migrate").code == 0
        for args in cases:
            dry = repo.vx("run", *args, "--dry=json")
            assert dry.code == 0, dry.err
            got = sorted(t["id"] for t in json.loads(dry.out)["tasks"])
            assert got == oracle[" ".join(args)], (migrated, args)
