"""Task graph: dependsOn forms, the ^ frontier, groups, cycles, selection (GR-01..GR-06, GR-08)."""

import json
from pathlib import Path

import pytest

from vx.errors import ConfigError, CycleError, UnknownTaskError
from vx.model import ExecConfig, Package, ProjectConfig, TaskConfig, TaskId, Workspace
from vx.plan.graph import Selection, build_graph


def task(name, command="true", deps=()):
    exec_ = ExecConfig(command) if command else None
    return TaskConfig(name, json.dumps({"n": name}), exec_, tuple(deps))


def workspace(edges: dict[str, list[str]]):
    pkgs = {"//": Package("//", "", tuple(), "package.json")}
    for name, deps in edges.items():
        pkgs[name] = Package(
            name, f"packages/{name}", tuple(sorted(deps)), f"packages/{name}/package.json"
        )
    return Workspace(Path("/ws"), "npm", pkgs)


def configs(spec: dict[str, list[TaskConfig]]):
    out = {
        name: ProjectConfig(f"packages/{name}/vx.config.json", {t.name: t for t in tasks})
        for name, tasks in spec.items()
    }
    out.setdefault("//", ProjectConfig(""))
    return out


@pytest.mark.feature("GR-02")
def test_caret_frontier_stops_at_nearest_holder_and_bridges_gaps():
    ws = workspace({"app": ["mid"], "mid": ["lib"], "lib": []})
    cfg = configs({"app": [task("gen", deps=["^gen"])], "mid": [], "lib": [task("gen")]})
    g = build_graph(ws, cfg, Selection(("gen",), "app"))
    assert g.nodes[TaskId("app", "gen")].deps == (TaskId("lib", "gen"),)
    assert g.order == (TaskId("lib", "gen"), TaskId("app", "gen"))


@pytest.mark.feature("WS-19")
def test_a_project_without_build_has_an_implicit_keyed_one():
    ws = workspace({"app": ["mid"], "mid": ["lib"], "lib": []})
    cfg = configs(
        {"app": [task("build", deps=["^build"])], "mid": [task("lint")], "lib": [task("build")]}
    )
    g = build_graph(ws, cfg, Selection(("build",), "app"))
    mid = g.nodes[TaskId("mid", "build")]
    assert g.nodes[TaskId("app", "build")].deps == (TaskId("mid", "build"),)
    assert mid.is_group and mid.config.implicit and mid.deps == (TaskId("lib", "build"),)
    assert mid.config.cache.input_files == ("**",)
    everywhere = build_graph(ws, cfg, Selection(("build",), "//"))  # a bare name never selects it
    assert set(everywhere.requested) == {TaskId("app", "build"), TaskId("lib", "build")}


@pytest.mark.feature("GR-02")
def test_frontier_takes_only_nearest_holder():  # the holder owns deeper ordering
    ws = workspace({"app": ["mid"], "mid": ["lib"], "lib": []})
    cfg = configs(
        {"app": [task("build", deps=["^build"])], "mid": [task("build")], "lib": [task("build")]}
    )
    g = build_graph(ws, cfg, Selection(("build",), "app"))
    assert g.nodes[TaskId("app", "build")].deps == (TaskId("mid", "build"),)
    assert TaskId("lib", "build") not in g.nodes


@pytest.mark.feature("GR-02")
def test_caret_name_no_project_declares_is_a_typo():
    ws = workspace({"app": []})
    cfg = configs({"app": [task("build", deps=["^biuld"])]})
    with pytest.raises(ConfigError) as err:
        build_graph(ws, cfg, Selection(("build",), "app"))
    assert "tasks.build.dependsOn[0]" in err.value.render()
    assert "packages/app/vx.config.json" in err.value.render()


@pytest.mark.feature("GR-01")
def test_qualified_and_root_forms():
    ws = workspace({"app": [], "lib": []})
    cfg = configs({"app": [task("build", deps=["lib#gen", "//#setup"])], "lib": [task("gen")]})
    cfg["//"] = ProjectConfig("vx.config.json", {"setup": task("setup")})
    g = build_graph(ws, cfg, Selection(("app#build",), "//"))
    assert set(g.nodes[TaskId("app", "build")].deps) == {
        TaskId("lib", "gen"),
        TaskId("//", "setup"),
    }


@pytest.mark.feature("GR-03")
def test_group_task_is_transparent_node():
    ws = workspace({"app": []})
    cfg = configs(
        {"app": [task("check", command=None, deps=["lint", "test"]), task("lint"), task("test")]}
    )
    g = build_graph(ws, cfg, Selection(("check",), "app"))
    assert g.nodes[TaskId("app", "check")].is_group
    assert g.order[-1] == TaskId("app", "check")


@pytest.mark.feature("GR-04")
def test_cycle_is_refused_with_full_path():
    ws = workspace({"app": []})
    cfg = configs({"app": [task("a", deps=["b"]), task("b", deps=["c"]), task("c", deps=["a"])]})
    with pytest.raises(CycleError) as err:
        build_graph(ws, cfg, Selection(("a",), "app"))
    text = err.value.render()
    assert "app#a -> app#b -> app#c -> app#a" in text


@pytest.mark.feature("GR-04")
def test_deep_chain_has_no_recursion_limit():
    n = 5000
    ws = workspace({"app": []})
    tasks = [task(f"t{i}", deps=[f"t{i + 1}"] if i + 1 < n else []) for i in range(n)]
    g = build_graph(ws, configs({"app": tasks}), Selection(("t0",), "app"))
    assert len(g.order) == n and g.order[0] == TaskId("app", f"t{n - 1}")


@pytest.mark.feature("GR-06")
def test_unknown_task_did_you_mean():
    ws = workspace({"app": []})
    cfg = configs({"app": [task("build")]})
    with pytest.raises(UnknownTaskError) as err:
        build_graph(ws, cfg, Selection(("biuld",), "app"))
    assert "did you mean `build`" in err.value.render()


@pytest.mark.feature("CLI-01")
def test_task_missing_in_cwd_project_hints_all():
    ws = workspace({"app": [], "lib": []})
    cfg = configs({"app": [], "lib": [task("build")]})
    with pytest.raises(UnknownTaskError) as err:
        build_graph(ws, cfg, Selection(("build",), "app"))
    assert "--all" in err.value.render()


@pytest.mark.feature("CLI-20")
def test_root_cwd_and_all_select_every_holder():
    ws = workspace({"app": ["lib"], "lib": [], "docs": []})
    cfg = configs({"app": [task("build")], "lib": [task("build")], "docs": []})
    for sel in (Selection(("build",), "//"), Selection(("build",), "app", all=True)):
        g = build_graph(ws, cfg, sel)
        assert set(g.requested) == {TaskId("app", "build"), TaskId("lib", "build")}


@pytest.mark.feature("GR-05")
def test_multi_task_runs_share_one_graph():
    ws = workspace({"app": ["lib"], "lib": []})
    cfg = configs(
        {
            "app": [task("build", deps=["^build"]), task("test", deps=["build"])],
            "lib": [task("build")],
        }
    )
    g = build_graph(ws, cfg, Selection(("build", "test"), "app"))
    assert len(g.nodes) == 3
    assert set(g.requested) == {TaskId("app", "build"), TaskId("app", "test")}


@pytest.mark.feature("GR-08")
def test_priority_is_exact_transitive_dependent_count():  # a diamond counts once
    ws = workspace({"top": ["l", "r"], "l": ["base"], "r": ["base"], "base": []})
    cfg = configs({p: [task("build", deps=["^build"])] for p in ("top", "l", "r", "base")})
    g = build_graph(ws, cfg, Selection(("top#build",), "//"))
    assert g.priority[TaskId("base", "build")] == 3
    assert g.priority[TaskId("l", "build")] == 1
    assert g.priority[TaskId("top", "build")] == 0


# ---------------------------------------------------------------- GR-15 output overlaps


def checked_graph(ws, cfg, sel):
    from vx.plan.ownership import refuse_overlaps

    graph = build_graph(ws, cfg, sel)
    refuse_overlaps(graph.nodes, cfg)
    return graph


def cached(name, outputs, deps=(), ws_outputs=()):
    from vx.model import CacheConfig

    return TaskConfig(
        name,
        json.dumps({"n": name, "o": outputs}),
        ExecConfig("true"),
        tuple(deps),
        CacheConfig(("src/**",), tuple(outputs), output_workspace_files=tuple(ws_outputs)),
    )


@pytest.mark.feature("GR-15")
@pytest.mark.parametrize(
    "a,b,overlap",
    [
        (["dist/**"], ["dist/**"], True),
        (["dist"], ["dist/x.js"], True),  # a literal is the file or its whole tree
        (["dist/**"], ["dist/*.js"], True),  # a wildcard whose head lies in the tree
        (["./dist//"], ["dist/sub/**"], True),  # spellings are normalised
        (["{dist,out}/**"], ["out/a.js"], True),
        (["dist/*"], ["dist/sub/**"], False),  # only possibly: let through
        (["dist/*.js"], ["dist/*.js"], True),  # the same wildcard pattern
        (["dist/*.js"], ["dist/*.css"], False),
        (["dist/**", "!dist/types/**"], ["dist/types/**"], False),  # taken back for the other
        (["dist/**"], ["lib/**"], False),
        ([], ["dist/**"], False),
    ],
)
def test_output_overlaps(a, b, overlap):
    ws = workspace({"app": []})
    cfg = configs({"app": [cached("one", a), cached("two", b, deps=["one"])]})
    if not overlap:
        checked_graph(ws, cfg, Selection(("two",), "app"))
        return
    with pytest.raises(ConfigError) as err:
        checked_graph(ws, cfg, Selection(("two",), "app"))
    assert "`app#one` and `app#two` declare overlapping outputs" in err.value.message
    assert err.value.field == "tasks.two.cache.outputs.files"


@pytest.mark.feature("GR-15")
def test_workspace_outputs_meet_every_projects():
    ws = workspace({"app": [], "web": []})
    cfg = configs(
        {
            "app": [cached("build", [], ws_outputs=["packages/web/dist/**"])],
            "web": [cached("build", ["dist"])],
        }
    )
    with pytest.raises(ConfigError) as err:
        checked_graph(ws, cfg, Selection(("build",), "//"))
    assert "`app#build` and `web#build`" in err.value.message
    assert (
        err.value.field == "tasks.build.cache.outputs.files"
        and err.value.file == "packages/web/vx.config.json"
    )
    assert "(declared in packages/app/vx.config.json)" in err.value.message


@pytest.mark.feature("GR-15")
def test_tasks_outside_the_graph_are_not_compared():
    ws = workspace({"app": []})
    cfg = configs({"app": [cached("one", ["dist/**"]), cached("two", ["dist/**"])]})
    assert set(checked_graph(ws, cfg, Selection(("one",), "app")).nodes) == {TaskId("app", "one")}


@pytest.mark.feature("KEY-20")
def test_late_tasks_follow_an_uncached_task_of_any_project_and_what_folds_them():
    """KEY-20: a cached task after an uncached task, of its own project or another (a codegen
    may write a sibling's sources), is keyed late with its inputs read again (True); a group that
    only folds a late key is late without (False); an uncached task nothing depends on, and a
    task with no uncached task upstream, are not late."""
    from vx.model import CacheConfig
    from vx.plan.tasks import late_tasks

    def cached(name, deps=()):
        return TaskConfig(
            name,
            json.dumps({"n": name}),
            ExecConfig("true"),
            tuple(deps),
            CacheConfig(("src/**",), ("dist/**",)),
        )

    ws = workspace({"app": ["lib"], "lib": [], "web": ["app"]})
    cfg = configs(
        {
            "lib": [task("gen"), cached("build", deps=["gen"]), cached("test")],
            "app": [cached("build", deps=["^build", "lib#gen"]), task("lint")],
            "web": [cached("build", deps=["^build"]), task("check", command=None, deps=["build"])],
        }
    )
    g = build_graph(ws, cfg, Selection(("build", "lint", "check", "test"), "//", all=True))
    late = late_tasks(g)
    assert TaskId("lib", "test") in g.nodes and TaskId("app", "lint") in g.nodes
    assert late == {
        TaskId("lib", "build"): True,
        TaskId("app", "build"): True,
        TaskId("web", "build"): True,
        TaskId("web", "check"): False,
    }


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "selection",
    [
        Selection(("build",), "//"),  # everywhere
        Selection(("demo#build",), "//"),
        Selection(("build",), "app"),  # ^build reaches it
        Selection(("ship",), "app"),  # demo#build named in a dependsOn, never the implicit build
        Selection(("check",), "demo"),  # a task of its own project that depends on it
    ],
)
def test_a_task_refused_by_its_mapping_is_refused_wherever_the_run_reaches_it(selection):
    """A turbo.json task whose input leaves the workspace: refused when the run would run it,
    by its reason, never passed over or replaced by the implicit build."""
    ws = workspace({"app": ["demo"], "demo": []})
    cfg = configs(
        {"app": [task("build", deps=["^build"]), task("ship", deps=["demo#build"])], "demo": []}
    )
    why = ("input `../../x` of demo#build leaves the workspace", "turbo.json", "tasks.build", "h")
    cfg["demo"] = ProjectConfig(
        "turbo.json", {"check": task("check", deps=["build"])}, not_runnable={"build": why}
    )
    with pytest.raises(ConfigError) as err:
        build_graph(ws, cfg, selection)
    assert err.value.message == why[0] and err.value.field == "tasks.build"


@pytest.mark.feature("TL-05")
def test_a_task_refused_by_its_mapping_leaves_a_run_that_does_not_reach_it():
    ws = workspace({"app": [], "demo": []})
    cfg = configs({"app": [task("build")], "demo": []})
    why = ("input `../../x` of demo#build leaves the workspace", "turbo.json", "tasks.build", "h")
    cfg["demo"] = ProjectConfig("turbo.json", {}, not_runnable={"build": why})
    g = build_graph(ws, cfg, Selection(("build",), "//", projects=frozenset({"app"})))
    assert set(g.nodes) == {TaskId("app", "build")}
