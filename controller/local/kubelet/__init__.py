"""The embedded cluster's kubelet: runs the pods bound to one Node as local processes.

It is its own process (``trainctl local kubelet --dir DIR``, or ``python -m
trainctl.controller.local.kubelet``) so the fault tests can kill and restart it alone. Modules:
``node`` and ``heartbeat`` (the Node and its Lease), ``scheduler`` (the fit rules) and ``scheduling``
(binding, Unschedulable), ``podspec`` (what the kubelet can run), ``admission`` (workers, devices,
rejections), ``deletion``, ``status`` (status writes), ``service_names`` and ``service_rules``
(Service names, proxy rules, hosts file), ``env`` (environment and command line), ``runtime``
(process groups and CRI logs), ``paths`` (files stay in the directory), ``pod_worker`` (one
pod's life), ``kubelet`` (the loop that composes them). It
talks to the API server through ``trainctl.controller.kube``'s client and informers, like the controller.
"""

from .kubelet import DEFAULT_NODE_NAME, Kubelet, KubeletConfig

__all__ = ["DEFAULT_NODE_NAME", "Kubelet", "KubeletConfig"]
