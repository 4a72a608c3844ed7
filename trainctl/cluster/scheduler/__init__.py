"""The embedded cluster's scheduler, one process for every node (as kube-scheduler).

``rules`` (the pure filter and score rules over N nodes, with ``labels``, ``assigned``,
``interpod``, ``spread``, ``unsupported`` and ``preemption`` for the rules across pods and the
message), ``binding`` (binding through ``pods/binding``, the Unschedulable condition, the
back-off of FailedScheduling Events), ``events`` (Scheduled and FailedScheduling, written off
the loop), ``component`` (the process: informers on Pods, Nodes and Namespaces, one pass per
change). Run it with ``python -m trainctl.cluster.scheduler``.
Kubelets only run pods bound to their own node.
"""
