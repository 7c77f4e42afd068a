"""``kube.lean_imports``: a package registered bare gets the ``__version__`` its ``__init__``
assigns, read from the source when first asked for, without ``importlib.metadata`` (one child
process per case, ~0.5 s each)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

from lws_operator.kube.lean_imports import _version


def run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def test_the_client_packages_read_their_version_without_package_metadata() -> None:
    code = ("import sys\n"
            "import lws_operator.kube  # registers both bare\n"
            "import kubernetes, kubernetes.aio\n"
            "print('kubernetes.client' not in sys.modules)  # the __init__ did not run\n"
            "from kubernetes.aio import client, __version__ as aio_version\n"
            "print(kubernetes.__version__, aio_version, 'importlib.metadata' in sys.modules)\n"
            "try:\n"
            "    kubernetes.aio.nothing\n"
            "except AttributeError as exc:\n"
            "    print(type(exc).__name__)\n")
    version = importlib.metadata.version("kubernetes")
    assert run(code) == ["True", version, version, "False", "AttributeError"]


def test_aiohttp_bare_as_the_admission_child_registers_it() -> None:
    code = ("import sys\n"
            "from lws_operator.kube.lean_imports import bare_packages\n"
            "print(bare_packages(('aiohttp',)))\n"
            "import aiohttp.web, aiohttp.http\n"
            "print(aiohttp.__version__, 'importlib.metadata' in sys.modules)\n")
    assert run(code) == ["True", importlib.metadata.version("aiohttp"), "False"]


def test_without_a_literal_in_the_source_the_distribution_says(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("kubernetes")
    assert spec is not None
    init = tmp_path / "__init__.py"
    init.write_text("from ._version import __version__\n")
    spec.origin = str(init)
    assert _version(spec, "kubernetes") == importlib.metadata.version("kubernetes")
    spec.origin = str(tmp_path / "missing.py")
    assert _version(spec, "no-such-distribution-here") == "unknown"
