"""A proposed change to a LeaderWorkerSet, as ``kubectl lws plan`` takes it: a new manifest
(``-f``), new images (``--set-image``), ``--replicas``, ``--size``; and whether it rolls.

The change is applied to a copy of the live object and defaulted as the admission webhook
would (``api.defaults``); whether it causes a rollout is the controller's own revision
question: do the templates of a revision (``logic.identity.revision``) differ, compared by content
as the controller compares them (``template_difference``). Replicas, the rollout strategy and
metadata are not in a revision, so changing only them never replaces a group.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import aggregate_message, validate_create, validate_update
from lws_operator.logic.identity.revision import revision_patch, template_difference


class ChangeError(ValueError):
    """The change cannot be applied (an unknown container, a manifest of another object)."""


@dataclass(frozen=True)
class ImageChange:
    container: str | None  # None: every container
    image: str


def parse_image(text: str) -> ImageChange:
    """``[CONTAINER=]IMAGE``, as ``kubectl set image`` takes it (``*=IMAGE``: every one)."""
    name, sep, image = text.partition("=")
    if not sep:
        return ImageChange(None, text)
    if not name or not image:
        raise ChangeError(f"--set-image {text!r}: expected [CONTAINER=]IMAGE")
    return ImageChange(None if name == "*" else name, image)


def _pod_templates(spec: dict[str, Any]) -> list[dict[str, Any]]:
    template = spec.get("leaderWorkerTemplate") or {}
    return [t for t in (template.get("leaderTemplate"), template.get("workerTemplate"))
            if isinstance(t, dict)]


def _set_images(spec: dict[str, Any], change: ImageChange) -> None:
    found = False
    for template in _pod_templates(spec):
        pod = template.get("spec") or {}
        for key in ("initContainers", "containers"):
            for container in pod.get(key) or []:
                if change.container is None or container.get("name") == change.container:
                    container["image"] = change.image
                    found = True
    if not found:
        raise ChangeError(f"no container named {change.container!r} in the leader or worker "
                          "template")


def proposed(live: Mapping[str, Any], *, manifest: Mapping[str, Any] | None = None,
             images: Sequence[ImageChange] = (), replicas: int | None = None,
             size: int | None = None) -> dict[str, Any]:
    """The live set with the change applied and defaulted (a copy; ``live`` is untouched).
    A manifest replaces the spec (as ``kubectl apply`` of a full manifest would); the flags
    apply on top."""
    out = copy.deepcopy(dict(live))
    if manifest is not None:
        meta = manifest.get("metadata") or {}
        live_meta = out.get("metadata") or {}
        if manifest.get("kind") not in (None, "LeaderWorkerSet"):
            raise ChangeError(f"the manifest is a {manifest.get('kind')}, not a LeaderWorkerSet")
        if meta.get("name") not in (None, live_meta.get("name")):
            raise ChangeError(f"the manifest names {meta.get('name')!r}, not "
                              f"{live_meta.get('name')!r}")
        out["spec"] = copy.deepcopy(dict(manifest.get("spec") or {}))
    spec = out.setdefault("spec", {})
    for change in images:
        _set_images(spec, change)
    if replicas is not None:
        spec["replicas"] = replicas
    if size is not None:
        spec.setdefault("leaderWorkerTemplate", {})["size"] = size
    return apply_defaults(out)


def template_change(live: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Where the new templates differ from the live ones (the first difference), or None when
    the change rolls no group."""
    return template_difference(new, revision_patch(live))


def refusal(live: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """What admission would answer to this update, or None if it would be accepted."""
    errors = validate_create(dict(new)) + validate_update(dict(new), dict(live))
    return aggregate_message(errors) if errors else None
