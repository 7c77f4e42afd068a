"""One pass over a DisaggregatedSet as one function read top to bottom.

The order is upstream's Reconcile (disaggregatedset_controller.go): the target revision (and,
ours, its record in the set's revision history), removed slices, the role scalers, the legacy
slice-0 migration (when ``slices > 1``), then per slice its workloads (drained revisions
deleted, then the simple path or the coordinated rolling update) and its Services, then the
scalers' status and the set's status.

``reconcile`` awaits ``run(step, *values)`` for each step on the runner the LeaderWorkerSet pass
shares (``controllers.passes``): the runner builds the step's snapshot from the watch caches,
carries out its plan, and hands back what the step decided for the later ones (the target
revision, a slice's error), which ``reconcile`` passes to them as arguments; where a plan ends
the pass (the status write's conflict), ``run`` does not return. A step skipped is an ``if``
here.
"""

from __future__ import annotations

from lws_operator.logic.disaggregated import steps
from lws_operator.logic.disaggregated.snapshot import DsObserved
from lws_operator.logic.reconcile.plan import Run


async def reconcile(run: Run[DsObserved], slice_count: int) -> tuple[str, ...]:
    """One pass over a set of ``slice_count`` slices (``spec.slices`` at the pass's start):
    the errors the steps decided (upstream's texts), in order, which the controller joins with
    the failures its writes collected once the status is written."""
    rev = await run(steps.revision)  # fixed for the whole pass
    await run(steps.history_step, rev)
    await run(steps.removed_slices)
    await run(steps.scalers)
    if slice_count > 1:  # a legacy (pre-slices) slice 0 migrates only beside siblings
        await run(steps.legacy, rev)

    errors: list[str] = []
    for k in range(slice_count):
        error = await run(steps.workloads, k, rev)
        if error is not None:  # upstream's slice reconcile returns before its Services
            errors.append(error)
            continue
        await run(steps.services, k, rev)

    await run(steps.scaler_status)
    await run(steps.status, rev)
    return tuple(errors)
