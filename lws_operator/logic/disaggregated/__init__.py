"""The DisaggregatedSet controller's pure logic: names and children, the revision, the
coordinated rollout's planner and drain, slices, placement, role scalers and status."""
