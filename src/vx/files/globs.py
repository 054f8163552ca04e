"""Parse and match vx's path globs: one small grammar for inputs and outputs.

The grammar is deliberately narrow so that a glob means the same thing on every machine:
`*` (within a segment), `**` (any depth, zero included), `?` and `{a,b}` (nested) are the
only wildcards; `[` is an ordinary character (Next.js-style `[id].tsx` paths are common and
a character class would silently change their meaning); a pattern with no wildcard names a
file *or its whole tree*. A leading `!` negates wherever it sits in the list: a path is in
the set when some positive pattern matches it and no negative one does. Wildcards match
dotfiles too, because a build cache must over-include rather than miss an input.

Each pattern compiles once (memoised) to one regex; a set ORs its patterns into one
regex per polarity, so a match is one `fullmatch` call.

A turbo.json's globs (`GlobSet(..., turbo=True)`) are turbo's: the same grammar plus character
classes (`[jt]`, `[!a]`, `[^a]`), as its glob engine reads them.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Iterable, Sequence

from msgspec import Struct

from vx.errors import UsageError

_MAX_ALTERNATIVES = 256
_WILDCARD = re.compile(r"[*?]")
_TURBO_WILDCARD = re.compile(r"[*?]|\[[^\]/]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_EXTGLOB = ("@(", "!(", "+(", "*(", "?(")


# ---------------------------------------------------------------- refusals


def glob_error(pattern: str) -> str | None:
    """Say why `pattern` is refused, with a hint after `; `, or None when it is fine.

    Refusing early keeps a glob from silently matching nothing (or everything) because it
    was written for another tool's grammar.
    """
    if not pattern:
        return "an empty glob names nothing; remove it"
    if pattern.startswith("!!"):
        return (
            f"double negation `{pattern}` is ambiguous; write `{pattern[2:]}` or `!{pattern[2:]}`"
        )
    if pattern.startswith("!("):
        return _extglob_error(pattern)
    body = pattern[1:] if pattern.startswith("!") else pattern
    if not body:
        return "`!` alone negates nothing; write `!<glob>`"
    for check in _CHECKS:
        reason = check(body)
        if reason:
            return reason
    return None


def _foreign_error(body: str) -> str | None:
    """Refuse the spellings of Turborepo and Nx, which mean nothing to vx."""
    if "$TURBO_DEFAULT$" in body:
        return "`$TURBO_DEFAULT$` is Turborepo syntax; list the files instead, e.g. `**/*` for the whole project"
    if body.startswith("$TURBO_ROOT$"):
        return (
            "`$TURBO_ROOT$` is Turborepo syntax; put root-relative globs in `inputs.workspaceFiles`"
        )
    if "{projectRoot}" in body or "{workspaceRoot}" in body:
        return (
            "`{projectRoot}`/`{workspaceRoot}` are Nx tokens; globs are already project-relative"
            " (use `inputs.workspaceFiles` for root paths)"
        )
    if body.startswith("^"):
        return (
            "`^named` inputs are Nx syntax; vx has no named inputs, list the globs"
            " (share them with a config preset)"
        )
    return None


def _path_error(body: str) -> str | None:
    """Refuse paths that could leave the project or mean different things per OS."""
    if "\\" in body:
        return "backslashes are not path separators here; write `/`"
    if body.startswith("/"):
        return "absolute paths are refused; globs are project-relative, drop the leading `/`"
    if _DRIVE.match(body):
        return "drive letters are refused; globs are project-relative"
    if ".." in body.split("/"):
        return "`..` leaves the project; use `inputs.workspaceFiles` for files outside it"
    if normalise(body) == "":
        return "`.` alone is refused; write `**/*` for the whole project"
    return None


def _extglob_error(body: str) -> str | None:
    """Refuse extglob, whose meaning differs between engines."""
    for opener in _EXTGLOB:
        if opener in body:
            return (
                f"extglob `{opener}…)` is not supported; write alternatives as braces, e.g. `{{a,b}}`"
                " (to negate a path starting with `(`, write `!./(…`)"
            )
    return None


def _brace_error(body: str) -> str | None:
    """Refuse unbalanced and single-alternative braces, and expansions too large to match fast."""
    depth: list[int] = []
    for ch in body:
        if ch == "{":
            depth.append(0)
        elif ch == "}":
            if not depth:
                return "unbalanced `}`; braces must pair, as in `{a,b}`"
            if depth.pop() == 0:
                return "a brace with one alternative is refused; write the text without braces, or `{a,b}`"
        elif ch == "," and depth:
            depth[-1] += 1
    if depth:
        return "unbalanced `{`; braces must pair, as in `{a,b}`"
    if len(_expand(body)) > _MAX_ALTERNATIVES:
        return f"braces expand to more than {_MAX_ALTERNATIVES} alternatives; split the glob"
    return None


_CHECKS = (_foreign_error, _path_error, _extglob_error, _brace_error)


# ---------------------------------------------------------------- normal form


def normalise(pattern: str) -> str:
    """Spell `pattern` canonically: no `./`, `/./`, `//` or trailing `/` (a leading `!` is kept).

    Two spellings of one path must compile, compare and key the same.
    """
    neg = pattern.startswith("!")
    body = pattern[1:] if neg else pattern
    segments = [s for s in body.split("/") if s not in ("", ".")]
    collapsed: list[str] = []
    for seg in segments:
        if not (seg == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(seg)
    return ("!" if neg else "") + "/".join(collapsed)


def _expand(body: str) -> list[str]:
    """Expand braces into brace-free alternatives (`a{b,c{d,e}}` -> ab, acd, ace)."""
    start = body.find("{")
    if start < 0:
        return [body]
    end, options = _brace_group(body, start)
    if end < 0:
        return [body]
    tails = _expand(body[end + 1 :])
    out: list[str] = []
    for option in options:
        for head in _expand(option):
            out += [body[:start] + head + tail for tail in tails]
            if len(out) > _MAX_ALTERNATIVES:
                return out
    return out


def _brace_group(body: str, start: int) -> tuple[int, list[str]]:
    """Find the `}` closing the brace at `start` and split its top-level alternatives."""
    depth, last, options = 0, start + 1, []
    for i in range(start, len(body)):
        ch = body[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                options.append(body[last:i])
                return i, options
        elif ch == "," and depth == 1:
            options.append(body[last:i])
            last = i + 1
    return -1, []


# ---------------------------------------------------------------- compiling


class _Alternative(Struct, frozen=True):
    """One brace-free spelling of a pattern, with what a walker needs to prune by it."""

    text: str
    segments: tuple[str, ...]
    literal: bool  # no wildcard: the file or its whole tree
    regex: str
    classes: bool = False  # `[…]` is a character class (turbo's globs)

    @property
    def head(self) -> str:
        """The literal leading directories (the whole text for a literal)."""
        if self.literal:
            return self.text
        fixed = []
        wildcard = _TURBO_WILDCARD if self.classes else _WILDCARD
        for seg in self.segments:
            if wildcard.search(seg):
                break
            fixed.append(seg)
        return "/".join(fixed)


def _segment_regex(seg: str, classes: bool = False) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            if not out or out[-1] != "[^/]*":
                out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and classes and _class_end(seg, i) > 0:
            end = _class_end(seg, i)
            out.append(_class_regex(seg[i + 1 : end]))
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _class_end(seg: str, start: int) -> int:
    """Where the class opened at `start` closes (`]` first, or after `!`/`^`, is a member); -1 if never."""
    i = start + 1
    if i < len(seg) and seg[i] in "!^":
        i += 1
    if i < len(seg) and seg[i] == "]":
        i += 1
    end = seg.find("]", i)
    return end


def class_members(body: str) -> list[str]:
    """The characters a `[…]` body names, ranges (`a-c`) spelled out, in order."""
    chars: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            chars += [chr(c) for c in range(ord(body[i]), ord(body[i + 2]) + 1)]
            i += 3
        else:
            chars.append(body[i])
            i += 1
    return chars


def _class_regex(body: str) -> str:
    """A glob class as a regex class that never matches `/` (`!` or `^` first negates)."""
    negate = body[:1] in ("!", "^")
    members = body[1:] if negate else body
    escaped = "".join("\\" + c if c in "\\^[]" else c for c in members)
    return f"[^/{escaped}]" if negate else f"(?!/)[{escaped}]"


def _wildcard_regex(segments: Sequence[str], classes: bool = False) -> str:
    """Translate segments; `**` spans zero or more whole directories."""
    rx = ""
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        if seg != "**":
            rx += _segment_regex(seg, classes) + ("" if i == last else "/")
        elif i == last:
            rx = rx[:-1] + "(?:/.*)?" if rx else ".*"
        else:
            rx += "(?:.*/)?"
    return rx


@functools.lru_cache(maxsize=4096)
def _alternatives(body: str, classes: bool = False) -> tuple[_Alternative, ...]:
    """Compile one normalised, non-negated pattern body into its alternatives."""
    out = []
    wildcard = _TURBO_WILDCARD if classes else _WILDCARD
    for text in dict.fromkeys(normalise(alt) for alt in _expand(body)):
        segments = tuple(text.split("/")) if text else ()
        literal = not wildcard.search(text)
        if not literal:
            regex = _wildcard_regex(segments, classes)
        else:
            regex = re.escape(text) + "(?:/.*)?" if text else ".+"
        out.append(_Alternative(text, segments, literal, regex, classes))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def spans(pattern: str) -> tuple[tuple[str, str, bool], ...]:
    """Each brace-free alternative of a non-negated pattern as (its text, its literal head, whether
    it spans that head's whole tree: a literal, or `head/**`): what an overlap check compares."""
    return tuple(
        (
            a.text,
            a.head,
            a.literal or a.segments[len(a.head.split("/")) if a.head else 0 :] == ("**",),
        )
        for a in _alternatives(normalise(pattern))
    )


@functools.lru_cache(maxsize=4096)
def _pattern_matcher(body: str, classes: bool = False):
    """One pattern (or one segment) on its own: for per-pattern questions, not set matching."""
    return re.compile(
        "(?s:" + "|".join(a.regex for a in _alternatives(body, classes)) + ")"
    ).fullmatch


def _union(
    positive: Sequence[_Alternative], negative: Sequence[_Alternative], exact: Sequence[str] = ()
):
    """One fullmatch for the whole set: the positives, behind a lookahead refusing the negatives;
    the `exact` paths before it, which no negation takes back.

    One regex call per path, not one per pattern: matching is keying's inner loop
    (docs/optimizations.md #10).
    """
    if not positive:
        return _never
    pos = "|".join(f"(?:{a.regex})" for a in positive)
    neg = "|".join(f"(?:{a.regex})" for a in negative)
    guard = f"(?!(?:{neg})\\Z)" if neg else ""
    first = "".join(f"{re.escape(path)}|" for path in exact)
    return re.compile(f"(?s:{first}{guard}(?:{pos}))").fullmatch


def _never(_path: str) -> None:
    """The matcher of a set with no positive pattern."""
    return None


def _dedupe_roots(heads: Iterable[str]) -> tuple[str, ...]:
    """Keep only the outermost heads; a head inside another adds nothing to a walk."""
    kept: list[str] = []
    for head in sorted(set(heads)):
        if kept and (kept[-1] == "" or head.startswith(kept[-1] + "/")):
            continue
        kept.append(head)
    return tuple(kept)


def _segments_match(pattern_seg: str, name: str, classes: bool = False) -> bool:
    if not (_TURBO_WILDCARD if classes else _WILDCARD).search(pattern_seg):
        return pattern_seg == name
    return _pattern_matcher(pattern_seg, classes)(name) is not None


def _reaches_below(alt: _Alternative, dir_segs: Sequence[str]) -> bool:
    """Whether some path strictly below the directory could match `alt`."""
    segs = alt.segments
    for i, name in enumerate(dir_segs):
        if i >= len(segs):
            return alt.literal
        if segs[i] == "**":
            return True
        if not _segments_match(segs[i], name, alt.classes):
            return False
    return alt.literal or len(segs) > len(dir_segs)


def _names_ignored(alt: _Alternative, entry_segs: Sequence[str], turbo: bool) -> bool:
    """Whether `alt` reaches an ignored entry (a file, or a directory git reports as ignored).

    vx's rule: the segments before the first `**` must match the entry's whole path, so `.env*`
    and `dist/**` reach an ignored `.env` and `dist/`, and `**` or `src/**` reach nothing git
    ignores. turbo.json's globs reach every ignored entry, as turbo's walk does. Under both,
    `node_modules` is entered only by a glob that spells it."""
    if "node_modules" in entry_segs and "node_modules" not in alt.segments:
        return False
    if turbo:
        return True
    segs = alt.segments
    fixed = segs if alt.literal else segs[: segs.index("**")] if "**" in segs else segs
    if len(fixed) < len(entry_segs):
        return False
    return all(_segments_match(p, n, alt.classes) for p, n in zip(fixed, entry_segs))


@functools.lru_cache(maxsize=4096)
def _covers(patterns: tuple[str, ...], root: str, classes: bool = False) -> bool:
    c = _compile_set(patterns, classes)
    segs = root.split("/") if root else []
    return not c.neg_alts and any(_covers_tree(a, segs) for a in c.pos_alts)


def _covers_tree(alt: _Alternative, dir_segs: Sequence[str]) -> bool:
    """Whether `alt` matches every path below the directory (so a negation prunes it)."""
    segs = alt.segments
    if alt.literal:
        return len(dir_segs) >= len(segs) and tuple(dir_segs[: len(segs)]) == segs
    if not segs or segs[-1] != "**" or "**" in segs[:-1]:
        return False
    head = segs[:-1]
    return len(dir_segs) >= len(head) and all(
        _segments_match(p, n, alt.classes) for p, n in zip(head, dir_segs)
    )


class _Compiled(Struct, frozen=True):
    positive: tuple[tuple[str, str], ...]  # (as written, normalised body)
    pos_alts: tuple[_Alternative, ...]
    neg_alts: tuple[_Alternative, ...]
    fullmatch: Callable[[str], object]
    roots: tuple[str, ...]
    exact: tuple[str, ...] = ()  # named outright, matched whatever the negations say


@functools.lru_cache(maxsize=1024)
def _compile_set(patterns: tuple[str, ...], classes: bool = False, walk: bool = False) -> _Compiled:
    positive: list[tuple[str, str]] = []
    pos_alts: list[_Alternative] = []
    neg_alts: list[_Alternative] = []
    for pattern in patterns:
        reason = glob_error(pattern)
        if reason:
            raise UsageError(f"invalid glob `{pattern}`", hint=reason)
        norm = normalise(pattern)
        if norm.startswith("!"):
            alts = _alternatives(norm[1:], classes)
            neg_alts += alts
            if walk:  # turbo's walk skips a directory a negation matches, and all below it
                neg_alts += [
                    tree
                    for a in alts
                    if not a.literal and a.segments[-1:] != ("**",)
                    for tree in _alternatives(a.text + "/**", classes)
                ]
        else:
            positive.append((pattern, norm))
            pos_alts += _alternatives(norm, classes)
    roots = _dedupe_roots(a.head for a in pos_alts)
    exact = _exact_paths(positive) if walk and neg_alts else ()
    return _Compiled(
        tuple(positive),
        tuple(pos_alts),
        tuple(neg_alts),
        _union(pos_alts, neg_alts, exact),
        roots,
        exact,
    )


def _exact_paths(positive: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The positive patterns that name one path outright (no `*`, `?`, `[` or `{`)."""
    return tuple(norm for _written, norm in positive if norm and not _GLOB_SYNTAX.search(norm))


_GLOB_SYNTAX = re.compile(r"[*?\[{]")


# ---------------------------------------------------------------- the set


class GlobSet:
    """A list of project-relative patterns, `!` negations included, matched as one set."""

    __slots__ = ("patterns", "turbo", "walk", "_c", "match")

    def __init__(self, patterns: Sequence[str], turbo: bool = False, walk: bool = False):
        self.patterns = tuple(patterns)
        self.turbo = turbo  # turbo.json's globs: character classes, and reaching what git ignores
        # turbo's explicit inputs, matched as its glob walk does: a path named outright is
        # hashed whatever the negations say, and a negation matching a directory takes its tree
        self.walk = walk
        self._c = _compile_set(self.patterns, turbo, walk)
        # The raw matcher (truthy match object or None), for hot loops that skip the bool().
        self.match: Callable[[str], object] = self._c.fullmatch

    def __repr__(self) -> str:
        return f"GlobSet({list(self.patterns)!r}{', turbo=True' if self.turbo else ''})"

    def __bool__(self) -> bool:
        return bool(self._c.pos_alts)

    def matches(self, rel_path: str) -> bool:
        """Whether the path is in the set: some positive pattern matches and no negation does."""
        return self.match(rel_path) is not None

    def roots(self) -> tuple[str, ...]:
        """The literal heads of the positive patterns: a walker need only descend there."""
        return self._c.roots

    def wildcard_roots(self) -> tuple[str, ...]:
        """The literal heads of wildcard patterns: directories a wipe keeps (`dist` of `dist/**`)."""
        return tuple(sorted({a.head for a in self._c.pos_alts if not a.literal}))

    def names(self, word: str) -> bool:
        """Whether some positive pattern spells `word` as a whole segment (e.g. `node_modules`)."""
        return any(word in a.segments for a in self._c.pos_alts)

    def could_match_under(self, dir: str) -> bool:
        """Whether any path strictly below `dir` could be in the set; False lets a walker prune."""
        dir_segs = dir.split("/") if dir else []
        if any(_covers_tree(a, dir_segs) for a in self._c.neg_alts):
            below = dir + "/" if dir else ""
            return any(path.startswith(below) for path in self._c.exact)
        return any(_reaches_below(a, dir_segs) for a in self._c.pos_alts)

    def covers(self, root: str) -> bool:
        """Whether every path at or below `root` is in the set, so a lister may take a whole sorted
        range unmatched: no negation, and some positive pattern spans the subtree (`src/**` at `src`)."""
        return _covers(self.patterns, root, self.turbo)

    def toward(self, entry: str) -> GlobSet | None:
        """The part of the set that reaches an ignored file or directory `entry` (see
        `_names_ignored`), negations kept; None when no pattern reaches it."""
        return _toward(self.patterns, self.turbo, entry, self.walk)

    def unmatched(self, rel_paths: Iterable[str]) -> tuple[str, ...]:
        """The positive patterns (as written) that match none of `rel_paths`."""
        paths = list(rel_paths)
        if paths and len(self._c.positive) == 1:
            return ()  # every path in the set matched the only positive pattern
        return tuple(
            w
            for w, norm in self._c.positive
            if not any(map(_pattern_matcher(norm, self.turbo), paths))
        )


@functools.lru_cache(maxsize=4096)
def _toward(
    patterns: tuple[str, ...], turbo: bool, entry: str, walk: bool = False
) -> GlobSet | None:
    c = _compile_set(patterns, turbo, walk)
    segs = entry.split("/")
    reaching = [a.text for a in c.pos_alts if _names_ignored(a, segs, turbo)]
    if not reaching:
        return None
    if len(reaching) == len(c.pos_alts):
        return GlobSet(patterns, turbo, walk)
    return GlobSet([*reaching, *("!" + a.text for a in c.neg_alts)], turbo, walk)
