"""Benchmarks: run as scripts, report figures, assert nothing about timing."""
