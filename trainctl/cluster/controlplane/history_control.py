"""ControllerRevisions written for the workload that owns them (a StatefulSet, a DaemonSet).

The pods a pass creates are labelled with their revision, so the revisions are written
first; a revision the cache had not shown yet (409 on create) is already recorded. Any
other refusal ends the pass before its pods, and the next pass looks again.
"""

from __future__ import annotations

import logging

from trainctl.cluster.controlplane.api_resources import CONTROLLER_REVISIONS
from trainctl.cluster.controlplane.controller_history import RevisionWrites
from trainctl.kube.client import ApiError, KubeClient

log = logging.getLogger("trainctl.controlplane.history")


def write_revisions(client: KubeClient, owner: str, namespace: str, writes: RevisionWrites) -> bool:
    """Apply ``writes``; False when the owner's pods must wait for the next pass."""
    try:
        for revision in writes.create:
            try:
                client.create(CONTROLLER_REVISIONS, revision)
            except ApiError as exc:
                if exc.code != 409:
                    raise
        for revision in writes.rewrite:
            client.replace(CONTROLLER_REVISIONS, revision)
        for name in writes.delete:
            client.delete(CONTROLLER_REVISIONS, namespace, name)
    except ApiError as exc:
        log.info("cannot record the revisions", extra={"owner": f"{namespace}/{owner}", "error": str(exc)})
        return False
    return True
