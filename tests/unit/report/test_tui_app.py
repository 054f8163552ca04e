"""The split view of `--ui=tui` under textual's pilot: messages from vx are fed as the reader
thread would (`on_vx`), keys pressed as a user would. Which task's output the pane shows, how
wide the task list is, and that the run's end closes the view (or not, when kept)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")

from textual.widgets import OptionList, RichLog  # noqa: E402

from vx.report.tui_app import RunView  # noqa: E402

TASKS = ["lib#build", "app#build", "web#build"]


class Fed(RunView):
    """The view with no reader thread: the test hands it vx's messages itself."""

    def _read(self) -> None:
        pass


def shown(app: RunView) -> str:
    return str(app.query_one("#output", RichLog).border_title)


def run_view(body, size=(120, 40)):
    async def main():
        app = Fed(-1)
        async with app.run_test(size=size) as pilot:
            await body(app, pilot)
        return app

    return asyncio.run(main())


@pytest.mark.feature("CLI-61")
def test_the_output_pane_follows_the_task_that_started_until_one_is_picked():
    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", TASKS, 2])
        await pilot.pause()
        assert shown(app) == "output: lib#build"
        app.on_vx(["start", "lib#build", "make lib"])
        app.on_vx(["start", "app#build", "make app"])
        await pilot.pause()
        assert shown(app) == "output: app#build"
        app.on_vx(["done", "app#build", "miss", "ok · 0.10s", ""])
        await pilot.pause()
        assert shown(app) == "output: lib#build"  # the one still running
        await pilot.press("j")  # the user picks the next task
        await pilot.pause()
        assert shown(app) == "output: app#build"
        app.on_vx(["start", "web#build", "make web"])
        await pilot.pause()
        assert shown(app) == "output: app#build"  # picked: the pane stays

    run_view(body)


@pytest.mark.feature("CLI-61")
def test_a_failed_task_stays_shown_when_it_ends():
    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", TASKS, 2])
        app.on_vx(["start", "lib#build", "make lib"])
        app.on_vx(["start", "app#build", "make app"])
        app.on_vx(["done", "app#build", "failed", "exit 1 · 0.10s", ""])
        await pilot.pause()
        assert shown(app) == "output: app#build"

    run_view(body)


@pytest.mark.feature("CLI-61")
@pytest.mark.parametrize("columns", [200, 60])
def test_the_task_list_fits_its_rows_up_to_half_the_terminal_and_never_wraps(columns):
    """More tasks than the list has lines (a scrollbar): still one line per task."""
    long = "a-package-with-a-rather-long-name#build:production"
    names = [f"p{i}#build" for i in range(40)] + [long]

    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", names, 1])
        app.on_vx(["start", long, "make"])
        await pilot.pause()
        tasks = app.query_one("#tasks", OptionList)
        row = len(f"● {long}  running")
        assert tasks.outer_size.width == min(row + 6, columns // 2)
        assert tasks.virtual_size.height == len(names)  # not one row wrapped
        prompt = tasks.get_option(long).prompt
        assert prompt.plain.endswith("…") == (row + 6 > columns // 2)

    run_view(body, size=(columns, 30))


@pytest.mark.feature("CLI-61")
def test_a_short_list_keeps_room_for_its_words():
    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", ["a#b"], 1])
        await pilot.pause()
        assert app.query_one("#tasks", OptionList).outer_size.width == 24

    run_view(body)


@pytest.mark.feature("CLI-61")
@pytest.mark.parametrize("leave", [True, False])
def test_the_run_s_end_closes_the_view_unless_it_is_kept(leave):
    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", TASKS[:1], 1])
        app.on_vx(["summary", "1 task · 0 cached (0%) · wall 0.10s", 0])
        app.on_vx(["closed", 0, leave])
        await pilot.pause()
        assert app.is_running is not leave
        if not leave:
            assert "run over: exit 0 · q quits" in str(app.query_one("#status").render())
            await pilot.press("q")  # the run is over: q closes, no signal to anyone
            await pilot.pause()
            assert not app.is_running

    run_view(body)


def test_a_progress_line_shows_its_last_state():
    async def body(app: RunView, pilot) -> None:
        app.on_vx(["tasks", TASKS[:1], 1])
        app.on_vx(["start", "lib#build", "make"])
        app.on_vx(["out", "lib#build", " 10%\r 50%\r100%\r\nnext\n"])
        await pilot.pause()
        assert app._rows["lib#build"].lines[-2:] == ["100%", "next"]

    run_view(body)
