"""The controllers' shell: watch-fed work queues, workers, and the runner that carries out each
step's plan (``passes``). No business rule lives here: a pass is a function of
``logic.leaderworkerset`` or ``logic.disaggregated``, and every write is a plan's action.
"""
