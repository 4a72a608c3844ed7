"""Resource limits and usage of the embedded cluster's containers (local process groups).

:func:`enforcer.detect` picks how a node enforces ``limits.memory`` and ``limits.cpu`` and
measures usage (cgroup v2, cgroup v1, or polling the process tree); :mod:`.limits` reads the
limits and maps an OOM kill to Kubernetes' terminated state; :mod:`.metrics` turns usage
samples into ``metrics.k8s.io/v1beta1`` PodMetrics and NodeMetrics.
"""
