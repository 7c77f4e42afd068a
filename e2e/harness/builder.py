"""Test-object builders, in the spirit of upstream's test wrappers.

    LeaderWorkerSet("sample").replicas(2).size(4).image("nginx:1.27").build()
    DisaggregatedSet("llm").role(Role("prefill").replicas(2).image("pause:3.9"))
                           .role(Role("decode").replicas(1).image("pause:3.9")).build()

builds exactly the fields it is told and nothing else (no defaults are filled in: tests of
defaulting need absent fields to stay absent), so a test reads as the manifest it creates.
Every call returns the builder; ``build()`` returns a new dict each time. Tests whose point is a
literal manifest (upstream's samples, malformed bodies) keep their literal instead.
"""

from __future__ import annotations

import copy
from typing import Any, Self

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

    def namespace(self, namespace: str) -> Self:
        self._meta["namespace"] = namespace
        return self

    def meta(self, **fields: Any) -> Self:
        """Further ``metadata`` fields as given (``uid``, ``generation``, ...)."""
        self._meta.update(copy.deepcopy(fields))
        return self

    def labels(self, labels: dict[str, str]) -> Self:
        """``metadata.labels`` merged with ``labels`` (created, even empty)."""
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def annotations(self, annotations: dict[str, str]) -> Self:
        """``metadata.annotations`` merged with ``annotations`` (created, even empty)."""
        self._meta.setdefault("annotations", {}).update(annotations)
        return self

    def annotation(self, key: str, value: str) -> Self:
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

    def replicas(self, replicas: int) -> Self:
        self._spec["replicas"] = replicas
        return self

    def spec(self, **fields: Any) -> Self:
        """``spec`` fields as given (``startupPolicy``, ``networkConfig``, ...); a
        ``leaderWorkerTemplate`` given here replaces the whole template."""
        self._spec.update(copy.deepcopy(fields))
        return self

    def rolling_update(self, **config: Any) -> Self:
        """``rolloutStrategy``: RollingUpdate with ``config`` (``maxSurge=1``, ...) as its
        ``rollingUpdateConfiguration``."""
        self._spec["rolloutStrategy"] = {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": dict(config)}
        return self

    # --------------------------------------------------------------------------- template

    def size(self, size: int) -> Self:
        self._template["size"] = size
        return self

    def template(self, **fields: Any) -> Self:
        """``leaderWorkerTemplate`` fields as given (``restartPolicy``, ``subGroupPolicy``,
        ``leaderTemplate``, ...)."""
        self._template.update(copy.deepcopy(fields))
        return self

    def restart_policy(self, policy: str) -> Self:
        return self.template(restartPolicy=policy)

    def worker_template(self, template: dict[str, Any]) -> Self:
        """The whole ``workerTemplate`` (a pod template)."""
        self._template["workerTemplate"] = copy.deepcopy(template)
        return self

    def leader_template(self, template: dict[str, Any]) -> Self:
        """The whole ``leaderTemplate`` (a pod template)."""
        self._template["leaderTemplate"] = copy.deepcopy(template)
        return self

    def image(self, image: str, name: str = "engine", **container: Any) -> Self:
        """The worker template's only container: ``name`` running ``image`` (with further
        container fields, such as ``resources``)."""
        pod = self._template.setdefault("workerTemplate", {}).setdefault("spec", {})
        pod["containers"] = [{"name": name, "image": image, **copy.deepcopy(container)}]
        return self

    def leader_image(self, image: str, name: str = "leader", **container: Any
                     ) -> Self:
        """The leader template's only container."""
        pod = self._template.setdefault("leaderTemplate", {}).setdefault("spec", {})
        pod["containers"] = [{"name": name, "image": image, **copy.deepcopy(container)}]
        return self

    def worker_pod(self, **fields: Any) -> Self:
        """Fields of the worker template's pod spec (``terminationGracePeriodSeconds``, ...)."""
        self._template.setdefault("workerTemplate", {}).setdefault("spec", {}).update(
            copy.deepcopy(fields))
        return self

    def worker_annotations(self, annotations: dict[str, str]) -> Self:
        """Annotations of the worker template's pods (kwok's ready delay, ...)."""
        template = self._template.setdefault("workerTemplate", {})
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        return self

    def worker_labels(self, labels: dict[str, str]) -> Self:
        """Labels of the worker template's pods."""
        template = self._template.setdefault("workerTemplate", {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        return self

    # --------------------------------------------------------------------------- status

    def status(self, **fields: Any) -> Self:
        self._obj.setdefault("status", {}).update(copy.deepcopy(fields))
        return self

    def build(self) -> dict[str, Any]:
        """The LeaderWorkerSet as a new dict."""
        return copy.deepcopy(self._obj)


# ------------------------------------------------------------------------------ DisaggregatedSet

DS_API = "disaggregatedset.x-k8s.io/v1"
DS_KIND = "DisaggregatedSet"
SCALER_KIND = "DisaggregatedSetRoleScaler"


class Role(LeaderWorkerSet):
    """One entry of a DisaggregatedSet's ``spec.roles``: a name, the role's ``metadata`` (its
    labels and annotations go onto the child LeaderWorkerSet object), an optional ``scaling``
    and a LeaderWorkerSet spec built with every method of :class:`LeaderWorkerSet`.

        Role("prefill").replicas(2).size(2).image("registry.k8s.io/pause:3.9")
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._name = name
        self._scaling: dict[str, Any] | None = None

    def external(self) -> Self:
        """``scaling.mode: External``: the role's replicas come from its role scaler."""
        self._scaling = {"mode": "External"}
        return self

    def scaling(self, mode: str) -> Self:
        self._scaling = {"mode": mode}
        return self

    def surge(self, max_surge: int | str, max_unavailable: int | str) -> Self:
        """``rolloutStrategy.rollingUpdateConfiguration`` with only the two budgets (no
        ``type``: as upstream's samples write it)."""
        self._spec["rolloutStrategy"] = {"rollingUpdateConfiguration": {
            "maxSurge": max_surge, "maxUnavailable": max_unavailable}}
        return self

    def build(self) -> dict[str, Any]:
        """The role entry as a new dict (``metadata`` only when labels or annotations were
        given)."""
        out: dict[str, Any] = {"name": self._name}
        meta = {k: v for k, v in self._meta.items() if k in ("labels", "annotations")}
        if meta:
            out["metadata"] = copy.deepcopy(meta)
        if self._scaling is not None:
            out["scaling"] = dict(self._scaling)
        out["spec"] = copy.deepcopy(self._spec)
        return out


class DisaggregatedSet:
    """A DisaggregatedSet under construction, built like upstream's e2e fixtures:

        DisaggregatedSet("llm").role(Role("prefill").replicas(2).image(PAUSE))
                               .role(Role("decode").replicas(2).image(PAUSE)).build()

    Exactly the fields it is told (``slices`` and ``placementPolicy`` stay absent unless set).
    """

    def __init__(self, name: str, namespace: str | None = None) -> None:
        self._obj: dict[str, Any] = {"apiVersion": DS_API, "kind": DS_KIND,
                                     "metadata": {"name": name}, "spec": {"roles": []}}
        if namespace is not None:
            self._obj["metadata"]["namespace"] = namespace

    def namespace(self, namespace: str) -> DisaggregatedSet:
        self._obj["metadata"]["namespace"] = namespace
        return self

    def labels(self, labels: dict[str, str]) -> DisaggregatedSet:
        self._obj["metadata"].setdefault("labels", {}).update(labels)
        return self

    def role(self, role: Role | dict[str, Any]) -> DisaggregatedSet:
        """Append a role (a :class:`Role` or a literal role entry)."""
        self._obj["spec"]["roles"].append(
            role.build() if isinstance(role, Role) else copy.deepcopy(role))
        return self

    def slices(self, slices: int) -> DisaggregatedSet:
        self._obj["spec"]["slices"] = slices
        return self

    def placement(self, type_: str, topology: str | None = None) -> DisaggregatedSet:
        """``placementPolicy``: ``type`` (None, ExclusiveSlice, ExclusiveTopology) and the
        node-label key it pins slices to."""
        policy: dict[str, Any] = {"type": type_}
        if topology is not None:
            policy["topology"] = topology
        self._obj["spec"]["placementPolicy"] = policy
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)
