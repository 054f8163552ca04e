"""`--filter=<p>...` takes, under turbo, the root package's workspace dependencies too: turbo's
package graph has every package depend on the root, so walking a package's dependencies reaches
the root's and theirs. leafygreen-ui's root devDepends on its own CLI (`@lg-tools/cli`), so
`turbo run tsc --filter=@leafygreen-ui/lib...` runs 28 packages' tasks where vx ran 8. Real turbo
is the oracle: both tools run the same tasks."""

from __future__ import annotations

import json

from support.turbo import small_turborepo, turbo, turbo_binary


def workspace() -> dict[str, object]:
    """a <- b as small_turborepo has them; the root devDepends on `tool`, which depends on
    `helper`; `lone` nothing depends on."""
    files = small_turborepo()
    root = dict(files["package.json"])  # type: ignore[arg-type]
    root["devDependencies"] = {"tool": "*"}
    files["package.json"] = root
    for name, deps in (("tool", {"helper": "*"}), ("helper", {}), ("lone", {})):
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": deps,
            "scripts": {"build": f"echo {name}"},
        }
    return files


def turbo_tasks(repo, *args: str) -> set[str]:
    res = turbo(repo, turbo_binary(), "run", "build", *args, "--dry=json")
    assert res.code == 0, res.out + res.err
    return {
        t["taskId"] for t in json.loads(res.out)["tasks"] if t.get("command") != "<NONEXISTENT>"
    }


def vx_tasks(repo, *args: str) -> set[str]:
    res = repo.vx("run", "build", *args, "--dry=json")
    assert res.code == 0, res.out + res.err
    return {t["id"] for t in json.loads(res.out)["tasks"] if not t.get("group")}


def test_a_packages_dependencies_take_the_roots_workspace_dependencies_as_in_turbo(repo):
    repo.write(workspace()).commit()
    for selector in ("--filter=a...", "--filter=b...", "--filter=helper..."):
        theirs = turbo_tasks(repo, selector)
        assert vx_tasks(repo, selector) == theirs, selector
    assert turbo_tasks(repo, "--filter=a...") == {"a#build", "tool#build", "helper#build"}
    # the match itself left out, the root's dependencies still walked to
    assert vx_tasks(repo, "--filter=b^...") == turbo_tasks(repo, "--filter=b^...")
    # dependents are not widened: nothing depends on `lone` but the root, which has no build
    assert vx_tasks(repo, "--filter=...lone") == turbo_tasks(repo, "--filter=...lone")
