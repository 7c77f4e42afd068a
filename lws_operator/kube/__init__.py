"""API I/O: the client facade, server-side apply, preconditioned deletes, the global client-side
rate limiter, watch caches and event recording. Business rules live in ``logic``, not here.

Every module that imports the ``kubernetes`` client (``client``) or kopf (which imports it too,
``watch``) is in this package, so the client's synchronous half is kept out here, before either
can import it (``lean_imports``)."""

from lws_operator.kube.lean_imports import bare_packages

bare_packages()
