"""Import the ``kubernetes`` client's asyncio half without its synchronous half.

The ``kubernetes`` package's ``__init__`` imports every synchronous module it has (the client,
its configuration loaders with requests and oauthlib, the dynamic client, watch, websocket
streams, informers), and ``kubernetes.aio``'s imports all of its own subpackages, whenever any
module under them is imported. The operator uses ``kubernetes.aio.client`` and
``kubernetes.aio.config`` only, so that is dead weight in every operator process: measured, the
operator's modules import in 68.7 MiB resident with the packages registered bare (below) and in
76.8 MiB without (about 270 modules fewer).

``bare_packages`` registers both packages as plain namespace-like modules (their ``__path__``
only) before anything imports them, so importing a submodule runs just that submodule and what
it imports. Nothing else changes: ``from kubernetes import client`` and ``import
kubernetes.config`` still import those submodules on demand (the import system does it for a
package whose attribute is missing); only an attribute read of a submodule nobody imported
(``import kubernetes; kubernetes.watch``) would fail, and nothing here does that. Of the
``__init__``'s own attributes only ``__version__`` is read by the client's modules; it is read
from the installed distribution when first asked for (a module ``__getattr__``), since
``importlib.metadata`` and the ``email`` parser it imports weigh about 3 MiB resident in a process
that never asks (the certificate planner, the admission child). When either
package is already imported (a test process that imported it first), this does nothing.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

PACKAGES = ("kubernetes", "kubernetes.aio")


def _version(distribution: str) -> str:
    import importlib.metadata  # here: see the module docstring

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _lazy_version(module: types.ModuleType, distribution: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that sets ``__version__`` when first read."""

    def __getattr__(name: str) -> Any:
        if name != "__version__":
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        version = _version(distribution)
        module.__version__ = version  # type: ignore[attr-defined]
        return version

    return __getattr__


def bare_packages(names: tuple[str, ...] = PACKAGES) -> bool:
    """Register ``names`` (parents first) without running their ``__init__``; False when one
    is already imported or not installed (then nothing is changed)."""
    if any(name in sys.modules for name in names):
        return False
    registered: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            for done in registered:
                del sys.modules[done]
            return False
        module = types.ModuleType(name)
        module.__spec__ = spec
        module.__path__ = list(spec.submodule_search_locations)
        module.__file__ = spec.origin
        module.__package__ = name
        # What the ``__init__`` would have set besides imports: the client's own modules read
        # the version (``kubernetes.aio.dynamic.discovery`` imports it for its cache file name),
        # looked up when first read.
        module.__getattr__ = _lazy_version(module, names[0])  # type: ignore[method-assign]
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
        registered.append(name)
    return True
