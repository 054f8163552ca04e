"""`vx prune PKG --docker` (issue #17's `vx prune` item, turbo's prune): a partial workspace for one
package whose install layer (`out/json`) installs offline with the manager's frozen flag from the
pruned lockfile, and whose full source (`out/full`) then builds with `vx run build`.

The workspace: app -> lib (workspace) and is-odd (-> is-number@6); other -> lib and is-number@7;
the root with kind-of. Pruning for app keeps app, lib and their entries: other and is-number@7
are gone from the tree and from the lockfile. Real package managers write the lockfiles and
fill their caches first; the pruned install then runs from those caches alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.package_managers import command, lockfile_name, root_files
from support.workspace import build_task


def _env(tmp: Path) -> dict[str, str]:
    return {
        # CI=true makes yarn berry's (and pnpm's) installs immutable: the first install of the
        # test's workspace, which writes the lockfile, would be refused on CI
        **{k: v for k, v in os.environ.items() if k != "CI"},
        "COREPACK_ENABLE_STRICT": "0",
        "npm_config_manage_package_manager_versions": "false",
        "npm_config_cache": str(tmp / "npm-cache"),
        # a lockfile with each tarball's URL: without it (a machine's npmrc may say so) npm ci
        # asks the registry for metadata the first install did not cache
        "npm_config_omit_lockfile_registry_resolved": "false",
        "npm_config_store_dir": str(tmp / "pnpm-store"),
        "YARN_CACHE_FOLDER": str(tmp / "yarn-cache"),
        "YARN_ENABLE_TELEMETRY": "0",
        "YARN_GLOBAL_FOLDER": str(tmp / "berry"),
        "YARN_ENABLE_GLOBAL_CACHE": "1",
        "BUN_INSTALL_CACHE_DIR": str(tmp / "bun-cache"),
    }


def _install(pm: str, cwd: Path, tmp: Path, frozen: bool) -> subprocess.CompletedProcess:
    """The manager's install: online the first time (it fills the cache and writes the lockfile),
    then `frozen`: offline from the cache, the lockfile as it is."""
    env = _env(tmp)
    flags = {
        "npm": (
            ["install", "--no-audit", "--no-fund"],
            ["ci", "--offline", "--no-audit", "--no-fund"],
        ),
        "pnpm": (["install"], ["install", "--frozen-lockfile", "--offline"]),
        "yarn": (
            ["install", "--non-interactive", "--no-progress"],
            ["install", "--frozen-lockfile", "--offline", "--non-interactive", "--no-progress"],
        ),
        "berry": (["install"], ["install", "--immutable"]),
        "bun": (["install"], ["install", "--frozen-lockfile"]),
    }[pm.split("@")[0]]
    if pm == "berry" and frozen:
        env["YARN_ENABLE_OFFLINE_MODE"] = "1"
    argv = command(pm) + flags[1 if frozen else 0]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _workspace(repo, pm: str, tmp: Path, root_extra: dict | None = None, files=None):
    link = "1.0.0" if pm in ("npm", "yarn") else "workspace:*"
    files = root_files(pm, root_extra, ignore="out/\n", files=files)
    # app's build needs is-odd installed, and lib built first (build_task's ^build)
    needs = "require('is-odd');require('@tootallnate/once');require('fs').statSync('../lib/dist/out.js');"
    deps = {
        "app": ({"lib": link, "is-odd": "^3.0.1", "@tootallnate/once": "^2.0.0"}, needs),
        "lib": ({}, ""),
        # is-odd@3.0.1 resolves as app's ^3.0.1 does: yarn lists both in one entry's key; a
        # scoped package in two majors: app's 2.0.0 stays, other's 1.1.2 goes
        "other": (
            {"lib": link, "is-number": "^7.0.0", "is-odd": "3.0.1", "@tootallnate/once": "1.1.2"},
            "",
        ),
    }
    for name, (dependencies, check) in deps.items():
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": dependencies,
        }
        command = (
            f"node -e \"{check}const fs=require('fs');fs.mkdirSync('dist',{{recursive:true}});"
            f"fs.writeFileSync('dist/out.js',fs.readFileSync('src/{name}.js','utf8'))\""
        )
        files[f"packages/{name}/vx.config.json"] = {"tasks": {"build": build_task(command=command)}}
        files[f"packages/{name}/src/{name}.js"] = f"{name.upper()};"
    ws = repo.write(files)
    proc = _install(pm, ws.root, tmp, frozen=False)
    assert proc.returncode == 0, f"{pm}: {proc.stdout}\n{proc.stderr}"
    return ws.commit()


def _descriptors(yarn_lock: str) -> set[str]:
    """The descriptors the entries' keys list, in either yarn's lockfile."""
    keys = [line[:-1] for line in yarn_lock.split("\n") if line[:1] not in ("", " ", "#")]
    return {d.strip().strip('"') for key in keys for d in key.split(",")}


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.feature("TL-07")
@pytest.mark.parametrize("pm", ("npm", "pnpm", "pnpm@8", "pnpm@7", "yarn", "berry", "bun"))
def test_issue17_prune_docker_installs_frozen_offline_and_builds(repo, tmp_path, pm):
    ws = _workspace(repo, pm, tmp_path)
    lock_before = (ws.root / lockfile_name(pm)).read_text()
    # what pruning must drop (and `other`: yarn 1 lists no workspace)
    assert "7.0.0" in lock_before and "1.1.2" in lock_before
    assert pm == "yarn" or "other" in lock_before

    pruned = ws.vx("prune", "app", "--docker")
    assert pruned.code == 0, pruned.err
    assert "Added app" in pruned.out and "Added lib" in pruned.out and "other" not in pruned.out
    out = ws.root / "out"
    json_files, full_files = _tree(out / "json"), _tree(out / "full")
    lockfile = lockfile_name(pm)
    assert {
        "package.json",
        "packages/app/package.json",
        "packages/lib/package.json",
        lockfile,
    } <= json_files
    assert not any(f.startswith("packages/other") for f in json_files | full_files)
    assert "packages/app/src/app.js" in full_files and "packages/lib/vx.config.json" in full_files
    assert not any("node_modules" in f or f.startswith(".git/") for f in full_files)
    assert "packages/app/src/app.js" not in json_files
    lock = (out / lockfile).read_text()
    assert lock == (out / "json" / lockfile).read_text() == (out / "full" / lockfile).read_text()
    # the lockfile holds nothing outside the closure: not `other`, not is-number@7
    assert "is-odd" in lock and "kind-of" in lock
    assert "7.0.0" not in lock and "1.1.2" not in lock and "packages/other" not in lock, lock
    assert "@tootallnate/once" in lock and "2.0.0" in lock
    if pm in ("yarn", "berry"):  # and not other's descriptor in is-odd's key
        exact = "is-odd@3.0.1" if pm == "yarn" else "is-odd@npm:3.0.1"
        assert exact in _descriptors(lock_before)
        assert exact not in _descriptors(lock) and "is-odd@npm:^3.0.1".replace(
            "npm:", "" if pm == "yarn" else "npm:"
        ) in _descriptors(lock), lock

    # everything kept: the manager's own file, byte for byte (the cut leaves its format alone)
    whole = ws.vx("prune", "app", "other", "--out-dir", "whole")
    assert whole.code == 0, whole.err
    assert (ws.root / "whole" / lockfile).read_text() == lock_before

    # a container-like clean dir: the install layer, then the full source over it
    clean = tmp_path / "clean"
    shutil.copytree(out / "json", clean)
    installed = _install(pm, clean, tmp_path, frozen=True)
    assert installed.returncode == 0, f"{pm}: {installed.stdout}\n{installed.stderr}"
    assert (clean / lockfile).read_text() == lock  # the frozen install left it as it was
    shutil.copytree(out / "full", clean, dirs_exist_ok=True)
    build = repo.__class__(clean).vx("run", "build")
    assert build.code == 0, build.err
    assert sorted(build.statuses()) == ["app#build", "lib#build"]
    assert (clean / "packages/app/dist/out.js").read_text() == "APP;"


@pytest.mark.feature("TL-07")
@pytest.mark.parametrize("pm", ("npm", "pnpm", "yarn", "berry", "bun"))
def test_issue17_prune_drops_the_plain_member_paths_of_left_out_packages(repo, tmp_path, pm):
    """Members listed one by one: bun refuses a workspace entry whose directory is gone, so the
    pruned root package.json (npm's lockfile root, pnpm-workspace.yaml) lists only kept ones."""
    members = ["packages/app", "./packages/lib/", "packages/other"]
    files = {}
    if pm == "pnpm":
        files["pnpm-workspace.yaml"] = "packages:\n" + "".join(f"  - '{d}'\n" for d in members)
    ws = _workspace(repo, pm, tmp_path, root_extra={"workspaces": members}, files=files)
    assert ws.vx("prune", "app", "--docker").code == 0
    out = ws.root / "out"
    kept = ["packages/app", "./packages/lib/"]
    assert json.loads((out / "json/package.json").read_text())["workspaces"] == kept
    if pm == "npm":
        lock = json.loads((out / "package-lock.json").read_text())
        assert lock["packages"][""]["workspaces"] == kept
    if pm == "pnpm":
        assert (out / "json/pnpm-workspace.yaml").read_text() == (
            "packages:\n  - 'packages/app'\n  - './packages/lib/'\n"
        )
    clean = tmp_path / "clean"
    shutil.copytree(out / "json", clean)
    installed = _install(pm, clean, tmp_path, frozen=True)
    assert installed.returncode == 0, f"{pm}: {installed.stdout}\n{installed.stderr}"
    assert (clean / lockfile_name(pm)).read_text() == (out / lockfile_name(pm)).read_text()


def _small(repo, extra: dict | None = None):
    """An npm workspace without installs: app -> lib, other alone."""
    files: dict[str, object] = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        ".gitignore": "node_modules/\n",
    }
    for name, deps in (("app", {"lib": "1.0.0"}), ("lib", {}), ("other", {})):
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": deps,
        }
        files[f"packages/{name}/src/{name}.js"] = name
    files.update(extra or {})
    return repo.write(files).commit()


def _everything(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.feature("TL-07")
def test_issue17_prune_without_docker_is_one_tree_and_names_its_packages(repo):
    ws = _small(repo, {"turbo.json": {"tasks": {"build": {}}}, "tsconfig.base.json": "{}"})
    pruned = ws.vx("prune", "app", "--out-dir", "dist/pruned")
    assert pruned.code == 0, pruned.err
    assert pruned.out.splitlines() == [
        "Generating pruned monorepo for app in dist/pruned",
        " - Added app",
        " - Added lib",
        " - no lockfile at the workspace root: none written",
    ]
    assert _tree(ws.root / "dist/pruned") == {
        ".gitignore",
        "package.json",
        "turbo.json",
        "tsconfig.base.json",
        "packages/app/package.json",
        "packages/app/src/app.js",
        "packages/lib/package.json",
        "packages/lib/src/lib.js",
    }
    again = ws.vx("prune", "app", "--out-dir", "dist/pruned")  # never over an earlier output
    assert again.code == 2 and "already exists and is not empty" in again.err, again.err
    assert "--out-dir" in again.err


@pytest.mark.parametrize(
    "case",
    ("unknown-package", "npm-v1", "bun-binary", "links-outside"),
)
@pytest.mark.feature("TL-07")
def test_issue17_prune_refuses_what_it_cannot_cut_and_writes_nothing(repo, case):
    extra: dict[str, object] = {}
    target, expect = "app", ""
    if case == "unknown-package":
        target, expect = "ap", "no package named `ap`"
    elif case == "npm-v1":
        extra["package-lock.json"] = {"name": "root", "lockfileVersion": 1, "dependencies": {}}
        expect = "lockfileVersion 1"
    elif case == "bun-binary":
        extra["bun.lockb"] = "\x00binary"
        expect = "binary lockfile"
    else:  # a lockfile whose link leaves the workspace: never followed, refused
        extra["package-lock.json"] = {
            "name": "root",
            "lockfileVersion": 3,
            "packages": {
                "": {"name": "root", "workspaces": ["packages/*"]},
                "packages/app": {"version": "1.0.0", "dependencies": {"evil": "1.0.0"}},
                "node_modules/evil": {"resolved": "../../etc", "link": True},
                "../../etc": {"name": "evil", "version": "1.0.0"},
            },
        }
        expect = "depend on `../../etc`, which is no workspace package"
    ws = _small(repo, extra)
    before = _everything(ws.root.parent)
    result = ws.vx("prune", target, "--docker")
    assert result.code == 2, result.err
    assert expect in result.err and "hint:" in result.err, result.err
    if case != "unknown-package":
        assert "in: " in result.err  # the file it could not cut
    assert _everything(ws.root.parent) == before


@pytest.mark.feature("TL-07")
def test_issue17_prune_writes_only_inside_the_out_dir_for_hostile_names_and_links(repo, tmp_path):
    """A package named `../../etc`, and links in a kept package that point out of the workspace:
    the copy is keyed by the package's dir, and a link is copied as a link, never followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    ws = _small(repo)
    (ws.root / "packages/evil").mkdir()
    (ws.root / "packages/evil/package.json").write_text('{"name": "../../etc", "version": "1.0.0"}')
    (ws.root / "packages/evil/a.js").write_text("a")
    os.symlink(str(outside), ws.root / "packages/evil/to-outside")
    os.symlink("../../../outside/secret", ws.root / "packages/evil/secret")
    ws.commit()
    before = _everything(tmp_path)
    result = ws.vx("prune", "../../etc", "--docker")
    assert result.code == 0, result.err
    assert " - Added ../../etc" in result.out
    made = _everything(tmp_path) - before
    assert made and all(p == "ws/out" or p.startswith("ws/out/") for p in made), made
    full = ws.root / "out/full/packages/evil"
    assert os.readlink(full / "to-outside") == str(outside)
    assert os.readlink(full / "secret") == "../../../outside/secret"
    assert (full / "a.js").read_text() == "a"
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert not (ws.root / "out/full/packages/app").exists()


def _patch(file: str, body: str) -> str:
    return (
        f"diff --git a/{file} b/{file}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{file}\n@@ -0,0 +1 @@\n+{body}\n"
    )


@pytest.mark.feature("TL-07")
@pytest.mark.parametrize("pm", ("pnpm", "bun"))
def test_issue17_prune_keeps_only_the_patches_of_kept_packages(repo, tmp_path, pm):
    """pnpm and bun compare the lockfile's patches with the root package.json's, and pnpm 10
    refuses a patch of a package it does not install: the pruned manifest and lockfile keep the
    patches of what the closure installs, and the kept one still applies."""
    patches = {
        "is-odd@3.0.1": _patch("extra.js", "module.exports = 'odd';"),
        "is-number@7.0.0": _patch("extra.js", "module.exports = 'seven';"),
    }
    declared = {"patchedDependencies": {k: f"patches/{k}.patch" for k in patches}}
    ws = _workspace(
        repo,
        pm,
        tmp_path,
        root_extra={"pnpm": declared} if pm == "pnpm" else declared,
        files={f"patches/{k}.patch": v for k, v in patches.items()},
    )
    assert "is-number@7.0.0" in (ws.root / lockfile_name(pm)).read_text()
    assert ws.vx("prune", "app", "--docker").code == 0
    out = ws.root / "out"
    manifest = json.loads((out / "json/package.json").read_text())
    kept = manifest["pnpm"] if pm == "pnpm" else manifest
    assert kept["patchedDependencies"] == {"is-odd@3.0.1": "patches/is-odd@3.0.1.patch"}
    assert (out / "full/package.json").read_text() == (out / "json/package.json").read_text()
    assert (out / "json/patches/is-odd@3.0.1.patch").exists()
    lock = (out / lockfile_name(pm)).read_text()
    assert "is-odd@3.0.1" in lock and "7.0.0" not in lock, lock
    clean = tmp_path / "clean"
    shutil.copytree(out / "json", clean)
    installed = _install(pm, clean, tmp_path, frozen=True)
    assert installed.returncode == 0, f"{installed.stdout}\n{installed.stderr}"
    assert (clean / lockfile_name(pm)).read_text() == lock
    odd = subprocess.run(
        ["node", "-p", "require('is-odd/extra.js')"],
        cwd=clean / "packages/app",
        capture_output=True,
        text=True,
    )
    assert odd.stdout.strip() == "odd", odd.stderr  # the kept patch applied


@pytest.mark.feature("TL-07")
def test_issue17_prune_copies_what_git_lists_or_the_tree_outside_git(repo, tmp_path):
    """In a repository: tracked and untracked-but-not-ignored files; outside one (or in a
    directory an outer repository ignores): every file but node_modules, .git and .vx."""
    ws = _small(repo, {".gitignore": "node_modules/\n*.log\n"})
    for rel in (
        "packages/app/debug.log",
        "packages/app/node_modules/x/i.js",
        "packages/app/new.js",
    ):
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text("x")
    assert ws.vx("prune", "app").code == 0
    copied = _tree(ws.root / "out")
    assert "packages/app/new.js" in copied and "packages/app/src/app.js" in copied
    assert (
        "packages/app/debug.log" not in copied and "packages/app/node_modules/x/i.js" not in copied
    )

    outer = tmp_path / "outer"  # a repository that ignores the directory the workspace is in
    outer.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=outer, check=True)
    (outer / ".gitignore").write_text("inner/\n")
    shutil.copytree(ws.root, outer / "inner", ignore=shutil.ignore_patterns(".git", "out"))
    inner = repo.__class__(outer / "inner")
    assert inner.vx("prune", "app").code == 0
    copied = _tree(outer / "inner/out")
    assert "packages/app/debug.log" in copied and "packages/app/src/app.js" in copied
    assert "packages/app/node_modules/x/i.js" not in copied


@pytest.mark.feature("TL-07")
def test_issue17_prune_and_cache_prune_point_at_each_other(repo):
    """`vx prune` is turbo's prune; evicting cache entries is `vx cache prune`. Each help names the
    other, and turbo's line typed under the cache's verb is answered with the right one."""
    ws = _small(repo)
    mixed = ws.vx("cache", "prune", "app", "--docker")
    assert mixed.code == 2 and "`vx prune app --docker`" in mixed.err, mixed.err
    assert not (ws.root / "out").exists()
    assert "vx cache prune" in ws.vx("help", "prune").out
    assert "vx prune PKG" in ws.vx("cache", "prune", "--help").out
    bare = ws.vx("prune")
    assert bare.code == 2 and "needs the package" in bare.err, bare.err


@pytest.mark.parametrize(
    "given", ("/", ".git", ".git/hooks", ".vx/pruned", "packages", "src-dir", "outside")
)
@pytest.mark.feature("TL-07")
def test_issue17_prune_out_dir_never_in_git_and_never_hints_removing_sources(repo, tmp_path, given):
    """An out dir that holds the workspace (`/`), lies in .git or .vx (an empty `.git/hooks` would
    take the root's files as hooks), or holds files git lists: refused, and the error never tells
    the user to `rm -rf` it — only an earlier prune's untracked output is one to remove."""
    ws = _small(repo)
    if given == "src-dir":  # a tracked directory outside every package
        ws.write({"tools/run.js": "x"}).commit()
        given = "tools"
    elif given == "outside":  # a user's directory elsewhere (a typo for a new one)
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine/notes.txt").write_text("n")
        given = str(tmp_path / "mine")
    (ws.root / ".git/hooks").mkdir(exist_ok=True)
    for hook in (ws.root / ".git/hooks").iterdir():
        hook.unlink()  # an empty hooks dir, as `git init --template=` leaves it
    before = _everything(ws.root.parent)
    result = ws.vx("prune", "app", "--out-dir", given)
    assert result.code == 2, result.out + result.err
    assert "rm -rf" not in result.err and "hint:" in result.err, result.err
    assert "Traceback" not in result.err
    assert _everything(ws.root.parent) == before
