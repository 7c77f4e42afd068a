"""How a controller's runtime winds down, in one place for both controllers
(``controllers.runtime``, ``controllers.disaggregated_runtime``)."""

from __future__ import annotations

import asyncio
from typing import Any

from lws_operator.kube.watch import Watches
from lws_operator.kube.workqueue import WorkQueue


async def shut_down(stop: asyncio.Event, watches: Watches, queue: WorkQueue[Any],
                    workers: asyncio.Task[None], *waiting: asyncio.Future[Any]) -> None:
    """Stop a runtime whichever way its run ended (``stop`` set, its watches failed): the
    futures it was ``waiting`` on cancelled, its watches told to halt (leaving the watches'
    ``running`` context awaits them), ``stop`` set and the queue shut down, so that idle
    workers return and those in a pass finish it, and then the workers awaited, so that no pass
    outlives the runtime."""
    for future in waiting:
        future.cancel()
    watches.halt()
    stop.set()
    queue.shutdown()
    await workers
