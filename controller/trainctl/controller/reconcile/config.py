"""The knobs of the reconcile core, fixed for the life of a controller process.

They mirror the reference controller's flags (gang scheduler, init-container image and
tries) and add trainctl's own timers. Everything has a default that works on a plain
cluster, so ``ReconcileConfig()`` is a valid configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from trainctl.controller.reconcile import oom

VOLCANO = "volcano"


def _oom_memory_max(text: str) -> str:
    oom.parse_maximum(text)
    return text


@dataclass(frozen=True)
class ReconcileConfig:
    # None: no gang scheduling. "volcano" (any case): Volcano PodGroups. Any other name:
    # scheduler-plugins PodGroups, with that name as the pods' schedulerName.
    gang_scheduler: Optional[str] = None
    # The PyTorch Worker pods' ``init-pytorch`` container, which waits for the Master's DNS name.
    init_container_image: str = "alpine:3.10"
    init_container_max_tries: int = 100
    # A pod still terminating this long after its deletionTimestamp (its node is gone) is
    # force-deleted so its replica can be recreated (reference issue #2072).
    force_delete_grace_seconds: float = 300.0
    # A pod whose node has been not Ready (Unknown/False, or tainted unreachable/not-ready)
    # this long is force-deleted and replaced; None turns it off (Kubernetes' eviction then
    # decides). A job's annotation trainctl.io/node-lost-grace overrides it.
    node_lost_grace_seconds: Optional[float] = field(
        default=30.0,
        metadata={
            "flag": "node-lost-grace",
            "help": "replace a pod whose node is not Ready for this long (e.g. 30s, 2m; 'never' = off)",
            "parse": "duration-or-never",
            "metavar": "DURATION",
        },
    )
    # Out-of-memory relaunch for every job (a job's annotations trainctl.io/oom-memory-factor
    # and -max override these): an OOMKilled replica comes back with its memory limit and
    # request times the factor, never above the maximum. None: off unless a job opts in.
    oom_memory_factor: Optional[float] = field(
        default=None, metadata={"help": "relaunch an OOMKilled replica with its memory times this factor, above 1 and "
                                        f"at most {oom.MAX_FACTOR:g} (off by default)",
                                "metavar": "FACTOR", "parse": oom.parse_factor}
    )
    oom_memory_max: Optional[str] = field(
        default=None, metadata={"help": "never relaunch with more memory than this quantity (e.g. 8Gi; the largest "
                                        "node's allocatable memory bounds it in any case)",
                                "metavar": "QUANTITY", "parse": _oom_memory_max}
    )
    # While Volcano has not admitted the PodGroup, look again this often.
    podgroup_poll_seconds: float = 5.0
    # Rendezvous timers for elastic jobs with a trainctl-hosted store, so that a lost pod
    # is noticed in seconds (elastic-fault-tolerance.md §1.7: ~8 s instead of ~45 s). An
    # agent silent for keep_alive_interval × keep_alive_max_attempt is taken for dead; a
    # live one starved that long by a busy machine is dropped from the rendezvous without
    # being told, and torchrun then trains two groups apart: 5 s is over twice the longest
    # gap between an agent's heartbeats measured at a load of 6-9 on two cores (2.1 s).
    rdzv_last_call_timeout: int = 2
    rdzv_keep_alive_interval: int = 1
    rdzv_keep_alive_max_attempt: int = 5
    rdzv_join_timeout: int = 600
    # Requests of the rendezvous store pod (a Python process holding a TCPStore).
    rdzv_store_cpu: str = "100m"
    rdzv_store_memory: str = "256Mi"
    # A job asking for more replicas than this fails at once, with a condition that names
    # the field and the limit: no single job may make the controller's work unbounded.
    max_replicas_per_job: int = 10_000
    # At most this many pods, and as many Services, are created for one job in one pass; the
    # rest follow in the next passes, so a pass's time and memory stay bounded.
    max_creates_per_pass: int = 500

    def __post_init__(self) -> None:
        """A setting no job could use fails here, at the controller's start, not in a reconcile."""
        for name, parse in (("oom_memory_factor", oom.parse_factor), ("oom_memory_max", oom.parse_maximum)):
            value = getattr(self, name)
            if value is not None:
                try:
                    parse(value)
                except ValueError as exc:
                    raise ValueError(f"{name} {exc}, got {value!r}") from None

    @property
    def gang(self) -> Optional[str]:
        """"volcano", the scheduler-plugins scheduler name, or None."""
        if not self.gang_scheduler:
            return None
        return VOLCANO if self.gang_scheduler.lower() == VOLCANO else self.gang_scheduler

    def rendezvous_conf(self) -> str:
        """``PET_RDZV_CONF`` for agents of a trainctl-hosted store (never host it themselves)."""
        return (
            f"is_host=0,last_call_timeout={self.rdzv_last_call_timeout},"
            f"keep_alive_interval={self.rdzv_keep_alive_interval},"
            f"keep_alive_max_attempt={self.rdzv_keep_alive_max_attempt},"
            f"join_timeout={self.rdzv_join_timeout}"
        )
