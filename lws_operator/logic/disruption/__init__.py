"""The group disruption budget: may a pod be evicted now, and the reservations replicas share."""
