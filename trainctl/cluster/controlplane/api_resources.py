"""The API resources only the control-plane controllers use.

Kept here rather than in the controller's resource table: the trainctl controller never
reads metrics, and its RBAC test compares that table's use with its ClusterRole.
"""

from __future__ import annotations

from trainctl.kube.restmapper import Resource

POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
JOBS = Resource("batch", "v1", "jobs", "Job")
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob")
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
