"""The embedded cluster's scheduler, one process for every node (as kube-scheduler).

``rules`` (the pure filter and score rules over N nodes), ``binding`` (binding through
``pods/binding`` and the Unschedulable condition), ``component`` (the process: informers on
Pods and Nodes, one pass per change). Run it with ``python -m trainctl.cluster.scheduler``.
Kubelets only run pods bound to their own node.
"""
