"""End-to-end tooling: the local control plane, end-to-end scenarios and benchmarks."""
