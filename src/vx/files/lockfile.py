"""Each project's share of the lockfile: its dependency closure, not the whole file.

A project's digest folds the lockfile's global part (everything but the per-package entries and
importers: the format version, settings, overrides, patches, a pnpm file's other documents), the
root importer, its own importer, the importers of the workspace packages it links (transitively),
and every package entry those reach. So adding a dependency to one leaf moves that leaf's digest
(and, through links, its dependants'), and nobody else's.

Formats: pnpm v5, v6 and v9 (multi-document too), npm v2 and v3 (`packages`), yarn classic and
berry, and bun's text `bun.lock`. Anything else — the binary `bun.lockb`, npm's v1 — is keyed
whole for every project. A lockfile vx cannot read refuses the run with its file and line.

Parsing happens only for a lockfile content vx has not seen: the digests are memoised under
`<cacheDir>/lockfiles/`, by the file's identity (its git blob id), so a warm run reads one small
file and parses nothing. The pnpm and berry YAML is read line-wise here (their writers emit a
plain block subset), never through PyYAML.
"""

from __future__ import annotations

import json
import os
import re

import xxhash

from vx import witness
from vx.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import NoReturn

LOCKFILES = ("pnpm-lock.yaml", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "bun.lock")
WHOLE = ("bun.lockb",)  # keyed whole: vx does not read the binary format
MEMO_KEEP = 4  # lockfile contents remembered per workspace


class Closure:
    """One project's part: the digest its key folds, and — for `vx why` — what it reached beyond
    the root importer's closure (which `root` digests): each package entry and importer by a
    label, with a short digest of its text. `parts` may be read lazily (`_Parts`): a warm run
    only needs the digests."""

    __slots__ = ("digest", "root", "_parts")

    def __init__(self, digest: str, root: str, parts):
        self.digest = digest
        self.root = root
        self._parts = parts

    @property
    def parts(self) -> dict[str, str]:
        return self._parts if isinstance(self._parts, dict) else self._parts()


class _Parts:
    """One project's `parts`, read from the memo's second file the first time any is asked for."""

    __slots__ = ("table", "project_dir")

    def __init__(self, table: "_PartsFile", project_dir: str):
        self.table, self.project_dir = table, project_dir

    def __call__(self) -> dict[str, str]:
        return self.table.load().get(self.project_dir, {})


class _PartsFile:
    def __init__(self, path: str):
        self.path = path
        self.data: dict | None = None

    def load(self) -> dict:
        if self.data is None:
            try:
                import msgspec

                with open(self.path, "rb") as f:
                    self.data = msgspec.json.decode(f.read())
            except Exception:  # gone or damaged: `vx why` then names the lockfile, not the entry
                self.data = {}
        return self.data


def _short(text: str) -> str:
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogateescape"))[:8]


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- entry point


def closures(
    root: str, name: str, ident: str, projects: dict[str, dict], memo_dir: str | None
) -> dict[str, Closure]:
    """Each project dir's closure in lockfile `name` (whose identity is `ident`). `projects` maps
    a project dir to `{"name": …, "manifest": identity}`; yarn classic also reads the manifests."""
    yarn_classic = (
        name == "yarn.lock"
    )  # either flavour: berry ignores the manifests' part of the key
    shape = _canon(
        sorted((d, p["name"], p["manifest"] if yarn_classic else "") for d, p in projects.items())
    )
    memo_key = f"{name}-{ident}-{_short(shape)}{_short(shape[::-1])}"
    memo = _memo_read(memo_dir, memo_key)
    if memo is not None:
        return memo
    path = os.path.join(root, name)
    witness.read(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the lockfile: {exc.strerror}",
            file=name,
            hint="check its permissions, or delete it and install again",
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            "the lockfile is not UTF-8 text",
            file=f"{name}:{line}",
            hint="reinstall to rewrite it (e.g. `npm install`, `pnpm install`)",
        ) from None
    out = of_text(root, name, text, projects)
    _memo_write(memo_dir, memo_key, out)
    return out


def of_text(root: str, name: str, text: str, projects: dict[str, dict]) -> dict[str, Closure]:
    """Each project dir's closure in lockfile `name` holding `text` (another commit's, for --affected)."""
    graph = parse_lockfile(name, text, root, projects)
    return {d: graph.closure(d) for d in projects}


def parse_lockfile(name: str, text: str, root: str, projects: dict[str, dict]) -> LockGraph:
    text = text.removeprefix("\ufeff")  # a BOM an editor saved is no part of the lockfile
    if not text.strip():  # an empty lockfile (yarn's marker of a project root before any install)
        return LockGraph("")
    if name == "pnpm-lock.yaml":
        return _pnpm(name, text)
    if name in ("package-lock.json", "npm-shrinkwrap.json"):
        return _npm(name, text)
    if name == "bun.lock":
        return _bun(name, text)
    if text.lstrip().startswith("#") and "yarn lockfile v1" in text[:400]:
        return _yarn_classic(name, text, root, projects)
    return _berry(name, text)


class LockGraph:
    """A lockfile read into importers (by project dir) and package entries, with how each
    importer or entry names the ones it depends on (`edges`)."""

    def __init__(self, global_part: str):
        self.global_part = global_part
        self.importers: dict[str, str] = {}  # project dir -> canonical text
        self.entries: dict[str, str] = {}  # entry id -> canonical text
        self.edges: dict[str, list[str]] = {}  # "i:<dir>" or "e:<id>" -> nodes it reaches
        self.labels: dict[str, str] = {}  # entry node -> `name@version`, what it resolved to
        self.whole = False
        self._root: set[str] | None = None
        self._root_digest = ""
        # what `_fold` made of each node and each (label, body): every project's closure
        # folds mostly the same entries, and a fresh clone folds them all (no memo yet)
        self._items: dict[str, tuple[str, str]] = {}
        self._folded: dict[tuple[str, str], bytes] = {}
        self._shorts: dict[tuple[str, str], str] = {}

    def closure(self, project_dir: str) -> Closure:
        if self.whole:
            return Closure(_short(self.global_part) * 2, _short(self.global_part), {})
        if self._root is None:
            self._root = self._reach(["i:"], set())
            self._root_digest = self._fold(xxhash.xxh3_64(), sorted(self._root)).hexdigest()
        own = sorted(self._reach([f"i:{project_dir}"], set(self._root)) - self._root)
        h = xxhash.xxh3_64()
        h.update(
            f"global\0{len(self.global_part)}\0{self.global_part}\0root\0{self._root_digest}\0".encode(
                "utf-8", "surrogateescape"
            )
        )
        parts: dict[str, str] = {}
        self._fold(h, own, parts)
        return Closure(h.hexdigest(), self._root_digest, parts)

    def _reach(self, todo: list[str], seen: set[str]) -> set[str]:
        out = set()
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            out.add(node)
            todo.extend(self.edges.get(node, ()))
        return out

    def _fold(self, h, nodes: list[str], parts: dict[str, str] | None = None):
        # An entry folds as what it resolved to, not where it sits: a hoisting change that moves
        # `is-number@6` under `is-odd/` is no change to the projects using it.
        items = set()
        known = self._items
        for node in nodes:
            item = known.get(node)
            if item is None:
                kind, ident = node[0], node[2:]
                if kind == "i":
                    label, body = f"importer {ident or '.'}", self.importers.get(ident)
                else:
                    label, body = self.labels.get(node, ident), self.entries.get(ident)
                item = known[node] = (
                    label,
                    "" if body is None else body,
                )  # "": an importer the lockfile lacks
            items.add(item)
        folded, shorts = self._folded, self._shorts
        for item in sorted(items):
            data = folded.get(item)
            if data is None:
                label, body = item
                data = folded[item] = f"{label}\0{len(body)}\0{body}\0".encode(
                    "utf-8", "surrogateescape"
                )
            h.update(data)
            if parts is not None:
                short = shorts.get(item)
                if short is None:
                    short = shorts[item] = _short(item[1])
                parts[item[0]] = short
        return h


def _refuse(name: str, line: int, what: str) -> NoReturn:
    raise ConfigError(
        f"cannot read the lockfile: {what}",
        file=f"{name}:{line}",
        hint="was it edited by hand or cut short? reinstall to rewrite it",
    )


# ---------------------------------------------------------------- a block-YAML subset


_PLAIN_KEY = re.compile(r"([^\s'\"#][^:]*?):(?: |$)")


def yaml_docs(name: str, text: str) -> list[dict]:
    """The block subset pnpm and yarn berry write: nested mappings of scalars, flow values kept
    as their text, `- item` lines as `-N` keys. Raises a ConfigError naming the line otherwise."""
    docs: list[dict] = []
    doc: dict = {}
    stack: list[tuple[int, dict]] = [(-1, doc)]
    pending: tuple[int, dict, str] | None = None  # a key whose value is the block below it
    # A key (or `- item`) whose value started on its own line: a deeper line after it continues
    # that value — a block scalar (`deprecated: |-` and its paragraphs), a long plain or quoted
    # scalar folded over lines, a flow mapping broken across lines.
    scalar: tuple[int, dict, str] | None = None
    blanks = 0  # blank lines since the last one: kept in a value they fall inside of
    for no, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped:
            blanks += 1
            continue
        gap, blanks = "\n" * blanks, 0
        if stripped.startswith("#") and scalar is None:
            continue
        if scalar is not None:
            s_indent, s_container, s_key = scalar
            if len(line) - len(line.lstrip(" ")) > s_indent:
                s_container[s_key] = f"{s_container[s_key]}\n{gap}{stripped}"
                continue
            scalar = None
            if stripped.startswith("#"):
                continue
        if line.startswith("---"):
            if doc:
                docs.append(doc)
            doc, stack, pending = {}, [(-1, {})], None
            stack[0] = (-1, doc)
            continue
        indent = len(line) - len(line.lstrip(" "))
        if "\t" in line[: indent + 1]:
            _refuse(name, no, "a tab in the indentation")
        if pending is not None:
            p_indent, parent, key = pending
            child: dict = {}
            parent[key] = child
            pending = None
            if indent > p_indent:
                stack.append((p_indent, child))
        while stack and indent <= stack[-1][0]:
            stack.pop()
        if not stack:
            _refuse(name, no, "the indentation does not match any block above")
        container = stack[-1][1]
        if stripped.startswith("- ") or stripped == "-":
            item = f"-{len(container)}"
            container[item] = yaml_scalar(stripped[1:].strip())
            scalar = (indent, container, item) if ": " not in stripped else None
            continue
        key, rest = entry_key(name, no, stripped)
        if rest:
            container[key] = yaml_scalar(rest)
            scalar = (indent, container, key)
        else:
            pending = (indent, container, key)
    if pending is not None:
        pending[1][pending[2]] = {}
    if doc:
        docs.append(doc)
    return docs


def entry_key(name: str, no: int, s: str) -> tuple[str, str]:
    if s[0] in "'\"":
        q, i, out = s[0], 1, []
        while i < len(s):
            c = s[i]
            if q == "'" and c == "'" and s[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            if q == '"' and c == "\\" and i + 1 < len(s):
                out.append(s[i + 1])
                i += 2
                continue
            if c == q:
                break
            out.append(c)
            i += 1
        else:
            _refuse(name, no, "a quoted key is not closed")
        after = s[i + 1 :]
        if not after.startswith(":"):
            _refuse(name, no, "a quoted key is not followed by `:`")
        return "".join(out), after[1:].strip()
    m = _PLAIN_KEY.match(s)
    if m is None:
        _refuse(name, no, f"expected `key: value`, found `{s[:60]}`")
    return m.group(1), s[m.end() :].strip()


def yaml_scalar(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        body = s[1:-1]
        return (
            body.replace("''", "'")
            if s[0] == "'"
            else body.replace('\\"', '"').replace("\\\\", "\\")
        )
    return s


# ---------------------------------------------------------------- pnpm


PEERS = re.compile(r"\(.*\)$")
DEP_FIELDS = ("dependencies", "devDependencies", "optionalDependencies")


def _pnpm(name: str, text: str) -> LockGraph:
    docs = yaml_docs(name, text)
    main = next(
        (d for d in reversed(docs) if "importers" in d or "packages" in d or "dependencies" in d),
        docs[-1] if docs else {},
    )
    others = [d for d in docs if d is not main]
    version = str(main.get("lockfileVersion", ""))
    if not version:
        _refuse(name, 1, "no `lockfileVersion`")
    major = version.split(".")[0]
    graph = LockGraph(
        _canon(
            [
                others,
                {k: v for k, v in main.items() if k not in ("importers", "packages", "snapshots")},
            ]
        )
    )
    importers = main.get("importers")
    if not isinstance(importers, dict):  # a single-project lockfile: its root holds the importer
        importers = {".": {k: main[k] for k in (*DEP_FIELDS, "specifiers") if k in main}}
    packages = main.get("packages") or {}
    snapshots = main.get("snapshots") or {}
    if not isinstance(packages, dict) or not isinstance(snapshots, dict):
        _refuse(name, 1, "`packages` or `snapshots` is not a mapping")

    def entry_id(dep: str, ref: str) -> str | None:
        if ref.startswith("link:"):
            return None
        if major == "5":
            return ref if ref.startswith("/") else f"/{dep}/{ref}"
        if major == "6":
            return ref if ref.startswith("/") else f"/{dep}@{ref}"
        alias = "@" in PEERS.sub("", ref)[1:] and not ref.startswith(("file:", "http"))
        return ref if alias else f"{dep}@{ref}"

    def refs(block, at_dir: str | None) -> list[str]:
        out = []
        for (
            field
        ) in DEP_FIELDS:  # peers are resolved into `dependencies` (ranges in `peerDependencies`)
            deps = block.get(field)
            if not isinstance(deps, dict):
                continue
            for dep, ref in deps.items():
                ref = ref.get("version", "") if isinstance(ref, dict) else str(ref)
                if ref.startswith(
                    "link:"
                ):  # a workspace package (from a package entry: left to its importer)
                    if at_dir is not None:
                        out.append("i:" + norm_dir(os.path.join(at_dir, ref[5:])))
                elif ref:
                    out.append(f"e:{entry_id(dep, ref)}")  # not a link: an id
        return out

    for d, block in importers.items():
        if not isinstance(block, dict):
            block = {}
        key = "" if d == "." else d
        graph.importers[key] = _canon(block)
        graph.edges["i:" + key] = refs(block, key)
    if major not in ("5", "6") and snapshots:
        for sid, block in snapshots.items():
            block = block if isinstance(block, dict) else {}
            base = PEERS.sub("", sid)
            graph.entries[sid] = _canon([packages.get(base), block])
            graph.edges["e:" + sid] = refs(block, None)
            graph.labels["e:" + sid] = base
    else:
        for pid, block in packages.items():
            block = block if isinstance(block, dict) else {}
            graph.entries[pid] = _canon(block)
            graph.edges["e:" + pid] = refs(block, None)
            base = PEERS.sub("", pid).lstrip("/")
            if major == "5":
                base = "@".join(base.split("_")[0].rsplit("/", 1))
            graph.labels["e:" + pid] = base
    return graph


def norm_dir(path: str) -> str:
    norm = os.path.normpath(path).replace(os.sep, "/")
    return "" if norm == "." else norm


# ---------------------------------------------------------------- npm


def _json(name: str, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _refuse(name, exc.lineno, exc.msg)


def _npm(name: str, text: str) -> LockGraph:
    data = _json(name, text)
    if not isinstance(data, dict):
        _refuse(name, 1, "not a JSON object")
    packages = data.get("packages")
    if not isinstance(packages, dict):  # lockfileVersion 1: no per-location table, keyed whole
        graph = LockGraph(text)
        graph.whole = True
        return graph
    graph = LockGraph(
        _canon({k: v for k, v in data.items() if k not in ("packages", "dependencies")})
    )

    def resolve(loc: str, dep: str) -> str | None:
        d = loc
        while True:
            cand = f"{d}/node_modules/{dep}" if d else f"node_modules/{dep}"
            if cand in packages:
                return cand
            if not d:
                return None
            d = d.rsplit("/", 1)[0] if "/" in d else ""

    def node_of(loc: str) -> str:
        meta = packages.get(loc)
        if isinstance(meta, dict) and meta.get("link") and isinstance(meta.get("resolved"), str):
            return "i:" + norm_dir(meta["resolved"])
        return "e:" + loc

    importers = {
        loc
        for loc, meta in packages.items()
        if "node_modules/" not in f"/{loc}" and isinstance(meta, dict)
    }
    for loc, meta in packages.items():
        if not isinstance(meta, dict):
            _refuse(name, 1, f'`packages["{loc}"]` is not an object')
        fields = (
            (*DEP_FIELDS, "peerDependencies")
            if loc in importers
            else ("dependencies", "optionalDependencies", "peerDependencies")
        )
        out = []
        for field in fields:
            deps = meta.get(field)
            for dep in deps if isinstance(deps, dict) else ():
                at = resolve(loc, dep)
                if at is not None:
                    out.append(node_of(at))
        if loc in importers:
            graph.importers[loc] = _canon(meta)
            graph.edges["i:" + loc] = out
        else:
            dep_name = meta.get("name") or loc.rpartition("node_modules/")[2]
            graph.entries[loc] = _canon([dep_name, meta])
            graph.labels["e:" + loc] = f"{dep_name}@{meta.get('version', '')}"
            graph.edges["e:" + loc] = out + ([node_of(loc)] if meta.get("link") else [])
    return graph


# ---------------------------------------------------------------- bun


_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])')


def _bun(name: str, text: str) -> LockGraph:
    data = _json(name, _TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), text))
    if not isinstance(data, dict) or not isinstance(data.get("workspaces"), dict):
        _refuse(name, 1, "no `workspaces` object")
    workspaces, packages = data["workspaces"], data.get("packages") or {}
    graph = LockGraph(
        _canon({k: v for k, v in data.items() if k not in ("workspaces", "packages")})
    )

    def segments(key: str) -> list[str]:
        parts, out = key.split("/"), []
        i = 0
        while i < len(parts):
            if parts[i].startswith("@") and i + 1 < len(parts):
                out.append(f"{parts[i]}/{parts[i + 1]}")
                i += 2
            else:
                out.append(parts[i])
                i += 1
        return out

    def resolve(at: list[str], dep: str) -> str | None:
        for n in range(len(at), -1, -1):
            cand = "/".join([*at[:n], dep])
            if cand in packages:
                return cand
        return None

    def node_of(key: str) -> str:
        spec = packages[key][0] if isinstance(packages[key], list) and packages[key] else ""
        if isinstance(spec, str) and "@workspace:" in spec:
            return "i:" + norm_dir(spec.split("@workspace:", 1)[1])
        return "e:" + key

    def refs(block: dict, at: list[str]) -> list[str]:
        out = []
        for field in (*DEP_FIELDS, "peerDependencies"):
            deps = block.get(field)
            for dep in deps if isinstance(deps, dict) else ():
                key = resolve(at, dep)
                if key is not None:
                    out.append(node_of(key))
        return out

    for d, block in workspaces.items():
        block = block if isinstance(block, dict) else {}
        graph.importers[d] = _canon(block)
        graph.edges["i:" + d] = refs(block, [block["name"]] if d and block.get("name") else [])
    for key, entry in packages.items():
        if not isinstance(entry, list):
            _refuse(name, 1, f'`packages["{key}"]` is not an array')
        graph.entries[key] = _canon(entry)
        graph.labels["e:" + key] = str(entry[0]) if entry else key
        meta = next((e for e in entry[1:] if isinstance(e, dict)), {})
        graph.edges["e:" + key] = refs(meta, segments(key))
    return graph


# ---------------------------------------------------------------- yarn


def _berry(name: str, text: str) -> LockGraph:
    docs = yaml_docs(name, text)
    data = docs[0] if docs else {}
    if "__metadata" not in data:
        _refuse(name, 1, "neither a yarn v1 header nor berry's `__metadata`")
    graph = LockGraph(_canon(data["__metadata"]))
    by_descriptor: dict[str, str] = {}
    for key in data:
        for desc in key.split(","):
            by_descriptor[desc.strip()] = key
    for key, block in data.items():
        if key == "__metadata":
            continue
        block = block if isinstance(block, dict) else {}
        out = []
        for field in ("dependencies", "peerDependencies", "optionalDependencies"):
            deps = block.get(field)
            for dep, rng in deps.items() if isinstance(deps, dict) else ():
                target = by_descriptor.get(f"{dep}@{rng}") or by_descriptor.get(f"{dep}@npm:{rng}")
                if target is not None:
                    out.append(berry_node(target, data[target]))
        node = berry_node(key, block)
        if node.startswith("i:"):
            graph.importers[node[2:]] = _canon(block)
        else:
            graph.entries[key] = _canon(block)
            graph.labels[node] = str(block.get("resolution", key))
        graph.edges[node] = out
    return graph


def berry_node(key: str, block) -> str:
    resolution = block.get("resolution", "") if isinstance(block, dict) else ""
    if "@workspace:" in resolution:
        return "i:" + norm_dir(resolution.split("@workspace:", 1)[1])
    return "e:" + key


def _yarn_classic(name: str, text: str, root: str, projects: dict[str, dict]) -> LockGraph:
    entries: dict[str, list[str]] = {}  # key line -> its body lines
    by_descriptor: dict[str, str] = {}
    current: list[str] | None = None
    for no, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if not line[0].isspace():
            if not line.rstrip().endswith(":"):
                _refuse(name, no, f"expected an entry line `name@range:`, found `{line[:60]}`")
            key = line.strip()[:-1]
            current = entries.setdefault(key, [])
            for desc in key.split(","):
                by_descriptor[desc.strip().strip('"')] = key
        elif current is None:
            _refuse(name, no, "an indented line before any entry")
        else:
            current.append(line.rstrip())
    graph = LockGraph("yarn lockfile v1")
    names = {p["name"]: d for d, p in projects.items()}

    def dep_lines(body: list[str]) -> list[tuple[str, str]]:
        out, inside = [], False
        for line in body:
            if line.startswith("  ") and not line.startswith("    "):
                inside = line.strip() in ("dependencies:", "optionalDependencies:")
            elif inside:
                dep, _, rng = line.strip().partition(" ")
                out.append((dep.strip('"'), rng.strip('"')))
        return out

    def node_for(dep: str, rng: str) -> str | None:
        key = by_descriptor.get(f"{dep}@{rng}")
        if key is not None:
            return "e:" + key
        if dep in names:  # a workspace package: yarn classic keeps no entry for it
            return "i:" + names[dep]
        return None

    for key, body in entries.items():
        graph.entries[key] = "\n".join(body)
        first = key.split(",")[0].strip().strip('"')
        version = next(
            (
                b.split()[1].strip('"')
                for b in body
                if b.startswith("  version ") and len(b.split()) > 1
            ),
            "",
        )
        dep_name = first[: first.index("@", 1)] if "@" in first[1:] else first
        graph.entries[key] = dep_name + "\n" + graph.entries[key]
        graph.labels["e:" + key] = f"{dep_name}@{version}"
        graph.edges["e:" + key] = [n for n in (node_for(d, r) for d, r in dep_lines(body)) if n]
    for d in projects:
        manifest = read_manifest(root, d)
        graph.importers[d] = _canon(
            {f: manifest.get(f) for f in (*DEP_FIELDS, "peerDependencies", "resolutions")}
        )
        out = []
        for field in DEP_FIELDS:
            deps = manifest.get(field)
            for dep, rng in deps.items() if isinstance(deps, dict) else ():
                n = node_for(dep, str(rng))
                if n:
                    out.append(n)
        graph.edges["i:" + d] = out
    return graph


def read_manifest(root: str, project_dir: str) -> dict:
    try:
        with open(os.path.join(root, project_dir, "package.json"), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- memo


def _memo_read(memo_dir: str | None, key: str) -> dict[str, Closure] | None:
    if memo_dir is None:
        return None
    try:
        import msgspec

        with open(os.path.join(memo_dir, key + ".json"), "rb") as f:
            data = msgspec.json.decode(f.read())
        parts = _PartsFile(os.path.join(memo_dir, key + ".parts"))
        return {d: Closure(v[0], v[1], _Parts(parts, d)) for d, v in data.items()}
    except Exception:  # a memo is never a reason to fail: any trouble reading one is a miss
        return None


def _memo_write(memo_dir: str | None, key: str, out: dict[str, Closure]) -> None:
    """The digests in `<key>.json` (what every planned run reads), the parts for `vx why` in
    `<key>.parts` (read only when a key moved); the last MEMO_KEEP contents are kept."""
    if memo_dir is None:
        return
    import msgspec

    from vx.dotvx import write_whole

    if not os.path.isdir(os.path.dirname(memo_dir)):
        return  # the store makes the cache dir (with its .gitignore): the next run writes the memo
    try:
        os.makedirs(memo_dir, mode=0o700, exist_ok=True)
        for suffix, body in (
            (".parts", {d: c.parts for d, c in out.items()}),
            (".json", {d: [c.digest, c.root] for d, c in out.items()}),
        ):
            write_whole(os.path.join(memo_dir, key + suffix), msgspec.json.encode(body))
        old = sorted(
            (e for e in os.scandir(memo_dir) if e.name.endswith(".json")),
            key=lambda e: e.stat().st_mtime_ns,
            reverse=True,
        )
        for e in old[MEMO_KEEP:]:
            os.unlink(e.path)
            try:
                os.unlink(e.path[: -len(".json")] + ".parts")
            except OSError:
                pass
    except OSError:
        pass  # unwritable: the next run parses again


# ---------------------------------------------------------------- the fingerprints


def fingerprints(
    root, packages, index, settings: str, memo_dir, skip=()
) -> dict[str, tuple[str, tuple]]:
    """Each project dir's workspace fingerprint, per-project lockfile shares in: the install settings'
    digest `settings`, then each root lockfile present (but those in `skip`, which a plugin keys)
    as that project's closure; and, for `vx why`, the `(lockfile name, Closure)` pairs it folded.
    `packages` are the workspace's members."""
    found = [
        (name, ident) for name in LOCKFILES if name not in skip and (ident := index.identity(name))
    ]
    yarn = any(name == "yarn.lock" for name, _ in found)  # only yarn classic reads the manifests
    projects = {
        p.dir: {"name": p.name, "manifest": index.identity(p.manifest_path) if yarn else ""}
        for p in packages
    }
    per = [(name, closures(str(root), name, ident, projects, memo_dir)) for name, ident in found]
    head = f"settings\0{settings}\0".encode()
    out = {}
    for d in projects:
        h = xxhash.xxh3_64(head)
        for name, table in per:
            h.update(f"{name}\0{table[d].digest}\0".encode())
        out[d] = (h.hexdigest(), tuple((name, table[d]) for name, table in per))
    return out


def why_parts(folded) -> dict[str, str]:
    """What `vx why` keeps of a project's share: a short digest per label (HashRecord.lockfile)."""
    out: dict[str, str] = {}
    for name, c in folded:
        out[f"{name}: the root importer's dependencies"] = c.root
        out.update((f"{name}: {label}", short) for label, short in c.parts.items())
    return out
