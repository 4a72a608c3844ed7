"""One embedded cluster for the whole e2e session, and a clean namespace for every test.

The cluster runs the real API server, kubelet and controller as processes, with the
controller's metrics on a free loopback port, and pods in a scratch working directory
(tests/support/cluster.py). Tests run one at a time (the machine has two cores); after
each, every job is deleted, its pods are waited for, and the checkpoints are removed so the
next job starts from step 0.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import E2E, scratch_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    # No HPA controller here: these tests are not about it, and one less process competes for
    # the two cores. e2e/test_hpa.py runs clusters of its own with one (and shows it leaves
    # elastic.yaml's jobs at the size a test gives them).
    # The Job controller is cheap (it watches only Jobs' pods) and e2e/test_workloads.py needs it.
    with scratch_cluster(tmp_path_factory.mktemp("e2e"), controlplane_args=["--controllers", "node-lifecycle,job"]) as env:
        yield env


@pytest.fixture
def e2e(cluster_env: E2E) -> Iterator[E2E]:
    for component in cluster_env.cluster.components:
        if not component.alive:  # a fault test that failed half-way left it down
            component.start()
    yield cluster_env
    cluster_env.clean()
