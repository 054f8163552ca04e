"""A fully cached run, remembered: what it read and what it found (docs/optimizations.md #18).

A `vx run` whose every task was a confirmed local hit, shown in the broad flow (where hits are
silent, so the whole output is the footer), ends by writing a receipt: its command line and
working directory; each environment variable it looked up, with its value; every path its
planning read or probed, with its lstat identity (`vx.witness`); the config-file names of each
project directory it listed; digests of git's three listings; and per task the cache row
(key, size, crc), the lstat values its outputs must show, where those outputs live,
what walking them reads and, for a hit current through a covering dependant, that one's key.

Planning is a function of exactly those facts, so while they hold the keys and the hits are
the receipt's. `vx.fastpath.replay` checks them before anything else of vx is loaded. This module owns
the record: writing it, finding it again, and the pure checks of what it says against the
disk. A receipt is an optimisation, never a source of truth: each fact is checked again, and
any trouble reading one is only a miss. `VX_REPLAY=0` turns receipts off.

A receipt is sealed with a MAC keyed by a secret of this user's kept outside the workspace
(`_key`), and nothing of it is decoded before its MAC holds: a receipt says which hits hold,
so one planted by an archive or another user, or torn by a crash, must be no receipt at all.
Only bytes this user's vx wrote reach `marshal` (which must never see any others), and the
warm path pays a hash instead of a typed decoder's imports.
"""

from __future__ import annotations

import marshal
import os
import stat

from vx import __version__, dotvx, witness

FORMAT = 6  # 3: env values kept as digests; 4: the store dir; 5: sealed; 6: a task's covering key
MAGIC = b"vxr" + bytes([FORMAT])
MAC_SIZE = 16
KEY_SIZE = 32
RECEIPTS = os.path.join(".vx", "receipts")
GIT_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME")  # read straight from os.environ by the listing
KEEP = 32  # receipts per workspace: one per command line and directory, the least recent go first

# A task's outputs as the replay finds them.
CURRENT, ABSENT, CHANGED = "current", "absent", "changed"


def enabled(environ) -> bool:
    off = ("0", "false", "no", "off")
    return environ.get("VX_REPLAY", "") not in off and environ.get("VX_FASTPATH", "") not in off


def name_of(cwd: str, argv: list[str]) -> str:
    import xxhash

    return xxhash.xxh3_64_hexdigest(
        "\0".join([__version__, cwd, *argv]).encode("utf-8", "surrogateescape")
    )


# ---------------------------------------------------------------- finding


def find(cwd: str, argv: list[str]) -> tuple[str, dict, memoryview] | None:
    """This command's receipt, under `.vx/receipts` of cwd or of a directory above: its path, its
    header (sealed, and checked against this command) and the undecoded body, which can wait
    until git runs (`body_of`)."""
    name = name_of(cwd, argv)
    here = cwd
    while True:
        path = os.path.join(here, RECEIPTS, name)
        try:
            with open(path, "rb") as f:
                data = memoryview(f.read())
        except FileNotFoundError:
            data = None
        if data is not None:
            if _linked(here):
                return None  # the pipeline refuses such a workspace, naming the link
            opened = unseal(data)
            if opened is None:
                return None
            header, body = opened
            ok = (
                isinstance(header, dict)
                and header.get("format") == FORMAT
                and header.get("vx") == __version__
                and header.get("cwd") == cwd
                and header.get("argv") == argv
                and header.get("root") == here
            )
            return (path, header, body) if ok else None
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def unseal(data: memoryview) -> tuple[dict, memoryview] | None:
    """A receipt's header and its undecoded body, or None unless the header's MAC holds: the
    magic, then the MAC of the rest, the header's length, the header and the body (whose own
    MAC the header holds, so a replay that keeps the body rewrites only the header's)."""
    head_at = len(MAGIC) + MAC_SIZE + 4
    if len(data) < head_at or data[: len(MAGIC)] != MAGIC:
        return None
    size = int.from_bytes(data[head_at - 4 : head_at], "little")
    if head_at + size > len(data):
        return None
    mac = _mac(data[len(MAGIC) + MAC_SIZE : head_at + size])
    if mac is None or not same_mac(mac, data[len(MAGIC) : len(MAGIC) + MAC_SIZE]):
        return None
    header = marshal.loads(data[head_at : head_at + size])
    return header, data[head_at + size :]


def body_of(header: dict, body: memoryview) -> dict | None:
    """The receipt's body, decoded once its MAC (in the sealed header) holds."""
    mac = _mac(body)
    sealed = header.get("body")
    if mac is None or not isinstance(sealed, bytes) or not same_mac(mac, sealed):
        return None
    return marshal.loads(body)


def same_mac(mac: bytes, sealed) -> bool:
    """Whether a receipt's MAC is the one computed, in time that does not depend on where they
    differ (a byte-by-byte `==` would tell a forger how much of a guess was right)."""
    try:
        from _operator import _compare_digest  # hmac.compare_digest, without hashlib's OpenSSL
    except ImportError:
        import hmac

        return hmac.compare_digest(mac, sealed)
    return _compare_digest(mac, sealed)


def _mac(data) -> bytes | None:
    """Keyed BLAKE2b of `data`; None when this user has no key (then no receipt is written or
    read)."""
    key = _key()
    if key is None:
        return None
    try:
        from _blake2 import blake2b  # hashlib's own, without hashlib's OpenSSL start-up
    except ImportError:
        from hashlib import blake2b
    return blake2b(data, key=key, digest_size=MAC_SIZE).digest()


_KEY: list[bytes | None] = []


def _key() -> bytes | None:
    """This user's receipt key: 32 random bytes in `$XDG_CACHE_HOME/vx/receipt-key`, made on first
    use, beside the digest seed. A file that is not this user's own, owner-only regular file
    counts as none, and so does one that cannot be made: then receipts are off."""
    if not _KEY:
        base, key = dotvx.cache_home(), None
        if base is not None:
            path = os.path.join(base, "vx", "receipt-key")
            key = _read_key(path)
            if key is None and not os.path.lexists(path):
                key = _make_key(path)
        _KEY.append(key)
    return _KEY[0]


def _read_key(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        data = os.read(fd, KEY_SIZE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == KEY_SIZE else None


def _make_key(path: str) -> bytes | None:
    """Written whole to a temp file, then linked into place: a process that reads the key never
    finds it half written, and of two making one at once, the second reads the first's."""
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_SIZE))
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
    except OSError:
        return None
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass
    return _read_key(path)


def _linked(root: str) -> bool:
    """Whether `.vx`, its receipts or its cache is a symlink (vx.store.location refuses those)."""
    for name in (".vx", RECEIPTS, os.path.join(".vx", "cache")):
        try:
            if stat.S_ISLNK(os.lstat(os.path.join(root, name)).st_mode):
                return True
        except OSError:
            pass
    return False


# ---------------------------------------------------------------- checks


def same_env(header: dict, environ) -> bool:
    if header["env_whole"] is not None:
        return header["env_whole"] == {
            name: dotvx.env_digest(value) for name, value in environ.items()
        }
    return all(
        dotvx.env_digest(environ.get(name)) == value for name, value in header["env"].items()
    )


def paths_hold(body: dict) -> bool:
    """Every planning path as the receipted run left it: its whole identity where its bytes or
    entries were used, its kind and inode where only those mattered, still missing where it was;
    and each listed project directory still holding the same config-file names."""
    return _hold(body["read"], True) and _hold(body["probed"], False) and _views_hold(body["views"])


def _hold(paths: list, whole: bool) -> bool:
    lstat, identity_of = os.lstat, witness.identity_of
    for path, want in paths:
        try:
            st = lstat(path)
        except OSError:
            if want is None:
                continue
            return False
        if want is None or identity_of(st, whole) != want:
            return False
    return True


def _views_hold(views: list) -> bool:
    """A listed directory holds when it is unchanged, or else when a fresh listing still shows
    the same names with the prefix (`dist` deleted beside a vx.config.json changes nothing)."""
    for directory, want, prefix, names in views:
        if want is not None and witness.identity(directory, True) == want:
            continue
        try:
            now = sorted(n for n in os.listdir(directory) if n.startswith(prefix))
        except OSError:
            return False
        if now != names:
            return False
    return True


def output_state(task: list) -> str:
    """CURRENT when the task's outputs are exactly as the receipt says (files by the up-to-date
    rule; the directories the walk lists unchanged, so nothing was added); ABSENT when none
    of its output roots exists, so restoring needs no wipe; CHANGED otherwise."""
    expected, roots, walked = task[3:6]
    if walked is not None and _hold(walked[0], True) and _hold(walked[1], False):
        output_stat = witness.output_stat
        try:
            if all(output_stat(os.lstat(path)) == want for path, want in expected):
                return CURRENT
        except OSError:
            pass
    for root in roots:
        try:
            os.lstat(root)
            return CHANGED
        except FileNotFoundError:
            continue
        except OSError:
            return CHANGED
    return ABSENT if roots else CHANGED


def status_digest(data: bytes, outputs: frozenset[bytes] | set[bytes]) -> str:
    """The digest of `git status` output without the ignored paths at or below a task's output
    root (`!! packages/a/dist/`): those are the run's outcome, which `output_state` judges, not
    planning's input — a deleted `dist` must not make git's listing look different."""
    import xxhash

    h = xxhash.xxh3_128()
    for record in data.split(b"\0"):
        if record.startswith(b"!! ") and outputs and _under(record[3:].rstrip(b"/"), outputs):
            continue
        h.update(record + b"\0")
    return h.hexdigest()


def _under(path: bytes, roots) -> bool:
    while True:
        if path in roots:
            return True
        cut = path.rfind(b"/")
        if cut <= 0:
            return False
        path = path[:cut]


def racy(paths: list, started_ns: int) -> bool:
    """Whether a path was changed so close to the run's start that an edit in the same tick
    could have left its identity as recorded (the racy window, `witness.RACY_NS`)."""
    return any(
        ident is not None and witness.racy_times(ident[2], ident[3], started_ns)
        for _path, ident in paths
    )


# ---------------------------------------------------------------- writing


def task_record(
    key: str,
    size: int,
    crc: str,
    expected: list[tuple[str, tuple]],
    roots: list[str],
    walked: dict[str, bool],
    started_ns: int,
    covering: str | None = None,
) -> list:
    """One task's part of a receipt. The directories its output walk read are kept only outside
    the racy window; without them the outputs can only be found ABSENT, never CURRENT.
    `covering`: the key of the dependant whose entry holds every file of this one's
    (`taskcache.covering`); then `expected` is empty, and the task is restored through it."""
    read = [(p, witness.identity(p, True)) for p, whole in sorted(walked.items()) if whole]
    probed = [(p, witness.identity(p, False)) for p, whole in sorted(walked.items()) if not whole]
    walk = None if racy(read, started_ns) else [read, probed]
    return [key, size, crc, expected, roots, walk, covering]


def to_restore(tasks: list) -> tuple[list, list] | None:
    """The tasks whose outputs are absent (`output_state`), split into those whose artifacts are
    extracted and those restored through a covering dependant's (its entry holds every file of
    theirs, and restoring both would end with its files: `taskcache.covering`). None when one's
    outputs changed, or when a covered task's covering one is not restored with it: its own
    artifact is not what the receipt vouches for, so the pipeline decides."""
    states = [output_state(task) for task in tasks]
    if CHANGED in states:
        return None
    absent = [task for task, state in zip(tasks, states) if state == ABSENT]
    extracted = [task for task in absent if len(task) < 7 or task[6] is None]
    keys = {task[0] for task in extracted}
    through = [task for task in absent if len(task) > 6 and task[6] is not None]
    if any(task[6] not in keys for task in through):
        return None
    return extracted, through


def write(
    *,
    argv: list[str],
    cwd: str,
    root: str,
    cache_dir: str,
    store_dir: str,
    started_ns: int,
    env: witness.ReadEnv,
    noted: tuple,
    vouched,
    toplevel: str | None,
    tasks: list[list],
    history: list | None = None,
    as_json: bool = False,
) -> bool:
    """Write the receipt of a run that qualified (the caller decides that); False when a fact
    cannot be vouched for (a path inside the racy window, say) and nothing was written.

    `vouched(rel)` names the files git vouches for: their bytes are pinned by git's listings,
    which the replay compares whole, so the receipt need not stat them too. `toplevel` is the git
    repository's root, against which `git status` spells its paths. `history` is what a replay
    records of its run (`vx.store.runs`): the invocation's fixed fields and each task's
    (project, task, key). `as_json`: the run printed its record on stdout (`--format json`),
    which a replay prints too, from `history`."""
    if as_json and history is None:
        return False
    paths_read, commands, views = noted
    prefix = os.path.join(root, "")
    read: list[tuple[str, object]] = []
    probed: list[tuple[str, object]] = []
    for path, whole in sorted(paths_read.items()):
        if whole and path.startswith(prefix) and vouched(path[len(prefix) :]):
            continue
        (read if whole else probed).append((path, witness.identity(path, whole)))
    if not commands or racy(read, started_ns):
        return False
    dirs = [
        (d, witness.identity(d, True), prefix, names)
        for d, (prefix, names) in sorted(views.items())
    ]
    dirs = [(d, None if racy([(d, ident)], started_ns) else ident, p, n) for d, ident, p, n in dirs]
    header = {
        "format": FORMAT,
        "vx": __version__,
        "cwd": cwd,
        "argv": list(argv),
        "root": root,
        "cache_dir": cache_dir,
        "store_dir": store_dir,  # entries and artifacts: cache_dir, or the shared store
        "env": {
            name: dotvx.env_digest(dict.get(env, name)) for name in sorted(env.names | set(GIT_ENV))
        },  # not noted
        "env_whole": {name: dotvx.env_digest(value) for name, value in dict.items(env)}
        if env.whole
        else None,
        "git": _commands(
            commands, toplevel, tasks, (os.path.join(root, ".vx"), cache_dir, store_dir)
        ),
        "tasks": len(tasks),
        "index": None,
        "touched": started_ns / 1e9,  # the run's close touched every row
        "json": as_json,
    }
    body = {"read": read, "probed": probed, "views": dirs, "tasks": tasks, "history": history}
    return store(os.path.join(root, RECEIPTS, name_of(cwd, argv)), header, body)


def _commands(
    commands: list, toplevel: str | None, tasks: list[list], own: tuple[str, ...]
) -> list[list]:
    """Each git command with its exit code and digest; `status` with the roots (as git spells
    them) whose ignored paths its digest leaves out: the tasks' outputs, and vx's own state
    (`own`: `.vx`, the cache and store dirs). A workspace whose .gitignore does not name `.vx`
    sees each file there listed through the `*` .gitignore vx keeps in its directories, and a
    replay leaves the index's `-wal`/`-shm` and `runs.pending` that the next pipeline run folds
    away: no planning reads them (`.vx` is never an input), so they must not fail a receipt."""
    out = []
    for argv, code, digest, status in commands:
        roots = None
        if status is not None and toplevel is not None:
            top = os.path.join(toplevel, "")
            paths = [r for task in tasks for r in task[4]]
            paths += [os.path.join(os.path.abspath(d), "") for d in own]
            roots = sorted(
                {os.fsencode(r[len(top) :].rstrip("/")) for r in paths if r.startswith(top)}
            )
            digest = status_digest(status, frozenset(roots))
        out.append([list(argv), code, digest, roots])
    return out


def store(path: str, header: dict, body: dict | bytes) -> bool:
    """Seal and write atomically (a rename), beside a `*` .gitignore so git never lists receipts.
    `body` may be the encoded body as read, when only the header changed: its MAC, checked as it
    was read (`body_of`), is the header's already. False when there is no key."""
    if not isinstance(body, bytes):
        body = marshal.dumps(body)
        body_mac = _mac(body)
        if body_mac is None:
            return False
        header = {**header, "body": body_mac}
    head = marshal.dumps(header)
    head = len(head).to_bytes(4, "little") + head
    mac = _mac(head)
    if mac is None:
        return False
    directory = os.path.dirname(path)
    try:
        dotvx.ignored_dir(directory)
        temp = f"{path}.{os.getpid()}.tmp"
        with open(temp, "wb") as f:
            f.write(MAGIC + mac + head + body)
        os.replace(temp, path)
        _prune(directory)
    except OSError:
        return False
    return True


def _prune(directory: str) -> None:
    """Keep the KEEP receipts written or replayed last; older command lines, and receipts of
    other vx versions (never read again), go."""
    with os.scandir(directory) as entries:
        found = [
            (e.stat().st_mtime_ns, e.path)
            for e in entries
            if e.name != ".gitignore" and e.is_file()
        ]
    if len(found) > KEEP:
        for _, path in sorted(found)[: len(found) - KEEP]:
            try:
                os.unlink(path)
            except OSError:
                pass


def restored(
    task: list, root: str, files: list[tuple[str, int, int, int, int, int]]
) -> tuple[list, dict[str, tuple[int, int]]]:
    """A task's record after its outputs were restored, and their new stamps (ino, ctime_ns):
    `files` are (workspace-relative path, mode, size, ms mtime, ino, ctime_ns) as written and
    then lstat'ed by the process that wrote them (`restores.extract`). The walked directories
    were just made, inside the racy window: the record keeps none."""
    expected, stamps = [], {}
    prefix = os.path.join(root, "")
    for rel, mode, size, mtime_ms, ino, ctime_ns in files:
        stamps[rel] = (ino, ctime_ns)
        expected.append((prefix + rel, (stat.S_IFREG | mode, size, mtime_ms, ino, ctime_ns)))
    return [*task[:3], expected, task[4], None, *task[6:]], stamps


def forget(root: str, cwd: str, argv: list[str]) -> None:
    """Drop this command's receipt: the run it described no longer holds."""
    try:
        os.unlink(os.path.join(root, RECEIPTS, name_of(cwd, argv)))
    except OSError:
        pass
