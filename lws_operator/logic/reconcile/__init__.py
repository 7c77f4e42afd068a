"""One LeaderWorkerSet pass: the snapshot it reads, the plan it writes, the pass function."""
