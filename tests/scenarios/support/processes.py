"""Processes a scenario starts or watches: a started process's stderr read as it comes, whether
a pid still runs, and waiting for an event rather than sleeping."""

from __future__ import annotations

import subprocess
import threading
import time


class Stderr:
    """A started process's stderr, read as it comes, so a test can wait for a line it prints
    (an event) instead of sleeping for a time that should be enough."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.text = proc, ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.text += line

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text}"
            assert self.proc.poll() is None or self._reader.is_alive(), self.text
            time.sleep(0.02)

    def finish(self, timeout: float = 120) -> str:
        """Wait for the process to end and its stderr to be read to the end; all of it."""
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return self.text
