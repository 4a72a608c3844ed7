"""Looking into a worker's container through ``pods/exec``, as ``kubectl exec`` does.

Hang detection needs two things only the node can see: whether a pod's processes are stopped,
and their Python stacks. Both come from :mod:`trainctl.controller.in_pod_processes`, run in
the container with the image's own ``python3`` over the API server's exec subresource, which
every cluster offers (the controller needs ``create`` on ``pods/exec``); no agent on the node
and nothing in the image.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from kubernetes import client as k8s_client
from kubernetes.stream import stream

from trainctl.controller import in_pod_processes
from trainctl.kube.client import KubeClient

log = logging.getLogger("trainctl.controller")

_SOURCE = Path(in_pod_processes.__file__).read_text()
STATES, FREEZE, DUMP = "states", "freeze", "dump"


class PodExec:
    """Runs the in-pod program in one pod's container and reads its report."""

    def __init__(self, client: KubeClient, timeout: float = 30.0) -> None:
        self._client = client
        self._api: Optional[k8s_client.CoreV1Api] = None
        self.timeout = timeout

    @property
    def _core(self) -> k8s_client.CoreV1Api:
        """The generated client exec needs, made at the first exec: most controllers never run one."""
        if self._api is None:
            self._api = k8s_client.CoreV1Api(k8s_client.ApiClient(self._client.configuration))
        return self._api

    def processes(self, namespace: str, pod: str, container: str, mode: str = STATES) -> Optional[list[dict[str, Any]]]:
        """The container's processes (``mode`` DUMP: after their stacks were dumped); None when
        the exec failed (the pod went, the image has no python3), which is logged."""
        try:
            session = stream(self._core.connect_get_namespaced_pod_exec, pod, namespace, container=container,
                             command=["python3", "-c", _SOURCE, mode], stdout=True, stderr=True, stdin=False,
                             tty=False, _preload_content=False)
            session.run_forever(timeout=self.timeout)
            out, err, code = session.read_stdout(), session.read_stderr(), session.returncode
            session.close()
        except Exception as exc:  # the websocket and the API answer in many ways; none is fatal here
            log.warning("exec into pod failed", extra={"pod": f"{namespace}/{pod}", "error": str(exc)})
            return None
        # The report is the first line; a dump may end the exec with the container, so the
        # exit code does not matter once the report is there.
        try:
            report = json.loads(out.splitlines()[0])
        except (ValueError, IndexError):
            log.warning("exec into pod failed", extra={"pod": f"{namespace}/{pod}", "code": code, "stderr": err[-500:]})
            return None
        found = report.get("processes") if isinstance(report, dict) else None
        return found if isinstance(found, list) else None

