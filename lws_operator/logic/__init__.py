"""The pure decision layer: one module per policy (revisions, object builders, rollout math, restart
decisions, placement, status). Input is a snapshot of observed objects and the clock; output is an
action plan. It never imports kopf or a Kubernetes client, so it is tested with plain data."""
