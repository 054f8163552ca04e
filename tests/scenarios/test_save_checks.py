"""What is judged after a task ran, before its result is saved: the input re-check (KEY-21), the
lockfiles (EX-19), processes a task left behind, and what an unsaved task says about it."""

import os
import time

import pytest
from support.store import assert_saved_as_left
from support.workspace import build_task, npm_workspace, one_build

COPY = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/out.js',fs.readFileSync('src/a.js'))\""
)


def artifacts(repo):
    return sorted((repo.root / ".vx" / "cache").glob("*.tar.zst"))


@pytest.mark.feature("KEY-21")
def test_same_bytes_rewrite_keeps_the_task_and_its_dependants_cached(repo):
    """Item 1 (edge-runtime's primitives build): a build regenerates a tracked input with the
    bytes it already had; the task and everything downstream are saved and hit next time."""
    regen = (
        "node -e \"const fs=require('fs');const p='load/package.json';const b=fs.readFileSync(p);"
        "fs.unlinkSync(p);fs.writeFileSync(p,b);fs.mkdirSync('dist',{recursive:true});"
        "fs.writeFileSync('dist/out.js',b)\""
    )
    prim = build_task(deps=(), command=regen, inputs=("load/**", "src/**"))
    repo.write(
        npm_workspace(
            {
                "primitives": {
                    "tasks": {"build": prim},
                    "files": {"load/package.json": '{"name": "load"}\n', "src/a.js": "P;"},
                },
                "runtime": {
                    "deps": ["primitives"],
                    "tasks": {"build": build_task(command=COPY)},
                    "files": {"src/a.js": "R;"},
                },
            }
        )
    ).commit()
    first = repo.vx("run", "build", "--all")
    assert first.code == 0, first.err
    assert "not saved" not in first.err
    assert len(artifacts(repo)) == 2
    again = repo.vx("run", "build", "--all")
    assert again.code == 0, again.err
    assert set(again.statuses().values()) == {("success", "up-to-date")}


@pytest.mark.feature("KEY-21")
def test_fresh_checkout_inside_the_racy_window_still_saves(repo):
    """Item 5: a file written just before `vx run` (a fresh clone, a test's setup) has an mtime
    inside the re-check's racy window; nothing edits it while the task runs, so it is saved. The
    mtime is set ahead of the clock, so it lands in the window whatever the machine's speed."""
    repo.write(one_build(COPY, "docs", "DOCS;")).commit()
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(repo.root / "packages/docs/src/a.js", ns=(ahead, ahead))
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert "not saved" not in res.err
    assert len(artifacts(repo)) == 1
    (repo.root / "packages/docs/dist/out.js").unlink()
    again = repo.vx("run", "build", "--all")
    assert again.statuses()["docs#build"] == ("success", "local")


@pytest.mark.feature("KEY-21")
def test_real_edit_inside_the_racy_window_is_still_refused(repo):
    """Item 5's other half: the same racy file, edited by the task while it runs, is not saved."""
    edit = (
        "node -e \"const fs=require('fs');fs.appendFileSync('src/a.js','//edited');"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js','x')\""
    )
    repo.write(one_build(edit, "docs", "DOCS;")).commit()
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(repo.root / "packages/docs/src/a.js", ns=(ahead, ahead))
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert "input changed while it ran: packages/docs/src/a.js" in res.err
    assert artifacts(repo) == []


@pytest.mark.feature("KEY-21")
def test_unsaved_dependants_say_why_in_the_run_and_in_vx_why(repo):
    """Item 2: every task that is not saved says why, once: the one whose input moved, and each
    dependant, naming the upstream task at the root of it; `vx why` repeats it until a save."""
    edit = (
        "node -e \"const fs=require('fs');if(process.env.EDIT)fs.appendFileSync('src/a.js','//e');"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js','a')\""
    )
    a = build_task(deps=(), command=edit)
    a["exec"]["env"] = {"passThrough": ["EDIT"]}
    repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": a}, "files": {"src/a.js": "A;"}},
                "b": {
                    "deps": ["a"],
                    "tasks": {"build": build_task(command=COPY)},
                    "files": {"src/a.js": "B;"},
                },
                "c": {
                    "deps": ["b"],
                    "tasks": {"build": build_task(command=COPY)},
                    "files": {"src/a.js": "C;"},
                },
            }
        )
    ).commit()
    res = repo.vx("run", "build", "--all", env={"EDIT": "1"})
    assert res.code == 0, res.err
    root = "a#build was not saved (input changed while it ran: packages/a/src/a.js)"
    for task in ("b#build", "c#build"):
        assert res.err.count(f"{task}: not saved to the cache: upstream {root}") == 1, res.err
    assert artifacts(repo) == []
    why = repo.vx("why", "c#build", summary=False)
    assert why.code == 0 and f"not saved: upstream {root}" in why.out, why.out
    assert (
        "input changed while it ran: packages/a/src/a.js"
        in repo.vx("why", "a#build", summary=False).out
    )
    repo.git("checkout", "--", "packages/a/src/a.js")
    saved = repo.vx("run", "build", "--all")
    assert saved.code == 0 and "not saved" not in saved.err, saved.err
    assert "not saved" not in repo.vx("why", "c#build", summary=False).out


@pytest.mark.feature("EX-11")
def test_background_writer_is_stopped_before_the_outputs_are_read(repo):
    """Item 3: a task that exits 0 while a process it started still runs. The writer blocks on a
    FIFO nobody opens, and writes dist/late.txt when it is stopped: vx must stop it (and say so)
    before it reads the outputs, so the saved entry holds exactly what is on disk."""
    # The shell exits only once the writer's trap is set (its mark, outside the workspace): a
    # stop that came first would find no trap to write late.txt with.
    armed = repo.root.parent / "armed"
    cmd = (
        f"rm -f gate {armed} && mkfifo gate && mkdir -p dist && echo early > dist/a.txt && "
        f"(trap 'echo late > dist/late.txt; exit 0' TERM; : > {armed}; cat gate) >/dev/null 2>&1 & "
        f"while [ ! -e {armed} ]; do sleep 0.01; done; exit 0"
    )
    repo.write(one_build(cmd)).commit()
    res = repo.vx("run", "build", "--all", env={"VX_KILL_GRACE_MS": "100"})
    assert res.code == 0, res.err
    assert "app#build: processes it started in the background were still running" in res.err, (
        res.err
    )
    assert_saved_as_left(repo)


@pytest.mark.feature("EX-19")
def test_lockfile_rewritten_mid_run_stops_hits_and_saves(repo):
    """Item 4 (EX-19): a root install task rewrites package-lock.json mid-run. Every key of the run
    was taken on the old lockfile, so a later task is neither restored from nor saved under it,
    and a line names the file."""
    install = {
        "exec": {
            "command": 'if [ -n "$LOCK" ]; then printf \'%s\\n\' "$LOCK" > package-lock.json; fi',
            "env": {"passThrough": ["LOCK"]},
        }
    }
    lock_copy = (
        "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
        "fs.writeFileSync('dist/out.js',fs.readFileSync('../../package-lock.json'))\""
    )
    files = npm_workspace(
        {
            "app": {
                "tasks": {"build": build_task(deps=("//#install",), command=lock_copy)},
                "files": {"src/a.js": "A;"},
            }
        }
    )
    files["vx.config.json"] = {"tasks": {"install": install}}
    files["package-lock.json"] = '{"v": 1}\n'
    repo.write(files).commit()
    first = repo.vx("run", "app#build")
    assert first.code == 0, first.err
    assert len(artifacts(repo)) == 1
    res = repo.vx("run", "app#build", env={"LOCK": '{"v": 2}'})
    assert res.code == 0, res.err
    assert "package-lock.json changed during the run (after //#install ran)" in res.err, res.err
    assert res.statuses()["app#build"] == ("success", "miss")
    assert (repo.root / "packages/app/dist/out.js").read_text() == '{"v": 2}\n'
    assert "app#build: not saved to the cache: package-lock.json changed during the run" in res.err
    assert len(artifacts(repo)) == 1


def _generator_project(repo):
    """app: an uncached `gen` that rewrites src/gen.js from $V, then a cached `build` of src/."""
    gen = {
        "exec": {
            "command": "node -e \"require('fs').writeFileSync('src/gen.js','GEN'+process.env.V+';')\"",
            "env": {"passThrough": ["V"]},
        }
    }
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {"gen": gen, "build": build_task(deps=("gen",))},
                    "files": {"src/a.js": "A;", "src/gen.js": "GEN0;"},
                },
                "web": {
                    "deps": ["app"],
                    "tasks": {"build": build_task()},
                    "files": {"src/w.js": "W;"},
                },
            }
        )
    ).commit()


@pytest.mark.feature("KEY-20")
def test_task_after_a_same_project_rewriter_is_keyed_late_and_saved(repo):
    """Item 6 (KEY-20): `gen` (no cache) rewrites its own project's sources before `build` of the
    same project. build is keyed once gen ran, on what gen wrote: saved on the first run, and so
    is web#build downstream (which folds build's key). gen's own key folds its project as it was
    before it ran, so the second run re-keys once more (the tree now holds GEN1); the third hits."""
    _generator_project(repo)
    first = repo.vx("run", "build", "--all", env={"V": "1"})
    assert first.code == 0, first.err
    assert "not saved" not in first.err, first.err
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;GEN1;"
    assert len(artifacts(repo)) == 2
    second = repo.vx("run", "build", "--all", env={"V": "1"})
    assert second.code == 0 and "not saved" not in second.err, second.err
    again = repo.vx("run", "build", "--all", env={"V": "1"})
    assert again.code == 0, again.err
    assert again.statuses()["app#build"] == ("success", "up-to-date")
    assert again.statuses()["web#build"] == ("success", "up-to-date")


@pytest.mark.feature("KEY-20")
def test_key_taken_before_the_rewrite_is_never_a_hit(repo):
    """KEY-20's correctness half: the worktree holds what gen wrote last time, a hit under the
    key taken up front; gen now writes something else, and build must run on that."""
    _generator_project(repo)
    assert repo.vx("run", "build", "--all", env={"V": "1"}).code == 0
    assert repo.vx("run", "build", "--all", env={"V": "1"}).code == 0  # up front: GEN1 is on disk
    res = repo.vx("run", "build", "--all", env={"V": "2"})
    assert res.code == 0, res.err
    assert res.statuses()["app#build"] == ("success", "miss")
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;GEN2;"


@pytest.mark.feature("KEY-20")
def test_a_root_rewriter_keys_every_project_downstream_late(repo):
    """A root `//#gen` without a cache (a prisma or graphql codegen at the root) rewrites
    packages/app/src/gen.js before app#build. Only a rewriter of the task's own project made its
    key late, so app#build kept the key of what the tree held before gen ran: a hit on the
    outputs built from the old generated file."""
    gen = {
        "exec": {
            "command": "node -e \"require('fs').writeFileSync('packages/app/src/gen.js',"
            "'GEN'+process.env.V+';')\"",
            "env": {"passThrough": ["V"]},
        }
    }
    files = npm_workspace(
        {
            "app": {
                "tasks": {"build": build_task(deps=("//#gen",))},
                "files": {"src/a.js": "A;", "src/gen.js": "GEN0;"},
            }
        }
    )
    files["vx.config.json"] = {"tasks": {"gen": gen}}
    repo.write(files).commit()
    assert repo.vx("run", "app#build", env={"V": "1"}).code == 0
    assert repo.vx("run", "app#build", env={"V": "1"}).code == 0  # up front: GEN1 is on disk
    res = repo.vx("run", "app#build", env={"V": "2"})
    assert res.code == 0, res.err
    assert res.statuses()["app#build"] == ("success", "miss")
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;GEN2;"


# api's codegen: writes packages/web/src/gen.js from the workspace's schema (schema/value.txt at
# the root), which is outside api's project and so outside generate's key: a change to api's own
# files changes generate's key and, folded, web#build's, which would hide the stale hit.
SIBLING_GEN = (
    "const fs=require('fs');const v=fs.readFileSync('../../schema/value.txt','utf8').trim();"
    "fs.writeFileSync('../web/src/gen.js','GEN:'+v+';');"
)
CONCAT = (
    "const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "const s=fs.readdirSync('src').sort().map(f=>fs.readFileSync('src/'+f,'utf8')).join('');"
    "fs.writeFileSync('dist/out.js',s);"
)


def _stale_sibling_run(repo, task: str) -> None:
    """Two runs with the schema's value V1 (the second saves web#build under a key that folds
    the V1 file generate left in web/src), then V2: generate writes GEN:V2 into web/src before
    web#build, whose key taken up front still sees GEN:V1 on disk."""
    for _ in range(2):
        res = repo.vx("run", task)
        assert res.code == 0, res.err
    assert (repo.root / "packages/web/dist/out.js").read_text() == "GEN:V1;W;"
    assert repo.vx("run", task).statuses()["web#build"] == ("success", "up-to-date")
    (repo.root / "schema/value.txt").write_text("V2\n")
    res = repo.vx("run", task)
    assert res.code == 0, res.err
    assert res.statuses()["web#build"] == ("success", "miss")
    assert (repo.root / "packages/web/dist/out.js").read_text() == "GEN:V2;W;"


@pytest.mark.feature("KEY-20")
def test_an_uncached_task_of_another_project_writing_its_sources_keys_it_late(repo):
    """Known limit lifted: `api#generate` (no cache) writes packages/web/src/gen.js from the
    workspace's schema, and `web#build` depends on it. Only an uncached task of a task's own project
    (or the root) made its key late, so web#build kept the key of what web/src held before
    generate ran: once api's value changed, a hit on dist built from the old generated file."""
    files = npm_workspace(
        {
            "api": {
                "tasks": {"generate": {"exec": {"command": "node gen.js"}}},
                "files": {"gen.js": SIBLING_GEN, "src/api.js": "API;"},
            },
            "web": {
                "tasks": {"build": build_task(deps=("api#generate",), command="node build.js")},
                "files": {"build.js": CONCAT, "src/gen.js": "GEN:V0;", "src/w.js": "W;"},
            },
        }
    )
    files["schema/value.txt"] = "V1\n"
    repo.write(files).commit()
    _stale_sibling_run(repo, "web#build")


@pytest.mark.feature("KEY-20")
def test_a_turbo_caret_generate_of_a_dependency_writing_its_sources_keys_it_late(repo):
    """The turbo.json form of the same: `generate` is `cache: false`, `build` dependsOn
    `^generate`, and api's generate (web depends on api) writes packages/web/src/gen.js."""
    files: dict[str, object] = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
        "turbo.json": {
            "tasks": {
                "generate": {"cache": False},
                "build": {"dependsOn": ["^generate"], "outputs": ["dist/**"]},
            }
        },
        "packages/api/package.json": {
            "name": "api",
            "version": "1.0.0",
            "scripts": {"generate": "node gen.js"},
        },
        "packages/api/gen.js": SIBLING_GEN,
        "packages/api/src/api.js": "API;",
        "schema/value.txt": "V1\n",
        "packages/web/package.json": {
            "name": "web",
            "version": "1.0.0",
            "dependencies": {"api": "*"},
            "scripts": {"build": "node build.js"},
        },
        "packages/web/build.js": CONCAT,
        "packages/web/src/gen.js": "GEN:V0;",
        "packages/web/src/w.js": "W;",
    }
    repo.write(files).commit()
    _stale_sibling_run(repo, "web#build")
