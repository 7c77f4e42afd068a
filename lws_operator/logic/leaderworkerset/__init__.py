"""The LeaderWorkerSet pass read top to bottom (``pipeline``) and its last step (``finish_step``):
above every feature package, whose steps it runs in upstream's order."""
