"""Ports for servers a test starts (a controller's metrics, a rendezvous store, a pod's server)."""

from __future__ import annotations

import socket
from typing import Any

from trainctl.launch.job_kinds import kind_of


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now at ``host`` (``0.0.0.0``: on any address of
    this machine, which other test runs may share)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


STATUS_PORT_NAME, STATUS_PORT_VARIABLE = "status", "STATUS_PORT"  # the samples' status page


def with_free_port(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with its framework port (``pytorchjob-port``, ``msjob-port``) moved to a free
    one, the knob a user has, and the samples' status page port (``status``, told to the
    script in ``$STATUS_PORT``) too. In the embedded cluster's shared network mode pods share
    the machine's port space, so a job on the default port would wait for any other cluster on
    this machine that holds it: a test never depends on a machine-wide port being free."""
    kind = kind_of(job)
    port = status_port = free_port("0.0.0.0")
    while status_port == port:
        status_port = free_port("0.0.0.0")
    for spec in (job.get("spec", {}).get(kind.replica_specs_field) or {}).values():
        for container in spec.get("template", {}).get("spec", {}).get("containers") or []:
            if container.get("name") != kind.container:
                continue
            ports = [p for p in container.get("ports") or [] if p.get("name") != kind.port_name]
            for declared in ports:
                if declared.get("name") == STATUS_PORT_NAME:
                    declared["containerPort"] = status_port
            for variable in container.get("env") or []:
                if variable.get("name") == STATUS_PORT_VARIABLE:
                    variable["value"] = str(status_port)
            container["ports"] = ports + [{"name": kind.port_name, "containerPort": port}]
    return job
