"""`vx run --verify=inputs` (LG-03): cached tasks run under real strace; every file a node task
read but did not declare is named with the cache.inputs entry that covers it, and the run exits 1."""

import json
import os
import subprocess
import sys

import pytest
from support.commands import needs
from support.workspace import npm_workspace

pytestmark = needs("strace")


def node(script: str) -> str:
    return "node -e \"const fs=require('fs');" + script + '"'


WRITE_OUT = "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js',s);"


def cached(
    command: str, inputs=("src/**",), workspace_files=(), deps=(), outputs=("dist/**",)
) -> dict:
    ins = {"files": list(inputs)}
    if workspace_files:
        ins["workspaceFiles"] = list(workspace_files)
    return {
        "exec": {"command": command},
        "dependsOn": list(deps),
        "cache": {"inputs": ins, "outputs": {"files": list(outputs)}},
    }


APP_READS_SHARED = node(
    "const s=fs.readFileSync('src/a.js','utf8')+fs.readFileSync('../shared/x.js','utf8');"
    + WRITE_OUT
)


def workspace(repo, app_task: dict, extra: dict | None = None):
    packages = {
        "shared": {"files": {"x.js": "X;", "notes.md": "unread"}},
        "app": {"tasks": {"build": app_task}, "files": {"src/a.js": "A;"}},
        **(extra or {}),
    }
    repo.write(npm_workspace(packages)).commit()
    return repo


def test_an_undeclared_read_of_a_sibling_file_is_named_and_fails_the_run(repo):
    workspace(repo, cached(APP_READS_SHARED))
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 1, res.err
    assert res.out.splitlines()[-4:] == [
        "app#build read 1 undeclared input:",
        '  ../shared/x.js  add cache.inputs.workspaceFiles: ["packages/shared/x.js"]',
        "",
        "verify: 1 undeclared input in 1 of 1 traced task",
    ]
    # the task itself succeeded and was saved: only the verdict fails the run
    assert res.task("app#build")["status"] == "success"


def test_a_correct_declaration_passes_and_the_cache_is_not_read(repo):
    workspace(repo, cached(APP_READS_SHARED, workspace_files=("packages/shared/x.js",)))
    first = repo.vx("run", "app#build")
    assert first.code == 0 and first.statuses() == {"app#build": ("success", "miss")}
    res = repo.vx("run", "app#build", "--verify")
    assert res.code == 0, res.out + res.err
    assert res.statuses() == {"app#build": ("success", "miss")}  # executed, to be observed
    assert res.out.splitlines()[-1] == "verify: every traced task declared what it read (1 task)"


def test_dependency_outputs_and_own_writes_are_covered_and_ignored_files_are_not_inputs(repo):
    lib_build = cached(
        node("fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/lib.js','L;')")
    )
    app = cached(
        node(
            "fs.mkdirSync('tmp',{recursive:true});fs.writeFileSync('tmp/scratch','x');"
            "const s=fs.readFileSync('tmp/scratch','utf8')+fs.readFileSync('../lib/dist/lib.js','utf8')"
            "+fs.readFileSync('.env.local','utf8')+fs.readFileSync('src/a.js','utf8');"
            "fs.unlinkSync('tmp/scratch');" + WRITE_OUT
        ),  # a scratch file it removes is no output
        deps=("^build",),
    )
    workspace(repo, app, {"lib": {"tasks": {"build": lib_build}, "files": {"src/l.js": "L"}}})
    repo.write(
        {
            "packages/app/package.json": {
                "name": "app",
                "version": "1.0.0",
                "dependencies": {"lib": "workspace:*"},
            },
            ".gitignore": "node_modules/\ndist/\n.vx/\ntmp/\n.env.local\n",
            "packages/app/.env.local": "SECRET=1",
        }
    ).commit()
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 0, res.out + res.err
    assert res.out.splitlines()[-1] == "verify: every traced task declared what it read (2 tasks)"


def test_each_task_gets_its_own_block_with_a_producer_hint(repo):
    gen = cached(
        node("fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/gen.js','G;')"),
        inputs=("src/**",),
    )
    app = cached(
        node(
            "const s=fs.readFileSync('config.json','utf8')+fs.readFileSync('../gen/dist/gen.js','utf8');"
            + WRITE_OUT
        ),
        deps=("gen#build",),
        inputs=("src/**",),
    )
    app["cache"]["inputs"][
        "tasks"
    ] = []  # gen#build's key is not folded: its outputs are not covered
    workspace(repo, app, {"gen": {"tasks": {"build": gen}, "files": {"src/g.js": "g"}}})
    repo.write({"packages/app/config.json": "{}"}).commit()
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 1, res.err
    block = res.out[res.out.index("app#build read") :].splitlines()
    assert block[:3] == [
        "app#build read 2 undeclared inputs:",
        '  config.json         add cache.inputs.files: ["config.json"]',
        '  ../gen/dist/gen.js  add cache.inputs.tasks: ["gen#build"] (gen#build outputs it)',
    ]
    assert block[-1] == "verify: 2 undeclared inputs in 1 of 2 traced tasks"


def test_verify_refuses_other_modes_and_dry(repo):
    workspace(repo, cached(APP_READS_SHARED))
    later = repo.vx("run", "app#build", "--verify=fingerprint")
    assert later.code == 2 and "not implemented yet" in later.err
    dry = repo.vx("run", "app#build", "--verify", "--dry")
    assert dry.code == 2 and "cannot be combined with `--dry`" in dry.err


@needs("bwrap")
def test_a_sandboxed_task_is_verified_from_its_sandbox_trace(repo):
    # config.json is granted to the sandbox (no violation) but not declared to the cache
    task = cached(
        node(
            "const s=fs.readFileSync('src/a.js','utf8')+fs.readFileSync('config.json','utf8');"
            + WRITE_OUT
        )
    )
    task["exec"]["sandbox"] = {
        "allow": {"read": ["src/**", "config.json", "package.json"], "write": ["dist/**"]}
    }
    workspace(repo, task)
    repo.write({"packages/app/config.json": "{}"}).commit()
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    assert res.task("app#build")["status"] == "success" and "sandboxViolations" not in res.task(
        "app#build"
    )
    assert res.out.splitlines()[-4:] == [
        "app#build read 1 undeclared input:",
        '  config.json  add cache.inputs.files: ["config.json"]',
        "",
        "verify: 1 undeclared input in 1 of 1 traced task",
    ]


def test_concurrent_tasks_keep_their_own_traces(repo):
    # two launches before either strace started once shared a trace file name
    reads = lambda f: cached(node(f"const s=fs.readFileSync('{f}','utf8');" + WRITE_OUT))  # noqa: E731
    repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": reads("a.txt")}, "files": {"a.txt": "a", "src/k": "k"}},
                "b": {"tasks": {"build": reads("b.txt")}, "files": {"b.txt": "b", "src/k": "k"}},
            }
        )
    ).commit()
    res = repo.vx("run", "build", "--all", "--verify", "--concurrency", "2")
    assert res.code == 1, res.err
    assert [line for line in res.out.splitlines() if "add " in line] == [
        '  a.txt  add cache.inputs.files: ["a.txt"]',
        '  b.txt  add cache.inputs.files: ["b.txt"]',
    ]


# ---------------------------------------------------------------- vercel/edge-runtime's shape

# primitives' build bundles dist/ (declared) and writes types/*.d.ts from type-definitions/ (not
# declared; gitignored by the package); vm's build type-checks against them through node_modules.
PRIMITIVES_BUILD = (
    "const fs=require('fs');fs.mkdirSync('dist',{recursive:true});fs.mkdirSync('types',{recursive:true});"
    "for (const f of fs.readdirSync('type-definitions')) "
    "fs.writeFileSync('types/'+f,fs.readFileSync('type-definitions/'+f));"
    "fs.writeFileSync('dist/index.js','module.exports={}');"
)
VM_BUILD = (
    "const fs=require('fs');const t=fs.readFileSync(require.resolve('@edge-runtime/primitives/types/index.d.ts'));"
    "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/index.js',fs.readFileSync('src/index.ts'));"
)
RUNTIME_BUILD = (
    "node -e \"require('fs').writeFileSync('src/version.ts','export const VERSION = 1')\""
)
EDGE_TURBO = {
    "globalEnv": ["RUNNER_OS", "NODE_VERSION"],
    "tasks": {
        "build": {"outputs": ["dist/**"], "dependsOn": ["^build"]},
        "edge-runtime#build": {
            "cache": False,
            "dependsOn": ["^build"],
            "outputs": ["src/version.ts"],
        },
        "@edge-runtime/primitives#build": {"dependsOn": ["^build"], "outputs": ["dist/**"]},
        "lint": {"outputs": []},
        "test": {"cache": False, "dependsOn": ["build"], "outputs": []},
    },
}


def edge_runtime(repo):
    def manifest(name, scripts, deps=()):
        return {
            "name": name,
            "version": "1.0.0",
            "scripts": scripts,
            "dependencies": {d: "workspace:*" for d in deps},
        }

    repo.write(
        {
            "package.json": {
                "name": "edge-runtime-monorepo",
                "private": True,
                "workspaces": ["packages/*"],
            },
            ".gitignore": "node_modules\n.vx\npackages/*/dist\npackages/runtime/src/version.ts\n",
            "turbo.json": EDGE_TURBO,
            "packages/primitives/package.json": manifest(
                "@edge-runtime/primitives", {"build": "node scripts/build.js"}
            ),
            "packages/primitives/.gitignore": "types\nload\n",
            "packages/primitives/scripts/build.js": PRIMITIVES_BUILD,
            "packages/primitives/type-definitions/index.d.ts": "export * from './fetch'",
            "packages/primitives/type-definitions/fetch.d.ts": "export declare const fetch: unknown",
            "packages/vm/package.json": manifest(
                "@edge-runtime/vm", {"build": "node scripts/build.js"}, ["@edge-runtime/primitives"]
            ),
            "packages/vm/scripts/build.js": VM_BUILD,
            "packages/vm/src/index.ts": "export {}",
            "packages/runtime/package.json": manifest(
                "edge-runtime",
                {
                    "build": RUNTIME_BUILD,
                    "lint": "node -e \"require('fs').readFileSync('src/version.ts')\"",
                },
                ["@edge-runtime/vm"],
            ),
            "packages/runtime/src/index.ts": "export * from './version'",
        }
    ).commit()
    links = repo.root / "node_modules" / "@edge-runtime"
    links.mkdir(parents=True)
    for name in ("primitives", "vm"):  # what `pnpm install` links
        (links / name).symlink_to(repo.root / "packages" / name)
    return repo


def test_an_undeclared_output_a_dependant_reads_is_named_with_the_producers_outputs(repo):
    edge_runtime(repo)
    res = repo.vx("run", "@edge-runtime/vm#build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    where = 'turbo.json tasks["@edge-runtime/primitives#build"]'
    out = res.out[res.out.index("@edge-runtime/primitives#build wrote") :].splitlines()
    assert out == [
        "@edge-runtime/primitives#build wrote 2 undeclared outputs:",
        f'  types/** (2 files)  add "types/**" to {where} "outputs"',
        "",
        "@edge-runtime/vm#build read 1 undeclared input:",
        '  ../primitives/types/** (1 file)  add "types/**" to the "outputs" of '
        "@edge-runtime/primitives#build, which writes it undeclared",
        "",
        f'{where} with these fixes: "outputs": ["dist/**", "types/**"]',
        "verify: 1 undeclared input, 2 undeclared outputs in 2 of 2 traced tasks",
    ]
    # with the fix, both pass: the dependant's key now folds the types the producer saves
    EDGE_TURBO["tasks"]["@edge-runtime/primitives#build"]["outputs"].append("types/**")
    try:
        repo.write({"turbo.json": EDGE_TURBO}).commit()
    finally:
        EDGE_TURBO["tasks"]["@edge-runtime/primitives#build"]["outputs"].remove("types/**")
    fixed = repo.vx("run", "@edge-runtime/vm#build", "--verify=inputs")
    assert fixed.code == 0, fixed.out + fixed.err
    assert fixed.out.splitlines()[-1] == "verify: every traced task declared what it read (2 tasks)"


def test_a_cache_false_tasks_writes_are_traced_for_its_cached_readers(repo):
    # edge-runtime#build is `cache: false` and writes src/version.ts; a cached lint reads it with no
    # edge to the writer (the copy an earlier build left)
    edge_runtime(repo)
    assert repo.vx("run", "edge-runtime#build").code == 0
    res = repo.vx("run", "edge-runtime#build", "edge-runtime#lint", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    block = res.out[res.out.index("edge-runtime#lint read") :].splitlines()
    assert block[:3] == [
        "edge-runtime#lint read 1 undeclared input:",
        '  src/version.ts  add "build" to turbo.json tasks.lint "dependsOn" (edge-runtime#build writes it, uncached)',
        "",
    ]
    # an uncached task is traced for what it writes, never itself checked or counted
    assert "edge-runtime#build wrote" not in res.out and "in 3 of 3 traced tasks" in res.out


# ---------------------------------------------------------------- floating-ui's shape

# `tsc -b`-like: dom's test project references react-dom's, so dom#typecheck reads react-dom's
# out-tsc when an earlier build left it; react-dom#typecheck depends on dom#typecheck (^typecheck).
TYPECHECK = (
    "const fs=require('fs');let s='';for (const f of fs.readdirSync('src')) s+=fs.readFileSync('src/'+f);"
    "s+=fs.readFileSync('tsconfig.json');const ref=process.argv[2];"
    "if (ref && fs.existsSync(ref)) s+=fs.readFileSync(ref);"
    "fs.mkdirSync('out-tsc',{recursive:true});fs.writeFileSync('out-tsc/index.d.ts',s);"
)
FLOATING_TURBO = {
    "globalDependencies": ["./config/scripts/build-api.mjs"],
    "tasks": {
        "build": {
            "dependsOn": ["^build"],
            "outputs": ["dist/**"],
            "inputs": [
                "packages/**/src/**",
                "packages/**/package.json",
                "packages/**/tsconfig.json",
                "packages/**/rollup.config.mjs",
                "packages/**/vite.config.ts",
            ],
        },
        "typecheck": {
            "dependsOn": ["^typecheck"],
            "outputs": ["out-tsc/**"],
            "inputs": ["src/**", "test/**", "tsconfig.json", "tsconfig.*.json"],
        },
        "lint": {"cache": False},
    },
}


def floating_ui(repo, build=None, sources=3, typecheck=None):
    def manifest(name, deps=(), **scripts):
        return {
            "name": name,
            "version": "1.0.0",
            "scripts": {"typecheck": "node ../../node_modules/tsc.js", **scripts},
            "dependencies": {d: "workspace:^" for d in deps},
        }

    files = {
        "package.json": {
            "name": "@floating-ui/monorepo",
            "private": True,
            "workspaces": ["./packages/*", "config"],
        },
        ".gitignore": "node_modules\ndist\nout-tsc\n.vx\n",
        "turbo.json": FLOATING_TURBO,
        "config/package.json": {"name": "config", "private": True, "version": "0.0.0"},
        "node_modules/tsc.js": TYPECHECK,  # tsc, as installed (gitignored)
        "config/scripts/build-api.mjs": "export {}",
        "packages/dom/package.json": manifest(
            "@floating-ui/dom", (), build=build or "node ../../config/build.js"
        ),
        "packages/dom/tsconfig.json": "{}",
        "packages/react-dom/package.json": manifest(
            "@floating-ui/react-dom", ("@floating-ui/dom",)
        ),
        "packages/react-dom/tsconfig.json": "{}",
        "packages/react-dom/src/index.ts": "export * from '@floating-ui/dom'",
    }
    files["packages/dom/package.json"]["scripts"]["typecheck"] = (
        typecheck or "node ../../node_modules/tsc.js ../react-dom/out-tsc/index.d.ts"
    )
    for i in range(sources):
        files[f"packages/dom/src/m{i}.ts"] = f"export const m{i} = {i}"
    repo.write(files).commit()
    return repo


def test_verify_never_suggests_an_edge_that_closes_a_cycle(repo):
    floating_ui(repo)
    assert (
        repo.vx("run", "typecheck").code == 0
    )  # an earlier build leaves react-dom's out-tsc behind
    res = repo.vx("run", "typecheck", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    assert res.out.splitlines()[-4:] == [
        "@floating-ui/dom#typecheck read 1 undeclared input:",
        "  ../react-dom/out-tsc/index.d.ts  no edge: @floating-ui/react-dom#typecheck outputs it and depends on "
        "this task (dependsOn would close a cycle), so this read is of an earlier build; move the read out of "
        "this task (a gitignored file cannot be an input)",
        "",
        "verify: 1 undeclared input in 1 of 2 traced tasks",
    ]
    assert '"dependsOn"' not in res.out


def test_a_write_into_another_tasks_declared_outputs_is_named_not_declared_twice(repo):
    # `tsc -b` in dom builds the react-dom project its tests reference: react-dom#typecheck's outputs
    build_ref = (
        "node -e \"const fs=require('fs');fs.mkdirSync('../react-dom/out-tsc/lib',{recursive:true});"
        "fs.writeFileSync('../react-dom/out-tsc/lib/index.d.ts','R')\" && node ../../node_modules/tsc.js"
    )
    floating_ui(repo, typecheck=build_ref)
    res = repo.vx("run", "@floating-ui/dom#typecheck", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    assert res.out.splitlines()[-4:] == [
        "@floating-ui/dom#typecheck wrote 1 undeclared output:",
        "  ../react-dom/out-tsc/lib/index.d.ts  no output of its own: @floating-ui/react-dom#typecheck declares it; "
        "let one task write it (two writers restore each other's copy)",
        "",
        "verify: 1 undeclared output in 1 of 1 traced task",
    ]


# rollup -c: every source of the package, its tsconfig and rollup config, and the shared config
# package's sources and base tsconfig (which every package's build reads)
ROLLUP = (
    "const fs=require('fs'),path=require('path');const walk=d=>fs.readdirSync(d,{withFileTypes:true})"
    ".flatMap(e=>e.isDirectory()?walk(path.join(d,e.name)):[path.join(d,e.name)]);"
    "let s='';for (const f of [...walk('src'),'tsconfig.json','rollup.config.mjs',...walk('../../config/src'),"
    "'../../config/tsconfig.base.json']) s+=fs.readFileSync(f);"
    "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/index.mjs',s);"
)


def test_turbo_advice_is_turbo_json_text_with_the_fewest_globs(repo):
    floating_ui(repo, build="node ../../node_modules/rollup.js", sources=12)
    extra = {
        "node_modules/rollup.js": ROLLUP,
        "config/src/index.mts": "export {}",
        "config/src/defineRollupConfig.mts": "export {}",
        "config/src/utils/outputFormat.mts": "export {}",
        "config/tsconfig.base.json": "{}",
        "packages/react-dom/rollup.config.mjs": "export default {}",
        "packages/dom/rollup.config.mjs": "export default {}",
        "packages/dom/vite.config.mts": "unread",
    }
    extra.update({f"packages/dom/src/platform/p{i}.ts": "p" for i in range(12)})
    repo.write(extra)
    manifest = (
        repo.root / "packages/react-dom/package.json"
    )  # react-dom builds with the same script
    manifest.write_text(
        manifest.read_text().replace(
            '"typecheck":', '"build": "node ../../node_modules/rollup.js", "typecheck":'
        )
    )
    repo.commit()
    res = repo.vx("run", "build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    dom = res.out[res.out.index("@floating-ui/dom#build read") :].split("\n\n")[0].splitlines()
    where = "turbo.json tasks.build"
    relative = "turbo inputs are package-relative"
    assert dom == [
        "@floating-ui/dom#build read 30 undeclared inputs:",
        f'  src/** (24 files)                add "src/**" to {where} "inputs" '
        f'(in place of "packages/**/src/**": {relative})',
        f'  tsconfig.json                    add "tsconfig.json" to {where} "inputs" '
        f'(in place of "packages/**/tsconfig.json": {relative})',
        f'  rollup.config.mjs                add "rollup.config.mjs" to {where} "inputs" '
        f'(in place of "packages/**/rollup.config.mjs": {relative})',
        '  ../../config/src/** (3 files)    add "config/src/**" to turbo.json "globalDependencies" '
        "(tasks of several packages read it)",
        '  ../../config/tsconfig.base.json  add "config/tsconfig.base.json" to turbo.json "globalDependencies" '
        "(tasks of several packages read it)",
    ]
    # the fixes of the shared definition, once for both packages: no glob it says matches nothing
    assert res.out.splitlines()[-5:] == [
        f'"packages/**/package.json" in {where} "inputs" matches nothing: {relative}; "package.json" here, '
        'or "$TURBO_ROOT$/packages/**/package.json" for root-relative',
        f'"packages/**/vite.config.ts" in {where} "inputs" matches no file in any package that runs it: '
        "left out",
        f'{where} with these fixes: "inputs": ["src/**", "package.json", "tsconfig.json", "rollup.config.mjs"]',
        'turbo.json with these fixes: "globalDependencies": '
        '["./config/scripts/build-api.mjs", "config/src/**", "config/tsconfig.base.json"]',
        "verify: 37 undeclared inputs in 2 of 2 traced tasks",
    ]
    assert res.out.count(" with these fixes: ") == 2
    assert "cache.inputs" not in res.out and "workspaceFiles" not in res.out
    # turbo itself hashes none of the package's sources for the declared globs, and all of them for
    # the suggested ones; with both fixes pasted, verify passes
    assert turbo_inputs(repo, "@floating-ui/dom#build") == ["package.json"]
    turbo = json.loads(json.dumps(FLOATING_TURBO))
    turbo["tasks"]["build"]["inputs"] = json.loads(
        res.out.splitlines()[-3].split('"inputs": ', 1)[1]
    )
    turbo["globalDependencies"] = json.loads(
        res.out.splitlines()[-2].split('"globalDependencies": ', 1)[1]
    )
    repo.write({"turbo.json": turbo}).commit()
    hashed = turbo_inputs(repo, "@floating-ui/dom#build")
    assert {"tsconfig.json", "rollup.config.mjs", "src/m0.ts", "src/platform/p11.ts"} <= set(
        hashed
    ) and len(hashed) == 27
    fixed = repo.vx("run", "build", "--verify=inputs")
    assert fixed.code == 0, fixed.out + fixed.err
    assert "matches no file" not in fixed.err  # nothing pasted is a glob the run warns about


def turbo_inputs(repo, task: str) -> list[str]:
    """The files turbo 2 (the pinned one) hashes for `task`, from `turbo run --dry=json`."""
    from support.npm_packages import installed

    turbo = installed("turbo").parent / ".bin" / "turbo"
    if not (
        repo.root / "package-lock.json"
    ).exists():  # turbo wants a package manager and its lockfile
        manifest = json.loads((repo.root / "package.json").read_text())
        repo.write(
            {
                "package.json": {**manifest, "packageManager": "npm@10.9.0"},
                "package-lock.json": {"lockfileVersion": 3, "packages": {}},
            }
        ).commit()
    out = subprocess.run(
        [str(turbo), "run", "build", "--dry=json"],
        cwd=repo.root,
        capture_output=True,
        text=True,
        env={**os.environ, "TURBO_TELEMETRY_DISABLED": "1", "DO_NOT_TRACK": "1"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return sorted(next(t for t in json.loads(out.stdout)["tasks"] if t["taskId"] == task)["inputs"])


def test_vx_tasks_get_vx_config_text_with_the_fewest_globs(repo):
    # a root-relative glob in `files` matches nothing; every source and a scratch report left behind
    reads = (
        "for (const f of ['a.js','lib/b.js','lib/c.js']) fs.readFileSync('src/'+f);"
        "fs.mkdirSync('reports',{recursive:true});fs.writeFileSync('reports/size.txt','1');"
        "fs.writeFileSync('reports/deps.txt','2');const s='';"
    )
    workspace(repo, cached(node(reads + WRITE_OUT), inputs=("packages/app/src/**",)))
    repo.write(
        {
            ".gitignore": "node_modules/\ndist/\n.vx/\nreports/\n",
            "packages/app/src/lib/b.js": "B",
            "packages/app/src/lib/c.js": "C",
        }
    ).commit()
    res = repo.vx("run", "app#build", "--verify")
    assert res.code == 1, res.out + res.err
    assert res.out.splitlines()[-6:] == [
        "app#build read 3 undeclared inputs:",
        '  src/** (3 files)  add cache.inputs.files: ["src/**"] (in place of "packages/app/src/**": '
        "files globs are project-relative)",
        "app#build wrote 2 undeclared outputs:",
        '  reports/** (2 files)  add cache.outputs.files: ["reports/**"]',
        "",
        "verify: 3 undeclared inputs, 2 undeclared outputs in 1 of 1 traced task",
    ]


# ---------------------------------------------------------------- a missing edge

UI_BUILD = node(
    "fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/index.d.ts',fs.readFileSync('src/index.ts'));"
)
WEB_CHECK = node("fs.readFileSync('src/index.ts');fs.readFileSync('../ui/dist/index.d.ts');")


def check_types_repo(repo, check_deps: list[str]):
    """create-turbo's shape: web's check-types reads ui's built types, under `^check-types` only."""
    turbo = {
        "tasks": {
            "build": {"dependsOn": ["^build"], "outputs": ["dist/**"]},
            "check-types": {"dependsOn": check_deps},
        }
    }
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules\ndist\n.vx\n",
            "turbo.json": turbo,
            "packages/ui/package.json": {
                "name": "ui",
                "version": "1.0.0",
                "scripts": {
                    "build": UI_BUILD,
                    "check-types": node("fs.readFileSync('src/index.ts');"),
                },
            },
            "packages/ui/src/index.ts": "export const ui = 1;",
            "packages/web/package.json": {
                "name": "web",
                "version": "1.0.0",
                "dependencies": {"ui": "*"},
                "scripts": {"check-types": WEB_CHECK},
            },
            "packages/web/src/index.ts": "import 'ui';",
        }
    ).commit()


def test_a_read_of_another_tasks_output_with_no_edge_names_the_edge(repo):
    """`check-types` reading its dependency's dist under `^check-types` only passes while an
    earlier build left the dist; verify names the output, its task and the missing edge."""
    check_types_repo(repo, ["^check-types"])
    assert repo.vx("run", "build").code == 0
    for tasks in (["check-types"], ["build", "check-types"]):  # ui#build outside the run, or in it
        res = repo.vx("run", *tasks, "--verify=inputs")
        assert res.code == 1, res.out + res.err
        assert res.out.splitlines()[-4:-1] == [
            "web#check-types read 1 undeclared input:",
            '  ../ui/dist/** (1 file)  the output of ui#build, with no edge to it: add "^build" '
            'to turbo.json tasks.check-types "dependsOn"',
            "",
        ]
    check_types_repo(repo, ["^check-types", "^build"])
    fixed = repo.vx("run", "check-types", "--verify=inputs")
    assert fixed.code == 0, fixed.out + fixed.err


# ---------------------------------------------------------------- one fix per definition

# vercel/edge-runtime's shape: a shared `build` run by vm and ponyfill (which read primitives'
# undeclared types and their own tsconfig) and by docs (Next.js: .next/, its cache inside), with a
# glob no package matches; primitives has a `pkg#build` of its own.
READS_TYPES = (
    "const fs=require('fs');for (const f of ['index.d.ts','fetch.d.ts']) "
    "fs.readFileSync(require.resolve('@edge-runtime/primitives/types/'+f));"
    "fs.readFileSync('tsconfig.json');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/index.js',fs.readFileSync('src/index.ts'));"
)
NEXT_BUILD = (
    "const fs=require('fs');fs.readFileSync('next.config.js');const s=fs.readFileSync('src/page.tsx');"
    "for (const f of ['server/app/page.js','server/pages-manifest.json','static/chunks/main.js',"
    "'static/css/app.css','BUILD_ID','cache/webpack/client.pack','cache/images/a.webp']) {"
    "fs.mkdirSync('.next/'+f.split('/').slice(0,-1).join('/'),{recursive:true});"
    "fs.writeFileSync('.next/'+f,s);}"
)


def edge_runtime_docs(repo):
    edge_runtime(repo)
    turbo = json.loads(json.dumps(EDGE_TURBO))
    turbo["tasks"]["build"]["inputs"] = ["src/**", "lib/**"]
    manifest = {"version": "1.0.0", "dependencies": {"@edge-runtime/primitives": "workspace:*"}}
    files = {"turbo.json": turbo, ".gitignore": "node_modules\n.vx\npackages/*/dist\n.next\n"}
    for name in ("vm", "ponyfill"):
        files[f"packages/{name}/package.json"] = {
            **manifest,
            "name": f"@edge-runtime/{name}",
            "scripts": {"build": "node scripts/build.js"},
        }
        files[f"packages/{name}/scripts/build.js"] = READS_TYPES
        files[f"packages/{name}/src/index.ts"] = "export {}"
        files[f"packages/{name}/tsconfig.json"] = "{}"
    files["packages/docs/package.json"] = {
        "name": "@edge-runtime/docs",
        "version": "1.0.0",
        "scripts": {"build": "node scripts/build.js"},
    }
    files["packages/docs/scripts/build.js"] = NEXT_BUILD
    files["packages/docs/next.config.js"] = "module.exports = {}"
    files["packages/docs/src/page.tsx"] = "export default () => null"
    repo.write(files).commit()
    (repo.root / "node_modules/@edge-runtime/ponyfill").symlink_to(repo.root / "packages/ponyfill")
    return repo


def test_a_shared_definitions_fixes_are_one_line_each_and_a_package_alone_gets_its_own(repo):
    """One list to paste per turbo.json definition, not one per package; a glob no package matches
    left out of it; docs' .next as `.next/**` without Next's cache, on a `pkg#build` of docs' own
    (not the shared `build`); primitives' types named once per dependant, not once per file."""
    edge_runtime_docs(repo)
    res = repo.vx("run", "build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    lines = res.out.splitlines()
    fixes = [line for line in lines if " with these fixes: " in line or " with a new " in line]
    inputs = [
        line
        for line in fixes
        if line.startswith('turbo.json tasks.build with these fixes: "inputs"')
    ]
    assert len(inputs) == 1, res.out  # one for vm, ponyfill and docs
    read = {"src/**", "scripts/build.js", "tsconfig.json", "next.config.js"}
    assert set(json.loads(inputs[0].split('"inputs": ', 1)[1])) == read
    assert (
        '"lib/**" in turbo.json tasks.build "inputs" matches no file in any package that runs it: left out'
        in lines
    )
    docs = '[".next/**", "!.next/cache/**"]'
    [own] = [line for line in fixes if 'tasks["@edge-runtime/docs#build"]' in line]
    assert own.startswith('turbo.json with a new tasks["@edge-runtime/docs#build"]'), own
    body = json.loads(own.split("writes): ", 1)[1])
    assert body["outputs"] == ["dist/**", ".next/**", "!.next/cache/**"] and body["dependsOn"] == [
        "^build"
    ]
    assert set(body["inputs"]) == read
    assert not any(
        line.startswith('turbo.json tasks.build with these fixes: "outputs"') for line in fixes
    )
    block = res.out[res.out.index("@edge-runtime/docs#build wrote") :].split("\n\n")[0].splitlines()
    assert block == [
        "@edge-runtime/docs#build wrote 5 undeclared outputs:",
        f'  .next/** (5 files)  add {docs[1:-1]} to the "outputs" of a new turbo.json '
        'tasks["@edge-runtime/docs#build"] (this package alone writes it)',
    ]
    types = [line for line in lines if "../primitives/types" in line]
    assert (
        types
        == [
            '  ../primitives/types/** (2 files)  add "types/**" to the "outputs" of '
            "@edge-runtime/primitives#build, which writes it undeclared"
        ]
        * 2
    ), res.out  # vm's and ponyfill's
    assert (
        'turbo.json tasks["@edge-runtime/primitives#build"] with these fixes: "outputs": ["dist/**", "types/**"]'
        in fixes
    )


# ---------------------------------------------------------------- reads by file handle

# A file opened by handle (name_to_handle_at, then open_by_handle_at), through ctypes: python's
# os has neither. `make` writes the handle of argv[2] to argv[3]; `open` opens the handle kept in
# argv[2] (relative to the mount of the current directory) and writes what it read to dist/out.js.
BY_HANDLE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
handle, mount = Handle(128), ctypes.c_int()
if sys.argv[1] == "make":
    assert libc.name_to_handle_at(-100, sys.argv[2].encode(), ctypes.byref(handle), ctypes.byref(mount), 0) == 0
    open(sys.argv[3], "wb").write(bytes(handle))
    sys.exit()
if sys.argv[1] == "both":
    assert libc.name_to_handle_at(-100, sys.argv[2].encode(), ctypes.byref(handle), ctypes.byref(mount), 0) == 0
else:
    ctypes.memmove(ctypes.byref(handle), open(sys.argv[2], "rb").read(), ctypes.sizeof(handle))
fd = libc.open_by_handle_at(os.open(".", os.O_RDONLY), ctypes.byref(handle), os.O_RDONLY)
assert fd >= 0, os.strerror(ctypes.get_errno())
os.makedirs("dist", exist_ok=True)
open("dist/out.js", "wb").write(os.read(fd, 100))
"""


def by_handle_workspace(repo, *args: str):
    command = f"python3 ../../by_handle.py {' '.join(args)}"
    workspace(repo, cached(command, workspace_files=("by_handle.py",)))
    (repo.root / "by_handle.py").write_text(BY_HANDLE)
    return repo.commit()


@pytest.mark.skipif(os.geteuid() != 0, reason="open_by_handle_at needs CAP_DAC_READ_SEARCH")
def test_a_read_by_file_handle_is_named_by_the_path_its_handle_was_made_of(repo):
    """The task makes a handle of ../shared/x.js and opens the file by it. Before, the trace had
    neither call, and --verify said every task declared what it read."""
    by_handle_workspace(repo, "both", "../shared/x.js")
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    assert (repo.root / "packages/app/dist/out.js").read_text() == "X;"
    assert res.out.splitlines()[-4:] == [
        "app#build read 1 undeclared input:",
        '  ../shared/x.js  add cache.inputs.workspaceFiles: ["packages/shared/x.js"]',
        "",
        "verify: 1 undeclared input in 1 of 1 traced task",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="open_by_handle_at needs CAP_DAC_READ_SEARCH")
def test_a_read_by_a_handle_made_outside_the_trace_is_a_warning_not_a_pass(repo, tmp_path):
    """The handle was made before the run (kept in a file); the task only opens by it: the trace
    cannot say which file it read, and --verify says so instead of passing every task."""
    by_handle_workspace(repo, "open", str(tmp_path / "handle"))
    subprocess.run(
        [sys.executable, "-c", BY_HANDLE, "make", "packages/shared/x.js", str(tmp_path / "handle")],
        cwd=repo.root,
        check=True,
    )
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 0, res.out + res.err
    assert (repo.root / "packages/app/dist/out.js").read_text() == "X;"
    lines = res.out.splitlines()
    assert any(
        line.startswith(
            "warning: app#build read through open_by_handle_at a file that was not attributed"
        )
        for line in lines
    ), res.out
    assert lines[-1] == (
        "verify: no undeclared read named in 1 traced task, but 1 task opened files by handle "
        "that the trace cannot name"
    )
