"""The embedded single-machine cluster that ``trainctl local`` runs: a Kubernetes-compatible
API server on loopback backed by SQLite (``apiserver``), kube-scheduler's filters and scores
(``scheduler``), one kubelet per node running pods as local processes (``kubelet``),
kube-controller-manager's node lifecycle and HPA loops (``controlplane``), resource limits and
usage (``resources``), pod and Service addressing (``network``), node faults (``nodes``) and
the supervisor that starts and restarts them all (``cluster``)."""
