"""AdmissionReview in, AdmissionReview out: upstream's webhooks over the pure modules.

The decisions live in ``api.defaults``, ``api.validation``, ``api.disaggregated_validation`` and
``logic.mutation.pod``; this module
only maps them to what the API server expects, answering the way controller-runtime answers for
the Go controller, so clients see the same errors:

* a defaulting or mutation result becomes a JSON patch;
* a refusal, of a LeaderWorkerSet by validation or of a pod by the pod webhook, becomes
  controller-runtime's ``admission.Denied(err.Error())``: code 403, reason ``Forbidden``, the
  error text as message and no details. For validation that text is the field-error aggregate
  (``validation.aggregate_message``). The API server prefixes it with ``admission webhook
  "<name>" denied the request: `` and answers the client with that status, so ``kubectl``
  prints ``Error from server (Forbidden): ... admission webhook "vleaderworkerset.kb.io" denied
  the request: spec.replicas: Invalid value: ...``, word for word what upstream's users see;
* DELETE is always allowed (controller-runtime skips it for defaulters, upstream allows it);
* a request we cannot read is answered with code 400, a crash in a pure function with 500,
  both as ``allowed: false`` (controller-runtime's ``Errored``): the webhooks fail closed.

Everything here is synchronous and CPU-only; the server calls it on the event loop.

JSON is read and written with orjson where it can (``load``, ``dump``: ``api.json_codec``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lws_operator.admission.answers import allowed, denied
from lws_operator.admission.patch import diff
from lws_operator.api import defaults, disaggregated, disaggregated_validation, validation
from lws_operator.api.constants import (
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    VALIDATE_EVICTION_PATH,
    VALIDATE_LWS_PATH,
    VALIDATE_POD_PATH,
)
from lws_operator.api.json_codec import loads as load
from lws_operator.logic.mutation import pod as pod_mutation

log = logging.getLogger(__name__)

# One webhook: the AdmissionReview ``request`` payload in, the ``response`` payload (no uid) out.
Handler = Callable[[Mapping[str, Any]], dict[str, Any]]
AsyncHandler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


class BadRequest(ValueError):
    """The AdmissionReview itself is malformed (answered with code 400)."""


def forbidden(message: str) -> dict[str, Any]:
    """controller-runtime's ``admission.Denied``: how every upstream webhook refuses."""
    return denied(403, message, "Forbidden")


def _object(request: Mapping[str, Any], key: str = "object") -> dict[str, Any]:
    obj = request.get(key)
    if not isinstance(obj, dict):
        raise BadRequest(f"the admission request has no {key}")
    return obj


def _mutation(request: Mapping[str, Any], mutate: Callable[[dict[str, Any]], dict[str, Any]],
              ) -> dict[str, Any]:
    if request.get("operation") == "DELETE":
        return allowed()
    obj = _object(request)
    return allowed(diff(obj, mutate(obj)))


def mutate_pod(scheduler_provider: str | None = None) -> Handler:
    """``mpod.kb.io``: labels, env, affinities and subdomain of LeaderWorkerSet pods."""

    def handle(request: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return _mutation(request, lambda pod: pod_mutation.mutate_pod(
                pod, scheduler_provider=scheduler_provider))
        except pod_mutation.PodRejected as exc:
            return forbidden(str(exc))

    return handle


def validate_pod(request: Mapping[str, Any]) -> dict[str, Any]:
    """``vpod.kb.io``: upstream allows every pod (its registration exists for future rules)."""
    return allowed()


def mutate_lws(request: Mapping[str, Any]) -> dict[str, Any]:
    """``mleaderworkerset.kb.io``: webhook defaulting (upstream's webhook Default
    (leaderworkerset_webhook.go)). It refuses nothing, as
    upstream's ``Default`` returns no error. An object of the wrong shape, which upstream's
    decoder answers with a 400 naming a Go type, is passed on undefaulted for the CRD schema to
    reject with the field's path (``defaults._child``): the same decision, a clearer message."""
    return _mutation(request, defaults.apply_defaults)


def validate_lws(request: Mapping[str, Any]) -> dict[str, Any]:
    """``vleaderworkerset.kb.io``: validation (upstream's webhook validation
    (leaderworkerset_webhook.go)), refused as upstream refuses: 403
    ``Forbidden`` with the field-error aggregate as message."""
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return allowed()
    new = _object(request)
    old = _object(request, "oldObject") if operation == "UPDATE" else None
    errors = validation.validate(new, old)
    if errors:
        return forbidden(validation.aggregate_message(errors))
    response = allowed()
    if notes := validation.warnings(new):
        response["warnings"] = notes
    return response


def validate_disaggregatedset(request: Mapping[str, Any]) -> dict[str, Any]:
    """``vdisaggregatedset.kb.io``: upstream's DisaggregatedSet checks on CREATE and UPDATE (the
    new object only), refused like the LeaderWorkerSet ones. Warnings (an External role that
    sets replicas) ride on the answer, a refusal included, as controller-runtime attaches a
    validator's warnings to its ``Denied``; ``kubectl`` prints them as ``Warning: ...``."""
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return allowed()
    result = disaggregated_validation.validate(_object(request))
    response = forbidden(result.message) if result.errors else allowed()
    if result.warnings:
        response["warnings"] = result.warnings
    return response


def allow_eviction(request: Mapping[str, Any]) -> dict[str, Any]:
    """The eviction path where nothing decides evictions (no guard was given)."""
    return allowed()


def handlers(scheduler_provider: str | None = None) -> dict[str, Handler]:
    """Every webhook path (upstream's, then ours) and what serves each. The eviction path
    allows everything here; a server that can decide evictions (``admission.eviction``)
    serves it with an ``AsyncHandler`` instead (``serving_handlers``)."""
    return {
        MUTATE_LWS_PATH: mutate_lws,
        VALIDATE_LWS_PATH: validate_lws,
        MUTATE_POD_PATH: mutate_pod(scheduler_provider),
        VALIDATE_POD_PATH: validate_pod,
        disaggregated.VALIDATE_PATH: validate_disaggregatedset,
        VALIDATE_EVICTION_PATH: allow_eviction,
    }


def serving_handlers(scheduler_provider: str | None,
                     eviction: AsyncHandler) -> dict[str, Handler | AsyncHandler]:
    """``handlers`` with the group disruption budget's path answered by ``eviction``."""
    return {**handlers(scheduler_provider), VALIDATE_EVICTION_PATH: eviction}


def _parse(body: bytes) -> tuple[str, str, Mapping[str, Any] | None, dict[str, Any] | None]:
    """(apiVersion, uid, request, None), or (apiVersion, uid, None, a 400 answer) when the
    body is not an AdmissionReview."""
    uid = ""
    api_version = "admission.k8s.io/v1"
    try:
        doc = load(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("request"), dict):
            raise BadRequest("the body is not an AdmissionReview with a request")
        request = doc["request"]
        uid = str(request.get("uid") or "")
        api_version = str(doc.get("apiVersion") or api_version)
    except ValueError as exc:  # json.JSONDecodeError and BadRequest
        return api_version, uid, None, denied(400, str(exc))
    return api_version, uid, request, None


def _failed(uid: str, exc: Exception) -> dict[str, Any]:
    if isinstance(exc, BadRequest):
        return denied(400, str(exc))
    log.exception("admission handler failed for %s", uid)
    return denied(500, f"internal error in the LeaderWorkerSet webhook: {exc}")


def review(body: bytes, handler: Handler) -> dict[str, Any]:
    """Answer one AdmissionReview (raw JSON) with ``handler``; never raises."""
    api_version, uid, request, unreadable = _parse(body)
    if request is None:
        return _review(api_version, uid, unreadable or denied(400, "no request"))
    try:
        response = handler(request)
    except Exception as exc:
        response = _failed(uid, exc)
    return _review(api_version, uid, response)


async def review_async(body: bytes, handler: AsyncHandler) -> dict[str, Any]:
    """``review`` for a handler that awaits (the eviction webhook asks the operator's main
    process, ``admission.eviction``)."""
    api_version, uid, request, unreadable = _parse(body)
    if request is None:
        return _review(api_version, uid, unreadable or denied(400, "no request"))
    try:
        response = await handler(request)
    except Exception as exc:
        response = _failed(uid, exc)
    return _review(api_version, uid, response)


def _review(api_version: str, uid: str, response: dict[str, Any]) -> dict[str, Any]:
    response["uid"] = uid
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
