"""Secret masking: a task's secret values never reach what vx shows or keeps.

A value is secret when its variable's name contains TOKEN, SECRET, KEY, PASSWORD, PASSWD or
CREDENTIAL (any case), the value has at least 6 characters, and the name does not end in
`_FILE`, `_PATH` or `_DIR` (those name where a secret is, not the secret); every variable named
in `exec.env.secret` is secret whatever its name or length. A multi-line value is masked line by
line (each line of 6 characters or more, any non-empty line of a declared one), and its
shell-quoted spelling too. Each occurrence becomes `***`.

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


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in WORDS) and not upper.endswith(NOT_SECRET_SUFFIXES)


def secrets_of(env: Mapping[str, str], declared: Iterable[str] = ()) -> tuple[bytes, ...]:
    """The byte strings to mask for a task with environment `env`, longest first."""
    named = set(declared)
    found: set[bytes] = set()
    for name, value in env.items():
        listed = name in named
        if not value or not (listed or (is_secret_name(name) and len(value) >= MIN_LENGTH)):
            continue
        shortest = 1 if listed else MIN_LENGTH
        for text in {value, *value.splitlines()}:
            if len(text) >= shortest:
                found.add(text.encode())
                quoted = shlex.quote(text)
                if quoted != text:
                    found.add(quoted.encode())
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


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
