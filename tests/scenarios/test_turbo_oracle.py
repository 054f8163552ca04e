"""What a Turborepo team's CI job sees is what real turbo (2.11.11, pinned) would have it see: the
same exit for a selection with nothing in it, and the flags of `turbo run` accepted with turbo's
meaning or refused with the reason. The real turbo runs beside vx on the same repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.remote_servers import CANARY, clone
from support.turbo import small_turborepo, turbo, turbo_binary


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


@pytest.mark.feature("TL-06")
def test_the_flag_table_names_every_flag_of_the_installed_turbo(repo, turbo_bin):
    missing = sorted(set(turbo_flags(repo, turbo_bin)) - set(documented()))
    assert not missing, f"docs/cli.md § turbo's flags has no row for {missing}"


@pytest.mark.feature("TL-06")
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


@pytest.mark.feature("TL-06")
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
