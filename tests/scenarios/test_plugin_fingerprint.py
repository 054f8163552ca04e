"""The `fingerprint` hook (docs/plugins.md#fingerprint): a plugin claims a root fingerprint file
and keys it per project through its `key` hook, and answers `--affected` for it. Real git, real
node, real `vx` processes."""

from __future__ import annotations

import json

import pytest
from support.plugins import plugin_workspace
from support.workspace import build_task

LOCK = """lockfileVersion: '9.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

importers:

  .: {{}}

  packages/a:
    dependencies:
      left-pad:
        specifier: ^1.3.0
        version: 1.3.0

  packages/b:
    dependencies:
      is-odd:
        specifier: ^3.0.0
        version: {odd}

  packages/c: {{}}

packages:

  left-pad@1.3.0:
    resolution: {{integrity: sha512-aaaa}}

  is-odd@{odd}:
    resolution: {{integrity: sha512-bbbb}}

snapshots:

  left-pad@1.3.0: {{}}

  is-odd@{odd}: {{}}
"""

# a keys the whole file, b keys none of it, c declines (so the file stays in c's key); under
# `--affected` the plugin names b, and writes down the change it was given
CLAIM = """
import hashlib
import json
from pathlib import Path

def plugin(options):
    def key(task, ctx):
        text = (Path(ctx.root) / "pnpm-lock.yaml").read_bytes()
        if task.project == "a":
            return {"lock": hashlib.sha256(text).hexdigest()}
        if task.project == "b":
            return {"lock": "b keys none of it"}
        return None

    def affected(change, ctx):
        seen = {
            "file": change.file,
            "base": change.base,
            "before": change.before.decode(),
            "after": change.after.decode(),
            "projects": sorted(p.name for p in change.projects),
        }
        (Path(ctx.root) / "affected.json").write_text(json.dumps(seen))
        return options.get("answer", ["b"])

    return {"key": key, "fingerprint": {"files": ["pnpm-lock.yaml"], "affected": affected}}
"""


def workspace(repo, plugins, modules):
    pkgs = {n: {"tasks": {"build": build_task(deps=())}, "files": {"src/x.js": n}} for n in "abc"}
    lock = {"pnpm-lock.yaml": LOCK.format(odd="3.0.1")}
    return plugin_workspace(repo, plugins, modules, pkgs, ignore=("affected.json",), extra=lock)


def cached(result) -> dict[str, bool]:
    assert result.code == 0, result.err
    return {t: c != "miss" for t, (_, c) in result.statuses().items()}


@pytest.mark.feature("PL-02", "KEY-04")
def test_a_claimed_lockfile_misses_only_the_projects_the_plugins_key_says(repo):
    """A plugin claims pnpm-lock.yaml and keys it per project: editing the lockfile misses the
    project whose key material moved, not the one the plugin keys none of it for; a project
    whose key hook declines keeps the file in its key as vx keys it (its share); a file no plugin
    claims (.npmrc) still misses every project (issue: plugins, the fingerprint hook never opens
    a wrong hit)."""
    workspace(repo, ["claim"], {"claim": CLAIM})
    assert cached(repo.vx("run", "build")) == {"a#build": False, "b#build": False, "c#build": False}
    assert cached(repo.vx("run", "build")) == {"a#build": True, "b#build": True, "c#build": True}
    (repo.root / "pnpm-lock.yaml").write_text(LOCK.format(odd="3.0.2"))  # b's dependency moved
    moved = cached(repo.vx("run", "build"))  # c: vx's own share of the file did not move
    assert moved == {"a#build": False, "b#build": True, "c#build": True}
    peers = LOCK.format(odd="3.0.2").replace("autoInstallPeers: true", "autoInstallPeers: false")
    (repo.root / "pnpm-lock.yaml").write_text(peers)  # every project's share moved
    moved = cached(repo.vx("run", "build"))
    assert moved == {"a#build": False, "b#build": True, "c#build": False}
    (repo.root / ".npmrc").write_text("registry=https://registry.example/\n")
    missed = {"a#build": False, "b#build": False, "c#build": False}
    assert cached(repo.vx("run", "build")) == missed


@pytest.mark.feature("PL-02", "CLI-41")
def test_affected_after_a_claimed_lockfile_change_selects_what_the_plugin_answers(repo):
    """`--affected` after a change to a claimed lockfile selects only the projects the plugin's
    `affected` names — vx's own reading would pick b, this plugin says a — and the plugin is
    given the file, the merge-base and both texts (issue: plugins, the fingerprint hook's
    affected answer)."""
    modules = {"claim": CLAIM}
    workspace(repo, [{"name": "claim", "options": {"answer": ["a"]}}], modules)
    head = repo.git("rev-parse", "HEAD").strip()
    (repo.root / "pnpm-lock.yaml").write_text(LOCK.format(odd="3.0.2"))
    result = repo.vx("run", "build", "--affected=HEAD")
    assert result.code == 0, result.err
    assert set(result.statuses()) == {"a#build"}, result.err
    seen = json.loads((repo.root / "affected.json").read_text())
    assert seen == {
        "file": "pnpm-lock.yaml",
        "base": head,
        "before": LOCK.format(odd="3.0.1"),
        "after": LOCK.format(odd="3.0.2"),
        "projects": ["//", "a", "b", "c"],
    }
    (repo.root / ".npmrc").write_text("registry=https://registry.example/\n")  # not claimed
    everything = repo.vx("run", "build", "--affected=HEAD")
    assert set(everything.statuses()) == {"a#build", "b#build", "c#build"}, everything.err


@pytest.mark.feature("PL-01")
def test_two_plugins_claiming_one_file_are_refused(repo):
    """Two plugins claiming one fingerprint file are refused before anything runs, naming the
    file and both plugins, with a hint, exit 2 (issue: plugins, a double claim is refused)."""
    other = CLAIM.replace('"pnpm-lock.yaml"]', '"pnpm-lock.yaml", ".npmrc"]')
    workspace(repo, ["claim", "other"], {"claim": CLAIM, "other": other})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    said = "error: plugins 'claim' and 'other' both claim the fingerprint file `pnpm-lock.yaml`"
    assert said in result.err and "hint: " in result.err, result.err
    assert "Traceback" not in result.err and "built" not in result.out


@pytest.mark.feature("PL-01")
@pytest.mark.parametrize(
    "claim,said",
    [
        ('{"files": ["src/x.js"]}', "names 'src/x.js', which is not a root fingerprint file"),
        ('{"files": []}', "`fingerprint.files` must be a list"),
        ('{"files": ["yarn.lock"], "affected": 3}', "`fingerprint.affected` must be a function"),
        ('{"files": ["yarn.lock"], "when": 1}', "`fingerprint` must be {files, affected}"),
    ],
)
def test_a_malformed_claim_is_refused(repo, claim, said):
    """A claim of a file that is no root fingerprint file, an empty or malformed claim, or an
    `affected` that is not a function is refused as the plugin loads (issue: plugins, claims
    checked)."""
    code = f"def plugin(o):\n    return {{'key': lambda t, c: None, 'fingerprint': {claim}}}\n"
    workspace(repo, ["bad"], {"bad": code})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2 and said in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.feature("PL-01")
def test_a_claim_without_a_key_hook_is_refused(repo):
    """A plugin that claims a file but has no `key` hook would take the file out of every key
    with nothing in its place: refused (issue: plugins, the fingerprint hook never opens a wrong
    hit)."""
    code = "def plugin(o):\n    return {'fingerprint': {'files': ['pnpm-lock.yaml']}}\n"
    workspace(repo, ["keyless"], {"keyless": code})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert "plugin 'keyless' claims pnpm-lock.yaml but has no `key` hook" in result.err


@pytest.mark.feature("PL-03")
def test_a_throwing_affected_fails_the_run_in_one_line(repo):
    """An `affected` that throws fails the run before anything runs, in one line naming the
    plugin and the hook (issue: plugins, failure isolation of the fingerprint hook)."""
    code = (
        "def plugin(o):\n"
        "    def affected(change, ctx):\n        raise ValueError('cannot read it')\n"
        "    claim = {'files': ['pnpm-lock.yaml'], 'affected': affected}\n"
        "    return {'key': lambda t, c: None, 'fingerprint': claim}\n"
    )
    workspace(repo, ["boom"], {"boom": code})
    (repo.root / "pnpm-lock.yaml").write_text(LOCK.format(odd="3.0.2"))
    result = repo.vx("run", "build", "--affected=HEAD", summary=False)
    assert result.code == 2, result.err
    said = "error: plugin 'boom' failed in its `fingerprint: affected` hook: ValueError: cannot"
    assert said in result.err, result.err
    assert "Traceback" not in result.err and "built" not in result.out
