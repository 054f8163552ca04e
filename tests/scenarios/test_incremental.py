"""Incremental tools keep their state (issue 16 item 1, docs/caching.md § Incremental tools): a
miss keeps `tsc -b`'s outputs and build info when they are exactly an entry of the task, and what
is saved still equals a clean build — checked against the real TypeScript (5.9.3, pinned in
npm_packages.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from support.npm_packages import installed
from support.workspace import npm_workspace

TSC = "node ../../node_modules/typescript/bin/tsc"
CONFIG = {
    "compilerOptions": {
        "composite": True,
        "outDir": "dist",
        "strict": True,
        "target": "ES2020",
        "module": "ES2020",
        "moduleResolution": "Bundler",
    },
    "include": ["src"],
}


def tsc_task(command: str = f"{TSC} -b --listEmittedFiles", deps=("^build",)) -> dict:
    return {
        "exec": {"command": command},
        "dependsOn": list(deps),
        "cache": {
            "inputs": {"files": ["src/**", "tsconfig.json"]},
            "outputs": {"files": ["dist/**"]},
        },
    }


@pytest.fixture
def ws(repo):
    """lib (three sources, b imports a) and app (reads lib's declarations through `paths`), each
    built by `tsc -b`; the workspace's own typescript linked in as an install would."""
    app_config = json.loads(json.dumps(CONFIG))
    app_config["compilerOptions"]["paths"] = {"lib": ["../lib/dist/src/index.d.ts"]}
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": tsc_task()},
                    "files": {
                        "tsconfig.json": CONFIG,
                        "src/a.ts": "export const a: number = 1;\n",
                        "src/b.ts": "import { a } from './a';\nexport const b = a + 1;\n",
                        "src/c.ts": "export const c = 'c';\n",
                        "src/index.ts": "export * from './a';\nexport * from './b';\n",
                    },
                },
                "app": {
                    "deps": ["lib"],
                    "tasks": {"build": tsc_task()},
                    "files": {
                        "tsconfig.json": app_config,
                        "src/main.ts": "import { a } from 'lib';\nexport const twice = a * 2;\n",
                        "src/other.ts": "export const other = true;\n",
                    },
                },
            }
        )
    ).commit()
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    return repo


def build(repo):
    return repo.vx("run", "build", "--all", "--output-logs=full")


def emitted(result, project: str) -> set[str]:
    """The files tsc said it wrote (`--listEmittedFiles`) for one project, relative to it."""
    base = f"/packages/{project}/"
    return {
        line.split("TSFILE: ", 1)[1].split(base, 1)[1]
        for line in result.out.splitlines()
        if "TSFILE: " in line and base in line
    }


def outputs(repo, project: str) -> dict[str, bytes]:
    dist = repo.root / "packages" / project / "dist"
    return {
        str(p.relative_to(dist)): p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()
    }


def clean_build(repo, project: str) -> dict[str, bytes]:
    """What `tsc -b` writes from nothing, in a copy of the workspace as it is now."""
    copy = repo.root.parent / "clean"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo.root, copy, symlinks=True, ignore=shutil.ignore_patterns(".vx", "dist"))
    order = ["lib", "app"] if project == "app" else ["lib"]
    for name in order:
        subprocess.run(
            [*TSC.split(), "-b"], cwd=copy / "packages" / name, check=True, capture_output=True
        )
    dist = copy / "packages" / project / "dist"
    return {
        str(p.relative_to(dist)): p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()
    }


def same_as_clean(got: dict[str, bytes], clean: dict[str, bytes]) -> None:
    """Byte for byte, but for the build info's `latestChangedDtsFile`: TypeScript records there
    the last declaration that changed, which is history, not the outputs' content."""
    assert sorted(got) == sorted(clean)
    for name in got:
        if name.endswith(".tsbuildinfo"):
            mine, theirs = json.loads(got[name]), json.loads(clean[name])
            mine.pop("latestChangedDtsFile", None), theirs.pop("latestChangedDtsFile", None)
            assert mine == theirs, name
        else:
            assert got[name] == clean[name], name


@pytest.mark.feature("EX-06")
def test_incr_tsc_edit_reemits_only_the_changed_file_and_equals_a_clean_build(ws):
    first = build(ws)
    assert first.code == 0, first.err
    assert {"dist/src/a.js", "dist/src/c.js"} <= emitted(first, "lib"), first.out + first.err

    (ws.root / "packages/lib/src/a.ts").write_text("export const a: number = 2;\n")
    edit = build(ws)
    assert edit.code == 0, edit.err
    assert edit.statuses() == {
        "lib#build": ("success", "miss"),
        "app#build": ("success", "miss"),
    }
    lib = emitted(edit, "lib")
    assert "dist/src/a.js" in lib and "dist/src/c.js" not in lib, lib  # incremental
    assert "dist/src/other.js" not in emitted(edit, "app")  # the dependant is incremental too
    assert "not saved" not in edit.err and "running it again" not in edit.err
    for project in ("lib", "app"):
        same_as_clean(outputs(ws, project), clean_build(ws, project))

    # The entry saved is the same: wiped and restored, it is the clean build again.
    for project in ("lib", "app"):
        shutil.rmtree(ws.root / "packages" / project / "dist")
    restored = build(ws)
    assert set(restored.statuses().values()) == {("success", "local")}
    for project in ("lib", "app"):
        same_as_clean(outputs(ws, project), clean_build(ws, project))


@pytest.mark.feature("EX-06")
def test_incr_a_removed_source_leaves_no_output_in_the_entry(ws):
    """tsc keeps `c.js` when `c.ts` goes (it never deletes an output); the kept run is caught and
    built again from wiped outputs, so neither the workspace nor the entry holds `c.js`."""
    assert build(ws).code == 0
    (ws.root / "packages/lib/src/c.ts").unlink()
    run = build(ws)
    assert run.code == 0, run.err
    assert "left the program" in run.err and "running it again on wiped outputs" in run.err
    lib = ws.root / "packages/lib/dist/src"
    assert not (lib / "c.js").exists() and not (lib / "c.d.ts").exists()
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))
    shutil.rmtree(ws.root / "packages/lib/dist")
    restored = build(ws)
    assert restored.statuses()["lib#build"] == ("success", "local")
    assert not (lib / "c.js").exists()
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))


@pytest.mark.feature("EX-06")
def test_incr_another_tools_leftover_is_not_kept(ws):
    """A task that runs tsc and a bundler naming its chunk by content: after an edit the old chunk
    is no program's output, so the run is repeated on wiped outputs and the entry lacks it."""
    chunk = (
        "node -e \"const fs=require('fs');const n=fs.readFileSync('src/c.ts').length;"
        "fs.writeFileSync('dist/chunk-'+n+'.js','x')\""
    )
    config = ws.root / "packages/lib/vx.config.json"
    config.write_text(json.dumps({"tasks": {"build": tsc_task(f"{TSC} -b && {chunk}")}}))
    ws.commit()
    assert build(ws).code == 0
    old = sorted(p.name for p in (ws.root / "packages/lib/dist").glob("chunk-*"))
    (ws.root / "packages/lib/src/c.ts").write_text("export const c = 'a longer c';\n")
    run = build(ws)
    assert run.code == 0, run.err
    assert f"packages/lib/dist/{old[0]} was kept" in run.err
    now = sorted(p.name for p in (ws.root / "packages/lib/dist").glob("chunk-*"))
    assert len(now) == 1 and now != old


@pytest.mark.feature("EX-06")
def test_incr_outputs_changed_by_hand_are_wiped_not_kept(ws):
    """The tsc -b + clean pitfall: an output gone while the build info stays says "up to date" and
    tsc would emit nothing; outputs that are not exactly an entry are wiped with their state."""
    assert build(ws).code == 0
    (ws.root / "packages/lib/dist/src/c.js").unlink()
    (ws.root / "packages/lib/src/a.ts").write_text("export const a: number = 3;\n")
    run = build(ws)
    assert run.code == 0, run.err
    assert "dist/src/c.js" in emitted(run, "lib")  # from scratch
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))


@pytest.mark.feature("EX-06")
def test_incr_restored_outputs_are_kept_for_the_next_edit(ws):
    """Hit, restore, then edit: a restore writes an entry's outputs with the build info saved with
    them, so the next miss is incremental and still a clean build's outputs."""
    assert build(ws).code == 0
    shutil.rmtree(ws.root / "packages/lib/dist")
    shutil.rmtree(ws.root / "packages/app/dist")
    restored = build(ws)
    assert set(restored.statuses().values()) == {("success", "local")}
    (ws.root / "packages/lib/src/c.ts").write_text("export const c = 'd';\n")
    run = build(ws)
    assert run.code == 0, run.err
    assert run.statuses()["lib#build"] == ("success", "miss")
    assert emitted(run, "lib") >= {"dist/src/c.js"}
    assert "dist/src/a.js" not in emitted(run, "lib")
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))


@pytest.mark.feature("EX-06")
def test_incr_a_cache_taken_out_of_the_outputs_is_neither_wiped_nor_saved(repo):
    """As turbo advises for Next.js: `.next/**` with `!.next/cache/**` keeps the tool's cache
    across a miss's wipe and out of the entry (docs/caching.md § Incremental tools)."""
    command = (
        "node -e \"const fs=require('fs');fs.mkdirSync('.next/cache',{recursive:true});"
        "const runs=fs.existsSync('.next/cache/runs')?fs.readFileSync('.next/cache/runs','utf8'):'';"
        "fs.writeFileSync('.next/cache/runs',runs+'x');"
        "fs.writeFileSync('.next/page.js',fs.readFileSync('src/page.js'))\""
    )
    task = {
        "exec": {"command": command},
        "cache": {
            "inputs": {"files": ["src/**"]},
            "outputs": {"files": [".next/**", "!.next/cache/**"]},
        },
    }
    repo.write(
        npm_workspace({"web": {"tasks": {"build": task}, "files": {"src/page.js": "1;"}}})
    ).commit()
    web = repo.root / "packages/web"
    assert repo.vx("run", "build").code == 0
    (web / "src/page.js").write_text("2;")
    assert repo.vx("run", "build").statuses()["web#build"] == ("success", "miss")
    assert (web / ".next/cache/runs").read_text() == "xx"  # not wiped before the second run
    shutil.rmtree(web / ".next")
    restored = repo.vx("run", "build")
    assert restored.statuses()["web#build"] == ("success", "local")
    assert (web / ".next/page.js").read_text() == "2;"
    assert not (web / ".next/cache").exists()  # not in the entry


@pytest.mark.feature("EX-06")
def test_incr_an_emit_root_that_moves_leaves_no_output_behind(repo):
    """Without `composite` or `rootDir`, tsc roots its emit at the sources' common directory: a
    first file outside `src` moves `dist/a.js` to `dist/src/a.js`, and tsc leaves the old one. A
    kept run whose common directory moved is built again on wiped outputs."""
    config = {
        "compilerOptions": {"incremental": True, "outDir": "dist", "target": "ES2020"},
        "include": ["src", "extra"],
    }
    task = tsc_task(f"{TSC} -p tsconfig.json", deps=())
    task["cache"]["inputs"]["files"].append("extra/**")
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": task},
                    "files": {"tsconfig.json": config, "src/a.ts": "export const a = 1;\n"},
                }
            }
        )
    ).commit()
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    assert build(repo).code == 0
    dist = repo.root / "packages/lib/dist"
    assert (dist / "a.js").exists()
    (repo.root / "packages/lib/extra").mkdir()
    (repo.root / "packages/lib/extra/b.ts").write_text("export const b = 2;\n")
    run = build(repo)
    assert run.code == 0, run.err
    assert "common directory moved" in run.err
    assert (dist / "src/a.js").exists() and not (dist / "a.js").exists()


@pytest.mark.feature("EX-06")
def test_incr_a_touched_build_info_is_still_kept_but_changed_bytes_are_not(ws):
    """`tsc -b` updates the timestamps of the projects it references (another task's outputs):
    a build info touched with its bytes unchanged is still the entry's, and the next miss stays
    incremental. An output rewritten with other bytes of the same size is not: wiped, rebuilt."""
    assert build(ws).code == 0
    info = ws.root / "packages/lib/dist/tsconfig.tsbuildinfo"
    os.utime(info, ns=(info.stat().st_atime_ns, info.stat().st_mtime_ns + 5_000_000_000))
    (ws.root / "packages/lib/src/a.ts").write_text("export const a: number = 4;\n")
    touched = build(ws)
    assert touched.code == 0, touched.err
    assert "dist/src/c.js" not in emitted(touched, "lib")  # kept
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))

    c = ws.root / "packages/lib/dist/src/c.js"
    c.write_bytes(c.read_bytes().replace(b"'c'", b"'x'"))  # same size, other bytes
    (ws.root / "packages/lib/src/a.ts").write_text("export const a: number = 5;\n")
    changed = build(ws)
    assert changed.code == 0, changed.err
    assert "dist/src/c.js" in emitted(changed, "lib")  # wiped: from scratch
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))


@pytest.mark.feature("EX-06")
def test_incr_force_builds_from_wiped_outputs(ws):
    assert build(ws).code == 0
    (ws.root / "packages/lib/src/a.ts").write_text("export const a: number = 6;\n")
    forced = ws.vx("run", "build", "--all", "--force", "--output-logs=full")
    assert forced.code == 0, forced.err
    assert "dist/src/c.js" in emitted(forced, "lib")


def outside_info(repo, config_extra: dict, command: str):
    """One project, lib, built by `command` (a tsc) into dist/**, whose tsconfig or command line
    keeps its build info outside the task's outputs."""
    config = json.loads(json.dumps(CONFIG))
    config["compilerOptions"].update(config_extra)
    if "-b" not in command.split():
        del config["compilerOptions"]["composite"]  # `tsc -p` keeps a build info when told to
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": tsc_task(command, deps=())},
                    "files": {
                        "tsconfig.json": config,
                        "src/a.ts": "export const a: number = 1;\n",
                        "src/c.ts": "export const c = 'c';\n",
                    },
                }
            }
        )
    ).commit()
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    return repo


@pytest.mark.feature("EX-06")
@pytest.mark.parametrize(
    "where",
    [
        ({"tsBuildInfoFile": "cache/lib.tsbuildinfo"}, f"{TSC} -b --listEmittedFiles"),
        ({"rootDir": "src"}, f"{TSC} -b --listEmittedFiles"),
        ({}, f"{TSC} -p . --incremental --tsBuildInfoFile .cache/lib.tsbuildinfo"),
    ],
    ids=["tsBuildInfoFile", "rootDir", "command-line"],
)
@pytest.mark.parametrize("edit", ["source", "other-input"])
def test_a_build_info_outside_the_outputs_never_leaves_an_entry_short(repo, where, edit):
    """The build info lies outside `dist/**` — named by `tsBuildInfoFile` (in the tsconfig or on
    the command line), or put beside the tsconfig by tsc itself when `rootDir` is set. A miss
    wiped `dist` but not it, and tsc, told that everything is emitted, re-emitted only the
    edited `c.ts` (or, after an edit tsc does not read, nothing): the entry saved lacked `a.js`.
    Now every miss builds what a clean build writes, and says why it cannot keep tsc
    incremental."""
    outside_info(repo, *where)
    first = build(repo)
    assert first.code == 0, first.err
    full = outputs(repo, "lib")
    assert any(name.endswith("a.js") for name in full), full
    if edit == "source":
        (repo.root / "packages/lib/src/c.ts").write_text("export const c = 'd';\n")
    else:
        (repo.root / "packages/lib/src/notes.md").write_text("not a source\n")
    again = build(repo)
    assert again.code == 0, again.err
    assert again.statuses() == {"lib#build": ("success", "miss")}
    assert sorted(outputs(repo, "lib")) == sorted(full), again.out + again.err
    assert "outside the task's outputs" in again.err, again.err
    shutil.rmtree(repo.root / "packages/lib/dist")
    hit = build(repo)
    assert hit.statuses() == {"lib#build": ("success", "local")}
    assert sorted(outputs(repo, "lib")) == sorted(full)


# ---------------------------------------------------------------- the date of a kept build info


@pytest.fixture
def refs(repo):
    """lib and app, app referencing lib as a project (`references`, imports through `paths`),
    each built by `tsc -b --verbose`: the verbose lines say which project tsc found up to date."""
    lib_config = json.loads(json.dumps(CONFIG))
    app_config = json.loads(json.dumps(CONFIG))
    app_config["compilerOptions"]["paths"] = {"lib": ["../lib/src/index.ts"]}
    app_config["references"] = [{"path": "../lib"}]
    command = f"{TSC} -b --verbose --listEmittedFiles"
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": tsc_task(command)},
                    "files": {
                        "tsconfig.json": lib_config,
                        "src/a.ts": "export const a = 1;\n",
                        "src/c.ts": "export const c = 'c';\n",
                        "src/index.ts": "export * from './a';\nexport * from './c';\n",
                    },
                },
                "app": {
                    "deps": ["lib"],
                    "tasks": {"build": tsc_task(command)},
                    "files": {
                        "tsconfig.json": app_config,
                        "src/main.ts": "import { a } from 'lib';\nexport const twice = a;\n",
                    },
                },
            }
        )
    ).commit()
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    return repo


def checked_app(result) -> bool:
    """Whether app's `tsc -b` checked app's own project rather than skip it as up to date (its
    `--verbose` lines, in app's block of the log)."""
    log = result.out.split("┌─ app#build", 1)[-1].split("└─ app#build", 1)[0]
    said = [line for line in log.splitlines() if "Project 'tsconfig.json' is" in line]
    assert said, result.out
    return not all(" is up to date" in line for line in said)


def clean_outputs(repo, projects=("lib", "app")) -> dict[str, dict[str, bytes]]:
    """Each project's outputs as `tsc -b` writes them from nothing, in a copy of the workspace."""
    copy = repo.root.parent / "clean"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo.root, copy, symlinks=True, ignore=shutil.ignore_patterns(".vx", "dist"))
    for name in projects:
        subprocess.run(
            [*TSC.split(), "-b"], cwd=copy / "packages" / name, check=True, capture_output=True
        )
    return {
        name: {
            str(p.relative_to(copy / "packages" / name / "dist")): p.read_bytes()
            for p in sorted((copy / "packages" / name / "dist").rglob("*"))
            if p.is_file()
        }
        for name in projects
    }


def all_as_clean(repo, projects=("lib", "app")) -> None:
    clean = clean_outputs(repo, projects)
    for name in projects:
        same_as_clean(outputs(repo, name), clean[name])


def back_in_time(path, seconds: int = 3600) -> None:
    """Give a file an mtime an hour old, as `cp -p`, tar or a package manager would: its ctime
    still says it changed now."""
    old = path.stat().st_mtime_ns - seconds * 1_000_000_000
    os.utime(path, ns=(old, old))


@pytest.mark.feature("EX-06")
def test_incr_an_unchanged_referenced_project_is_skipped_after_an_edit(refs):
    """The one-edit case: an edit that leaves lib's declarations as they were. Before, every kept
    build info was dated to the epoch and app's `tsc -b` checked app again whatever changed; dated
    to when its entry was saved, app is up to date with lib's declarations and tsc skips it. The
    same after a restore (the note a restore takes), and the outputs equal a clean build."""
    assert build(refs).code == 0
    index = refs.root / "packages/lib/src/index.ts"
    index.write_text(index.read_text() + "// a comment\n")
    edit = build(refs)
    assert edit.code == 0, edit.err
    assert edit.statuses() == {"lib#build": ("success", "miss"), "app#build": ("success", "miss")}
    assert not checked_app(edit), edit.out
    all_as_clean(refs)

    subprocess.run(["git", "checkout", "--", "."], cwd=refs.root, check=True)
    back = build(refs)
    assert set(back.statuses().values()) == {("success", "local")}, back.out + back.err
    index.write_text(index.read_text() + "// another comment\n")
    again = build(refs)
    assert again.statuses()["app#build"] == ("success", "miss")
    assert not checked_app(again), again.out
    all_as_clean(refs)


@pytest.mark.feature("EX-06")
def test_incr_a_source_edited_with_an_old_mtime_is_still_built(refs):
    """Danger (a): a root file whose content changed but whose mtime is older than the build
    info's date (`cp -p`, tar, an rsync from another machine) is a file tsc's timestamp check
    skips. Its ctime shows the change: the build info goes to the epoch, tsc compares by content."""
    assert build(refs).code == 0
    a = refs.root / "packages/lib/src/a.ts"
    a.write_text("export const a = 2;\n")
    back_in_time(a)
    run = build(refs)
    assert run.code == 0, run.err
    assert "dist/src/a.js" in emitted(run, "lib")
    all_as_clean(refs)


@pytest.mark.feature("EX-06")
def test_incr_a_source_moved_in_with_an_old_mtime_is_still_built(refs):
    """Danger (a), a new root: a file moved into `src` keeps its old mtime, and tsc, finding a new
    root no newer than the build info, says up to date. The folder tsc takes roots from changed:
    its new file is older than the date, so the build info goes to the epoch."""
    assert build(refs).code == 0
    outside = refs.root / "d.ts.txt"
    outside.write_text("export const d = 'd';\n")
    back_in_time(outside)
    os.rename(outside, refs.root / "packages/lib/src/d.ts")
    run = build(refs)
    assert run.code == 0, run.err
    assert "dist/src/d.js" in emitted(run, "lib")
    all_as_clean(refs)


@pytest.mark.feature("EX-06")
def test_incr_an_upstream_restored_to_an_older_state_is_not_taken_as_up_to_date(ws):
    """Danger (b): lib goes back to an older entry (a restore writes its declarations with the
    mtimes they were saved with, older than app's date) while app misses with its outputs kept.
    app's `tsc -b` looks at none of lib's files: dated, it would keep the declaration built on the
    newer lib. The restored files are not the lib entry app was built on: the epoch."""
    lib, app = ws.root / "packages/lib", ws.root / "packages/app"
    (lib / "src/a.ts").write_text("export const a = 1;\n")
    (app / "src/main.ts").write_text("import { a } from 'lib';\nexport const twice = a;\n")
    ws.commit()
    assert build(ws).code == 0
    (lib / "src/a.ts").write_text("export const a = 2;\n")
    assert build(ws).code == 0
    assert b"twice = 2" in (app / "dist/src/main.d.ts").read_bytes()

    (lib / "src/a.ts").write_text("export const a = 1;\n")  # lib's first entry again: restored
    (app / "src/notes.md").write_text("app misses on an input tsc does not read\n")
    run = build(ws)
    assert run.code == 0, run.err
    assert run.statuses() == {"lib#build": ("success", "local"), "app#build": ("success", "miss")}
    assert b"twice = 1" in (app / "dist/src/main.d.ts").read_bytes()
    for project in ("lib", "app"):
        same_as_clean(outputs(ws, project), clean_build(ws, project))


@pytest.mark.feature("EX-06")
def test_incr_a_declaration_in_node_modules_changed_with_an_old_mtime_is_not_missed(ws):
    """Danger (c): a package's declaration reached through node_modules changes content (a
    lockfile bump; npm and pnpm give package files fixed old mtimes). tsc -b never compares such a
    file, dated or not; the epoch makes tsc check it by content. Its ctime shows the change."""
    dep = ws.root / "node_modules/dep"
    dep.mkdir(parents=True)
    (dep / "package.json").write_text(json.dumps({"name": "dep", "types": "index.d.ts"}))
    (dep / "index.d.ts").write_text("export declare const d: 1;\n")
    lib = ws.root / "packages/lib"
    (lib / "src/uses.ts").write_text("import { d } from 'dep';\nexport const e = d;\n")
    ws.commit()
    assert build(ws).code == 0
    assert b"e: 1" in (lib / "dist/src/uses.d.ts").read_bytes()

    (dep / "index.d.ts").write_text("export declare const d: 2;\n")
    back_in_time(dep / "index.d.ts")
    (lib / "src/notes.md").write_text("lib misses on an input tsc does not read\n")
    run = build(ws)
    assert run.code == 0, run.err
    assert run.statuses()["lib#build"] == ("success", "miss")
    assert b"e: 2" in (lib / "dist/src/uses.d.ts").read_bytes()
    same_as_clean(outputs(ws, "lib"), clean_build(ws, "lib"))


@pytest.mark.feature("EX-06")
def test_a_build_info_named_by_config_dir_is_kept_as_create_t3_turbo_names_it(repo):
    """create-t3-turbo's shared tsconfig says `"tsBuildInfoFile": "${configDir}/.cache/
    tsbuildinfo.json"` and its turbo.json declares `.cache/tsbuildinfo.json` an output: the build
    info is kept like a `*.tsbuildinfo` (before, it was not recognised and was wiped, so every
    miss type-checked and emitted the whole package where turbo's tsc was incremental), and the
    outputs still equal a clean build's."""
    base = {
        "compilerOptions": {
            "incremental": True,
            "tsBuildInfoFile": "${configDir}/.cache/tsbuildinfo.json",
            "declaration": True,
            "strict": True,
            "target": "ES2022",
            "module": "ES2022",
            "moduleResolution": "Bundler",
        }
    }
    command = f"{TSC} --listEmittedFiles"
    task = tsc_task(command, deps=())
    task["cache"]["outputs"]["files"] = [".cache/tsbuildinfo.json", "dist/**"]
    repo.write(
        {
            "tooling/tsconfig.base.json": base,
            **npm_workspace(
                {
                    "lib": {
                        "tasks": {"build": task},
                        "files": {
                            "tsconfig.json": {
                                "extends": "../../tooling/tsconfig.base.json",
                                "compilerOptions": {"outDir": "dist"},
                                "include": ["src"],
                            },
                            "src/a.ts": "export const a: number = 1;\n",
                            "src/c.ts": "export const c = 'c';\n",
                        },
                    }
                }
            ),
        }
    ).commit()
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    lib = repo.root / "packages" / "lib"

    first = build(repo)
    assert first.code == 0, first.err
    assert (lib / ".cache" / "tsbuildinfo.json").is_file()
    assert {"dist/a.js", "dist/c.js"} <= emitted(first, "lib"), first.out

    (lib / "src" / "a.ts").write_text("export const a: number = 2;\n")
    edit = build(repo)
    assert edit.code == 0, edit.err
    assert edit.statuses()["lib#build"] == ("success", "miss")
    again = emitted(edit, "lib")
    assert "dist/a.js" in again and "dist/c.js" not in again, edit.out

    copy = repo.root.parent / "clean"
    shutil.copytree(
        repo.root, copy, symlinks=True, ignore=shutil.ignore_patterns(".vx", "dist", ".cache")
    )
    subprocess.run([*TSC.split()], cwd=copy / "packages" / "lib", check=True, capture_output=True)
    for path in sorted((lib / "dist").rglob("*")):
        if path.is_file():
            rel = path.relative_to(lib)
            assert path.read_bytes() == (copy / "packages" / "lib" / rel).read_bytes(), rel
    assert sorted(p.name for p in (lib / "dist").rglob("*")) == sorted(
        p.name for p in (copy / "packages" / "lib" / "dist").rglob("*")
    )
