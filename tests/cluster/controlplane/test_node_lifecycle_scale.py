"""The node lifecycle loop on a large cluster: a healthy node's Lease renewal costs no pass
(a thousand nodes renew a hundred times a second, and a pass reads every node and pod), yet
the renewal still counts from the moment it arrived, and a renewal that may change
something (a node not Ready) is looked at at once."""

from __future__ import annotations

import time

from trainctl.cluster.controlplane import node_lifecycle
from trainctl.cluster.controlplane.node_lifecycle_controller import NodeLifecycleController
from trainctl.kube import restmapper as r

from .conftest import FakeMetricsClient, eventually
from .test_node_lifecycle_controller import post_ready, ready_status, register, renew


def test_renewals_of_ready_nodes_cost_no_pass(client: FakeMetricsClient) -> None:
    for name in ("worker-1", "worker-2"):
        register(client, name)
    controller = NodeLifecycleController(client, monitor_period=600)
    controller.start()
    try:
        eventually(lambda: controller.loop.passes > 0, what="the first pass")
        time.sleep(0.3)
        passes = controller.loop.passes
        for _ in range(10):
            renew(client, "worker-1")
            renew(client, "worker-2")
        eventually(lambda: controller.leases.store.get("kube-node-lease", "worker-2")["spec"]["renewTime"]
                   == client.get(r.LEASES, "kube-node-lease", "worker-2")["spec"]["renewTime"], what="the renewals seen")
        time.sleep(0.3)
        assert controller.loop.passes == passes
    finally:
        controller.stop()


def test_a_renewal_counts_from_when_it_arrived_not_from_the_next_pass(client: FakeMetricsClient) -> None:
    register(client, "worker-1")
    config = node_lifecycle.NodeLifecycleConfig(node_monitor_grace_period=3)
    controller = NodeLifecycleController(client, config=config, monitor_period=600)
    controller.start()
    try:
        eventually(lambda: controller.loop.passes > 0, what="the first pass")
        time.sleep(1.5)
        renew(client)
        renewed = time.monotonic()
        eventually(lambda: ready_status(client.get(r.NODES, None, "worker-1")) == "Unknown", timeout=20,
                   what="the node judged Unknown a grace period after its renewal")
        assert time.monotonic() - renewed < config.node_monitor_grace_period + 2
    finally:
        controller.stop()


def test_a_renewal_from_a_node_that_is_not_ready_is_looked_at_at_once(client: FakeMetricsClient) -> None:
    register(client, "worker-1")
    controller = NodeLifecycleController(client, monitor_period=600)
    controller.start()
    try:
        eventually(lambda: controller.loop.passes > 0, what="the first pass")
        post_ready(client, "False")
        eventually(lambda: ready_status(controller.nodes.store.get("", "worker-1")) == "False", what="the node seen not Ready")
        passes = controller.loop.passes
        renew(client)
        eventually(lambda: controller.loop.passes > passes, what="a pass at the renewal")
    finally:
        controller.stop()
