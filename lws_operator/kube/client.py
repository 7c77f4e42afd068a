"""A dict-in, dict-out facade over ``kubernetes.aio``'s ApiClient.

The generated typed API round-trips bodies through pydantic models, which drops fields it does not
know and rejects integer quantities (python-notes 2.1), and its PATCH silently turns a dict body
into a strategic-merge patch. So we use only the client's transport, authentication and TLS
(``param_serialize`` + ``call_api``), send JSON we built ourselves with an explicit content type,
and decode answers with ``json``. Errors are the library's own ``ApiException``, with ``status``
and the API server's ``Status`` body.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes.aio import client, config
from kubernetes.aio.client.exceptions import ApiException

__all__ = ["MERGE_PATCH", "ApiException", "KubeClient", "in_cluster", "is_status"]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> bool:
    """Whether we run in a pod with a service account (the default source of credentials)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (
        SERVICE_ACCOUNT_DIR / "token").exists()


def in_cluster_namespace() -> str | None:
    """The pod's namespace, from its service-account mount."""
    path = SERVICE_ACCOUNT_DIR / "namespace"
    return path.read_text().strip() if path.exists() else None


def is_status(exc: BaseException, *codes: int) -> bool:
    return isinstance(exc, ApiException) and exc.status in codes


class KubeClient:
    """Raw REST calls with the credentials of a kubeconfig or of the pod's service account."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None,
                      ) -> KubeClient:
        """``kubeconfig`` if given; else in-cluster credentials inside a pod; else
        ``$KUBECONFIG`` or ``~/.kube/config``."""
        conf = client.Configuration()
        if kubeconfig is None and in_cluster():
            config.load_incluster_config(client_configuration=conf, try_refresh_token=True)
        else:
            path = kubeconfig or os.environ.get("KUBECONFIG") or None
            await config.load_kube_config(config_file=path, context=context,
                                          client_configuration=conf, persist_config=False)
        return cls(client.ApiClient(configuration=conf))

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = JSON,
        timeout: float = 30.0,  # noqa: ASYNC109 - passed down to the HTTP client
    ) -> dict[str, Any]:
        """One call; the decoded JSON answer, or ``ApiException`` for a non-2xx status."""
        data = await self.raw(method, path, body=body, query=query, content_type=content_type,
                              accept=JSON, timeout=timeout)
        decoded: dict[str, Any] = json.loads(data) if data else {}
        return decoded

    async def raw(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = JSON,
        accept: str = "*/*",
        timeout: float = 30.0,  # noqa: ASYNC109 - passed down to the HTTP client
    ) -> bytes:
        """One call; the answer's bytes (for non-JSON endpoints such as ``/metrics``)."""
        params = await self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()) or None,
            header_params={"Content-Type": content_type, "Accept": accept},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = await self.api.call_api(*params, _request_timeout=timeout)
        data: bytes = await response.read()
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason,
                               body=data.decode(errors="replace"))
        return data

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None if it does not exist."""
        try:
            return await self.request("GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


def status_message(exc: ApiException) -> str:
    """The API server's message inside an error, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
        return str(body.get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)
