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
``__init__``'s own attributes only ``__version__`` is read by the client's modules (and by
aiohttp's, in the admission child, which registers ``aiohttp`` bare). It is set when first read
(a module ``__getattr__``), to the literal the ``__init__`` assigns, read from its source, and
from the installed distribution's metadata only when the source has no such literal:
``importlib.metadata`` and what it imports (``zipfile``, ``csv``, the ``email`` parser) weigh about
1 MiB resident in a process that needs nothing else of them (the certificate planner never reads
the version; the admission child reads aiohttp's). When either package is already imported (a
test process that imported it first), this does nothing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import sys
import types
from collections.abc import Callable
from typing import Any

PACKAGES = ("kubernetes", "kubernetes.aio")


_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def _version(spec: importlib.machinery.ModuleSpec, distribution: str) -> str:
    """The ``__version__`` that the package's ``__init__`` (``spec.origin``) assigns, else the
    installed ``distribution``'s."""
    try:
        with open(spec.origin or "", encoding="utf-8") as source:
            found = _VERSION.search(source.read())
    except OSError:
        found = None
    if found is not None:
        return found.group(1)
    import importlib.metadata  # only here: see the module docstring

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _lazy_version(module: types.ModuleType, spec: importlib.machinery.ModuleSpec,
                  distribution: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that sets ``__version__`` when first read."""

    def __getattr__(name: str) -> Any:
        if name != "__version__":
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        version = _version(spec, distribution)
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
        module.__getattr__ = _lazy_version(  # type: ignore[method-assign]
            module, spec, names[0])
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
        registered.append(name)
    return True
