"""An API server where nothing exists yet, for the webhook certificate manager's tests: listings
are empty, watches stay quiet, and a create answers with the body it was given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


class QuietKube:
    """Nothing exists yet (listings are empty, watches quiet); creates echo their body."""

    async def get(self, path: str) -> None:
        return None

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "GET":
            return {"items": [], "metadata": {"resourceVersion": "1"}}
        body: dict[str, Any] = kwargs["body"]
        return body

    @contextlib.asynccontextmanager
    async def stream(self, path: str, **kwargs: Any) -> AsyncIterator[AsyncIterator[bytes]]:
        async def quiet() -> AsyncIterator[bytes]:
            await asyncio.Event().wait()
            yield b""

        yield quiet()
