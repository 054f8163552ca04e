"""A lockfile cut down to a pruned workspace (`vx prune`): the root importer, the kept projects'
importers and every entry they reach — nothing else — in the manager's own format, so that
`npm ci`, `pnpm install --frozen-lockfile`, `yarn install --frozen-lockfile` / `--immutable` and
`bun install --frozen-lockfile` accept it.

The closure is the one each project's cache key folds (vx.files.lockfile). The text is the
original's, with whole entries left out (npm's JSON is re-serialised as npm writes it): yarn
berry and bun compare the lockfile they would write with the one on disk, byte for byte.
"""

from __future__ import annotations

import json
import os
import re

from vx.errors import ConfigError
from vx.files.lockfile import (
    DEP_FIELDS,
    LOCKFILES,
    PEERS,
    LockGraph,
    berry_node,
    entry_key,
    norm_dir,
    parse_lockfile,
    read_manifest,
    yaml_docs,
    yaml_scalar,
)
from vx.model import ROOT_PROJECT, Workspace


class Subset:
    """The pruned lockfile's text, the importers (project dirs) its kept ones reach, and the
    patches it no longer lists (pnpm's `patchedDependencies` keys)."""

    __slots__ = ("text", "reached", "unpatched")

    def __init__(self, text: str, reached: set[str], unpatched: set[str] | None = None):
        self.text, self.reached, self.unpatched = text, reached, unpatched or set()


class Pruned:
    """What `vx prune` writes of the install: each lockfile's text, the root files that had to
    change with it (package.json, pnpm-workspace.yaml: by name, their new bytes), and the
    workspace packages the lockfiles link the kept ones to that were not kept."""

    __slots__ = ("lockfiles", "files", "more")

    def __init__(self, lockfiles: dict[str, str], files: dict[str, bytes], more: set[str]):
        self.lockfiles, self.files, self.more = lockfiles, files, more


def subset(
    name: str,
    text: str,
    root: str,
    projects: dict[str, dict],
    keep: set[str],
    patches: frozenset[str] = frozenset(),
    dropped: frozenset[str] | set[str] = frozenset(),
) -> Subset:
    """Lockfile `name` (holding `text`) cut to the root and the project dirs in `keep`.
    `projects` are all the workspace's, as vx.files.lockfile.closures takes them; `patches` are
    the pnpm or bun patches the root package.json declares, which may go with the packages they
    patch; `dropped` the member dirs left out, whose plain paths leave npm's root `workspaces`."""
    if not text.strip():
        return Subset(text, set())
    graph = parse_lockfile(name, text, root, projects)
    if graph.whole:
        raise ConfigError(
            "vx cannot prune this lockfile: it is npm's lockfileVersion 1, which has no table of "
            "installed locations",
            file=name,
            hint="`npm install --lockfile-version 3` rewrites it in the current format",
        )
    dirs = keep | {""}
    reach = graph._reach([f"i:{d}" for d in sorted(dirs)], set())
    reached = {n[2:] for n in reach if n.startswith("i:")}
    labels = {graph.labels[n] for n in reach if n in graph.labels}
    unpatched = {k for k in patches if not _patches_any(k, labels)}
    if name == "pnpm-lock.yaml":
        return Subset(_pnpm(text, reach, dirs, unpatched), reached, unpatched)
    if name == "bun.lock":
        return Subset(_bun(text, reach, dirs, unpatched), reached, unpatched)
    if name in ("package-lock.json", "npm-shrinkwrap.json"):
        out = _npm(text, reach, dirs, set(dropped))
    elif text.lstrip().startswith("#") and "yarn lockfile v1" in text[:400]:
        out = _yarn_classic(text, reach, root, dirs)
    else:
        out = _berry(name, text, graph, reach, dirs)
    return Subset(out, reached)


def _patches_any(key: str, labels: set[str]) -> bool:
    """Whether pnpm's patch key (`name@version`, or a bare `name` for every version) names an
    installed `name@version`; a key with a range is kept (it is not read here)."""
    at = key.find("@", 1)
    if at < 0:
        return any(label.rpartition("@")[0] == key for label in labels)
    if any(c in key[at + 1 :] for c in "^~<>=*| x"):
        return True
    return key in labels


def prune_lockfiles(ws: Workspace, keep: set[str]) -> Pruned:
    """Each root lockfile present, cut to the packages named in `keep` (and the root); the root
    files that must follow (below); and the workspace packages the lockfiles link the kept ones
    to that `keep` lacks (the caller keeps them too, then cuts again).

    The root package.json loses the patches of packages no longer installed (pnpm and bun
    compare them with the lockfile's), and it and pnpm-workspace.yaml lose each member entry
    written as a plain path to a package left out: bun refuses a workspace that is not there.
    A glob stays as written — matching nothing more is no error to any manager."""
    root = str(ws.root)
    present = [name for name in LOCKFILES if os.path.isfile(os.path.join(root, name))]
    if not present and os.path.isfile(os.path.join(root, "bun.lockb")):
        raise ConfigError(
            "vx cannot prune bun's binary lockfile",
            file="bun.lockb",
            hint="`bun install --save-text-lockfile` writes the text bun.lock vx reads (bun 1.2 "
            "writes it by default); then delete bun.lockb",
        )
    projects = {p.dir: {"name": p.name, "manifest": ""} for p in ws.packages.values()}
    by_dir = {p.dir: n for n, p in ws.packages.items()}
    dirs = {ws.packages[n].dir for n in keep}
    dropped = {p.dir for n, p in ws.packages.items() if n != ROOT_PROJECT} - dirs
    manifest_text = _read_optional(root, "package.json")
    manifest = _json_object(manifest_text)
    changed = _cut_members(manifest, dropped)
    out: dict[str, str] = {}
    more: set[str] = set()
    for name in present:
        declared = _declared_patches(manifest, name)
        patches = frozenset(declared or ())
        cut = subset(name, _read_text(root, name), root, projects, dirs, patches, dropped)
        outside = sorted(d for d in cut.reached if d not in by_dir)
        if outside:
            raise ConfigError(
                f"the kept packages depend on `{outside[0]}`, which is no workspace package",
                file=name,
                hint="a pruned workspace holds only workspace packages; make it one, or "
                "depend on a published version",
            )
        more |= {by_dir[d] for d in cut.reached} - keep - {ROOT_PROJECT}
        out[name] = cut.text
        if cut.unpatched and declared is not None:
            for key in cut.unpatched:
                declared.pop(key, None)
            changed = True
    files: dict[str, bytes] = {}
    if changed:
        text = json.dumps(manifest, indent=_indent(manifest_text), ensure_ascii=False) + "\n"
        files["package.json"] = text.encode()
    yaml_text = _read_optional(root, "pnpm-workspace.yaml")
    yaml_cut = _cut_pnpm_members(yaml_text, dropped) if yaml_text else yaml_text
    if yaml_cut != yaml_text:
        files["pnpm-workspace.yaml"] = yaml_cut.encode()
    return Pruned(out, files, more)


def _literal(entry) -> str | None:
    """A member entry written as a plain path (`packages/app`, `./apps/web/`), normalised; None
    for a glob or an exclusion."""
    if not isinstance(entry, str) or entry.startswith("!") or any(c in entry for c in "*?[]{}"):
        return None
    return norm_dir(entry.strip())


def _without_literals(entries: list, dropped: set[str]) -> list:
    return [e for e in entries if _literal(e) not in dropped]


def _cut_members(manifest: dict, dropped: set[str]) -> bool:
    """`workspaces` (a list, or yarn's `{packages: [...]}`) without the plain paths to dropped
    packages, in place; whether anything went."""
    field = manifest.get("workspaces")
    holder, key = (manifest, "workspaces") if isinstance(field, list) else (field, "packages")
    entries = holder.get(key) if isinstance(holder, dict) else None
    if not isinstance(entries, list):
        return False
    kept = _without_literals(entries, dropped)
    if len(kept) == len(entries):
        return False
    holder[key] = kept  # type: ignore[index]
    return True


def _cut_pnpm_members(text: str, dropped: set[str]) -> str:
    """pnpm-workspace.yaml without the `packages:` items that are plain paths to dropped ones."""
    out, inside = [], False
    for line in text.split("\n"):
        if line and not line[0].isspace() and not line.startswith("#"):
            inside = line.split(":", 1)[0].strip() == "packages"
        elif inside and line.strip().startswith("- "):
            item = yaml_scalar(line.strip()[2:].split(" #", 1)[0].strip())
            if _literal(item) in dropped:
                continue
        out.append(line)
    return "\n".join(out)


def _read_optional(root: str, name: str) -> str:
    return _read_text(root, name) if os.path.isfile(os.path.join(root, name)) else ""


def _declared_patches(manifest: dict, lockfile: str) -> dict | None:
    """The root package.json's patches for the manager of `lockfile`: pnpm's
    `pnpm.patchedDependencies`, bun's `patchedDependencies`; None for the others."""
    holder = manifest.get("pnpm") if lockfile == "pnpm-lock.yaml" else manifest
    if lockfile not in ("pnpm-lock.yaml", "bun.lock") or not isinstance(holder, dict):
        return None
    field = holder.get("patchedDependencies")
    return field if isinstance(field, dict) else None


def _json_object(text: str) -> dict:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _indent(text: str) -> int | str:
    """The indentation a JSON file is written with (its first indented line's), 2 by default."""
    for line in text.split("\n")[1:]:
        if line.strip():
            lead = line[: len(line) - len(line.lstrip())]
            return lead if lead.startswith("\t") else len(lead) or 2
    return 2


def _read_text(root: str, name: str) -> str:
    try:
        with open(os.path.join(root, name), "rb") as f:
            return f.read().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the lockfile: {exc.strerror}", file=name) from None
    except UnicodeDecodeError:
        raise ConfigError(
            "the lockfile is not UTF-8 text", file=name, hint="reinstall to rewrite it"
        ) from None


# ---------------------------------------------------------------- npm


def _npm(text: str, reach: set[str], dirs: set[str], dropped: set[str]) -> str:
    data = json.loads(text)
    packages = data["packages"]
    kept: dict[str, object] = {}
    for loc, meta in packages.items():
        if "node_modules/" not in f"/{loc}":  # an importer: a workspace package (or an outside one)
            keep = loc in dirs
        elif isinstance(meta, dict) and meta.get("link"):  # node_modules/a -> packages/a
            keep = norm_dir(str(meta.get("resolved", ""))) in dirs
        else:
            keep = f"e:{loc}" in reach
        if keep:
            kept[loc] = meta
    data["packages"] = kept
    root_meta = kept.get("")
    if isinstance(root_meta, dict):  # the root's copy of package.json's `workspaces` follows it
        _cut_members(root_meta, dropped)
    if isinstance(data.get("dependencies"), dict):  # lockfileVersion 2 keeps npm 6's tree too
        data["dependencies"] = _npm_legacy(data["dependencies"], "", kept)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _npm_legacy(tree: dict, at: str, kept: dict) -> dict:
    """npm 6's nested `dependencies`, holding only what `packages` kept at the same location."""
    out = {}
    for dep, meta in tree.items():
        loc = f"{at}node_modules/{dep}"
        if loc not in kept:
            continue
        if isinstance(meta, dict) and isinstance(meta.get("dependencies"), dict):
            meta = {**meta, "dependencies": _npm_legacy(meta["dependencies"], loc + "/", kept)}
        out[dep] = meta
    return out


# ---------------------------------------------------------------- the line-wise formats


def _chunks(lines: list[str], starts) -> list[tuple[str | None, list[str]]]:
    """`lines` cut where `starts(line)` names a key: (key, its lines), the lines before any
    key under None. A chunk's trailing blank lines stay with it, so a dropped entry takes its
    separator along."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in lines:
        key = starts(line)
        if key is not None:
            out.append((key, []))
        out[-1][1].append(line)
    return out


def _pnpm(text: str, reach: set[str], dirs: set[str], unpatched: set[str]) -> str:
    entries = {n[2:] for n in reach if n.startswith("e:")}
    bases = {PEERS.sub("", e) for e in entries}  # v9: `packages` holds each snapshot's base
    lines = text.split("\n")
    docs = _pnpm_documents(lines)
    main = max((i for i, d in enumerate(docs) if _pnpm_main(d)), default=len(docs) - 1)
    out: list[str] = []
    for i, doc in enumerate(docs):
        out += _pnpm_document(doc, entries, bases, dirs, unpatched) if i == main else doc
    return "\n".join(out)


_PNPM_TABLES = ("importers", "packages", "snapshots", "patchedDependencies")


def _pnpm_documents(lines: list[str]) -> list[list[str]]:
    docs: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("---") and docs[-1]:
            docs.append([])
        docs[-1].append(line)
    return docs


def _pnpm_main(doc: list[str]) -> bool:
    return any(line.startswith(("importers:", "packages:", "dependencies:")) for line in doc)


def _pnpm_document(
    doc: list[str], entries: set[str], bases: set[str], dirs: set[str], unpatched: set[str]
) -> list[str]:
    v9_snapshots = any(line.startswith("snapshots:") for line in doc)
    out: list[str] = []
    section = ""
    keep = True
    for no, line in enumerate(doc, 1):
        if line and not line[0].isspace() and not line.startswith("#"):
            section, keep = line.split(":", 1)[0], True
        elif section in _PNPM_TABLES and line.startswith("  "):
            if line[2:3] not in (" ", "#", ""):  # an entry's key line
                key = entry_key("pnpm-lock.yaml", no, line.strip())[0]
                if section == "patchedDependencies":
                    keep = key not in unpatched
                elif section == "importers":
                    keep = ("" if key == "." else key) in dirs
                elif section == "snapshots" or not v9_snapshots:
                    keep = key in entries
                else:
                    keep = key in bases
        if keep:
            out.append(line)
    return out


def _yarn_classic(text: str, reach: set[str], root: str, dirs: set[str]) -> str:
    def starts(line: str) -> str | None:
        if line.strip() and not line[0].isspace() and not line.startswith("#"):
            return line.strip()[:-1]
        return None

    chunks = [(k, lines) for k, lines in _chunks(text.split("\n"), starts)]
    kept = [(k, lines) for k, lines in chunks if k is None or f"e:{k}" in reach]
    # As berry's, an entry's key lists the descriptors that resolved to it: keep those asked for.
    wanted: set[str] = set()
    for d in dirs:
        manifest = read_manifest(root, d)
        for field in (*DEP_FIELDS, "peerDependencies"):
            deps = manifest.get(field)
            for dep, rng in deps.items() if isinstance(deps, dict) else ():
                wanted.add(f"{dep}@{rng}")
    for _, lines in kept[1:]:
        inside = False
        for line in lines[1:]:
            if line.startswith("  ") and not line.startswith("    "):
                inside = line.strip() in ("dependencies:", "optionalDependencies:")
            elif inside and line.strip():
                dep, _, rng = line.strip().partition(" ")
                wanted.add(f"{dep.strip(chr(34))}@{rng.strip(chr(34))}")
    out: list[str] = []
    for key, lines in kept:
        if key is not None:
            parts = [p.strip() for p in key.split(",")]
            asked = [p for p in parts if p.strip('"') in wanted]
            if asked and asked != parts:
                lines = [", ".join(asked) + ":", *lines[1:]]
        out += lines
    return "\n".join(out)


def _berry(name: str, text: str, graph: LockGraph, reach: set[str], dirs: set[str]) -> str:
    data = yaml_docs(name, text)[0]
    # The descriptors the kept entries ask for: yarn writes an entry's key as the descriptors
    # that resolved to it, so one only a pruned package used must go from the key too.
    wanted: set[str] = set()
    for key, block in data.items():
        node = berry_node(key, block)
        if key == "__metadata" or not (node in reach or node[2:] in dirs and node[0] == "i"):
            continue
        for field in ("dependencies", "peerDependencies", "optionalDependencies"):
            deps = block.get(field) if isinstance(block, dict) else None
            for dep, rng in deps.items() if isinstance(deps, dict) else ():
                wanted |= {f"{dep}@{rng}", f"{dep}@npm:{rng}"}

    def starts(line: str) -> str | None:
        if line.strip() and not line[0].isspace() and not line.startswith("#"):
            return line
        return None

    out: list[str] = []
    for no, (head, lines) in enumerate(_chunks(text.split("\n"), starts)):
        if head is None:
            out += lines
            continue
        key = entry_key(name, no, head.strip())[0]
        if key == "__metadata":
            out += lines
            continue
        block = data.get(key)
        node = berry_node(key, block)
        if node.startswith("i:"):
            own = node[2:] in dirs
        else:
            own = node in reach
        if not own:
            continue
        descriptors = [d.strip() for d in key.split(",")]
        kept = [d for d in descriptors if d in wanted or _is_own_workspace(d, node)]
        if kept != descriptors:
            lines = [json.dumps(", ".join(kept or descriptors[:1])) + ":", *lines[1:]]
        out += lines
    return "\n".join(out)


def _is_own_workspace(descriptor: str, node: str) -> bool:
    """`a@workspace:packages/a` for the workspace at packages/a (and `root@workspace:.`)."""
    if not node.startswith("i:") or "@workspace:" not in descriptor:
        return False
    return norm_dir(descriptor.split("@workspace:", 1)[1]) == node[2:]


_BUN_TABLES = ("workspaces", "packages", "patchedDependencies")
_BUN_KEY = re.compile(r'^    ("(?:[^"\\]|\\.)*"):')


def _bun(text: str, reach: set[str], dirs: set[str], unpatched: set[str]) -> str:
    """bun.lock's tables hold one entry per 4-space-indented key; an entry of `workspaces` spans
    lines up to its closing brace, one of `packages` or `patchedDependencies` is one line."""
    section = ""
    out: list[str] = []
    keep = True
    for line in text.split("\n"):
        if line.startswith('  "'):
            section, keep = json.loads(line.strip().split(":", 1)[0]), True
        elif line.startswith("  }"):
            section, keep = "", True
        elif (m := _BUN_KEY.match(line)) and section in _BUN_TABLES:
            key = json.loads(m.group(1))
            if section == "patchedDependencies":
                keep = key not in unpatched
            elif section == "workspaces":
                keep = key in dirs
            else:
                spec = _first_string(line[m.end() :].strip().lstrip("[").strip())
                if "@workspace:" in spec:
                    keep = norm_dir(spec.split("@workspace:", 1)[1]) in dirs
                else:
                    keep = f"e:{key}" in reach
        if keep:
            out.append(line)
    return "\n".join(out)


def _first_string(text: str) -> str:
    """The JSON string `text` starts with ("" when it starts with none)."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""
