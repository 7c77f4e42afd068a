"""kopf's signal watches: the kinds watched only to be told of their events (``Watches.signal_on``:
a CustomResourceDefinition installed later), which cache nothing, so a relisting's plain events
are harmless there (``docs/architecture.md``, "Watching and caching"). kopf runs in a thread of its
own with its own event loop (kopf's documented embedding), and only when some signal is wanted:
when it exits it cancels every task of its loop that it did not see start, which in a shared loop
would include the webhooks' request handlers.

``kube.watch`` imports this module only when it has a signal to watch: kopf and what it brings
were about 5.7 MiB of the operator's resident memory (docs/performance.md), for watches that an
install with every CRD of the chart never starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Iterable
from typing import Any, cast

import kopf

from lws_operator.kube.client import KubeClient

# (group, version, plural, field selector), and what is told: ``kube.watch.Signal`` and
# ``kube.watch.Signalled`` (not imported: that module imports this one).
Signals = Iterable[tuple[tuple[str, str, str, str], Any]]

# kopf warns with this when it starts outside the main thread (SignalsForwarded).
KOPF_RUNNING_LOGGER = "kopf._core.reactor.running"
KOPF_SIGNALS_IGNORED = "OS signals are ignored: running not in the main thread"

# kopf's watch timeouts for the signal watches (its defaults are none but the 70 s inactivity
# one): a watch request the server ends every few minutes, a client-side cap on one request in
# case the server never does (a half-open connection), and a bound on connecting to an API
# server that is down.
# Whole seconds: kopf sends the server timeout as str(value), and the API server rejects
# "300.0" (400 Bad Request, which stops every watch).
WATCH_SERVER_TIMEOUT = 300
WATCH_CLIENT_TIMEOUT = WATCH_SERVER_TIMEOUT + 60
WATCH_CONNECT_TIMEOUT = 10

# kopf runs one task per object with events, which holds that object's last event until no
# event came for this long (kopf's default: 5 s); a signal handler has nothing left to do after
# handing the event over.
KOPF_WORKER_IDLE = 0.2


class _NoDiffBase(kopf.DiffBaseStorage):
    """kopf keeps a "last handled" essence of every object to detect changes for its change
    handlers, building it (a deep copy) on every event even when, as here, only event handlers
    are registered: the benchmark's profile showed that copy as the operator's top hotspot. We
    have no change handlers, so there is nothing to build, store or compare."""

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class _NoProgress(kopf.ProgressStorage):
    """kopf's progress storage records the state of change handlers in annotations or status;
    with event handlers only it holds nothing, yet kopf still asks it to clear its keys from
    every event's essence (a deep copy of the default storages' making). Nothing to clear,
    fetch, store or purge here; and kopf writes nothing to our objects either way."""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(self, *, key: kopf.HandlerId, record: kopf.ProgressRecord, body: kopf.Body,
              patch: kopf.Patch) -> None:
        return None

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


class SignalsForwarded(logging.Filter):
    """Drops kopf's warning ``OS signals are ignored: running not in the main thread`` from
    the thread kopf runs in, which the operator's log would otherwise show at every start.

    kopf logs it whenever its loop is not the main thread's, because it can then install no
    signal handlers of its own (``kopf._core.reactor.running.spawn_tasks``), and there is no
    setting to say that someone else handles them. Here someone does: ``__main__`` handles
    SIGTERM and SIGINT on the main thread's loop by setting ``stop``, and the controller's
    ``run`` turns ``stop`` into kopf's ``stop_flag`` (:meth:`Watches.halt`), the termination
    kopf's docs ("Embedding") ask an embedder running it in a thread to provide. So the premise of
    the warning is false, and running kopf on the main thread instead is no option: at exit it
    cancels every task of its loop it did not see start (the module docstring). Only that one
    record of that one thread is dropped; every other kopf record passes."""

    def __init__(self, thread: int) -> None:
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.thread == self.thread
                    and record.getMessage().startswith(KOPF_SIGNALS_IGNORED))

    @classmethod
    def install(cls) -> SignalsForwarded:
        """For the calling thread, which must pass kopf a ``stop_flag``."""
        forwarded = cls(threading.get_ident())
        logging.getLogger(KOPF_RUNNING_LOGGER).addFilter(forwarded)
        return forwarded

    def uninstall(self) -> None:
        logging.getLogger(KOPF_RUNNING_LOGGER).removeFilter(self)


def kopf_identity() -> Any:
    """The name this process gives kopf for itself (``kopf.operator(identity=...)``).

    Left to itself kopf names the process after ``getpass.getuser()``, which raises
    ``KeyError`` for a uid without a passwd entry and no ``USER``/``LOGNAME`` in the
    environment: exactly the image's user 65532 in a pod, so the operator crashed at start. The
    identity only names a peer in kopf's peering, which runs standalone here; the pod's name
    (``POD_NAME``, set by the chart) or else the host name is enough. Typed ``Any``: kopf's
    ``Identity`` is a ``NewType`` of ``str`` that it does not export."""
    return f"lws-operator@{os.environ.get('POD_NAME') or socket.gethostname()}"


def operator_registry(kube: KubeClient, signals: Signals,
                      loop: asyncio.AbstractEventLoop) -> kopf.OperatorRegistry:
    """kopf's handlers: the signal watches only, each event handed to its ``told`` on ``loop``
    (the main loop)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(kube)

    for (group, version, plural, _selector), told in signals:

        async def signal(type: str | None, body: kopf.Body, _told: Any = told,
                         **_: Any) -> None:
            loop.call_soon_threadsafe(_told, type, dict(body))

        kopf.on.event(group, version, plural, registry=registry,
                      id=f"signal-{plural}.{group}")(signal)
    return registry


def operator_settings(signals: Signals, chunk_size: int) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.persistence.progress_storage = _NoProgress()
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.watching.chunk_size = chunk_size
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = WATCH_CONNECT_TIMEOUT
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT
    settings.watching.client_timeout = WATCH_CLIENT_TIMEOUT
    settings.watching.connect_timeout = WATCH_CONNECT_TIMEOUT
    settings.scanning.disabled = True
    settings.queueing.idle_timeout = KOPF_WORKER_IDLE
    for (group, version, plural, selector), _told in signals:
        settings.watching.field_selectors[group, version, plural] = selector
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    return settings


def watch(registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings,
          stop: threading.Event) -> None:
    """kopf's thread: its own event loop, until ``stop`` (set from the main loop, where
    the process's signals are handled: ``SignalsForwarded``)."""
    forwarded = SignalsForwarded.install()
    try:
        asyncio.run(kopf.operator(registry=registry, settings=settings,
                                  clusterwide=True, standalone=True, stop_flag=stop,
                                  identity=cast(Any, kopf_identity())))
    finally:
        forwarded.uninstall()


def run_in_thread(kube: KubeClient, signals: Signals, chunk_size: int,
                  stop: threading.Event) -> asyncio.Future[None]:
    """The signal watches in kopf's thread, from the main loop (the one running now)."""
    signals = list(signals)
    registry = operator_registry(kube, signals, asyncio.get_running_loop())
    return asyncio.ensure_future(asyncio.to_thread(
        watch, registry, operator_settings(signals, chunk_size), stop))


def connection_info(kube: KubeClient) -> kopf.ConnectionInfo:
    """kopf's credentials, taken from the operator's own client configuration (kubeconfig or
    in-cluster), so both talk to the same server as the same identity."""
    conf = kube.api.configuration
    token = None
    for key in ("BearerToken", "authorization"):
        value = (conf.api_key or {}).get(key)
        if value:
            token = str(value).removeprefix("Bearer ").removeprefix("bearer ")
    return kopf.ConnectionInfo(
        server=str(conf.host),
        ca_path=conf.ssl_ca_cert,
        insecure=not conf.verify_ssl,
        certificate_path=conf.cert_file,
        private_key_path=conf.key_file,
        token=token,
        scheme="Bearer" if token else None,
    )
