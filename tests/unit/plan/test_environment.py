"""Task environment isolation (EX-03) and the concurrency default and flag (GR-11).

The cgroup tests build a fake `/sys/fs/cgroup` tree and `/proc/self/cgroup` in tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vx.errors import UsageError
from vx.plan.environment import (
    ESSENTIAL_ENV,
    available_cpus,
    cgroup_cpu_limit,
    default_concurrency,
    matching,
    parse_concurrency,
    task_env,
)

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "CI": "1",
    "AWS_SECRET_ACCESS_KEY": "hunter2",
    "API_URL": "https://host",
    "NPM_TOKEN": "npm_secret",
}


def env_for(host=HOST, pass_through=(), define=None, project="/ws/apps/web", root="/ws"):
    return task_env(
        host=host,
        pass_through=pass_through,
        define=define or {},
        project_dir_abs=Path(project),
        root=Path(root),
        workspace_id="/ws",
        task_id="web#build",
    )


# ---------------------------------------------------------------- EX-03


@pytest.mark.feature("TL-05")
def test_plain_names_are_kept_as_given_without_reading_the_host():
    class Untouchable(dict):
        def __iter__(self):
            raise AssertionError("a plain list must not read the whole environment")

    assert matching(("B", "A", "MISSING"), Untouchable(HOST)) == ("B", "A", "MISSING")


@pytest.mark.feature("TL-05")
def test_patterns_match_host_names_sorted_and_exclusions_take_back():
    host = {
        "NEXT_PUBLIC_B": "1",
        "NEXT_PUBLIC_A": "2",
        "NEXT_PUBLIC_SECRET": "3",
        "NEXT": "4",
        "API_URL": "5",
    }
    assert matching(("API_URL", "NEXT_PUBLIC_*", "!NEXT_PUBLIC_SECRET"), host) == (
        "API_URL",
        "NEXT_PUBLIC_A",
        "NEXT_PUBLIC_B",
    )
    assert matching(("*_URL", "UNSET"), host) == (
        "UNSET",
        "API_URL",
    )  # a plain name stays, set or not
    assert matching(("N*T",), host) == (
        "NEXT",
        "NEXT_PUBLIC_SECRET",
    )  # `*` spans any run; the whole name matches


@pytest.mark.feature("TL-05")
def test_pass_through_patterns_reach_the_task():
    env = env_for(
        host={**HOST, "NEXT_PUBLIC_X": "x", "NEXT_PRIVATE": "p"}, pass_through=("NEXT_PUBLIC_*",)
    )
    assert env["NEXT_PUBLIC_X"] == "x" and "NEXT_PRIVATE" not in env


@pytest.mark.feature("EX-03")
def test_only_the_allowlist_reaches_the_task():
    env = env_for()
    assert "AWS_SECRET_ACCESS_KEY" not in env and "NPM_TOKEN" not in env and "API_URL" not in env
    assert (
        env["HOME"] == "/home/me" and env["LANG"] == "C.UTF-8" and "CI" not in env
    )  # CI only when declared
    assert set(env) == {"PATH", "HOME", "LANG", "FORCE_COLOR", "VX_RUN_WORKSPACE", "VX_RUN_TASK"}


@pytest.mark.feature("EX-03")
def test_pass_through_takes_only_host_values_that_exist():
    env = env_for(pass_through=("API_URL", "NOT_SET_ANYWHERE"))
    assert env["API_URL"] == "https://host"
    assert "NOT_SET_ANYWHERE" not in env


@pytest.mark.feature("EX-03")
def test_define_is_the_top_layer():
    env = env_for(
        pass_through=("API_URL",), define={"API_URL": "https://defined", "HOME": "/elsewhere"}
    )
    assert env["API_URL"] == "https://defined" and env["HOME"] == "/elsewhere"


@pytest.mark.feature("EX-03")
def test_path_is_prefixed_with_project_then_root_bins():
    env = env_for()
    assert env["PATH"] == "/ws/apps/web/node_modules/.bin:/ws/node_modules/.bin:/usr/bin:/bin"


@pytest.mark.feature("EX-03")
def test_root_bin_appears_once_when_the_project_is_the_root():
    env = env_for(project="/ws", root="/ws")
    assert env["PATH"] == "/ws/node_modules/.bin:/usr/bin:/bin"


@pytest.mark.feature("EX-03")
def test_a_host_without_path_still_gets_a_usable_one():
    env = env_for(host={"HOME": "/h"})
    assert env["PATH"].startswith("/ws/apps/web/node_modules/.bin:/ws/node_modules/.bin:")
    assert env["PATH"].split(":")[2:] != [""]


@pytest.mark.feature("EX-03")
@pytest.mark.parametrize(
    "host_extra, define, expected",
    [
        ({}, {}, {"FORCE_COLOR": "1"}),
        ({"NO_COLOR": "1"}, {}, {"NO_COLOR": "1"}),
        ({"FORCE_COLOR": "0"}, {}, {"FORCE_COLOR": "0"}),
        ({}, {"FORCE_COLOR": "3"}, {"FORCE_COLOR": "3"}),
    ],
)
def test_force_color_unless_a_colour_variable_reaches_the_task(host_extra, define, expected):
    env = env_for(host={**HOST, **host_extra}, define=define)
    assert {k: env[k] for k in ("FORCE_COLOR", "NO_COLOR") if k in env} == expected


@pytest.mark.feature("EX-03")
def test_vx_run_variables_name_the_workspace_and_task():
    env = env_for(define={"VX_RUN_TASK": "spoofed"})
    assert (env["VX_RUN_WORKSPACE"], env["VX_RUN_TASK"]) == ("/ws", "web#build")


@pytest.mark.feature("EX-03")
def test_the_allowlist_is_the_documented_one():
    documented = (
        "PATH HOME SHELL USER LOGNAME TMPDIR TEMP TMP LANG LC_ALL LC_CTYPE TERM COLORTERM "
        "FORCE_COLOR NO_COLOR NODE_OPTIONS COREPACK_HOME PNPM_HOME"
    ).split()
    assert list(ESSENTIAL_ENV) == documented


# ---------------------------------------------------------------- GR-11: the flag


@pytest.mark.feature("GR-11")
@pytest.mark.parametrize(
    "text, cpus, expected",
    [
        ("4", 2, 4),
        ("1", 8, 1),
        ("08", 2, 8),
        ("50%", 8, 4),
        ("100%", 6, 6),
        ("200%", 3, 6),
        ("1%", 2, 1),
        ("33%", 10, 3),
    ],
)
def test_parse_concurrency(text, cpus, expected):
    assert parse_concurrency(text, cpus) == expected


@pytest.mark.feature("GR-11")
@pytest.mark.parametrize(
    "text",
    ["0", "0%", "0x10", "1e3", "2.7", "+4", "-1", "-50%", "", " 4", "4 ", "1_0", "٣", "4%%", "%"],
)
def test_parse_concurrency_refuses_anything_but_plain_decimal(text):
    with pytest.raises(UsageError) as refused:
        parse_concurrency(text, 4)
    assert refused.value.hint and "50%" in refused.value.hint


# ---------------------------------------------------------------- GR-11: the cgroup quota


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_v2(
    tmp_path: Path, proc_line: str, quotas: dict[str, str], *, hybrid=False
) -> tuple[Path, Path]:
    root = tmp_path / "sys"
    mount = root / "unified" if hybrid else root
    write(mount / "cgroup.controllers", "cpu memory\n")
    for rel, cpu_max in quotas.items():
        write(mount / rel / "cpu.max", cpu_max + "\n")
    proc = tmp_path / "proc-cgroup"
    write(proc, proc_line + "\n")
    return root, proc


@pytest.mark.feature("GR-11")
def test_v2_quota_of_an_ancestor_caps_the_cpu_count(tmp_path):
    root, proc = fake_v2(
        tmp_path, "0::/a/b", {"": "max 100000", "a": "150000 100000", "a/b": "max 100000"}
    )
    assert cgroup_cpu_limit(cgroup_root=root, proc_cgroup=proc) == 1.5
    assert default_concurrency(cpus=8, cgroup_root=root, proc_cgroup=proc) == 1


@pytest.mark.feature("GR-11")
def test_v2_takes_the_tightest_quota_on_the_way_up(tmp_path):
    root, proc = fake_v2(tmp_path, "0::/a/b", {"a": "400000 100000", "a/b": "300000 100000"})
    assert default_concurrency(cpus=16, cgroup_root=root, proc_cgroup=proc) == 3


@pytest.mark.feature("GR-11")
def test_v2_quota_never_goes_below_one(tmp_path):
    root, proc = fake_v2(tmp_path, "0::/job", {"job": "20000 100000"})
    assert default_concurrency(cpus=4, cgroup_root=root, proc_cgroup=proc) == 1


@pytest.mark.feature("GR-11")
def test_v2_no_quota_leaves_the_cpu_count(tmp_path):
    root, proc = fake_v2(tmp_path, "0::/a", {"a": "max 100000"})
    assert cgroup_cpu_limit(cgroup_root=root, proc_cgroup=proc) is None
    assert default_concurrency(cpus=6, cgroup_root=root, proc_cgroup=proc) == 6


@pytest.mark.feature("GR-11")
def test_v2_container_path_is_trimmed_to_the_mounted_subtree(tmp_path):
    # Without a cgroup namespace the path names the host hierarchy; the mount shows our subtree.
    root, proc = fake_v2(
        tmp_path, "0::/kubepods/pod1/ctr", {"": "200000 100000", "ctr": "max 100000"}
    )
    assert default_concurrency(cpus=8, cgroup_root=root, proc_cgroup=proc) == 2


@pytest.mark.feature("GR-11")
def test_v2_hybrid_layout_under_unified(tmp_path):
    root, proc = fake_v2(tmp_path, "0::/svc", {"svc": "300000 100000"}, hybrid=True)
    assert default_concurrency(cpus=8, cgroup_root=root, proc_cgroup=proc) == 3


@pytest.mark.feature("GR-11")
def test_v1_cfs_quota_with_ancestors(tmp_path):
    root = tmp_path / "sys"
    cpu = root / "cpu,cpuacct"
    write(cpu / "cpu.cfs_quota_us", "-1")
    write(cpu / "cpu.cfs_period_us", "100000")
    write(cpu / "docker" / "cpu.cfs_quota_us", "250000")
    write(cpu / "docker" / "cpu.cfs_period_us", "100000")
    write(cpu / "docker" / "abc" / "cpu.cfs_quota_us", "-1")
    write(cpu / "docker" / "abc" / "cpu.cfs_period_us", "100000")
    proc = tmp_path / "proc-cgroup"
    write(proc, "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_limit(cgroup_root=root, proc_cgroup=proc) == 2.5
    assert default_concurrency(cpus=8, cgroup_root=root, proc_cgroup=proc) == 2


@pytest.mark.feature("GR-11")
def test_v1_separate_cpu_mount(tmp_path):
    root = tmp_path / "sys"
    write(root / "cpu" / "cpu.cfs_quota_us", "300000")
    write(root / "cpu" / "cpu.cfs_period_us", "100000")
    proc = tmp_path / "proc-cgroup"
    write(proc, "2:cpuacct:/\n1:cpu:/\n")
    assert default_concurrency(cpus=8, cgroup_root=root, proc_cgroup=proc) == 3


@pytest.mark.feature("GR-11")
def test_no_cgroup_information_means_the_cpu_count(tmp_path):
    missing = tmp_path / "nowhere"
    assert cgroup_cpu_limit(cgroup_root=missing, proc_cgroup=missing / "cgroup") is None
    assert default_concurrency(cpus=5, cgroup_root=missing, proc_cgroup=missing / "cgroup") == 5
    assert default_concurrency(cpus=0, cgroup_root=missing, proc_cgroup=missing / "cgroup") == 1


@pytest.mark.feature("GR-11")
def test_this_machine_has_a_sane_default():
    assert 1 <= default_concurrency() <= available_cpus()
