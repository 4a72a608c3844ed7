"""The control-plane controllers of the embedded cluster that only talk to the API.

As in kube-controller-manager: the node lifecycle controller (node health from Leases,
taints, taint-based eviction), the horizontal pod autoscaler, the ServiceAccount controller
and the disruption controller (PodDisruptionBudgets' status). Each is a pure decision core
(plain dicts and ``now`` in, a decision out) plus a thin loop on the project's API client
and informers; ``python -m trainctl.cluster.controlplane`` runs them.
"""
