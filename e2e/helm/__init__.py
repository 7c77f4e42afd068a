"""The operator as its users run it: ``helm install`` of the chart on the node tier.

The image built from the Dockerfile (``e2e.image``) is imported into the real node's containerd;
the chart is installed with its defaults (two replicas, self-managed certificates, the
PodDisruptionBudget, probes, leader election), only the image and the placement on the real node
(``e2e.cluster.PLACEMENT``) given. The API server reaches the webhooks through their Service's
endpoints, /metrics is scraped over HTTPS through the metrics Service from a pod, and the
LeaderWorkerSets' pods stay on the kwok nodes.

``test_helm.py`` is the short form ``make test`` runs; ``test_helm_full.py`` the rest
(``make e2e-helm``, ``LWS_E2E_HELM=full``).
"""
