"""`vx init` (TL-01): a vx.config.json per package from its scripts, then a run of them."""

from __future__ import annotations

import json

import pytest
from support.commands import needs
from support.workspace import npm_workspace

from vx.config import jsonc

WRITE = (
    "node -e \"require('fs').mkdirSync('{out}',{{recursive:true}});"
    "require('fs').writeFileSync('{out}/x.js','{name}')\""
)


@pytest.fixture
def ws(repo):
    files = npm_workspace(
        {"lib": {}, "web": {"deps": ["lib"]}},
        root_extra={"scripts": {"build": "turbo run build", "lint": "node -e 0"}},
    )
    files["packages/lib/package.json"]["scripts"] = {
        "build": WRITE.format(out="out", name="lib") + " -- --outDir out",
        "prebuild": "node -e 0",
        "test": "node -e \"require('fs').accessSync('out/x.js')\"",
        "dev": "tsc -w",
    }
    files["packages/web/package.json"]["scripts"] = {
        "build": WRITE.format(out="dist", name="web"),
        "start": "node server.js",
        "typecheck": "node -e 0",
    }
    return repo.write(files).commit()


@pytest.mark.feature("TL-01")
def test_scripts_become_tasks_and_run(ws):
    result = ws.vx("init", summary=False)
    assert result.code == 0, result.err
    web = (ws.root / "packages/web/vx.config.json").read_text()
    assert (
        '"^build"' in web and '// "cache"' in web and '"dist/**"' in web
    )  # caching: a comment to turn on
    lib_text = (ws.root / "packages/lib/vx.config.json").read_text()
    lib = jsonc.loads(lib_text, "lib")["tasks"]
    assert '"out/**"' in lib_text and set(lib) == {"build", "test", "dev"}
    assert (
        lib["dev"]["exec"]["persistent"] == {} and "cache" not in lib["dev"]
    )  # the watcher: persistent
    assert lib["build"]["exec"]["command"].startswith("(\nnode -e 0\n) && (")  # prebuild folded in
    assert "`dev` is persistent" in result.err and "runs the members" in result.err
    web_tasks = jsonc.loads(web, "web")["tasks"]
    assert web_tasks["start"]["exec"]["persistent"] == {} and web_tasks["start"]["dependsOn"] == [
        "^build"
    ]
    scripts = json.loads((ws.root / "package.json").read_text())["scripts"]
    assert (
        scripts["build"] == "vx run build" and scripts["lint"] == "node -e 0"
    )  # npm run build goes through vx
    root = (ws.root / "vx.config.json").read_text()
    assert '"lint"' in root and "turbo run" not in root
    run = ws.vx("run", "test", "typecheck", "--all")
    assert run.code == 0, run.err
    assert set(run.statuses()) == {"lib#build", "lib#test", "web#build", "web#typecheck"}


@pytest.mark.feature("TL-01")
def test_existing_configs_are_kept_unless_forced_and_dry_writes_nothing(ws):
    dry = ws.vx("init", "--dry", summary=False)
    assert dry.code == 0 and "// packages/web/vx.config.json" in dry.out
    assert not (ws.root / "packages/web/vx.config.json").exists()
    (ws.root / "packages/web/vx.config.json").write_text(json.dumps({"tasks": {}}))
    kept = ws.vx("init", summary=False)
    assert "kept" in kept.err and json.loads(
        (ws.root / "packages/web/vx.config.json").read_text()
    ) == {"tasks": {}}
    forced = ws.vx("init", "--force", summary=False)
    assert forced.code == 0 and "build" in (ws.root / "packages/web/vx.config.json").read_text()


@pytest.mark.feature("TL-02")
def test_a_turborepo_repository_needs_no_init(ws):
    (ws.root / "turbo.json").write_text(json.dumps({"tasks": {"build": {}}}))
    result = ws.vx("init", summary=False)
    assert result.code == 0 and "runs turbo.json as it is" in result.err
    assert not (ws.root / "packages/web/vx.config.json").exists()


@pytest.mark.feature("TL-01")
def test_a_script_that_is_no_task_yet_points_at_vx_init(ws):
    result = ws.vx("run", "build", summary=False)
    assert (
        result.code == 2
        and "vx init" in result.err
        and "a package.json script in: //, lib, web" in result.err
    )


def test_issue17_init_maps_a_root_workspaces_script_and_can_write_caching_on(repo):
    """`npm run build --workspaces` at the root becomes `vx run build`; `--cache` writes each
    build's cache block on, so the second `vx run build` is served from the cache."""
    files = npm_workspace(
        {"lib": {}}, root_extra={"scripts": {"build": "npm run build --workspaces"}}
    )
    files["packages/lib/package.json"]["scripts"] = {"build": WRITE.format(out="dist", name="lib")}
    files["packages/lib/src/a.js"] = "a"
    repo.write(files).commit()
    result = repo.vx("init", "--cache", summary=False)
    assert result.code == 0, result.err
    assert (
        json.loads((repo.root / "package.json").read_text())["scripts"]["build"] == "vx run build"
    )
    assert "`build` now runs `vx run …`" in result.err and "caching on" in result.err
    lib = jsonc.loads((repo.root / "packages/lib/vx.config.json").read_text(), "lib")["tasks"]
    assert lib["build"]["cache"]["outputs"]["files"] == ["dist/**"]
    repo.commit("init")
    assert repo.vx("run", "build").statuses() == {"lib#build": ("success", "miss")}
    assert repo.vx("run", "build").statuses() == {"lib#build": ("success", "up-to-date")}


# reads its tsconfig and sources, as tsc does, into dist/
TSC_LIKE = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/x.js',fs.readFileSync('tsconfig.json','utf8')+fs.readFileSync('src/a.ts','utf8'))\""
)


@pytest.mark.feature("TL-01")
@needs("strace")
def test_init_cache_never_writes_a_config_that_hits_stale(repo):
    """`--cache` keys each build on every file of its package, as turbo hashes it: an edit to the
    tsconfig the build reads is a miss, never a hit on the old dist; and a traced run finds no
    read the written inputs miss."""
    files = npm_workspace({"lib": {}})
    files["packages/lib/package.json"]["scripts"] = {"build": TSC_LIKE}
    files["packages/lib/tsconfig.json"] = '{"compilerOptions": {"target": "es2019"}}'
    files["packages/lib/src/a.ts"] = "export const a = 1;"
    repo.write(files).commit()
    assert repo.vx("init", "--cache", summary=False).code == 0
    text = (repo.root / "packages/lib/vx.config.json").read_text()
    assert "--verify=inputs" in text  # the file says how to narrow the inputs soundly
    repo.commit("init")
    assert repo.vx("run", "build").statuses() == {"lib#build": ("success", "miss")}
    assert repo.vx("run", "build").statuses() == {"lib#build": ("success", "up-to-date")}
    (repo.root / "packages/lib/tsconfig.json").write_text(
        '{"compilerOptions": {"target": "es2022"}}'
    )
    assert repo.vx("run", "build").statuses() == {"lib#build": ("success", "miss")}
    assert "es2022" in (repo.root / "packages/lib/dist/x.js").read_text()
    verified = repo.vx("run", "build", "--verify=inputs")
    assert verified.code == 0, verified.out + verified.err
