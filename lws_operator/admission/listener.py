"""Starting an aiohttp application on a TCP port, shared by the admission and health servers."""

from __future__ import annotations

import ssl

from aiohttp import web


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    shutdown_timeout: float = 1.0,
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (port 0 picks a free one); returns the runner, whose
    ``cleanup()`` stops it, and the port actually bound. Nothing is left open on failure."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None,
                           shutdown_timeout=shutdown_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    if port == 0 and runner.addresses:
        port = int(runner.addresses[0][1])
    return runner, port
