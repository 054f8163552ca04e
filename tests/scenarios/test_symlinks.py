"""Inputs reached through a symlink (KEY-12): git lists the link alone, vx keys what it leads to.

`packages/app/lib -> ../../shared` with `lib/**` declared: the files under `shared/` are the
task's inputs, seen through the link, by content."""

from __future__ import annotations

import json
import os

import pytest
from support.commands import needs
from support.workspace import build_task, npm_workspace

CONCAT = (
    "node -e \"const fs=require('fs');const s=fs.readdirSync('lib').filter(f=>f.endsWith('.js')).sort()"
    ".map(f=>fs.readFileSync('lib/'+f,'utf8')).join('');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/out.js',s)\""
)


def linked(repo, command=CONCAT, link="../../shared", inputs=("lib/**",)):
    task = {
        "exec": {"command": command},
        "cache": {"inputs": {"files": list(inputs)}, "outputs": {"files": ["dist/**"]}},
    }
    files = npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    files["shared/x.js"] = "X1;"
    repo.write(files)
    os.symlink(link, repo.root / "packages/app/lib")
    return repo.commit()


def build(ws) -> tuple[str, str]:
    res = ws.vx("run", "app#build")
    assert res.code == 0, res.err
    return res.task("app#build")["cache"], (ws.root / "packages/app/dist/out.js").read_text()


def replayed(ws) -> bool:
    """Run `vx run build` as a user would (no summary: a receipt may serve it); whether it did. The
    broad run: `vx run app#build` streams its one task's output, and only a broad run is receipted."""
    res = ws.vx("run", "build", summary=False, env={"VX_TIMING": "1"})
    assert res.code == 0, res.err
    return "receipt check" in res.err


@pytest.mark.feature("KEY-12")
def test_an_edit_behind_a_symlinked_input_directory_is_a_miss(repo):
    ws = linked(repo)
    assert build(ws) == ("miss", "X1;")
    (ws.root / "shared/x.js").write_text("X2;")  # dirty, through the link
    assert build(ws) == ("miss", "X2;")
    ws.commit("x2")
    assert build(ws)[0] != "miss"
    (ws.root / "shared/y.js").write_text("Y;")  # a new file behind the link
    assert build(ws) == ("miss", "X2;Y;")
    ws.commit("y")
    assert build(ws)[0] != "miss"
    replayed(ws)  # writes a receipt (a full hit, as a user runs it) ...
    assert replayed(ws)  # ... which serves the repeat ...
    (ws.root / "shared/x.js").write_text("X3;")  # ... and must not once the target moved
    assert not replayed(ws) and (ws.root / "packages/app/dist/out.js").read_text() == "X3;Y;"
    replayed(ws)
    assert replayed(ws)
    (ws.root / "shared/x.js").write_text(
        "X4;"
    )  # dirty twice: git's listing reads the same, the stat does not
    assert not replayed(ws) and (ws.root / "packages/app/dist/out.js").read_text() == "X4;Y;"


@pytest.mark.feature("KEY-12")
def test_the_inputs_seen_through_the_link_are_keyed_by_path_and_content(repo):
    ws = linked(repo)
    dry = ws.vx("run", "app#build", "--dry=json")
    assert dry.code == 0, dry.err
    inputs = json.loads(dry.out)["tasks"][0]["inputs"]
    blob = ws.git("rev-parse", "HEAD:shared/x.js").strip()
    assert inputs["packages/app/lib/x.js"] == blob and inputs["packages/app/lib"].startswith(
        "120000:"
    )
    assert build(ws)[0] == "miss"
    # retargeting the link to another directory with the same bytes under another name re-keys
    (ws.root / "other").mkdir()
    (ws.root / "other/x.js").write_text("X1;")
    os.unlink(ws.root / "packages/app/lib")
    os.symlink("../../other", ws.root / "packages/app/lib")
    assert build(ws)[0] == "miss"


@pytest.mark.feature("KEY-12")
def test_a_link_met_below_a_linked_directory_is_followed_too(repo):
    """`lib -> ../../shared` holding `more -> ../other`: turbo keys `lib/more/m.js` by its content,
    so vx does (keyed as the link alone, an edit in other/ was a hit), and a receipt stops
    serving once a file appears behind it."""
    ws = linked(repo, inputs=("lib/**",))
    (ws.root / "other").mkdir()
    (ws.root / "other/m.js").write_text("M1;")
    os.symlink("../other", ws.root / "shared/more")
    ws.commit("more")
    dry = json.loads(ws.vx("run", "app#build", "--dry=json").out)["tasks"][0]["inputs"]
    assert dry["packages/app/lib/more/m.js"] == ws.git("rev-parse", "HEAD:other/m.js").strip()
    assert build(ws)[0] == "miss"
    assert build(ws)[0] != "miss"
    (ws.root / "other/m.js").write_text("M2;")
    assert build(ws)[0] == "miss"
    replayed(ws)
    assert replayed(ws)
    (ws.root / "other/n.js").write_text("N;")  # a new file behind the inner link
    assert not replayed(ws)
    assert build(ws)[0] != "miss"


@pytest.mark.feature("KEY-21")
def test_a_task_that_edits_an_input_through_the_link_is_not_saved(repo):
    ws = linked(
        repo,
        command=CONCAT.replace(
            "fs.writeFileSync('dist/out.js',s)",
            "fs.writeFileSync('dist/out.js',s);fs.appendFileSync('lib/x.js','//')",
        ),
    )
    res = ws.vx("run", "app#build")
    assert res.code == 0, res.err
    assert "input changed while it ran: packages/app/lib/x.js" in res.err


@pytest.mark.feature("KEY-12")
def test_a_symlinked_file_is_keyed_by_what_it_leads_to(repo):
    ws = linked(
        repo,
        command="node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').copyFileSync('conf.js','dist/out.js')\"",
        inputs=("conf.js",),
    )
    os.symlink("../../shared/x.js", ws.root / "packages/app/conf.js")
    ws.commit("conf")
    assert build(ws) == ("miss", "X1;")
    (ws.root / "shared/x.js").write_text("X2;")
    assert build(ws) == ("miss", "X2;")


@pytest.mark.feature("KEY-12")
def test_an_input_directory_linked_out_of_the_workspace_is_refused_by_name(repo, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.js").write_text("O;")
    ws = linked(repo, link=str(outside))
    res = ws.vx("run", "app#build")
    assert res.code == 2
    assert (
        f"input packages/app/lib is a symlink to {outside}, a directory outside the workspace"
        in res.err
    )
    assert "`!lib`" in res.err and "Traceback" not in res.err
    # taken out of the inputs, the task runs
    task = {
        "exec": {"command": CONCAT},
        "cache": {
            "inputs": {"files": ["src/**", "!lib", "!lib/**"]},
            "outputs": {"files": ["dist/**"]},
        },
    }
    ws.write({"packages/app/vx.config.json": {"tasks": {"build": task}}}).commit()
    ok = ws.vx("run", "app#build")
    assert ok.code == 0, ok.err


@pytest.mark.feature("KEY-12")
def test_a_link_out_of_the_workspace_is_keyed_as_the_link_where_no_glob_declares_it(repo, tmp_path):
    """A task without `cache` and the implicit build key their project's files, not globs the
    user wrote: a committed link out of the workspace is keyed as the link (the path it holds),
    as turbo's default inputs key it, and nothing is refused."""
    outside, moved = tmp_path / "elsewhere", tmp_path / "moved"
    for d in (outside, moved):
        d.mkdir()
        (d / "x.js").write_text("O;")
    uncached = {"exec": {"command": "cat ext/x.js"}}
    files = npm_workspace(
        {
            "lib": {"tasks": {"fmt": uncached}, "files": {"src/l.js": "L;"}},
            "app": {
                "deps": ["lib"],
                "tasks": {"build": build_task(command="node -e \"console.log('built')\"")},
                "files": {"src/a.js": "A;"},
            },
        }
    )
    repo.write(files)
    os.symlink(str(outside), repo.root / "packages/lib/ext")
    ws = repo.commit()
    res = ws.vx("run", "lib#fmt")
    assert res.code == 0 and "O;" in res.out, res.out + res.err

    # app#build folds lib's implicit build, keyed on lib's files: the link among them
    def cache() -> str:
        res = ws.vx("run", "app#build")
        assert res.code == 0, res.out + res.err
        return res.task("app#build")["cache"]

    assert cache() == "miss" and cache() != "miss"
    (outside / "x.js").write_text("O2;")  # what the link leads to is not the workspace's
    assert cache() != "miss"
    os.unlink(ws.root / "packages/lib/ext")
    os.symlink(str(moved), ws.root / "packages/lib/ext")  # the link retargeted re-keys
    assert cache() == "miss"
    ws.commit("moved")
    assert cache() != "miss"


@pytest.mark.feature("KEY-12")
@needs("strace")
def test_verify_counts_a_read_through_the_link_as_the_declared_input(repo):
    ws = linked(repo)
    res = ws.vx("run", "app#build", "--verify=inputs")
    assert res.code == 0, res.out + res.err
    assert res.out.splitlines()[-1] == "verify: every traced task declared what it read (1 task)"


@pytest.mark.feature("KEY-12")
def test_a_file_linked_from_outside_is_keyed_by_content_and_a_receipt_rechecks_it(repo, tmp_path):
    outside = tmp_path / "conf.js"
    outside.write_text("O1;")
    ws = linked(
        repo,
        command="node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').copyFileSync('conf.js','dist/out.js')\"",
        inputs=("conf.js",),
    )
    os.symlink(outside, ws.root / "packages/app/conf.js")
    ws.commit("conf")
    assert build(ws) == ("miss", "O1;")
    assert build(ws)[0] != "miss"
    replayed(ws)
    assert replayed(ws)
    outside.write_text("O2;")
    assert not replayed(ws) and (ws.root / "packages/app/dist/out.js").read_text() == "O2;"


@pytest.mark.feature("SB-03")
@needs("bwrap", "strace")
def test_a_read_grant_through_an_in_repo_link_is_readable_in_the_sandbox(repo):
    ws = linked(repo, command="cat lib/x.js > dist/out.js")
    task = json.loads((ws.root / "packages/app/vx.config.json").read_text())
    task["tasks"]["build"]["exec"]["sandbox"] = {"allow": {"read": ["lib/**"], "write": ["dist/"]}}
    ws.write({"packages/app/vx.config.json": task}).commit()
    res = ws.vx("run", "app#build")
    assert res.code == 0, res.out + res.err
    assert res.task("app#build").get("sandboxViolations") in (None, [])
    assert (ws.root / "packages/app/dist/out.js").read_text() == "X1;"
