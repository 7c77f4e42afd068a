"""The pod webhook's mutation: what it adds to a pod, which pods it serves, pods it never saw."""
