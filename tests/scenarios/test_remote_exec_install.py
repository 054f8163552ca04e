"""Remote execution of an installed workspace (RC-10): `remoteExecution.workerInstall` links the
workers' copy of the package store into each action's input root (pnpm's layout: the
workspace's node_modules links and `.bin` shims shipped, `node_modules/.pnpm` one symlink, or
one an entry with the entries that resolve a workspace package shipped; a hoisted tree's
packages one link each, its workspace links shipped), and an action of hundreds of small files
fits BuildGrid's 4 MiB batch calls both ways."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from support.npm_packages import installed_or_skip
from support.package_managers import command, install_env, root_files
from support.reapi_servers import stack_fixture, two_workers
from support.workspace import Repo

LIB = "lib@1.0.0"
CLI = 'const {word} = require("lib"); require("fs").mkdirSync("dist", {recursive: true});\n' \
    'require("fs").writeFileSync("dist/out.txt", word + "\\n");\n'  # fmt: skip
SHIM = '#!/bin/sh\nbasedir=$(dirname "$0")\nexec node "$basedir/../lib/cli.js" "$@"\n'


stack = stack_fixture("bgd-exec-install")
workers = two_workers  # two fresh workers for one test, ended after it


def store(root: Path, word: str = "from lib") -> None:
    """pnpm's virtual store under `root`/node_modules/.pnpm, holding one package, `lib`, whose
    `word` is what the build writes."""
    pkg = root / "node_modules" / ".pnpm" / LIB / "node_modules" / "lib"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "lib", "version": "1.0.0"}))
    (pkg / "index.js").write_text(f"exports.word = {json.dumps(word)};\n")
    (pkg / "cli.js").write_text(CLI)


def installed_workspace(repo, install: str | None) -> None:
    """A workspace of one project, a, whose remote `build` runs `libtool` (a `.bin` shim of the
    installed `lib`), installed the way pnpm lays it out; `install`: its `workerInstall`."""
    remote = {"default": True, **({"workerInstall": install} if install else {})}
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "vx.workspace.json": {"remoteExecution": remote},
            ".gitignore": "node_modules\n",
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/src/in.txt": "input\n",
            "packages/a/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {"command": "libtool"},
                        "cache": {
                            "inputs": {"files": ["src/**", "package.json"]},
                            "outputs": {"files": ["dist/**"]},
                        },
                    }
                }
            },
        }
    ).commit()
    store(repo.root)
    modules = repo.root / "node_modules"
    (modules / "lib").symlink_to(f".pnpm/{LIB}/node_modules/lib")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "libtool").write_text(SHIM)
    (modules / ".bin" / "libtool").chmod(0o755)
    project = repo.root / "packages" / "a" / "node_modules"
    project.mkdir()
    (project / "lib").symlink_to(f"../../../node_modules/.pnpm/{LIB}/node_modules/lib")


@pytest.mark.feature("RC-10")
def test_worker_install_links_the_store_and_the_task_finds_its_packages(
    repo, tmp_path, stack, workers
):
    """With `workerInstall` the action gets the workspace's node_modules links and shims and
    `.pnpm` as a link to the workers' install: `libtool` (on PATH from node_modules/.bin)
    requires `lib` through them and builds on a worker (the image's `lib`, not this machine's
    copy, which is not shipped)."""
    install = tmp_path / "image"
    store(install, "from the image")  # so the output tells which store the worker used
    installed_workspace(repo, str(install))
    res = repo.vx("run", "build", "--all", env=stack.env())
    assert res.code == 0, res.err[-3000:]
    assert f"remote execution: 1 task ran on {stack.endpoint}" in res.err, res.err[-2000:]
    assert "ran here instead" not in res.err
    # the store came from the image, not from this machine's node_modules/.pnpm
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "from the image\n"


@pytest.mark.feature("RC-10")
def test_without_worker_install_the_store_is_not_shipped_and_the_command_fails(
    repo, tmp_path, stack, workers
):
    """The same workspace with no `workerInstall`: node_modules is not shipped (the worker
    provides the platform), so `libtool` is not found there: the task fails with its log."""
    installed_workspace(repo, None)
    res = repo.vx("run", "build", "--all", env=stack.env())
    assert res.code == 1, res.err[-3000:]
    assert "libtool" in res.out + res.err
    assert "Traceback" not in res.err


BUILD = {"inputs": {"files": ["*.js", "package.json"]}, "outputs": {"files": ["dist/**"]}}
# app's build: a hoisted registry package (kind-of), a scoped one (@tootallnate/once) and the
# workspace's lib, whose dist is lib#build's output (an upstream output in the input root)
APP = """const fs = require("fs"), kindOf = require("kind-of"), once = require("@tootallnate/once");
fs.mkdirSync("dist", {recursive: true});
fs.writeFileSync("dist/out.txt", [kindOf([]), once.word || "once", require("lib")].join(" ") + "\\n");
"""


def install(repo, pm: str, tmp_path: Path) -> None:
    """`pm`'s real install of the workspace written in `repo`, then a commit. `pnpm-hoisted`:
    pnpm with `node-linker=hoisted`."""
    # berry turns immutable installs on when CI is set (CI sets it): this one writes the lockfile
    env = install_env(tmp_path, YARN_ENABLE_IMMUTABLE_INSTALLS="0")
    flags = {
        "npm": ["install", "--no-audit", "--no-fund"],
        "yarn": ["install", "--non-interactive", "--no-progress"],
        "berry": ["install"],
        # pnpm installs frozen under CI: this one writes the lockfile
        "pnpm": ["install", "--no-frozen-lockfile"],
    }[pm.removesuffix("-hoisted")]
    proc = subprocess.run(
        command(pm.removesuffix("-hoisted")) + flags,
        cwd=repo.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{pm}: {proc.stdout}\n{proc.stderr}"
    repo.commit()


def two_builds(lib: dict, app: dict, index: str) -> dict[str, object]:
    """lib's build (`node build.js`, writing dist/index.js as `index`) and app's (`node
    build.js`, after ^build, keyed on lib's package.json); `lib` and `app`: their package.json."""
    build = {"exec": {"command": "node build.js"}, "cache": BUILD}
    inputs = {"files": ["*.js", "package.json"], "workspaceFiles": ["packages/lib/package.json"]}
    return {
        "packages/lib/package.json": lib,
        "packages/lib/build.js": 'require("fs").mkdirSync("dist", {recursive: true});\n'
        f'require("fs").writeFileSync("dist/index.js", {json.dumps(index)});\n',
        "packages/lib/vx.config.json": {"tasks": {"build": build}},
        "packages/app/package.json": app,
        "packages/app/vx.config.json": {
            "tasks": {
                "build": {**build, "dependsOn": ["^build"], "cache": {**BUILD, "inputs": inputs}}
            }
        },
    }


def hoisted_workspace(repo, pm: str, tmp_path: Path) -> Path:
    """A workspace of lib and app (app depends on lib) that `pm` (npm, yarn 1, yarn berry's
    node-modules linker, pnpm's hoisted linker) installs hoisted into the root node_modules,
    every build remote, and the workers' install: a copy of it whose registry packages say
    "image" and whose lib has a stale build (a worker that followed the workspace link into it
    would build from that)."""
    image = tmp_path / "image"
    link = "workspace:*" if pm in ("berry", "pnpm-hoisted") else "1.0.0"
    files = root_files(
        pm.removesuffix("-hoisted"),
        files={
            "vx.workspace.json": {
                "remoteExecution": {"default": True, "workerInstall": str(image)}
            },
            **two_builds(
                {"name": "lib", "version": "1.0.0", "main": "dist/index.js"},
                {
                    "name": "app",
                    "version": "1.0.0",
                    "dependencies": {"lib": link, "@tootallnate/once": "2.0.0"},
                },
                "module.exports = 'fresh lib';\n",
            ),
            "packages/app/build.js": APP,
            **({".npmrc": "node-linker=hoisted\n"} if pm == "pnpm-hoisted" else {}),
        },
    )
    repo.write(files)
    install(repo, pm, tmp_path)
    modules = repo.root / "node_modules"
    # pnpm links a workspace package into its dependant's node_modules, the others at the root
    linked = repo.root / "packages/app/node_modules" if pm == "pnpm-hoisted" else modules
    assert (linked / "lib").is_symlink() and (modules / "kind-of").is_dir()  # hoisted, linked
    assert not (modules / "kind-of").is_symlink()
    shutil.copytree(repo.root, image, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    (image / "node_modules/kind-of/index.js").write_text('module.exports = () => "image";\n')
    once = image / "node_modules/@tootallnate/once/dist/index.js"
    once.write_text(once.read_text() + '\nmodule.exports.word = "image-once";\n')
    (image / "packages/lib/dist").mkdir()
    (image / "packages/lib/dist/index.js").write_text("module.exports = 'stale lib';\n")
    return image


@pytest.mark.feature("RC-10")
@pytest.mark.parametrize("pm", ["npm", "yarn", "berry", "pnpm-hoisted"])
def test_worker_install_of_a_hoisted_tree_links_packages_and_ships_workspace_links(
    repo, tmp_path, stack, workers, pm
):
    """npm's, yarn 1's, yarn berry's and pnpm's (`node-linker=hoisted`) node-modules layout: the
    registry packages (`kind-of`, the scoped `@tootallnate/once`) come from the workers'
    install, the workspace link `node_modules/lib` is shipped as the link it is, so app's build
    reads lib#build's fresh output from its input root. (vx used to link the whole root
    node_modules to the workers' copy: `require("lib")` followed the image's workspace link to
    the image's own lib, and app's output said "stale lib" - a wrong output, saved and cached
    as if built from this workspace.)"""
    hoisted_workspace(repo, pm, tmp_path)
    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=600)
    assert res.code == 0, res.err[-3000:]
    assert f"remote execution: 2 tasks ran on {stack.endpoint}" in res.err, res.err[-2000:]
    assert "ran here instead" not in res.err
    out = (repo.root / "packages/app/dist/out.txt").read_text()
    assert out == "image image-once fresh lib\n"


# app's build: lib through a registry package whose peer dependency lib satisfies
# (use-sync-external-store's shim exports lib's `useSyncExternalStore`), and kind-of
PEER = """const fs = require("fs"), kindOf = require("kind-of");
const {useSyncExternalStore} = require("use-sync-external-store/shim");
fs.mkdirSync("dist", {recursive: true});
fs.writeFileSync("dist/out.txt", [kindOf([]), useSyncExternalStore].join(" ") + "\\n");
"""


@pytest.mark.feature("RC-10")
def test_worker_install_ships_a_pnpm_store_package_whose_peer_is_a_workspace_package(
    repo, tmp_path, stack, workers
):
    """pnpm's store holds `use-sync-external-store` with its peer `react` satisfied by the
    workspace's own react (lib here, named react): `.pnpm/use-sync-external-store@…_react@…/
    node_modules/react` is a link to packages/lib. The action ships that store entry as it is
    here, so the package's `require("react")` reads lib#build's fresh output in the input root;
    the rest of the store (kind-of) still comes from the workers' install. (vx used to ship
    `.pnpm` as one link to the workers' copy: Node followed it to the image's copy of the
    package and from there the image's link to the image's lib, and app's output said "stale
    lib" - a wrong output, saved and cached.)"""
    image = tmp_path / "image"
    react = {"name": "react", "version": "18.0.0", "main": "dist/index.js"}
    files = root_files(
        "pnpm",
        files={
            "vx.workspace.json": {
                "remoteExecution": {"default": True, "workerInstall": str(image)}
            },
            **two_builds(
                react,
                {
                    "name": "app",
                    "version": "1.0.0",
                    "dependencies": {"react": "workspace:*", "use-sync-external-store": "1.2.2"},
                },
                "exports.useSyncExternalStore = 'fresh lib';\n",
            ),
            "packages/app/build.js": PEER,
        },
    )
    repo.write(files)
    install(repo, "pnpm", tmp_path)
    store = repo.root / "node_modules/.pnpm"
    [entry] = [p for p in store.iterdir() if p.name.startswith("use-sync-external-store@")]
    assert os.readlink(entry / "node_modules/react") == "../../../../packages/lib"
    shutil.copytree(repo.root, image, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    kind_of = image / "node_modules/.pnpm/kind-of@6.0.3/node_modules/kind-of/index.js"
    kind_of.unlink()  # a hard link into pnpm's content store
    kind_of.write_text('module.exports = () => "image";\n')
    (image / "packages/lib/dist").mkdir()
    (image / "packages/lib/dist/index.js").write_text(
        "exports.useSyncExternalStore = 'stale lib';\n"
    )
    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=600)
    assert res.code == 0, res.err[-3000:]
    assert f"remote execution: 2 tasks ran on {stack.endpoint}" in res.err, res.err[-2000:]
    assert "ran here instead" not in res.err
    out = (repo.root / "packages/app/dist/out.txt").read_text()
    assert out == "image fresh lib\n"


TS = "typescript@5.9.3"
TSCONFIG = {
    "compilerOptions": {
        "incremental": True,
        "outDir": "dist",
        "declaration": True,
        "target": "es2020",
        "module": "commonjs",
        "lib": ["es2020"],
        "types": [],
    },
    "include": ["src"],
}


def typescript_store(root: Path) -> None:
    """pnpm's layout of typescript under `root`: the package in `.pnpm` (hard links to the
    installed copy: tsc records the real paths of the lib files it reads, so they must be
    here), `node_modules/typescript` linking to it, and a `.bin/tsc` shim."""
    pkg = root / "node_modules" / ".pnpm" / TS / "node_modules" / "typescript"
    pkg.parent.mkdir(parents=True)
    shutil.copytree(installed_or_skip("typescript"), pkg, copy_function=os.link)
    (root / "node_modules" / "typescript").symlink_to(f".pnpm/{TS}/node_modules/typescript")
    shim = root / "node_modules" / ".bin" / "tsc"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec node "$(dirname "$0")/../typescript/bin/tsc" "$@"\n')
    shim.chmod(0o755)


def emitted(project: Path) -> set[str]:
    """What an incremental `tsc -b` in `project` writes, as this machine's user would run it."""
    bins = f"{project / 'node_modules/.bin'}:{project.parents[1] / 'node_modules/.bin'}"
    proc = subprocess.run(
        ["tsc", "-b", "--listEmittedFiles"],
        cwd=project,
        env={**os.environ, "PATH": f"{bins}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {
        os.path.relpath(line.split("TSFILE: ", 1)[1], project)
        for line in proc.stdout.splitlines()
        if line.startswith("TSFILE: ")
    }


@pytest.mark.feature("RC-10")
def test_a_tsc_build_info_made_on_a_worker_is_a_local_builds_and_stays_incremental(
    repo, tmp_path, stack, workers
):
    """`tsc -b` on a worker reads TypeScript's lib files through the store's link, so its build
    info named them by their real path in the workers' install
    (`../../../../…/image/node_modules/.pnpm/typescript@5.9.3/…`) where a local build names
    `../../node_modules/.pnpm/…`: the only output of the build that differed from a local
    build's, and a `tsc -b` here after an edit found none of those files, took every global
    file as changed and re-emitted every source (b.js here) instead of the edited one. The
    action rewrites those paths to the input root's: the build info equals a local build's byte
    for byte, and the next local build stays incremental."""
    image = tmp_path / "image"
    typescript_store(image)
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "vx.workspace.json": {
                "remoteExecution": {"default": True, "workerInstall": str(image)}
            },
            ".gitignore": "node_modules\ndist\n",
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/tsconfig.json": TSCONFIG,
            "packages/a/src/a.ts": "export const a: number = 1;\n",
            "packages/a/src/b.ts": "export const b: number = 2;\n",
            "packages/a/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {"command": "tsc -b"},
                        "cache": {
                            "inputs": {"files": ["src/**", "tsconfig.json", "package.json"]},
                            "outputs": {"files": ["dist/**"]},
                        },
                    }
                }
            },
        }
    ).commit()
    typescript_store(repo.root)
    local = Repo(tmp_path / "local")
    shutil.copytree(repo.root, local.root, ignore=shutil.ignore_patterns("node_modules"))
    typescript_store(local.root)
    built_here = local.vx("run", "build", "--all", timeout=600)
    assert built_here.code == 0, built_here.err[-2000:]

    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=600)
    assert res.code == 0, res.err[-3000:]
    assert f"remote execution: 1 task ran on {stack.endpoint}" in res.err, res.err[-2000:]
    dist = repo.root / "packages/a/dist"
    info = (dist / "tsconfig.tsbuildinfo").read_text()
    assert "image" not in info and "../../node_modules/.pnpm/" in info, info[:600]
    outputs = sorted(p.relative_to(dist) for p in dist.rglob("*") if p.is_file())
    assert len(outputs) == 5  # a.js, a.d.ts, b.js, b.d.ts and the build info
    for rel in outputs:
        assert (dist / rel).read_bytes() == (local.root / "packages/a/dist" / rel).read_bytes(), rel

    for where in (repo.root, local.root):  # the same edit in both
        (where / "packages/a/src/a.ts").write_text("export const a: number = 3;\n")
    after_remote = emitted(repo.root / "packages/a")
    assert after_remote == emitted(local.root / "packages/a")
    assert "dist/a.js" in after_remote and "dist/b.js" not in after_remote


def test_a_relative_worker_install_is_refused(repo):
    installed_workspace(repo, "opt/ws")
    res = repo.vx("run", "build", "--all")
    assert res.code == 2, res.err
    assert "vx.workspace.json" in res.err and "workerInstall" in res.err
    assert "absolute path" in res.err and "Traceback" not in res.err


@pytest.mark.feature("RC-10")
def test_an_action_of_many_small_files_fits_the_batch_calls_both_ways(repo, stack, workers):
    """700 input files of 6000 bytes (4.2 MB) go up in BatchUpdateBlobs calls and come back as
    700 outputs in BatchReadBlobs calls: each call's message, counting every blob's digest and
    framing, stays under BuildGrid's 4 MiB cap. (A vx that packed batches by the blobs' bytes
    alone sent ~4 MiB of data plus 700 digests in one call and the server refused it,
    RESOURCE_EXHAUSTED: the task ran here instead.)"""
    files = {f"packages/a/src/f{i:03}.txt": f"{i:06}" * 1000 for i in range(700)}
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "vx.workspace.json": {"remoteExecution": {"default": True}},
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            **files,
            "packages/a/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {"command": "mkdir -p dist && cp src/*.txt dist/"},
                        "cache": {
                            "inputs": {"files": ["src/**", "package.json"]},
                            "outputs": {"files": ["dist/**"]},
                        },
                    }
                }
            },
        }
    ).commit()
    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=600)
    assert res.code == 0, res.err[-3000:]
    assert f"remote execution: 1 task ran on {stack.endpoint}" in res.err, res.err[-2000:]
    assert "ran here instead" not in res.err
    out = sorted((repo.root / "packages/a/dist").iterdir())
    assert len(out) == 700
    assert all(p.read_text() == files[f"packages/a/src/{p.name}"] for p in out)
    assert not any(p.stat().st_mode & stat.S_IXUSR for p in out[:3])
    assert os.path.getsize(out[0]) == 6000
