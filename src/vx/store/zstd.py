"""The zstd codec: zstandard's C extension, loaded without the package's `__init__`.

Why: `import zstandard` picks its backend through `platform` (which imports `re`) and loads
`typing` before the C extension it settles on, and a replay restoring outputs would pay that on
every run (docs/optimizations.md #22). Every name vx uses — ZstdCompressor,
ZstdDecompressor, frame_header_size, ZstdError — is the extension's own, and a later
`import zstandard` re-exports this very module, so the two never disagree. Where the extension
is not where the package keeps it, or a backend policy is set, the package is imported as usual.
"""

from __future__ import annotations

import os
import sys
from _thread import allocate_lock

EXTENSION = "zstandard.backend_c"


_loading = (
    allocate_lock()
)  # two first uses on two threads must not load two modules (two ZstdErrors)


def codec():
    """The module holding the codec: the extension itself, or the `zstandard` package."""
    loaded = sys.modules.get("zstandard") or sys.modules.get(EXTENSION)
    if loaded is not None:
        return loaded
    with _loading:
        loaded = sys.modules.get("zstandard") or sys.modules.get(EXTENSION)
        if loaded is not None:
            return loaded
        if "PYTHON_ZSTANDARD_IMPORT_POLICY" not in os.environ:
            try:
                return _load_extension()
            except (ImportError, OSError):
                pass
        import zstandard

        return zstandard


def _load_extension():
    suffixes, ExtensionFileLoader, ModuleSpec, PathFinder = _machinery()  # noqa: N806 (their own names)
    package = PathFinder.find_spec("zstandard")
    for where in (package and package.submodule_search_locations) or ():
        for suffix in suffixes:
            path = os.path.join(where, "backend_c" + suffix)
            if os.path.isfile(path):
                loader = ExtensionFileLoader(EXTENSION, path)
                spec = ModuleSpec(EXTENSION, loader, origin=path)
                module = loader.create_module(spec)
                module.__spec__, module.__loader__, module.__package__ = spec, loader, "zstandard"
                loader.exec_module(module)
                sys.modules[EXTENSION] = module
                return module
    raise ImportError("zstandard's C extension is not installed beside the package")


def _machinery() -> tuple:
    """`importlib.machinery`'s EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec and PathFinder,
    from the import system's own modules, which are always loaded: the `importlib` package's
    `__init__` imports `warnings`, which a replay need not load (docs/optimizations.md #26)."""
    try:
        external, bootstrap = (
            sys.modules["_frozen_importlib_external"],
            sys.modules["_frozen_importlib"],
        )
        return (
            external.EXTENSION_SUFFIXES,
            external.ExtensionFileLoader,
            bootstrap.ModuleSpec,
            external.PathFinder,
        )
    except (KeyError, AttributeError):
        from importlib.machinery import (
            EXTENSION_SUFFIXES,
            ExtensionFileLoader,
            ModuleSpec,
            PathFinder,
        )

        return EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder
