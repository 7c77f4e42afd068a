"""Hash group identity (LWS docs: "Hash Mode"): the leader Deployment's groups admitted behind
the replacement gate, their readiness gate and their restart budget across replacements. It
combines the rules of the packages below it (workloads, status, failures, placement); the
leader owner's rollout and the scheduler providers use its admission."""
