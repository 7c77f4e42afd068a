"""``kubectl lws``: a kubectl plugin that shows LeaderWorkerSets as their users think of them.

A shell like ``controllers/``: it reads the API with the user's kubeconfig and renders what the
pure modules of ``logic/`` compute. ``cli.py`` owns the global options and the dispatch; each
subcommand is a module with ``register(subparsers)``.
"""

from lws_operator.kube.lean_imports import bare_packages

# Both entry points (``kubectl-lws``, and ``kubectl_complete-lws``, which runs at every TAB) use
# the client's asyncio half only, as the operator does: leave its synchronous half unimported.
bare_packages()
