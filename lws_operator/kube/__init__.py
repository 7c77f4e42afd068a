"""API I/O: the client facade, server-side apply, preconditioned deletes, the global client-side
rate limiter, watch caches and event recording. Business rules live in ``logic``, not here."""
