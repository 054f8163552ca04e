"""How this vx was installed, and how it starts itself again.

Read by `vx --version` before anything else loads, so it imports only `os` and `sys`. The kinds
(docs/install.md):

- `npm`: the standalone build inside a `node_modules` folder (the per-platform package the npm
  launcher runs);
- `standalone`: the standalone build anywhere else (a PyInstaller onedir: `sys.frozen` is set);
- `pip`: the package installed into an environment (a venv, pipx, `uv tool`), from a wheel;
- `source checkout`: the modules are a checkout's `src/vx` (`pip install -e .`, or PYTHONPATH).
"""

import os
import sys

# The argument the standalone build takes to run one of its modules as `python -m` would: it has
# no interpreter to give `-m` to (the TUI's view and `vx watch`'s cycles start processes of vx).
RUN_MODULE = "--vx-run-module"


def frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def kind() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    if frozen():
        parts = os.path.realpath(sys.executable).split(os.sep)
        return "npm" if "node_modules" in parts else "standalone"
    checkout = os.path.dirname(os.path.dirname(here))  # src/vx -> the checkout
    if os.path.basename(os.path.dirname(here)) == "src" and os.path.isfile(
        os.path.join(checkout, "pyproject.toml")
    ):
        return "source checkout"
    return "pip"


def where() -> str:
    """The folder vx runs from: the standalone build's, the environment's, or the checkout's."""
    if frozen():
        return os.path.dirname(os.path.realpath(sys.executable))
    k = kind()
    if k == "source checkout":
        return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return sys.prefix


def described() -> str:
    """`npm, /repo/node_modules/@vx-build/vx-linux-x64/bin`: the kind and where."""
    return f"{kind()}, {where()}"


def module_argv(module: str) -> list[str]:
    """The argv that runs `python -m MODULE` with this same vx."""
    if frozen():
        return [sys.executable] if module == "vx" else [sys.executable, RUN_MODULE, module]
    return [sys.executable, "-m", module]


def extra_hint(extra: str, module: str) -> str:
    """What to run to get an optional extra (`tui`, `watch`, `reapi`) for this install."""
    if frozen():
        # The standalone build carries every extra (docs/install.md); one missing is a broken build.
        return f"this standalone build lacks {module}: reinstall vx ({described()})"
    if kind() == "source checkout":
        return f"pip install -e '.[{extra}]' in {where()} (or pip install {module})"
    parts = os.path.realpath(sys.prefix).split(os.sep)
    if parts[-2:-1] == ["venvs"] and any(
        "pipx" in p for p in parts
    ):  # ~/.local/share/pipx/venvs/vx
        return f"pipx inject vx {module}"
    if parts[-2:-1] == ["tools"] and any("uv" in p for p in parts):  # ~/.local/share/uv/tools/vx
        return f"uv tool install --reinstall 'vx[{extra}]'"
    return f"{sys.prefix}/bin/pip install 'vx[{extra}]' (the environment vx runs from)"
