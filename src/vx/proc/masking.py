"""Secret masking: a task's secret values never reach what vx shows or keeps.

A value is secret when its variable's name contains TOKEN, SECRET, KEY, PASSWORD, PASSWD or
CREDENTIAL (any case), the value has at least 6 characters, and the name does not end in
`_FILE`, `_PATH` or `_DIR` (those name where a secret is, not the secret); every variable named
in `exec.env.secret` is secret whatever its name or length. A multi-line value is masked line by
line (each line of 6 characters or more, any non-empty line of a declared one), and its
shell-quoted spelling too. Each occurrence becomes `***`.

What a remote cache is given to authenticate with is a credential whatever its name: each
value of `VX_REAPI_HEADERS` (and the credential after an `authorization` scheme such as
`Bearer`), and the remotes' token and signing-key variables. Those are secret like a declared
name, wherever they are set, and `credentials` names them from the host's environment so a
task's output is masked for them even when the task was never given them.

Output arrives in chunks, and a value may be split between two: `Masker` holds back the end of
a chunk while it could still be the start of a secret, and lets it go with the next chunk (or
at the end). Live output and the stored log go through the same masker, so they agree.
"""

from __future__ import annotations

import shlex
from typing import Iterable, Mapping, Sequence

from vx.model import LogChunk

WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL")
NOT_SECRET_SUFFIXES = ("_FILE", "_PATH", "_DIR")
MIN_LENGTH = 6
MASK = b"***"
HEADERS_ENV = "VX_REAPI_HEADERS"
CREDENTIAL_ENV = (
    "TURBO_TOKEN",
    "VERCEL_ARTIFACTS_TOKEN",
    "TURBO_REMOTE_CACHE_SIGNATURE_KEY",
    "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN",
    "NX_CLOUD_ACCESS_TOKEN",
)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in WORDS) and not upper.endswith(NOT_SECRET_SUFFIXES)


def secrets_of(
    env: Mapping[str, str], declared: Iterable[str] = (), host: Mapping[str, str] | None = None
) -> tuple[bytes, ...]:
    """The byte strings to mask for a task with environment `env`, longest first; with `host`,
    the remote credentials set there too (`credentials`)."""
    named = set(declared)
    found: set[bytes] = set()
    for name, value in env.items():
        listed = name in named
        if name == HEADERS_ENV or name in CREDENTIAL_ENV:
            continue  # its header values, below: the whole setting is not one secret
        if not value or not (listed or (is_secret_name(name) and len(value) >= MIN_LENGTH)):
            continue
        _add(found, value, 1 if listed else MIN_LENGTH)
    # Credentials whatever they are called, but not a test's one-letter stand-in: masking
    # every "t" of the output would hide everything else and protect nothing.
    for value in credentials(env) + (credentials(host) if host is not None else ()):
        _add(found, value, MIN_LENGTH)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def _add(found: set[bytes], value: str, shortest: int) -> None:
    for text in {value, *value.splitlines()}:
        if len(text) >= shortest:
            found.add(text.encode())
            quoted = shlex.quote(text)
            if quoted != text:
                found.add(quoted.encode())


def credentials(env: Mapping[str, str]) -> tuple[str, ...]:
    """What `env` gives a remote cache to authenticate with: each header value of
    `VX_REAPI_HEADERS` (`name=value` pairs, comma- or line-separated), also without an auth
    scheme before it (`Bearer abc` is masked as a whole and as `abc`), and the value of each
    CREDENTIAL_ENV variable — whatever the header or variable is called."""
    out = [env[name] for name in CREDENTIAL_ENV if env.get(name)]
    for item in (env.get(HEADERS_ENV) or "").replace("\n", ",").split(","):
        value = item.partition("=")[2].strip()
        if value:
            out.append(value)
            scheme, _, rest = value.partition(" ")
            if rest.strip() and scheme.isalpha():
                out.append(rest.strip())
    return tuple(out)


def mask_bytes(data: bytes, secrets: Sequence[bytes]) -> bytes:
    for secret in secrets:  # longest first: a secret inside a longer one is masked with it
        if secret in data:
            data = data.replace(secret, MASK)
    return data


def mask_text(text: str | None, secrets: Sequence[bytes]) -> str | None:
    if text is None or not secrets:
        return text
    return mask_bytes(text.encode("utf-8", "surrogateescape"), secrets).decode(
        "utf-8", "surrogateescape"
    )


class Masker:
    """Mask a stream of chunks (both streams of one task), catching values split across chunks."""

    def __init__(self, secrets: Sequence[bytes]):
        self.secrets = tuple(secrets)
        self._held: dict[int, bytes] = {}

    def feed(self, chunk: LogChunk) -> LogChunk | None:
        """The chunk to pass on now (None when all of it is held back for the moment)."""
        data = mask_bytes(self._held.pop(chunk.stream, b"") + chunk.data, self.secrets)
        keep = self._unfinished(data)
        if keep:
            self._held[chunk.stream] = data[-keep:]
            data = data[:-keep]
        return LogChunk(chunk.stream, data) if data else None

    def flush(self) -> list[LogChunk]:
        """What is still held back, at the end of the task (it was no secret after all)."""
        out = [LogChunk(stream, data) for stream, data in self._held.items() if data]
        self._held.clear()
        return out

    def _unfinished(self, data: bytes) -> int:
        """The length of the longest end of `data` that begins some secret without ending it."""
        longest = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(data)), longest, -1):
                if data.endswith(secret[:size]):
                    longest = size
                    break
        return longest


def mask_log(log: Iterable[LogChunk], secrets: Sequence[bytes]) -> tuple[LogChunk, ...]:
    """A whole log masked as `Masker` masks it live."""
    masker = Masker(secrets)
    out = [c for c in (masker.feed(chunk) for chunk in log) if c is not None]
    return tuple(out + masker.flush())
