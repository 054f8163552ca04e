"""The `vx` command and `python -m vx`.

A `vx run` first tries its receipt (`vx.fastpath.replay`): a warm run that still holds is finished
there, before the CLI and the pipeline are even imported. Everything else goes to `vx.cli.main`.
"""

import gc
import os
import sys


def entry() -> None:
    if sys.argv[1:] in (["--version"], ["version"]):  # answered before the CLI's modules load
        from vx import __version__
        from vx.install import described

        print(f"vx {__version__} ({described()})")
        return
    if getattr(sys, "frozen", False) and _runs_module():
        # The standalone build's `python -m MODULE` (vx.install.module_argv): no interpreter here.
        import runpy

        module = sys.argv[2]
        sys.argv = [module, *sys.argv[3:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    if len(sys.argv) > 1 and sys.argv[1] in ("run", "run-many"):  # the receipt is keyed on argv
        # A replay makes no cycles worth collecting and ends in `os._exit`, so the collector
        # is off while it runs: decoding the receipt alone set off six passes at 100 packages,
        # and a forked helper would copy every page a pass touches. It stays off through the
        # CLI's imports and the planning of a run the replay leaves to the pipeline, which
        # turns it on for the walk (`vx.cli.run._collect_from_here`).
        gc.disable()
        from vx.fastpath.replay import replay

        try:
            code = replay(sys.argv[1:])
        except KeyboardInterrupt:  # Ctrl-C while replaying: everything it opened is closed
            code = 130
        if code is not None:
            try:
                sys.stderr.flush()
            except (BrokenPipeError, ValueError):
                pass
            os._exit(code)
    from vx.cli.main import entry as run_cli

    run_cli()


def _runs_module() -> bool:
    """Whether the standalone build was asked to run a module (only it imports vx.install here: a
    replay loads nothing it does not need)."""
    from vx.install import RUN_MODULE

    return len(sys.argv) > 2 and sys.argv[1] == RUN_MODULE


if __name__ == "__main__":
    entry()
