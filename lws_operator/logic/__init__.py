"""The pure decision layer, one package per concept (``docs/architecture.md`` lists them in
their import order). Input is a snapshot of observed objects and the clock; output is a plan of
writes. It never imports kopf or a Kubernetes client, so it is tested with plain data."""
