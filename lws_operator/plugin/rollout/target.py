"""Which set a rollout subcommand's NAME names: a LeaderWorkerSet or a DisaggregatedSet.

``--kind`` settles it; without it NAME is looked up as both, and a name both kinds carry in the
namespace is refused (the user says which), as kubectl refuses an ambiguous short name. A kind
the user may not read counts as absent when the other is found.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from lws_operator.api import constants as lws
from lws_operator.api import disaggregated as ds
from lws_operator.kube.client import ApiException, KubeClient

Kind = Literal["leaderworkerset", "disaggregatedset"]
KINDS: tuple[Kind, ...] = ("leaderworkerset", "disaggregatedset")


@dataclass(frozen=True)
class Target:
    """The set NAME names, as read: its kind, its API path and its body."""

    kind: Kind
    path: str
    body: dict[str, Any]


class NotFound(LookupError):
    """NAME names no set of the kinds asked (the message says which were looked for)."""


class Ambiguous(LookupError):
    """NAME names a set of both kinds; the user must pass ``--kind``."""


def path_of(kind: Kind, namespace: str, name: str) -> str:
    """The API path of one set of ``kind``."""
    if kind == "leaderworkerset":
        return f"/apis/{lws.GROUP}/{lws.VERSION}/namespaces/{namespace}/{lws.PLURAL}/{name}"
    return f"/apis/{ds.GROUP}/{ds.VERSION}/namespaces/{namespace}/{ds.PLURAL}/{name}"


async def _get(kube: KubeClient, path: str) -> dict[str, Any] | ApiException | None:
    """The object at ``path``; None when it does not exist; the error when the user may not
    read it (a user allowed LeaderWorkerSets only still finds theirs by name)."""
    try:
        return await kube.get(path)
    except ApiException as exc:
        if exc.status == 403:
            return exc
        raise


async def resolve(kube: KubeClient, namespace: str, name: str,
                  kind: Kind | None = None) -> Target:
    """The set named ``name`` in ``namespace``; raises NotFound or Ambiguous."""
    kinds = (kind,) if kind else KINDS
    paths = [path_of(k, namespace, name) for k in kinds]
    bodies = await asyncio.gather(*(_get(kube, p) for p in paths))
    found = [Target(k, p, b) for k, p, b in zip(kinds, paths, bodies, strict=True)
             if isinstance(b, dict)]
    if not found:
        forbidden = next((b for b in bodies if isinstance(b, ApiException)), None)
        if forbidden is not None:
            raise forbidden
        looked = " or ".join(kinds)
        raise NotFound(f'{looked} "{name}" not found in namespace "{namespace}"')
    if len(found) > 1:
        raise Ambiguous(f'"{name}" names both a LeaderWorkerSet and a DisaggregatedSet in '
                        f'namespace "{namespace}": pass --kind')
    return found[0]

