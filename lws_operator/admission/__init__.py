"""The admission webhook server: defaulting and validation of LeaderWorkerSets, pod mutation."""
