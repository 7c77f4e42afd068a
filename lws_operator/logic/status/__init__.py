"""The set's status: readiness, counters and conditions, status pacing, the group metrics."""
