"""The vocabulary every step of a pass speaks: the snapshot it reads (``snapshot``,
``observed``, ``memo``) and the plan it writes (``plan``). It imports no feature package: the
features import it, and the pass over them (``logic.leaderworkerset``) stands above them all."""
