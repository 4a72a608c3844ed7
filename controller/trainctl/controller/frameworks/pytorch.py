"""PyTorchJob (kubeflow.org/v1): the rules of training-operator's PyTorch controller.

Environment, Services, the ``init-pytorch`` wait container and the success rules follow
kubeflow-pytorchjob.md §2–§5. Where the reference is broken (``PET_STANDALONE=""``, an empty
``rdzvConf`` crashing the controller, ``WORLD_SIZE`` ignoring the devices a pod declares) the
fixed behaviour is here and listed in docs/compatibility.md. For elastic jobs trainctl adds
what it takes for a rendezvous to survive a lost pod (elastic-fault-tolerance.md §0), unless
the user configured the rendezvous or asked for the reference environment.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.api.pytorch import ElasticPolicy, PyTorchJob
from trainctl.api.replicas import default_container
from trainctl.controller.frameworks.accelerators import devices_per_pod
from trainctl.controller.frameworks.base import (
    Autoscaling,
    ConditionChange,
    EnvContext,
    EnvFactory,
    Framework,
    JobFacts,
    RendezvousStore,
    env,
    env_from_field,
    named_port,
)

MASTER = "Master"
WORKER = "Worker"
INIT_CONTAINER = "init-pytorch"
BACKEND_C10D = "c10d"
TORCH_DISABLE_SHARE_RDZV_TCP_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
RDZV_CONF_IS_HOST = "is_host"  # who hosts the c10d store; set by the user, it opts out of ours


def is_elastic(job: PyTorchJob) -> bool:
    return job.spec.elastic_policy is not None


def uses_rendezvous_store(job: PyTorchJob, reference_env: bool) -> bool:
    """Whether trainctl hosts this elastic job's c10d store outside the training pods.

    Only when the user left the store's placement to us: no ``rdzvHost``, no ``is_host`` in
    ``rdzvConf`` (its timers are fine: they are passed on), the c10d backend, not standalone
    (torchrun then ignores the endpoint) and no opt-out annotation.
    """
    elastic = job.spec.elastic_policy
    if elastic is None or reference_env:
        return False
    return (
        not elastic.rdzv_host
        and not any(pair.key == RDZV_CONF_IS_HOST for pair in elastic.rdzv_conf or [])
        and (elastic.rdzv_backend or BACKEND_C10D) == BACKEND_C10D
        and not elastic.standalone
    )


def merged_rdzv_conf(base: str, user: list[Any]) -> str:
    """trainctl's ``k=v,...`` rendezvous configuration with the user's keys on top."""
    conf = dict(item.split("=", 1) for item in base.split(",") if item)
    conf.update((pair.key, pair.value) for pair in user)
    return ",".join(f"{key}={value}" for key, value in conf.items())


def rendezvous_port(job: PyTorchJob) -> int:
    """``rdzvPort``, else the Worker's ``pytorchjob-port`` (spec §2.3)."""
    elastic = job.spec.elastic_policy
    if elastic is not None and elastic.rdzv_port is not None:
        return elastic.rdzv_port
    worker = job.spec.pytorch_replica_specs.get(WORKER)
    port = named_port(default_container(worker.template if worker else None, c.PYTORCH_CONTAINER), c.PYTORCH_PORT_NAME)
    return port if port is not None else c.PYTORCH_DEFAULT_PORT


def processes_per_pod(job: PyTorchJob, rtype: str, reference_env: bool) -> tuple[int, Optional[str]]:
    """(processes per pod for WORLD_SIZE, the ``PET_NPROC_PER_NODE`` value to inject).

    An integer ``nprocPerNode`` is taken as written. ``auto`` and ``gpu`` mean one process per
    device, so trainctl resolves them from the devices the pod declares (reference issue
    #1790; the reference counts 1) and injects the number, so torchrun and ``WORLD_SIZE``
    agree. Without devices (and for ``cpu``) a pod counts as 1 process, as in the reference.
    """
    nproc = job.spec.nproc_per_node
    if nproc is None:
        return 1, None
    if nproc.isdigit():
        return int(nproc), nproc
    if not reference_env and nproc in ("auto", "gpu"):
        spec = job.spec.pytorch_replica_specs[rtype]
        devices = devices_per_pod(default_container(spec.template, c.PYTORCH_CONTAINER))
        if devices:
            return devices, str(devices)
    return 1, nproc


class PyTorchFramework(Framework[PyTorchJob]):
    job_kind = kinds.PYTORCHJOB
    restart_policy_event = "SetPodTemplateRestartPolicy"
    scheduler_name_event = "SetPodTemplateSchedulerName"
    limit_failure_reason = "PyTorchJobFailed"
    restarting_message = "job {name} is restarting because {rtype} replica(s) failed."
    advisory_env = frozenset({TORCH_DISABLE_SHARE_RDZV_TCP_STORE, c.PET_LOCAL_ADDR})

    def rendezvous_store(self, job: PyTorchJob, reference_env: bool) -> Optional[RendezvousStore]:
        if not uses_rendezvous_store(job, reference_env):
            return None
        # The store runs from the Workers' image, which has torch.
        return RendezvousStore(port=rendezvous_port(job), template=job.spec.pytorch_replica_specs[WORKER].template or {})

    def replaces_members_alone(self, job: PyTorchJob) -> bool:
        return is_elastic(job)

    def autoscaling(self, job: PyTorchJob) -> Optional[Autoscaling]:
        elastic = job.spec.elastic_policy
        if elastic is None or elastic.metrics is None:
            return None
        return Autoscaling(elastic.min_replicas, elastic.max_replicas, elastic.metrics)

    def gang_replicas(self, job: PyTorchJob, rtype: str) -> int:
        """An elastic job's Workers count with minReplicas: the gang starts at the lower bound."""
        replicas = super().gang_replicas(job, rtype)
        elastic = job.spec.elastic_policy
        if elastic is not None and rtype == WORKER and elastic.min_replicas is not None:
            return min(replicas, elastic.min_replicas)
        return replicas

    def is_master_role(self, job: PyTorchJob, rtype: str, index: int) -> bool:
        if MASTER in job.spec.pytorch_replica_specs:
            return rtype == MASTER
        return rtype == WORKER and index == 0

    def service_cluster_ip(self, rtype: str) -> Optional[str]:
        return "None"  # one headless Service per replica, Workers included

    def env_containers(self, template: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
        return lambda container: True  # every container, sidecars too (spec §2.1)

    def env_factory(self, job: PyTorchJob, rtype: str, ctx: EnvContext) -> EnvFactory:
        spec = job.spec
        specs = spec.pytorch_replica_specs
        head = [env("PYTHONUNBUFFERED", "1")]
        has_master = MASTER in specs
        if has_master:
            master_port = named_port(default_container(specs[MASTER].template, c.PYTORCH_CONTAINER), c.PYTORCH_PORT_NAME)
            master_addr = f"{ctx.name}-master-0"
            world = sum((s.replicas or 0) * processes_per_pod(job, t, ctx.reference_env)[0] for t, s in specs.items())
            head += [
                env(c.ENV_MASTER_PORT, master_port),
                env(c.PET_MASTER_PORT, master_port),
                env(c.ENV_MASTER_ADDR, master_addr),
                env(c.PET_MASTER_ADDR, master_addr),
                env(c.ENV_WORLD_SIZE, world),
            ]
        tail: list[dict[str, Any]] = []
        nproc = processes_per_pod(job, rtype, ctx.reference_env)[1]
        if nproc is not None:
            tail.append(env(c.PET_NPROC_PER_NODE, nproc))
        if job.spec.elastic_policy is not None:
            tail += self._elastic_env(job, job.spec.elastic_policy, ctx)
        else:
            tail.append(env(c.PET_NNODES, sum(s.replicas or 0 for s in specs.values())))
        if not has_master:
            shared = head + tail
            return lambda index: shared
        first_rank = 0 if rtype == MASTER else 1

        def factory(index: int) -> list[dict[str, Any]]:
            rank = str(first_rank + index)
            return head + [{"name": c.ENV_RANK, "value": rank}, {"name": c.PET_NODE_RANK, "value": rank}] + tail

        return factory

    def _elastic_env(self, job: PyTorchJob, elastic: ElasticPolicy, ctx: EnvContext) -> list[dict[str, Any]]:
        host = elastic.rdzv_host or ctx.rendezvous_host or f"{ctx.name}-worker-0"
        out = [
            env(c.PET_RDZV_ENDPOINT, f"{host}:{rendezvous_port(job)}"),
            env(c.PET_RDZV_BACKEND, elastic.rdzv_backend or BACKEND_C10D),
            env(c.PET_NNODES, f"{elastic.min_replicas}:{elastic.max_replicas}"),
        ]
        max_restarts = elastic.max_restarts
        if not ctx.reference_env:
            # Every node that leaves costs each survivor one restart (a scale-down is seen
            # as a worker failure); leave room for all of them on top of the user's budget.
            max_restarts = (max_restarts or 0) + (elastic.max_replicas or 0)
        if max_restarts is not None:
            out.append(env(c.PET_MAX_RESTARTS, max_restarts))
        if elastic.n_proc_per_node is not None:
            out.append(env(c.PET_NPROC_PER_NODE, elastic.n_proc_per_node))
        rdzv_id = elastic.rdzv_id or (None if ctx.reference_env else ctx.uid)
        if rdzv_id:
            out.append(env(c.PET_RDZV_ID, rdzv_id))
        if ctx.rendezvous_conf:  # trainctl hosts the store: is_host=0, the user's timers win
            out.append(env(c.PET_RDZV_CONF, merged_rdzv_conf(ctx.rendezvous_conf, elastic.rdzv_conf or [])))
        elif elastic.rdzv_conf:  # an empty list is no configuration (the reference crashes)
            out.append(env(c.PET_RDZV_CONF, ",".join(f"{p.key}={p.value}" for p in elastic.rdzv_conf)))
        if elastic.standalone:
            out.append(env(c.PET_STANDALONE, "1"))  # torchrun parses the switch with int()
        if not ctx.reference_env:
            out.append(env(TORCH_DISABLE_SHARE_RDZV_TCP_STORE, "1"))
            out.append(env_from_field(c.PET_LOCAL_ADDR, "status.podIP"))
        return out

    def init_containers(self, job: PyTorchJob, rtype: str, name: str, image: str, max_tries: int) -> list[dict[str, Any]]:
        if rtype != WORKER or MASTER not in job.spec.pytorch_replica_specs:
            return []
        master = f"{name}-master-0"
        # An address that is already an IP literal (the embedded cluster's kubelet rewrites
        # Service names to addresses) has nothing to wait for; nslookup may even fail on it.
        script = (
            f'case "{master}" in *[!0-9.:]*) ;; *) exit 0 ;; esac; '
            f"err=1; for i in $(seq {max_tries}); do "
            f"if nslookup {master}; then err=0 && break; fi; "
            "echo waiting for master; sleep 2; done; exit $err"
        )
        return [
            {
                "name": INIT_CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                    "requests": {"cpu": "50m", "memory": "10Mi"},
                },
                "command": ["sh", "-c", script],
            }
        ]

    def is_retryable(self, exit_code: int) -> bool:
        return exit_code >= 128

    def permanent_failure(self, name: str, rtype: str) -> ConditionChange:
        return self.change(c.CONDITION_FAILED, f'job "{name}" is failing because "{rtype}" replica(s) failed.', "Warning")

    def evaluate(self, facts: JobFacts[PyTorchJob]) -> list[ConditionChange]:
        job, name, ns = facts.job, facts.name, facts.namespace
        specs = job.spec.pytorch_replica_specs
        has_master = MASTER in specs
        out: list[ConditionChange] = []
        running = self.change(c.CONDITION_RUNNING, f"PyTorchJob {name} is running.", None)
        # The reference words success differently with and without a Master (spec §5.4).
        succeeded = self.change(
            c.CONDITION_SUCCEEDED,
            f"PyTorchJob {name} is successfully completed." if has_master else f"PyTorchJob {ns}/{name} successfully completed.",
        )
        for rtype in self.ordered_types(job):
            counts, replicas = facts.counts[rtype], specs[rtype].replicas or 0
            if rtype == MASTER:
                if counts.active > 0:
                    out.append(running)
                if replicas - counts.succeeded == 0:
                    return out + [succeeded]  # a Master's success decides (spec §5.4)
            elif rtype == WORKER and not has_master:
                if (counts.succeeded > 0) if is_elastic(job) else (replicas - counts.succeeded == 0):
                    return out + [succeeded]
                if counts.active > 0:
                    out.append(self.change(c.CONDITION_RUNNING, f"PyTorchJob {ns}/{name} is running.", None))
            if counts.failed > 0 and replicas > counts.succeeded + counts.active:
                message = f"PyTorchJob {name} is {{}} because {counts.failed} {rtype} replica(s) failed."
                if specs[rtype].restart_policy != "Never":
                    out.append(self.change(c.CONDITION_RESTARTING, message.format("restarting"), "Warning"))
                else:
                    out.append(self.change(c.CONDITION_FAILED, message.format("failed")))
        return out

    def disruption_budget_minimum(self, job: PyTorchJob) -> Optional[int]:
        """An elastic job's Workers may be drained down to minReplicas, never below at once."""
        elastic = job.spec.elastic_policy
        return None if elastic is None else elastic.min_replicas

    def scale_selector(self, job_name: str, rtype: str) -> str:
        labels = self.base_labels(job_name)
        labels[c.LABEL_REPLICA_TYPE] = rtype.lower()
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
