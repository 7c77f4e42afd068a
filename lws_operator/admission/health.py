"""Plain-HTTP probes (``/healthz``, ``/readyz``), upstream's health port 8081.

The operator serves ``/metrics`` from ``metrics_server`` on a port of its own (upstream's
``:8443``, authenticated), never here: whoever can reach the probes (the kubelet, anything in
the pod network) should not thereby read the metrics. A registry handed in still adds an
unauthenticated ``/metrics`` here, for tests and embedders that want one port.

Readiness is what keeps a replica out of the webhook Service until it can answer admissions: with
``failurePolicy: Fail`` a replica that receives reviews before its certificate is loaded fails
pod creations. Checks are plain callables, so ``__main__`` can add the controllers' checks
without this module knowing about them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from lws_operator.admission.listener import listen

log = logging.getLogger(__name__)

Check = Callable[[], bool]


class HealthServer:
    """``/healthz`` answers while the event loop runs; ``/readyz`` once every check passes."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry | None = None, *,
                 liveness_path: str = "/healthz", readiness_path: str = "/readyz") -> None:
        self.host = host
        self.port = port
        self.readiness: dict[str, Check] = {}
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get(liveness_path, self._healthz)
        app.router.add_get(readiness_path, self._readyz)
        if registry is not None:
            app.router.add_get("/metrics", make_aiohttp_handler(registry))
        self.app = app

    def add_readiness_check(self, name: str, check: Check) -> None:
        self.readiness[name] = check

    def failing(self) -> list[str]:
        """Names of the readiness checks that do not pass now."""
        out = []
        for name, check in self.readiness.items():
            try:
                ok = check()
            except Exception:
                log.exception("readiness check %s failed", name)
                ok = False
            if not ok:
                out.append(name)
        return out

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        failing = self.failing()
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(failing))
        return web.Response(text="ok")

    async def start(self) -> None:
        self._runner, self.port = await listen(self.app, self.host, self.port)
        log.info("health probes on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
