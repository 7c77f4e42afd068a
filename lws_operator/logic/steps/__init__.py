"""The steps of a LeaderWorkerSet pass, each a pure function from ``logic.snapshot.Observed``
to a ``logic.plan.Plan``; ``logic.steps.pipeline`` lists them in order."""
