"""``kubectl lws``: a kubectl plugin that shows LeaderWorkerSets as their users think of them.

A shell like ``controllers/``: it reads the API with the user's kubeconfig and renders what the
pure modules of ``logic/`` compute. ``cli.py`` owns the global options and the dispatch; each
subcommand is a module with ``register(subparsers)``.
"""
