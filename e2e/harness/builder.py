"""A LeaderWorkerSet test-object builder, in the spirit of upstream's test wrappers.

    LeaderWorkerSet("sample").replicas(2).size(4).image("nginx:1.27").build()

builds exactly the fields it is told and nothing else (no defaults are filled in: tests of
defaulting need absent fields to stay absent), so a test reads as the manifest it creates.
Every call returns the builder; ``build()`` returns a new dict each time. Tests whose point is a
literal manifest (upstream's samples, malformed bodies) keep their literal instead.
"""

from __future__ import annotations

import copy
from typing import Any

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"  # label and annotation prefix


class LeaderWorkerSet:
    """A LeaderWorkerSet under construction (``apiVersion``, ``kind``, ``metadata.name`` and an
    empty ``spec.leaderWorkerTemplate`` to begin with)."""

    def __init__(self, name: str, namespace: str | None = None) -> None:
        self._obj: dict[str, Any] = {"apiVersion": API, "kind": KIND,
                                     "metadata": {"name": name},
                                     "spec": {"leaderWorkerTemplate": {}}}
        if namespace is not None:
            self._obj["metadata"]["namespace"] = namespace

    # --------------------------------------------------------------------------- metadata

    @property
    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._obj["metadata"]
        return meta

    def namespace(self, namespace: str) -> LeaderWorkerSet:
        self._meta["namespace"] = namespace
        return self

    def meta(self, **fields: Any) -> LeaderWorkerSet:
        """Further ``metadata`` fields as given (``uid``, ``generation``, ...)."""
        self._meta.update(copy.deepcopy(fields))
        return self

    def labels(self, labels: dict[str, str]) -> LeaderWorkerSet:
        """``metadata.labels`` merged with ``labels`` (created, even empty)."""
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def annotations(self, annotations: dict[str, str]) -> LeaderWorkerSet:
        """``metadata.annotations`` merged with ``annotations`` (created, even empty)."""
        self._meta.setdefault("annotations", {}).update(annotations)
        return self

    def annotation(self, key: str, value: str) -> LeaderWorkerSet:
        return self.annotations({key: value})

    # --------------------------------------------------------------------------- spec

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    @property
    def _template(self) -> dict[str, Any]:
        template: dict[str, Any] = self._spec["leaderWorkerTemplate"]
        return template

    def replicas(self, replicas: int) -> LeaderWorkerSet:
        self._spec["replicas"] = replicas
        return self

    def spec(self, **fields: Any) -> LeaderWorkerSet:
        """``spec`` fields as given (``startupPolicy``, ``networkConfig``, ...); a
        ``leaderWorkerTemplate`` given here replaces the whole template."""
        self._spec.update(copy.deepcopy(fields))
        return self

    def rolling_update(self, **config: Any) -> LeaderWorkerSet:
        """``rolloutStrategy``: RollingUpdate with ``config`` (``maxSurge=1``, ...) as its
        ``rollingUpdateConfiguration``."""
        self._spec["rolloutStrategy"] = {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": dict(config)}
        return self

    # --------------------------------------------------------------------------- template

    def size(self, size: int) -> LeaderWorkerSet:
        self._template["size"] = size
        return self

    def template(self, **fields: Any) -> LeaderWorkerSet:
        """``leaderWorkerTemplate`` fields as given (``restartPolicy``, ``subGroupPolicy``,
        ``leaderTemplate``, ...)."""
        self._template.update(copy.deepcopy(fields))
        return self

    def restart_policy(self, policy: str) -> LeaderWorkerSet:
        return self.template(restartPolicy=policy)

    def worker_template(self, template: dict[str, Any]) -> LeaderWorkerSet:
        """The whole ``workerTemplate`` (a pod template)."""
        self._template["workerTemplate"] = copy.deepcopy(template)
        return self

    def leader_template(self, template: dict[str, Any]) -> LeaderWorkerSet:
        """The whole ``leaderTemplate`` (a pod template)."""
        self._template["leaderTemplate"] = copy.deepcopy(template)
        return self

    def image(self, image: str, name: str = "engine", **container: Any) -> LeaderWorkerSet:
        """The worker template's only container: ``name`` running ``image`` (with further
        container fields, such as ``resources``)."""
        pod = self._template.setdefault("workerTemplate", {}).setdefault("spec", {})
        pod["containers"] = [{"name": name, "image": image, **copy.deepcopy(container)}]
        return self

    def leader_image(self, image: str, name: str = "leader", **container: Any
                     ) -> LeaderWorkerSet:
        """The leader template's only container."""
        pod = self._template.setdefault("leaderTemplate", {}).setdefault("spec", {})
        pod["containers"] = [{"name": name, "image": image, **copy.deepcopy(container)}]
        return self

    def worker_pod(self, **fields: Any) -> LeaderWorkerSet:
        """Fields of the worker template's pod spec (``terminationGracePeriodSeconds``, ...)."""
        self._template.setdefault("workerTemplate", {}).setdefault("spec", {}).update(
            copy.deepcopy(fields))
        return self

    def worker_annotations(self, annotations: dict[str, str]) -> LeaderWorkerSet:
        """Annotations of the worker template's pods (kwok's ready delay, ...)."""
        template = self._template.setdefault("workerTemplate", {})
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        return self

    # --------------------------------------------------------------------------- status

    def status(self, **fields: Any) -> LeaderWorkerSet:
        self._obj.setdefault("status", {}).update(copy.deepcopy(fields))
        return self

    def build(self) -> dict[str, Any]:
        """The LeaderWorkerSet as a new dict."""
        return copy.deepcopy(self._obj)
