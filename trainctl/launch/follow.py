"""Stream the lead pod's log, following it across container restarts and pod re-creation.

A log stream ends when its container exits. The training operator then either restarts
the container in place (restartCount + 1) or deletes the pod and creates a new one with
the same name (a new uid). Each (uid, restartCount) is one container instance; this
module streams each instance once, in order, as the pod watch reports them, so a user
sees the whole log of the pod that speaks for the job, however often it restarts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from trainctl.api.replicas import default_container
from trainctl.kube.client import ApiError, KubeClient, LogStream

Instance = tuple[str, int]  # (pod uid, restartCount)


def container_status(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
    status: dict[str, Any]
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status
    return None


class LeadPodLogs:
    """Writes every line of the lead pod's container to ``on_line(pod_name, line)``.

    Feed it the lead pod as the pod watch sees it (``observe``); a background thread
    opens ``pods/log?follow=true`` for each container instance that is running or has run.
    """

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        container: str,
        on_line: Callable[[str, str], None],
        on_note: Callable[[str], None],
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._container = container
        self._on_line = on_line
        self._on_note = on_note
        self._cond = threading.Condition()
        self._pod: dict[str, Any] | None = None
        self._streamed: set[Instance] = set()
        self._active: Instance | None = None
        self._open_log: LogStream | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="lead-pod-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def observe(self, pod: dict[str, Any] | None) -> None:
        with self._cond:
            self._pod = pod
            self._cond.notify_all()

    def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the log of every instance that has exited.

        An exited container's stream ends by itself once its last line is read; a container
        still running when the job ended (a worker failed the job) is not waited for.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._exited(self._active) or self._exited(self._pending()):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped:
                    return
                self._cond.wait(remaining)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            stream = self._open_log
            self._cond.notify_all()
        if stream is not None:
            stream.close()

    def _container_name(self, pod: dict[str, Any]) -> str:
        container = default_container(pod, self._container)
        return (container or {}).get("name") or self._container

    def _exited(self, instance: Instance | None) -> bool:
        """Whether the latest pod snapshot shows ``instance`` terminated (or its pod gone)."""
        if instance is None:
            return False
        pod = self._pod
        if pod is None or (pod.get("metadata") or {}).get("uid") != instance[0]:
            return True
        status = container_status(pod, self._container_name(pod)) or {}
        if int(status.get("restartCount") or 0) != instance[1]:
            return True
        state = status.get("state") or {}
        # Waiting after a run that ended (CrashLoopBackOff): restartCount still names that run.
        return "terminated" in state or ("waiting" in state and "terminated" in (status.get("lastState") or {}))

    def _pending(self) -> Instance | None:
        """The newest container instance with a log we have not streamed yet."""
        pod = self._pod
        if pod is None:
            return None
        status = container_status(pod, self._container_name(pod))
        if status is None:
            return None
        state = status.get("state") or {}
        if "running" not in state and "terminated" not in state:
            return None
        instance = ((pod.get("metadata") or {}).get("uid") or "", int(status.get("restartCount") or 0))
        return None if instance in self._streamed else instance

    def _run(self) -> None:
        while True:
            with self._cond:
                instance = self._pending()
                while instance is None and not self._stopped:
                    self._cond.wait()
                    instance = self._pending()
                if self._stopped or instance is None:  # None only once stopped
                    return
                pod = self._pod or {}
                self._active = instance
                # Older instances of this pod we never saw running are skipped, not replayed
                # out of order; the note tells the user where to find them.
                skipped = [i for i in range(instance[1]) if (instance[0], i) not in self._streamed]
                self._streamed.update((instance[0], i) for i in range(instance[1] + 1))
            name = (pod.get("metadata") or {}).get("name") or ""
            if instance[1] > 0:
                self._on_note(f"{name}: following restart {instance[1]} of container {self._container_name(pod)}")
            if skipped:
                self._on_note(f"{name}: logs of restarts {skipped} were not followed (kubectl logs --previous)")
            try:
                self._stream(name, self._container_name(pod))
            finally:
                with self._cond:
                    self._active = None
                    self._open_log = None
                    self._cond.notify_all()

    def _stream(self, pod_name: str, container: str) -> None:
        try:
            stream = self._client.log(self._namespace, pod_name, container=container, follow=True)
        except ApiError:
            return  # the pod went away or its container is not startable yet
        with self._cond:
            if self._stopped:
                stream.close()
                return
            self._open_log = stream
        try:
            for line in stream:
                self._on_line(pod_name, line)
        except ApiError:
            pass  # stream cut: the pod is gone
