"""The repository's sample jobs, loaded as a user would apply them and changed only through
the knobs a user has: the training script's flags, ``INJECT_FAULT``-style env vars, restart
policies, the name."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from trainctl.launch.job_kinds import kind_of

from .repo import SAMPLES

Obj = dict[str, Any]


def load_sample(relative: str) -> Obj:
    """The one job in ``samples/<relative>``, as a user would apply it."""
    documents = [d for d in yaml.safe_load_all((SAMPLES / relative).read_text()) if d]
    assert len(documents) == 1, f"{relative}: expected one document"
    return documents[0]


def replica_specs(job: Obj) -> dict[str, Obj]:
    return job["spec"][kind_of(job).replica_specs_field]


def containers(job: Obj, rtype: str | None = None) -> list[Obj]:
    return [container for name, spec in replica_specs(job).items() if rtype in (None, name)
            for container in spec["template"]["spec"]["containers"]]


def set_env(job: Obj, name: str, value: str, rtype: str | None = None) -> None:
    for container in containers(job, rtype):
        env = [e for e in container.get("env") or [] if e.get("name") != name]
        container["env"] = env + [{"name": name, "value": value}]


def set_arg(job: Obj, flag: str, value: str) -> None:
    """Set ``--flag=value`` in every container's args (the training script's flags)."""
    for container in containers(job):
        args = [a for a in container.get("args") or [] if not a.startswith(f"{flag}=")]
        container["args"] = args + [f"{flag}={value}"]


def set_restart_policy(job: Obj, policy: str) -> None:
    for spec in replica_specs(job).values():
        spec["restartPolicy"] = policy


def named(job: Obj, name: str) -> Obj:
    job = copy.deepcopy(job)
    job["metadata"]["name"] = name
    return job
