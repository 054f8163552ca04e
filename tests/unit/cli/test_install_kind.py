"""How vx says it was installed (`vx --version`, `vx info`), how it starts itself again, and
what it tells a user to run for an extra, for each way of installing it (IN-01)."""

import sys
from pathlib import Path

import pytest

from vx import install

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.feature("IN-01")
def test_this_checkout_is_a_source_checkout():
    assert install.kind() == "source checkout"
    assert install.where() == str(ROOT)
    assert install.module_argv("vx") == [sys.executable, "-m", "vx"]
    assert "pip install -e '.[tui]'" in install.extra_hint("tui", "textual")


@pytest.mark.feature("IN-01")
def test_a_wheel_install_is_pip(monkeypatch, tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vx"
    monkeypatch.setattr(install, "__file__", str(site / "install.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert install.kind() == "pip"
    assert install.described() == f"pip, {tmp_path / 'venv'}"
    assert "pip install 'vx[watch]'" in install.extra_hint("watch", "watchfiles")


@pytest.mark.feature("IN-01")
@pytest.mark.parametrize(
    "prefix, hint",
    [
        (".local/share/pipx/venvs/vx", "pipx inject vx textual"),
        (".local/share/uv/tools/vx", "uv tool install --reinstall 'vx[tui]'"),
    ],
)
def test_a_pipx_or_uv_install_is_told_its_own_command(monkeypatch, tmp_path, prefix, hint):
    site = tmp_path / prefix / "lib" / "python3.11" / "site-packages" / "vx"
    monkeypatch.setattr(install, "__file__", str(site / "install.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / prefix))
    assert install.kind() == "pip"
    assert install.extra_hint("tui", "textual") == hint


@pytest.mark.feature("IN-01")
@pytest.mark.parametrize(
    "exe, kind",
    [
        ("ws/node_modules/@vx-build/vx-linux-x64/bin/vx", "npm"),
        (
            "ws/node_modules/.pnpm/@vx-build+vx-linux-x64@0.1.0/node_modules/@vx-build/vx-linux-x64/bin/vx",
            "npm",
        ),
        ("opt/vx/vx", "standalone"),
    ],
)
def test_the_standalone_build_says_npm_inside_node_modules(monkeypatch, tmp_path, exe, kind):
    binary = tmp_path / exe
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(binary))
    assert install.kind() == kind
    assert install.where() == str(binary.parent)
    assert install.module_argv("vx") == [str(binary)]
    assert install.module_argv("vx.report.tui_app") == [
        str(binary),
        install.RUN_MODULE,
        "vx.report.tui_app",
    ]
    assert "pip" not in install.extra_hint("tui", "textual")
