"""Resource limits and usage of the embedded cluster's containers (local process groups).

:func:`enforcer.detect` picks how a node enforces ``limits.memory`` and ``limits.cpu`` and
measures usage (cgroup v2, cgroup v1, or polling the process tree); :mod:`.container_limits` reads the
limits and maps an OOM kill to Kubernetes' terminated state; :mod:`.pod_metrics` turns usage
samples into ``metrics.k8s.io/v1beta1`` PodMetrics and NodeMetrics.

How a kubelet uses it::

    node = enforcer.detect(cluster=enforcer.cluster_key(state_dir), node=node_name)
    log.info("resource limits: %s", node.describe())
    # per container run
    group = node.container(pod_uid, name, container_limits.ContainerLimits.from_resources(spec.get("resources")))
    process = subprocess.Popen(argv, ..., start_new_session=True, preexec_fn=group.preexec())
    group.add(process.pid)                    # (group.close() if Popen raised)
    code = ...wait for the main process...
    group.close()                             # kills what is left; usage and verdict stay readable
    terminated = {**container_limits.terminated_fields(code, oom_killed=group.oom_killed()), ...}
    # every few seconds, for the Metrics API
    history.record((pod_uid, name), pod_metrics.Sample(time=time.time(), usage=group.usage()))
"""
