"""The DisaggregatedSet replica gauges, exported from the watch cache after every pass.

``lws_disaggregatedset_role_replicas{namespace,name,role,revision,state}``: groups of one role
at one revision, summed over the set's slices, by ``state``:

* ``desired``: the children's ``spec.replicas`` (what the rollout asked for);
* ``current``: their ``status.replicas``;
* ``ready``: their ``status.readyReplicas``.

During a rolling update the old and the new revision of every role show side by side, which is
what an operator watches to see the coordinated drain. The series are per role and revision
(bounded by the spec: at most a few revisions live at once), and every series of a set is
removed when the set or the revision goes, so a deleted set does not report forever.

``lws_disaggregatedset_progressing{namespace,name}``: 1 while the set's ``Progressing``
condition is True (a rollout or a scaling not finished: not every role at its wanted groups,
ready and updated), else 0. With the replica gauges it tells a rollout that stopped moving: the
set progressing while none of its role series changed for a while.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from lws_operator.api.disaggregated import CONDITION_PROGRESSING, KIND, controlled_by
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.metrics import _once
from lws_operator.logic.disaggregated.slices import (
    lws_replicas,
    revision_label,
    role_of,
    status_count,
)
from lws_operator.logic.objects.meta import meta_of

log = logging.getLogger(__name__)

STATES = ("desired", "current", "ready")
Series = tuple[str, str, str, str, str]  # namespace, name, role, revision, state


class DisaggregatedSetMetrics:
    """The family, created once per registry; ``observe`` after each pass of a key."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.replicas = Gauge(
            "lws_disaggregatedset_role_replicas",
            "Groups of a DisaggregatedSet role at one revision, over all slices, by state",
            ["namespace", "name", "role", "revision", "state"], registry=registry)
        self.progressing = Gauge(
            "lws_disaggregatedset_progressing",
            "1 while the DisaggregatedSet's Progressing condition is True, else 0",
            ["namespace", "name"], registry=registry)
        self._series: dict[Key, set[Series]] = {}

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> DisaggregatedSetMetrics:
        return _once(registry, cls, lambda: cls(registry))

    def observe(self, key: Key, cache: ClusterCache) -> None:
        """Set the set's series from the cache; remove those of revisions (or the whole set)
        that are gone."""
        ds = cache[KIND].get(*key)
        sums: dict[Series, int] = {}
        if ds is not None:
            uid = str(meta_of(ds).get("uid") or "")
            for lws in cache["LeaderWorkerSet"].owned_by(key):
                if not controlled_by(lws, uid):
                    continue
                role, rev = role_of(lws), revision_label(lws)
                for state, value in zip(STATES, (
                        lws_replicas(lws), status_count(lws, "replicas"),
                        status_count(lws, "readyReplicas")), strict=True):
                    series = (*key, role, rev, state)
                    sums[series] = sums.get(series, 0) + value
        for series, value in sums.items():
            self.replicas.labels(*series).set(value)
        for series in self._series.get(key, set()) - set(sums):
            try:
                self.replicas.remove(*series)
            except KeyError:  # already removed
                log.debug("series %s was already removed", series)
        if sums:
            self._series[key] = set(sums)
        else:
            self._series.pop(key, None)
        if ds is not None:
            self.progressing.labels(*key).set(1 if progressing(ds) else 0)
        else:
            with contextlib.suppress(KeyError):  # never observed
                self.progressing.remove(*key)


def progressing(ds: Mapping[str, Any]) -> bool:
    """Whether the set's ``Progressing`` condition is True."""
    conditions = (ds.get("status") or {}).get("conditions") or []
    return any(c.get("type") == CONDITION_PROGRESSING and c.get("status") == "True"
               for c in conditions if isinstance(c, Mapping))
