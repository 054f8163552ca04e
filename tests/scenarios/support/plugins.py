"""Workspaces that load plugins, for the plugin scenarios: the plugin modules at the root,
declared in vx.workspace.json, and a plugin whose hook throws."""

from __future__ import annotations

from support.workspace import build_task, npm_workspace

# One project, a, whose build concatenates src/a.js into dist/out.js.
ONE_PACKAGE = {"a": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}


def plugin_workspace(repo, plugins, modules=None, pkgs=None, ignore=(), extra=None):
    """Commit a workspace whose vx.workspace.json loads `plugins`, with each of `modules` (name →
    source) at its root: `pkgs` as npm_workspace takes them (ONE_PACKAGE without), the `ignore`
    patterns added to .gitignore and the `extra` files."""
    files = npm_workspace(pkgs or ONE_PACKAGE)
    files[".gitignore"] = str(files[".gitignore"]) + "".join(f"{g}\n" for g in ignore)
    files["vx.workspace.json"] = {"plugins": plugins}
    files.update({f"{name}.py": code for name, code in (modules or {}).items()})
    files.update(extra or {})
    repo.write(files).commit()
    return repo


def throwing(hook: str, args: str) -> str:
    """A plugin module whose `hook` (taking `args`) raises RuntimeError('nope')."""
    return (
        f"def plugin(options):\n    def hook({args}):\n        raise RuntimeError('nope')\n"
        f"    return {{'{hook}': hook}}\n"
    )


def assert_failed_in_one_line(repo, hook: str):
    """`vx run build` with the throwing plugin `boom` loaded fails before anything runs, exit 2,
    in one line naming the plugin and the hook; the result."""
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert f"error: plugin 'boom' failed in its `{hook}` hook: RuntimeError: nope" in result.err
    assert "Traceback" not in result.err
    assert not (repo.root / "packages/a/dist").exists()
    return result
