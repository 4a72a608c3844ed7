"""The embedded cluster's kubelet: runs the pods bound to one Node as local processes.

It is its own process (``trainctl local kubelet --dir DIR``, or ``python -m
trainctl.cluster.kubelet``), one per node, so the fault tests and ``trainctl local node``
can kill, freeze and restart it alone; pods reach it through the cluster's scheduler
(:mod:`trainctl.cluster.scheduler`). Modules:
``node`` and ``heartbeat`` (the Node and its Lease), ``podspec`` (what the kubelet can run), ``admission`` (workers, devices,
rejections), ``deletion``, ``thaw`` (a frozen node resuming), ``status`` (status writes), ``service_names`` and ``service_rules``
(Service names, proxy rules, hosts file), ``env`` (environment and command line), ``runtime``
(process groups and CRI logs), ``paths`` (files stay in the directory), ``pod_worker`` (one
pod's life), ``kubelet`` (the loop that composes them). It
talks to the API server through ``trainctl.kube``'s client and informers, like the controller.
"""

from trainctl.cluster.kubelet.kubelet import DEFAULT_NODE_NAME, Kubelet, KubeletConfig

__all__ = ["DEFAULT_NODE_NAME", "Kubelet", "KubeletConfig"]
