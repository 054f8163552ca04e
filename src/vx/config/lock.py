"""vx-lock.json: every project config written as code, evaluated and kept with a digest of each
file its evaluation read. `vx lock` writes it, `vx lock --check` says whether the configs drifted
from it (a CI step), and `vx run --frozen` takes the configs' values from it without starting
Node for them. A plain run never reads it.

A lock is committed, so it must not hold a secret: one whose evaluated values contain a secret
variable's value (vx.proc.masking's rule) is refused. Variables a config read are kept by name
only; their values at lock time live on in what the config returned.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import xxhash

from vx.errors import ConfigError
from vx.model import Workspace

LOCK_FILE = "vx-lock.json"
VERSION = 1  # a lock of the same version stays readable; a newer one is refused
_HINT = "run `vx lock` and commit vx-lock.json"


def build(ws: Workspace, code: Mapping[str, str], env: Mapping[str, str]) -> dict[str, Any]:
    """The lock of the workspace's code configs `code` (absolute path → workspace-relative name,
    `vx.config.loader.code_configs`) as they evaluate now. Raises ConfigError for a config that
    fails to evaluate."""
    from vx import __version__
    from vx.config.evaluation import evaluate

    root = str(ws.root)
    configs: dict[str, Any] = {}
    names: tuple[str, ...] = ()
    if code:
        evaluated = evaluate(root, code, env)
        names = evaluated.env
        for path, source in sorted(code.items(), key=lambda item: item[1]):
            configs[source] = {
                "digest": _digest(path),
                "reads": {rel: _digest(os.path.join(root, rel)) for rel in evaluated.reads[path]},
                "value": evaluated.values[path],
            }
    return {"lockVersion": VERSION, "vx": __version__, "env": list(names), "configs": configs}


def write(ws: Workspace, code: Mapping[str, str], env: Mapping[str, str]) -> tuple[str, int]:
    """Write the lock (refusing one that holds a secret): its path and how many configs it holds."""
    from vx.dotvx import write_whole

    lock = build(ws, code, env)
    _refuse_secrets(lock, env)
    path = os.path.join(str(ws.root), LOCK_FILE)
    text = json.dumps(lock, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    write_whole(path, text.encode(), 0o644)
    return path, len(lock["configs"])


def drift(ws: Workspace, code: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    """What differs between the lock and the configs as they evaluate now, one line each (none:
    the lock holds)."""
    lock = read(str(ws.root))
    if lock is None:
        return [f"{LOCK_FILE} is missing"]
    fresh = build(ws, code, env)["configs"]
    kept = lock["configs"]
    out: list[str] = []
    for source in sorted({*fresh, *kept}):
        now, then = fresh.get(source), kept.get(source)
        if then is None:
            out.append(f"{source} is not in {LOCK_FILE}")
        elif now is None:
            out.append(f"{LOCK_FILE} holds {source}, which is no longer a project's config")
        elif now["digest"] != then.get("digest"):
            out.append(f"{source} changed")
        elif now["reads"] != then.get("reads"):
            changed = sorted(
                rel
                for rel in {*now["reads"], *(then.get("reads") or {})}
                if now["reads"].get(rel) != (then.get("reads") or {}).get(rel)
            )
            out.append(f"{source}: a file it reads changed ({', '.join(changed)})")
        elif now["value"] != then.get("value"):
            where = _first_difference(now["value"], then.get("value"))
            out.append(f"{source} evaluates to something else now (at `{where or '.'}`)")
    return out


def read(root: str) -> dict[str, Any] | None:
    """The lock at `root`, checked for shape; None when there is none. Raises ConfigError for a
    lock vx cannot read."""
    path = os.path.join(root, LOCK_FILE)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the lock: {exc}", file=LOCK_FILE, hint=_HINT) from None
    if not isinstance(data, dict) or not isinstance(data.get("configs"), dict):
        raise ConfigError(
            "not a vx lock (no `configs` object)", file=LOCK_FILE, field="configs", hint=_HINT
        )
    version = data.get("lockVersion")
    if not isinstance(version, int) or version > VERSION:
        raise ConfigError(
            f"lock version {version!r} is not one this vx reads (it reads {VERSION})",
            file=LOCK_FILE,
            field="lockVersion",
            hint="use the vx that wrote it, or run `vx lock` again",
        )
    for source, entry in data["configs"].items():
        if not isinstance(entry, dict) or "value" not in entry:
            raise ConfigError(
                "an entry without a `value`", file=LOCK_FILE, field=f"configs.{source}", hint=_HINT
            )
        reads = entry.get("reads")
        if reads is not None and not (
            isinstance(reads, dict) and all(isinstance(r, str) for r in reads)
        ):  # file names for --affected: anything else would reach the run unchecked
            raise ConfigError(
                "`reads` must map file names to digests",
                file=LOCK_FILE,
                field=f"configs.{source}.reads",
                hint=_HINT,
            )
    return data


def locked(root: str, code: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The code configs `code` (absolute path → workspace-relative name) as the lock holds them:
    their values and the files each read, with no check that they still evaluate so (`--frozen`)."""
    from vx import witness

    lock = read(root)
    witness.read(os.path.join(root, LOCK_FILE))
    if lock is None:
        raise ConfigError(
            "`--frozen` takes the configs written as code from the lock, and there is none",
            file=LOCK_FILE,
            hint=_HINT,
        )
    values: dict[str, Any] = {}
    reads: dict[str, tuple[str, ...]] = {}
    for path, source in code.items():
        entry = lock["configs"].get(source)
        if entry is None:
            raise ConfigError(
                f"not in {LOCK_FILE}, and `--frozen` evaluates no config",
                file=source,
                hint=_HINT,
            )
        values[path] = entry["value"]
        reads[path] = tuple(entry.get("reads") or ())
    return values, reads


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return xxhash.xxh3_128_hexdigest(f.read())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _refuse_secrets(lock: dict[str, Any], env: Mapping[str, str]) -> None:
    from vx.proc.masking import secrets_of

    secrets = secrets_of(env)
    if not secrets:
        return
    for source, entry in lock["configs"].items():
        text = json.dumps(entry["value"], ensure_ascii=False).encode()
        for secret in secrets:
            if secret in text:
                names = sorted(n for n, v in env.items() if v and v.encode() == secret)
                which = f"the value of {names[0]}" if names else "a secret value"
                raise ConfigError(
                    f"the config's value holds {which}, and the lock is committed",
                    file=source,
                    hint="read secrets from the task's environment when it runs (`env`, "
                    "`passThroughEnv`), not into the config; nothing was written",
                )


def _first_difference(a: Any, b: Any, at: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted({*a, *b}, key=str):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{at}[{i}]")
    return at
