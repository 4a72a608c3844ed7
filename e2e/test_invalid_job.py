"""A job the API server accepts but trainctl cannot run fails alone, with the field named.

The CRDs describe pod templates loosely (docs/architecture.md, Decisions), so a Worker whose
container is not called ``pytorch`` passes the server's schema; trainctl's validation
rejects it. That is the honest way past the server: no validation is switched off.
"""

from __future__ import annotations

import pytest
import yaml

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.net import with_free_port
from tests.support.samples import load_sample, named

pytestmark = pytest.mark.e2e


def test_invalid_job_fails_naming_the_field_and_the_valid_one_next_to_it_succeeds(e2e: E2E) -> None:
    valid = with_free_port(load_sample("pytorch/ddp.yaml"))
    invalid = named(valid, "pytorch-invalid")
    invalid["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"

    with e2e.observe(invalid).start() as bad, e2e.observe(valid).start() as good:
        e2e.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([invalid, valid]))

        bad.wait_finished(timeout=60)
        failed = condition(bad.job, "Failed")
        assert failed is not None, bad.dump()
        assert "spec.pytorchReplicaSpecs[Worker].template.spec.containers" in failed["message"], failed
        assert "pytorch" in failed["message"], failed

        good.wait_succeeded(timeout=120)
        assert {ln.pod for ln in good.events("done")} == {"pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"}
        assert not bad.created, f"pods created for an invalid job: {bad.created}"
        assert not condition(bad.job, "Running") and not condition(bad.job, "Succeeded"), bad.dump()

    described = e2e.kubectl("get", "pytorchjob", "pytorch-invalid", "-o", "jsonpath={.status.conditions[-1].type}")
    assert described == "Failed"
