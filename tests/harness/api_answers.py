"""What the API server answered a refused request with, shared by the api-tier admission tests:
its Status object, and the text of a validating webhook's refusal after checking the API server
relayed it as it relays upstream's."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.aio.dynamic.exceptions import DynamicApiError


def status(exc: DynamicApiError) -> dict[str, Any]:
    """The Status object the API server answered with."""
    body: dict[str, Any] = json.loads(exc.body or "{}")
    return body


def webhook_denial(exc: DynamicApiError, denied: str) -> str:
    """The validating webhook's own text, after checking that the API server relayed the
    refusal as it relays upstream's: 403 Forbidden, with the webhook named (``denied``, the
    API server's prefix naming it). The API server may add details of its own; the webhook
    sends none."""
    got = status(exc)
    assert (exc.status, got.get("code"), got.get("reason")) == (403, 403, "Forbidden"), got
    message = str(got.get("message", ""))
    assert message.startswith(denied), message
    return message[len(denied):]
