"""`vx migrate [--from turbo|nx] [--dry] [--force] [--format json|ts]`.

Writes a vx config per project from what the live mapping of turbo.json or Nx gives it
(`vx.config.migration`), a `vx-preset.ts` for the global lists with `--format ts`, and
`migrated` in vx.workspace.json, after which vx reads tasks from the vx configs only. An existing
vx.config is refused (exit 2, naming it) unless `--force`; `--dry` prints every file instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vx.cli.args import Args, one_of
from vx.config import migration
from vx.errors import EXIT_OK, ConfigError


def migrate_verb(args: Args, argv: list[str]) -> int:
    from vx.cli.args import say
    from vx.workspace import discover as workspace

    tool = one_of("--from", args.source, ("turbo", "nx"), "") or None
    fmt = one_of("--format", args.format, ("json", "ts"), "json")
    ws = workspace.discover(Path(os.getcwd()))
    root = str(ws.root)
    tool = migration.detect(root, tool)
    configs = migration.live_configs(ws, tool)
    chosen = {
        name: configs[name]
        for name, pkg in sorted(ws.packages.items())
        if migration.has_tasks(pkg, configs[name])
    }
    preset = (
        migration.preset_of((ws.packages[name], c) for name, c in chosen.items())
        if fmt == "ts"
        else {}
    )
    files: list[migration.Written] = []
    for name, config in chosen.items():
        pkg = ws.packages[name]
        path = migration.config_path(pkg, fmt)
        text = migration.project_file(pkg, config, tool, fmt, preset)
        files.append(migration.Written(path, text, bool(_existing(root, pkg.dir))))
    if preset:
        files.append(
            migration.Written(
                "vx-preset.ts",
                migration.preset_file(preset, tool),
                os.path.lexists(os.path.join(root, "vx-preset.ts")),
            )
        )
    ws_path, ws_text = migration.workspace_file(root, tool)
    ws_note = f'{ws_path}: add `migrated: "{tool}"` to it (vx migrate edits no code)'
    if ws_text is not None:
        files.append(migration.Written(ws_path, ws_text))
    clashes = [f for f in files if f.replaces]
    if clashes and not args.force and not args.dry:
        first = clashes[0].path
        shown = (first.endswith("vx-preset.ts") and [first]) or _existing(root, _dir_of(first))
        more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
        raise ConfigError(
            f"a vx config is already there{more}; vx migrate would replace it",
            file=shown[0],
            hint="`vx migrate --force` replaces it; `vx migrate --dry` prints what it would write",
        )
    if args.dry:
        for f in files:
            sys.stdout.write(f"// ── {f.path}\n{f.text}\n")
        if ws_text is None:
            say(f"  {ws_note}")
        say(f"vx migrate: would write {len(files)} file(s) from {_origin(tool)}")
        return EXIT_OK
    for f in files:
        if f.path.endswith(("vx.config.json", "vx.config.ts")):
            for old in _existing(root, _dir_of(f.path)):
                os.unlink(os.path.join(root, old))
        with open(os.path.join(root, f.path), "w", encoding="utf-8") as out:
            out.write(f.text)
        say(f"  {f.path}")
    if ws_text is None:
        say(f"  {ws_note}")
    todos = sum(f.text.count(migration.TODO + ":") for f in files)
    say(
        f"vx migrate: wrote {len(files)} file(s) from {_origin(tool)}"
        + (f"; {todos} {migration.TODO} to resolve (grep for it)" if todos else "")
        + "; next: `vx run build --dry` to check, then `vx run build`"
    )
    return EXIT_OK


def _origin(tool: str) -> str:
    return "turbo.json" if tool == "turbo" else "nx.json and the project targets"


def _dir_of(path: str) -> str:
    return path.rpartition("/")[0]


def _existing(root: str, rel_dir: str) -> list[str]:
    """The vx.config files in the project dir, workspace-relative."""
    from vx.config.loader import LOADERS

    directory = os.path.join(root, rel_dir) if rel_dir else root
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = sorted(n for n in names if n.startswith("vx.config") and n[9:] in LOADERS)
    return [f"{rel_dir}/{n}" if rel_dir else n for n in found]
