"""The node tier's own tests: a real container on the real node, its networking and ``down``."""
