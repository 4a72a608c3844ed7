"""The knobs of the reconcile core, fixed for the life of a controller process.

They mirror the reference controller's flags (gang scheduler, init-container image and
tries) and add trainctl's own timers. Everything has a default that works on a plain
cluster, so ``ReconcileConfig()`` is a valid configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from trainctl.controller.reconcile import oom

VOLCANO = "volcano"


def setting(default: Any, help: str, **metadata: Any) -> Any:
    """A setting's default and its one description, which ``trainctl controller --help`` shows
    (further metadata: trainctl.controller.options)."""
    return field(default=default, metadata={"help": help, **metadata})


def _oom_memory_max(text: str) -> str:
    oom.parse_maximum(text)
    return text


@dataclass(frozen=True)
class ReconcileConfig:
    # None: no gang scheduling. "volcano" (any case): Volcano PodGroups. Any other name:
    # scheduler-plugins PodGroups, with that name as the pods' schedulerName. Set through
    # ManagerOptions' flag, whose help describes it.
    gang_scheduler: Optional[str] = None
    init_container_image: str = setting(
        "alpine:3.10", "image of the PyTorch Worker pods' init-pytorch container, which waits for the Master's DNS name")
    init_container_max_tries: int = setting(100, "how often init-pytorch looks the Master's name up before failing")
    # Reference issue #2072.
    force_delete_grace_seconds: float = setting(
        300.0, "force-delete a pod still terminating this long after its deletionTimestamp (its node is gone), "
               "so its replica can be recreated", metavar="SECONDS")
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
    # The node check before training (a job's annotation trainctl.io/node-check overrides it).
    node_check: bool = setting(False, "run the node check (allgather and matmul in pairs) in every PyTorchJob's pods "
                                      "before training, unless a job's annotation trainctl.io/node-check says \"false\"")
    node_check_straggler_factor: float = setting(
        2.0, "the node check calls a node a straggler when its time is more than this many times the median",
        metavar="FACTOR")
    node_check_join_timeout: float = setting(60.0, "the node check waits this long for the pods checked together "
                                                   "to meet", metavar="SECONDS")
    node_check_pair_timeout: float = setting(10.0, "a pair of the node check that has not connected and exchanged "
                                                   "its data in this time has failed", metavar="SECONDS")
    podgroup_poll_seconds: float = setting(5.0, "while Volcano has not admitted a job's PodGroup, look again "
                                                "this often", metavar="SECONDS")
    # Rendezvous timers for elastic jobs with a trainctl-hosted store, so that a lost pod
    # is noticed in seconds (elastic-fault-tolerance.md §1.7: ~8 s instead of ~45 s). An
    # agent silent for keep_alive_interval × keep_alive_max_attempt is taken for dead; a
    # live one starved that long by a busy machine is dropped from the rendezvous without
    # being told, and torchrun then trains two groups apart: 5 s is over twice the longest
    # gap between an agent's heartbeats measured at a load of 6-9 on two cores (2.1 s).
    rdzv_last_call_timeout: int = setting(2, "elastic rendezvous: seconds to wait for more agents once the "
                                             "minimum joined", metavar="SECONDS")
    rdzv_keep_alive_interval: int = setting(1, "elastic rendezvous: seconds between an agent's heartbeats",
                                            metavar="SECONDS")
    rdzv_keep_alive_max_attempt: int = setting(5, "elastic rendezvous: heartbeats an agent may miss before it "
                                                  "is taken for dead")
    rdzv_join_timeout: int = setting(600, "elastic rendezvous: seconds the rendezvous may take to complete", metavar="SECONDS")
    rdzv_store_cpu: str = setting("100m", "CPU request of the rendezvous store pod (a Python process holding a "
                                          "TCPStore)", metavar="QUANTITY")
    rdzv_store_memory: str = setting("256Mi", "memory request of the rendezvous store pod", metavar="QUANTITY")
    # No single job may make the controller's work unbounded.
    max_replicas_per_job: int = setting(10_000, "fail at once a job asking for more replicas than this, with a "
                                                "condition that names the field and the limit")
    # So a pass's time and memory stay bounded.
    max_creates_per_pass: int = setting(500, "create at most this many pods, and as many Services, for one job "
                                             "in one pass; the rest follow in the next passes")

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
