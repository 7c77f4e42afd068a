"""The two shapes of an AdmissionReview ``response`` (no uid): allowed, with an optional JSON
patch, and denied, with a status. ``admission.review`` answers every webhook with them; the
operator process decides the evictions its admission child forwards (``admission.eviction``)
with them too, and imports only this module for it, not the webhooks' review and mutation
modules it never runs (docs/performance.md)."""

from __future__ import annotations

import base64
from typing import Any

from lws_operator.api.json_codec import dumps


def allowed(patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"allowed": True}
    if patch:
        response["patch"] = base64.b64encode(dumps(patch)).decode()
        response["patchType"] = "JSONPatch"
    return response


def denied(code: int, message: str, reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"status": "Failure", "message": message, "code": code}
    if reason:
        status["reason"] = reason
    return {"allowed": False, "status": status}
