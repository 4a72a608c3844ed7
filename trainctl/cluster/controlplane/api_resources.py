"""The API resources only the control-plane controllers use.

Kept here rather than in the controller's resource table: the trainctl controller never
reads metrics, and its RBAC test compares that table's use with its ClusterRole.
"""

from __future__ import annotations

from trainctl.kube.restmapper import Resource

POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
