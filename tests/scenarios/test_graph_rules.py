"""What the task graph holds and refuses: the implicit keyed `build` (WS-19), workspace edges as the
package manager links them (WS-20), overlapping outputs (GR-15, WS-12), turbo's tasks without a script
(TL-05), dependsOn forms (GR-01) and cycles (GR-04)."""

from __future__ import annotations

import json

from conftest import build_task, npm_workspace

# Reads the dependency's sources straight from its directory, as a bundler reading a source-only
# package does: the output changes with them.
BUNDLE = ("node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
          "fs.writeFileSync('dist/out.js',fs.readFileSync('src/app.ts','utf8')+fs.readFileSync('../types/src/a.ts','utf8'))\"")


def _source_only(repo):
    return repo.write(npm_workspace({
        "types": {"files": {"src/a.ts": "export type A = 1;\n"}},
        "app": {"deps": ["types"], "tasks": {"build": build_task(command=BUNDLE)}, "files": {"src/app.ts": "app;\n"}},
    })).commit()


def test_ws19_source_only_package_is_keyed(repo):
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


def test_ws19_implicit_build_is_reached_not_selected_and_shown(repo):
    _source_only(repo)
    plan = json.loads(repo.vx("run", "build", "--dry=json").out)  # from the root: every declared build
    assert [t["id"] for t in plan["tasks"]] == ["types#build", "app#build"]
    types = plan["tasks"][0]
    assert types["predicted"] == "group" and types["implicit"] is True and types["command"] is None
    assert plan["tasks"][1]["deps"] == ["types#build"]
    assert "implicit" not in plan["tasks"][1]
    # A bare name never selects it: from inside `types`, `build` is no task of that project.
    inside = repo.vx("run", "build", cwd="packages/types")
    assert inside.code == 2 and "has no task `build`" in inside.err
    assert repo.vx("run", "build", "--all").statuses() == {"app#build": ("success", "miss")}
    # `pkg#build` reaches it, and `vx why` names the file that moved its key.
    assert repo.vx("run", "types#build").code == 0
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 3;\n")
    assert repo.vx("run", "app#build").code == 0
    why = repo.vx("why", "types#build", summary=False)
    assert why.code == 0 and "packages/types/src/a.ts" in why.out, why.out + why.err


def test_ws19_affected_reaches_through_a_source_only_package(repo):
    """`--affected`: an edit in a package with no `build` reaches its dependants' builds."""
    _source_only(repo)
    repo.git("branch", "base")
    (repo.root / "packages/types/src/a.ts").write_text("export type A = 4;\n")
    repo.commit("edit types")
    res = repo.vx("run", "build", "--affected=base")
    assert res.code == 0, res.err
    assert res.statuses() == {"app#build": ("success", "miss")}
