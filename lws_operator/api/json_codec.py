"""JSON read and written with orjson, falling back to the standard library where orjson refuses.

Every watch event, API answer and admission review is decoded, and every admission answer
encoded: orjson takes a fraction of the standard library's time on a pod. What it
refuses goes through the standard library, so values and answers are the same as before: NaN
literals and escaped lone surrogates are read, an unreadable body gets the standard library's
message, and strings orjson cannot write (lone surrogates) are escaped. One difference cannot
reach us: orjson reads an integer beyond 64 bits as a float, but the API server decodes every
number it stores or sends to a webhook, in a typed or a free-form field, as an int64 or a
float64, so it never sends one.

Shared by the operator (``kube.client``) and the admission child (``admission.review``), which
imports no Kubernetes client: hence here, in the layer both may import.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """The JSON value of ``data`` (``ValueError`` if it is not JSON)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, an integer beyond 64 bits
        return json.dumps(value, separators=(",", ":")).encode()
