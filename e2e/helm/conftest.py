"""The release of the chart the helm tests share within a module: the image of this tree built
(or reused), imported into the real node, installed with ``helm`` and uninstalled at the end
(the CRDs stay, as helm leaves them)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from e2e.harness.clusters import Clusters
from e2e.helm import release as r
from e2e.helm.release import Release
from e2e.image import build


@pytest.fixture(scope="module")
def installed(clusters: Clusters) -> Iterator[Release]:
    """The chart installed with the image of this tree; a namespace for the module's sets."""
    cluster = clusters.get("node")
    image = build()
    cluster.import_image(image.archive)
    if r.RELEASE in r.run_helm(cluster, "list", "-n", r.NAMESPACE, "-q").split():
        r.uninstall(cluster)  # a kept cluster's leftover from an interrupted run
    r.install(cluster, image)
    namespace = r.temp_namespace(cluster, f"t-{uuid.uuid4().hex[:10]}")
    yield Release(cluster, image, namespace)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    r.uninstall(cluster)
