"""The API layer: pydantic models of LeaderWorkerSet spec and status, constants, defaulting and
validation. Pure: no I/O, no kopf, no Kubernetes client. Every other layer imports from here."""
