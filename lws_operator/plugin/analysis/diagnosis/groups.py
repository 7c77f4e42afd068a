"""The set's groups as the diagnosis sees them: pods gathered by their ``group-index`` label,
leader first, and the revision the leader owner creates leaders on now."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lws_operator.api.constants import GROUP_KEY_LABEL, SIZE_ANNOTATION
from lws_operator.api.view import (
    count_of,
    deleting,
    group_index,
    is_leader,
    labels,
    lws_view,
    revision_of,
)
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.plugin.analysis.diagnosis.scene import Scene, spec_of


def _index_order(index: str | None) -> tuple[int, int, str]:
    value = count_of(index)
    return (0, value, "") if value is not None else (1, 0, index or "")


@dataclass
class Group:
    """The pods of one group (its ``group-index`` label), leader first."""

    index: str
    pods: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def leader(self) -> Mapping[str, Any] | None:
        live = [p for p in self.pods if is_leader(p) and not deleting(p)]
        return live[0] if live else next((p for p in self.pods if is_leader(p)), None)

    @property
    def live(self) -> list[Mapping[str, Any]]:
        return [p for p in self.pods if not deleting(p)]

    @property
    def key(self) -> str:
        return str(labels(self.leader or (self.pods[0] if self.pods else None)).get(
            GROUP_KEY_LABEL) or "")


def groups_of(pods: Iterable[Mapping[str, Any]]) -> list[Group]:
    """The set's groups by index (numeric order, then Hash indices), pods leader first."""
    by_index: dict[str, Group] = {}
    for pod in pods:
        index = group_index(pod)
        if index is None:
            continue
        by_index.setdefault(index, Group(index)).pods.append(pod)
    out = sorted(by_index.values(), key=lambda g: _index_order(g.index))
    for group in out:
        group.pods.sort(key=lambda p: (not is_leader(p), _index_order(
            labels(p).get("leaderworkerset.sigs.k8s.io/worker-index")), name_of(p)))
    return out


def find_group(groups: Sequence[Group], wanted: str) -> Group | None:
    """``wanted`` as the user typed it: a group index, a Hash group key (or its prefix), or the
    name of one of the group's pods."""
    for group in groups:
        if wanted == group.index or any(name_of(p) == wanted for p in group.pods):
            return group
    prefixed = [g for g in groups if g.key and g.key.startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


def group_size(scene: Scene, group: Group) -> int:
    raw = meta_of(group.leader).get("annotations", {}).get(SIZE_ANNOTATION) \
        if group.leader else None
    return count_of(raw) or lws_view(scene.lws).size


def leader_owner(scene: Scene) -> Mapping[str, Any] | None:
    """The leader Deployment (Hash) or StatefulSet (Ordinal), named after the set."""
    name = lws_view(scene.lws).name
    return scene.deployment or next((s for s in scene.statefulsets if name_of(s) == name), None)


def current_revision(scene: Scene) -> str:
    """The revision the leader owner creates leaders on now ('' before it exists)."""
    owner = leader_owner(scene)
    template = spec_of(owner).get("template") if owner else None
    return revision_of(template) if isinstance(template, Mapping) else ""
