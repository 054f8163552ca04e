"""What the task graph holds and refuses: the implicit keyed `build` (WS-19), workspace edges as the
package manager links them (WS-20), overlapping outputs (GR-15, WS-12), turbo's tasks without a script
(TL-05), dependsOn forms (GR-01) and cycles (GR-04)."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace

# Reads the dependency's sources straight from its directory, as a bundler reading a source-only
# package does: the output changes with them.
BUNDLE = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/out.js',fs.readFileSync('src/app.ts','utf8')+fs.readFileSync('../types/src/a.ts','utf8'))\""
)


def _source_only(repo):
    return repo.write(
        npm_workspace(
            {
                "types": {"files": {"src/a.ts": "export type A = 1;\n"}},
                "app": {
                    "deps": ["types"],
                    "tasks": {"build": build_task(command=BUNDLE)},
                    "files": {"src/app.ts": "app;\n"},
                },
            }
        )
    ).commit()


@pytest.mark.feature("WS-19")
def test_source_only_package_is_keyed(repo):
    """An edit to a dependency that declares no `build` is a miss for the dependant, not a hit
    with the old output."""
    _source_only(repo)
    first = repo.vx("run", "app#build")
    assert first.code == 0, first.err
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 2;\n")
    second = repo.vx("run", "app#build")
    assert second.code == 0, second.err
    assert second.task("app#build")["cache"] == "miss"
    assert (repo.root / "packages/app/dist/out.js").read_text() == "app;\nexport type A = 2;\n"
    third = repo.vx("run", "app#build")
    assert third.task("app#build")["cache"] == "up-to-date"


@pytest.mark.feature("WS-19")
def test_implicit_build_is_reached_not_selected_and_shown(repo):
    _source_only(repo)
    plan = json.loads(
        repo.vx("run", "build", "--dry=json").out
    )  # from the root: every declared build
    assert [t["id"] for t in plan["tasks"]] == ["types#build", "app#build"]
    types = plan["tasks"][0]
    assert types["predicted"] == "group" and types["implicit"] is True and types["command"] is None
    assert plan["tasks"][1]["deps"] == ["types#build"]
    assert "implicit" not in plan["tasks"][1]
    # A bare name never selects it: from inside `types`, `build` is no task of that project.
    inside = repo.vx("run", "build", cwd="packages/types")
    assert inside.code == 2 and "has no task `build` (no `build` script or task)" in inside.err
    named = repo.vx(
        "run", "types#test"
    )  # one that no package has, named: who has it, or that nobody does
    assert (
        named.code == 2
        and "package `types` has no task `test` (no `test` script or task)" in named.err
    )
    assert repo.vx("run", "build", "--all").statuses() == {"app#build": ("success", "miss")}
    # `pkg#build` reaches it, and `vx why` names the file that moved its key.
    assert repo.vx("run", "types#build").code == 0
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 3;\n")
    assert repo.vx("run", "app#build").code == 0
    why = repo.vx("why", "types#build", summary=False)
    assert why.code == 0 and "packages/types/src/a.ts" in why.out, why.out + why.err


@pytest.mark.feature("WS-19")
def test_affected_reaches_through_a_source_only_package(repo):
    """`--affected`: an edit in a package with no `build` reaches its dependants' builds."""
    _source_only(repo)
    repo.git("branch", "base")
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 4;\n")
    repo.commit("edit types")
    res = repo.vx("run", "build", "--affected=base")
    assert res.code == 0, res.err
    assert res.statuses() == {"app#build": ("success", "miss")}


# ---------------------------------------------------------------- WS-20: edges as the package manager links


def _pnpm() -> str:
    from support.npm_packages import installed

    return str(installed("pnpm").parent / ".bin" / "pnpm")


def _pnpm_install(repo, tmp_path):
    """The real pnpm writes the lockfile (resolving only metadata; nothing is installed)."""
    import subprocess

    env = {
        **__import__("os").environ,
        "npm_config_store_dir": str(tmp_path / "store"),
        "npm_config_cache_dir": str(tmp_path / "cache"),
        "CI": "1",
    }
    subprocess.run(
        [_pnpm(), "install", "--lockfile-only", "--ignore-scripts"],
        cwd=repo.root,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


def _pnpm_workspace(repo, npmrc=None):
    files = {
        "package.json": {"name": "root", "private": True, "packageManager": "pnpm@9.15.9"},
        "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
        # A member named like a registry package: `^7.0.0` is the registry's unless pnpm links ranges.
        "packages/is-number/package.json": {"name": "is-number", "version": "7.0.0"},
        "packages/is-number/vx.config.json": {"tasks": {"build": build_task(deps=())}},
        "packages/is-number/src/a.js": "N;",
        "packages/lib/package.json": {"name": "lib", "version": "1.0.0"},
        "packages/lib/vx.config.json": {"tasks": {"build": build_task(deps=())}},
        "packages/lib/src/a.js": "L;",
        "packages/app/package.json": {
            "name": "app",
            "version": "1.0.0",
            "dependencies": {"is-number": "^7.0.0", "lib": "workspace:*"},
        },
        "packages/app/vx.config.json": {"tasks": {"build": build_task()}},
        "packages/app/src/a.js": "A;",
    }
    if npmrc is not None:
        files[".npmrc"] = npmrc
    return repo.write(files)


def _app_deps(repo):
    res = repo.vx("run", "app#build", "--dry=json")
    assert res.code == 0, res.err
    return {t["id"]: t["deps"] for t in json.loads(res.out)["tasks"]}["app#build"]


@pytest.mark.feature("WS-20")
def test_pnpm9_links_a_range_only_as_its_lockfile_says(repo, tmp_path):
    """pnpm 9 links a workspace package for `workspace:` specs, not for a range the member
    satisfies: no edge (and no extra miss) where pnpm installed the registry's package."""
    _pnpm_workspace(repo)
    _pnpm_install(repo, tmp_path)
    lock = (repo.root / "pnpm-lock.yaml").read_text()
    assert "version: 7.0.0" in lock and "version: link:../lib" in lock  # what pnpm itself decided
    repo.commit()
    assert _app_deps(repo) == ["lib#build"]


@pytest.mark.feature("WS-20")
def test_pnpm_link_workspace_packages_true_links_ranges(repo, tmp_path):
    _pnpm_workspace(repo, npmrc="link-workspace-packages=true\n")
    _pnpm_install(repo, tmp_path)
    assert "version: link:../is-number" in (repo.root / "pnpm-lock.yaml").read_text()
    repo.commit()
    assert _app_deps(repo) == ["is-number#build", "lib#build"]


@pytest.mark.feature("WS-20")
def test_pnpm_without_a_lockfile_follows_the_version_default(repo):
    _pnpm_workspace(repo).commit()  # pnpm 9 (packageManager): ranges do not link
    assert _app_deps(repo) == ["lib#build"]
    pkg = json.loads((repo.root / "package.json").read_text())
    repo.write(
        {"package.json": {**pkg, "packageManager": "pnpm@8.15.9"}}
    ).commit()  # pnpm 8 linked them
    assert _app_deps(repo) == ["is-number#build", "lib#build"]


# ---------------------------------------------------------------- GR-15 / WS-12: one owner per output


@pytest.mark.feature("GR-15")
def test_overlapping_outputs_are_refused_at_graph_build(repo):
    """Two tasks of one project declaring `dist/**`: the dependant's wipe would delete what the
    upstream built, and their restores would undo each other. Refused before anything runs."""
    make_lib = "mkdir -p dist && echo lib > dist/lib.js"
    bundle = "test -f dist/lib.js && cat dist/lib.js > dist/bundle.js"
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {
                        "build": {
                            "exec": {"command": make_lib},
                            "cache": {
                                "inputs": {"files": ["src/**"]},
                                "outputs": {"files": ["dist/**"]},
                            },
                        },
                        "bundle": {
                            "exec": {"command": bundle},
                            "dependsOn": ["build"],
                            "cache": {
                                "inputs": {"files": ["src/**"]},
                                "outputs": {"files": ["./dist/**"]},
                            },
                        },
                    },
                    "files": {"src/a.js": "A;"},
                }
            }
        )
    ).commit()
    res = repo.vx("run", "app#bundle")
    assert res.code == 2, res.out + res.err
    assert (
        "`app#build` and `app#bundle` declare overlapping outputs: `dist/**` and `./dist/**`"
        in res.err
    )
    assert "in: packages/app/vx.config.json, tasks.bundle.cache.outputs.files" in res.err
    assert "hint:" in res.err and "Traceback" not in res.err
    assert not (repo.root / "packages/app/dist").exists()  # nothing ran


@pytest.mark.feature("GR-15")
def test_disjoint_or_taken_back_outputs_run(repo):
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {
                        "build": {
                            "exec": {"command": "mkdir -p dist/types && echo js > dist/a.js"},
                            "cache": {
                                "inputs": {"files": ["src/**"]},
                                "outputs": {"files": ["dist/**", "!dist/types/**"]},
                            },
                        },
                        "types": {
                            "exec": {
                                "command": "mkdir -p dist/types && echo t > dist/types/a.d.ts"
                            },
                            "dependsOn": ["build"],
                            "cache": {
                                "inputs": {"files": ["src/**"]},
                                "outputs": {"files": ["dist/types/**"]},
                            },
                        },
                    },
                    "files": {"src/a.js": "A;"},
                }
            }
        )
    ).commit()
    res = repo.vx("run", "app#types")
    assert res.code == 0, res.err
    assert (repo.root / "packages/app/dist/a.js").exists() and (
        repo.root / "packages/app/dist/types/a.d.ts"
    ).exists()


# ---------------------------------------------------------------- TL-05: turbo's tasks without a script


def _edge_runtime_shaped(repo):
    """vercel/edge-runtime's shape: ponyfill's tests need jest-environment built, and ponyfill has
    no build script of its own; `types` is source only (no scripts at all)."""
    make = (
        "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
        "fs.writeFileSync('dist/index.js',fs.readFileSync('src/index.js','utf8'))\""
    )
    needs = "node -e \"require('fs').readFileSync('../jest-environment/dist/index.js');console.log('tested')\""
    bundle = (
        "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
        "fs.writeFileSync('dist/out.js',fs.readFileSync('../types/src/a.ts','utf8'))\""
    )
    return repo.write(
        {
            "package.json": {
                "name": "root",
                "private": True,
                "workspaces": ["packages/*"],
                "packageManager": "npm@10.8.2",
            },
            ".gitignore": "node_modules/\ndist/\n.vx/\n.turbo/\n",
            "turbo.json": {
                "tasks": {
                    "build": {"dependsOn": ["^build"], "outputs": ["dist/**"]},
                    "test": {"dependsOn": ["build"]},
                }
            },
            "packages/jest-environment/package.json": {
                "name": "jest-environment",
                "version": "1.0.0",
                "scripts": {"build": make},
            },
            "packages/jest-environment/src/index.js": "module.exports = 1;\n",
            "packages/ponyfill/package.json": {
                "name": "ponyfill",
                "version": "1.0.0",
                "scripts": {"test": needs},
                "devDependencies": {"jest-environment": "*"},
            },
            "packages/ponyfill/src/index.js": "P;\n",
            "packages/types/package.json": {"name": "types", "version": "1.0.0"},
            "packages/types/src/a.ts": "export type A = 1;\n",
            "packages/app/package.json": {
                "name": "app",
                "version": "1.0.0",
                "scripts": {"build": bundle},
                "dependencies": {"types": "*"},
            },
        }
    ).commit()


def _turbo_plan(repo, *tasks) -> dict[str, tuple[bool, list[str]]]:
    import os
    import subprocess

    from support.npm_packages import installed

    turbo = installed("turbo").parent / ".bin" / "turbo"
    env = {
        **os.environ,
        "TURBO_TELEMETRY_DISABLED": "1",
        "DO_NOT_TRACK": "1",
        "TURBO_NO_UPDATE_NOTIFIER": "1",
    }
    out = subprocess.run(
        [str(turbo), "run", *tasks, "--dry=json"],
        cwd=repo.root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    plan = json.loads(out[out.index("{") :])
    return {
        t["taskId"]: (t["command"] == "<NONEXISTENT>", sorted(t["dependencies"]))
        for t in plan["tasks"]
    }


def _vx_plan(repo, *tasks) -> dict[str, tuple[bool, list[str]]]:
    res = repo.vx("run", *tasks, "--dry=json")
    assert res.code == 0, res.err
    return {
        t["id"]: (t["command"] is None, sorted(t["deps"])) for t in json.loads(res.out)["tasks"]
    }


def _through_noops(plan: dict[str, tuple[bool, list[str]]]) -> dict[str, set[str]]:
    """Each task with a command and the commands it waits for, no-ops looked through: what runs
    in which order (bench/turbo_parity.py compares the same)."""

    def real(tid, seen):
        out = set()
        for dep in plan[tid][1]:
            if dep not in seen:
                seen.add(dep)
                out |= real(dep, seen) if plan[dep][0] else {dep}
        return out

    return {tid: real(tid, set()) for tid, (noop, _deps) in plan.items() if not noop}


@pytest.mark.feature("TL-05")
def test_a_task_without_its_script_still_pulls_in_its_dependencies(repo):
    """`ponyfill#test` dependsOn `build`, which ponyfill has no script for: turbo keeps a no-op
    `ponyfill#build` that waits for `^build`, so jest-environment is built before the test."""
    _edge_runtime_shaped(repo)
    res = repo.vx("run", "test")
    assert res.code == 0, res.out + res.err
    # app's no-op `test` waits for app#build, so turbo builds app too; vx runs what turbo runs.
    assert res.statuses() == {
        "jest-environment#build": ("success", "miss"),
        "ponyfill#test": ("success", "miss"),
        "app#build": ("success", "miss"),
    }


@pytest.mark.feature("TL-05")
def test_the_plan_is_turbos(repo):
    """The same graph as the real turbo's `--dry=json`: the same commands wait for the same
    commands, and every no-op vx keeps is turbo's, with turbo's dependencies."""
    _edge_runtime_shaped(repo)
    for tasks in (("test",), ("build",), ("build", "test")):
        turbo, vx = _turbo_plan(repo, *tasks), _vx_plan(repo, *tasks)
        assert _through_noops(vx) == _through_noops(turbo), (tasks, turbo, vx)
        assert all(turbo[t] == vx[t] for t, (noop, _d) in vx.items() if noop), (tasks, turbo, vx)


@pytest.mark.feature("TL-05", "WS-19")
def test_a_package_without_scripts_keys_its_dependants(repo):
    """`types` has no build script: its no-op build still folds its files into app#build's key."""
    _edge_runtime_shaped(repo)
    assert repo.vx("run", "app#build").code == 0
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 2;\n")
    again = repo.vx("run", "app#build")
    assert again.task("app#build")["cache"] == "miss", again.out
    assert (repo.root / "packages/app/dist/out.js").read_text() == "export type A = 2;\n"


# ---------------------------------------------------------------- GR-01: `name.*` and `^name.*`


@pytest.mark.feature("GR-01")
def test_name_star_and_caret_name_star_depends_on(repo):
    """`build.*` is every other task of the project named `build.<x>`; `^gen.*` the matching tasks
    of the nearest dependencies that have any. Validated at load, and the graph takes them."""

    def echo(word):
        return {"exec": {"command": f"echo {word}"}}

    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {
                        "gen.types": echo("types"),
                        "gen.docs": echo("docs"),
                        "other": echo("other"),
                    }
                },
                "mid": {"deps": ["lib"]},
                "app": {
                    "deps": ["mid"],
                    "tasks": {
                        "build": {"dependsOn": ["build.*"]},
                        "build.js": {**echo("js"), "dependsOn": ["^gen.*"]},
                        "build.css": echo("css"),
                    },
                },
            }
        )
    ).commit()
    res = repo.vx("run", "app#build")
    assert res.code == 0, res.err
    assert set(res.statuses()) == {"app#build.js", "app#build.css", "lib#gen.types", "lib#gen.docs"}
    plan = {
        t["id"]: t["deps"]
        for t in json.loads(repo.vx("run", "app#build", "--dry=json").out)["tasks"]
    }
    assert plan["app#build"] == ["app#build.css", "app#build.js"]
    assert plan["app#build.js"] == ["lib#gen.docs", "lib#gen.types"]  # through mid, which has none


@pytest.mark.feature("GR-01")
def test_a_star_anywhere_else_is_refused_at_load(repo):
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": {"exec": {"command": "true"}, "dependsOn": ["bu*ld"]}}}}
        )
    ).commit()
    res = repo.vx("run", "app#build")
    assert res.code == 2 and "Traceback" not in res.err
    assert (
        'dependsOn entry "bu*ld"' in res.err
        and "in: packages/app/vx.config.json, tasks.build.dependsOn[0]" in res.err
    )
    assert "hint:" in res.err


# ---------------------------------------------------------------- GR-04: a task waiting for itself


@pytest.mark.feature("GR-04")
def test_a_task_depending_on_itself_is_a_cycle(repo):
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {
                        "build": {
                            "exec": {"command": "echo built"},
                            "dependsOn": ["^build", "build"],
                        },
                        "test": {"exec": {"command": "echo tested"}, "dependsOn": ["app#test"]},
                    }
                }
            }
        )
    ).commit()
    for task, index in (("build", 1), ("test", 0)):
        res = repo.vx("run", f"app#{task}")
        assert res.code == 2, res.out + res.err
        assert f"`app#{task}` depends on itself" in res.err and "Traceback" not in res.err
        assert f"in: packages/app/vx.config.json, tasks.{task}.dependsOn[{index}]" in res.err
        assert res.summary is None  # nothing ran


# ---------------------------------------------------------------- WS-12 / LC-18: additive outputs


def _additive(repo, exclusive=False, bundle_deps=("build",)):
    make_lib = "mkdir -p dist && cat src/a.js > dist/lib.js"
    bundle = "test -f dist/lib.js && (cat dist/lib.js; echo bundled) > dist/bundle.js"
    return repo.write(
        {
            **npm_workspace(
                {
                    "app": {
                        "tasks": {
                            "build": {
                                "exec": {"command": make_lib},
                                "cache": {
                                    "inputs": {"files": ["src/**"]},
                                    "outputs": {"files": ["dist/**"]},
                                },
                            },
                            "bundle": {
                                "exec": {"command": bundle},
                                "dependsOn": list(bundle_deps),
                                "cache": {
                                    "inputs": {"files": ["src/**"]},
                                    "outputs": {"files": ["dist/**"]},
                                },
                            },
                        },
                        "files": {"src/a.js": "A;\n"},
                    }
                }
            ),
            "vx.workspace.json": {"rules": {"exclusiveOutputs": exclusive}},
        }
    ).commit()


@pytest.mark.feature("WS-12")
def test_exclusive_outputs_off_lets_a_dependant_add_to_its_upstreams(repo):
    """With `rules.exclusiveOutputs: false` and an edge between them, the dependant keeps the
    upstream's files, owns only what it added, and restores of the two compose."""
    _additive(repo)
    dist = repo.root / "packages/app/dist"
    first = repo.vx("run", "app#bundle")
    assert first.code == 0, first.out + first.err
    assert (dist / "lib.js").read_text() == "A;\n" and (
        dist / "bundle.js"
    ).read_text() == "A;\nbundled\n"
    import shutil

    shutil.rmtree(dist)
    again = repo.vx("run", "app#bundle")
    assert again.code == 0, again.err
    assert again.statuses() == {
        "app#build": ("success", "local"),
        "app#bundle": ("success", "local"),
    }
    assert sorted(p.name for p in dist.iterdir()) == ["bundle.js", "lib.js"]
    assert (dist / "bundle.js").read_text() == "A;\nbundled\n"
    # The upstream alone rebuilt (its wipe takes the bundle), then the bundle restored beside it.
    (repo.root / "packages/app/src/a.js").write_text("B;\n")
    third = repo.vx("run", "app#bundle")
    assert third.statuses() == {"app#build": ("success", "miss"), "app#bundle": ("success", "miss")}
    assert (dist / "lib.js").read_text() == "B;\n" and (
        dist / "bundle.js"
    ).read_text() == "B;\nbundled\n"


@pytest.mark.feature("WS-12")
def test_unordered_overlaps_stay_refused_and_the_default_hints_at_the_rule(repo):
    _additive(repo, exclusive=False, bundle_deps=())
    res = repo.vx("run", "app#bundle", "app#build")
    assert res.code == 2 and "only when one depends on the other" in res.err, res.err
    _additive(repo, exclusive=True)
    res = repo.vx("run", "app#bundle")
    assert res.code == 2 and '"exclusiveOutputs": false' in res.err, res.err


@pytest.mark.feature("LC-18")
def test_a_dependant_that_removes_an_upstream_file_saves_nothing(repo):
    _additive(repo)
    cfg = json.loads((repo.root / "packages/app/vx.config.json").read_text())
    cfg["tasks"]["bundle"]["exec"]["command"] = "cat dist/lib.js > dist/bundle.js && rm dist/lib.js"
    repo.write({"packages/app/vx.config.json": cfg}).commit()
    res = repo.vx("run", "app#bundle")
    assert res.code == 0, res.err
    assert "app#bundle: not saved to the cache: it removed packages/app/dist/lib.js" in res.err
    again = repo.vx("run", "app#bundle")  # nothing was saved: it runs again, after build's restore
    assert again.statuses() == {
        "app#build": ("success", "local"),
        "app#bundle": ("success", "miss"),
    }


@pytest.mark.feature("TL-05")
def test_a_persistent_task_some_packages_lack_runs_where_it_is_a_script(repo):
    """turbo's `persistent` is exec.persistent (EX-07); packages without the script get turbo's no-op."""
    _edge_runtime_shaped(repo)
    turbo = json.loads((repo.root / "turbo.json").read_text())
    turbo["tasks"]["dev"] = {"cache": False, "persistent": True}
    pkg = json.loads((repo.root / "packages/ponyfill/package.json").read_text())
    pkg["scripts"]["dev"] = "node -e \"console.log('up'); setTimeout(() => {}, 1)\""
    repo.write({"turbo.json": turbo, "packages/ponyfill/package.json": pkg}).commit()
    res = repo.vx("run", "dev")
    assert res.code == 0, res.out + res.err
    assert "up" in res.out and res.task("ponyfill#dev")["persistent"], res.out + res.err


@pytest.mark.feature("GR-15")
def test_turbo_tasks_that_share_outputs_run_as_under_turbo(repo):
    """floating-ui's turbo.json: `build` writes dist/**, `build:api` adds dist/**/*.d.ts, `prepack`
    depends on both and nothing orders the two. turbo runs it (it never wipes outputs); vx refused
    it. Each now adds to the shared dist/, and each restores its own files."""
    turbo = {
        "tasks": {
            "build": {"outputs": ["dist/**"]},
            "build:api": {"outputs": ["dist/**/*.d{.ts,.mts}"]},
            "prepack": {"dependsOn": ["build", "build:api"], "outputs": []},
        }
    }
    scripts = {
        "build": "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').writeFileSync('dist/index.js','js')\"",
        "build:api": "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').writeFileSync('dist/index.d.ts','types')\"",
        "prepack": "test -f dist/index.js && test -f dist/index.d.ts",
    }
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\ndist/\n.vx/\n",
            "turbo.json": turbo,
            "packages/core/package.json": {"name": "core", "version": "1.0.0", "scripts": scripts},
            "packages/core/src/index.ts": "export {}\n",
        }
    ).commit()
    first = repo.vx("run", "prepack")
    assert first.code == 0, first.err
    dist = repo.root / "packages/core/dist"
    for name in ("index.js", "index.d.ts"):
        (dist / name).unlink()
    again = repo.vx("run", "prepack")
    assert again.code == 0, again.err
    assert again.statuses()["core#build"][1] in ("local", "up-to-date")
    assert again.statuses()["core#build:api"][1] in ("local", "up-to-date")
    assert (dist / "index.js").read_text() == "js" and (dist / "index.d.ts").read_text() == "types"
