"""Failures and restarts: restart policies, the restart budget and backoff, pod termination."""
