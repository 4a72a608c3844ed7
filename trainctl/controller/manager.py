"""The manager: informers feed a work queue, workers reconcile, plans become API calls.

This is the imperative shell around the pure core (docs/architecture.md). For each job key
a worker takes from the queue it:

1. reads the job and its children from the informer caches (never from the API);
2. waits, if the cache has not yet caught up with this controller's own writes
   (expectations), because a stale cache is how duplicate pods are born;
3. calls ``reconcile(job, observed, now)`` and applies the Plan: children created in
   parallel with bounded concurrency (the reference creates them one by one, issue #2361),
   in slow-start batches that stop at the first failing one (the Job controller's
   slowStartBatch), updates, deletes, then the status through the ``status`` subresource
   (only when the plan has one), then the plan's Events and metrics, which therefore count
   only transitions that were persisted; each child created or deleted gets its Event once
   the call has answered (``SuccessfulCreatePod`` …), bounded by the recorder's correlator
   (kube/events.py); a create answered AlreadyExists is a success only when the object is
   the job's own, else a failure (a deleted job's pod of the same name, still terminating);
   a standing problem with the job's settings (``Plan.problems``, a bad annotation) becomes
   a Warning Event when it appears, not in every pass;
4. re-queues with per-job exponential back-off on any error, or after ``requeue_after``.

Within ``status_batch_period`` of a job's last status write, a new status that only moves
replica counts is held back and written when the period is over, with whatever else changed
meanwhile (the Job controller's syncJobBatchPeriod): status writes do not grow with pod
churn, while transitions (conditions, Events) are still written at once.

Leader election, when on, gates the workers only: caches warm up on every replica so a new
leader starts with a synced cache.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.controller.metrics import ControllerMetrics
from trainctl.controller.options import ManagerOptions
from trainctl.controller.reconcile import nodes, oom
from trainctl.controller.reconcile import plan as plans
from trainctl.controller.reconcile.plan import Event, ObjectRef, Observed, Plan
from trainctl.kube import resources as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.expectations import ChildKey, Expectations
from trainctl.kube.informer import Informer
from trainctl.kube.leader import LeaderElector
from trainctl.kube.workqueue import WorkQueue

log = logging.getLogger("trainctl.controller")

JobKey = tuple[str, str, str]  # (kind, namespace, name)
Reconciler = Callable[[dict[str, Any], Observed, datetime], Plan]

CHILD_SELECTOR = c.LABEL_OPERATOR_NAME  # every pod and service a job owns carries it
GANG_SCHEDULERS = {"volcano": r.VOLCANO_PODGROUPS}


def component_of(kind: str) -> str:
    """The Event component of a job kind: its controller's name."""
    found = kinds.find(kind)
    return found.controller_name if found is not None else "trainctl"


def framework_of(kind: str) -> str:
    """The ``framework`` label of a job kind's metrics."""
    found = kinds.find(kind)
    return found.framework if found is not None else ""


class GangSchedulerMissing(Exception):
    """The PodGroup CRD the configured gang scheduler needs is not installed."""


class ApplyError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))
        self.errors = errors


def pod_group_resource(gang_scheduler: Optional[str]) -> Optional[r.Resource]:
    """Volcano for ``volcano`` (any case), scheduler-plugins for any other name, None when off."""
    if not gang_scheduler:
        return None
    return GANG_SCHEDULERS.get(gang_scheduler.lower(), r.SCHEDULER_PLUGINS_PODGROUPS)


def default_reconciler(options: ManagerOptions) -> Reconciler:
    """The reconcile core with the options' ReconcileConfig."""
    from trainctl.controller.reconcile import reconcile

    def run(job: dict[str, Any], observed: Observed, now: datetime) -> Plan:
        return reconcile(job, observed, now, options.reconcile)

    return run


def _without_counts(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k != "replicaStatuses"}


def _job_name(key: JobKey) -> str:
    return f"{key[1]}/{key[2]}"


class Manager:
    def __init__(
        self,
        client: KubeClient,
        options: ManagerOptions,
        *,
        reconciler: Optional[Reconciler] = None,
        metrics: Optional[ControllerMetrics] = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.client = client
        self.options = options
        self.metrics = metrics or ControllerMetrics()
        self.reconciler = reconciler or default_reconciler(options)
        self.clock = clock
        self.queue: WorkQueue[JobKey] = WorkQueue(on_depth=self.metrics.queue_depth.set)
        self.expectations = Expectations()
        self.events = EventRecorder(client)
        self._pool = ThreadPoolExecutor(max_workers=max(1, options.create_concurrency), thread_name_prefix="apply")
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self.lost_leadership = False
        self.reconciles = 0
        # job -> time.monotonic() of its last status write, for the status batch period
        self._status_written: dict[JobKey, float] = {}
        # (job, child) -> the last refusal recorded as an Event, so retries do not repeat it
        self._refusals: dict[tuple[JobKey, ChildKey], str] = {}
        # job -> its standing problems (Plan.problems) already recorded as Events
        self._problems: dict[JobKey, frozenset[Event]] = {}
        self._once_lock = threading.Lock()
        # The most memory any Node offers a pod, recomputed after a Node came, went or changed it.
        self._node_memory: Optional[int] = None
        self._node_memory_stale = True
        self._node_memory_lock = threading.Lock()

        ns = options.namespace
        self.job_informers = {
            res.kind: Informer(client, res, namespace=ns, watch_timeout=options.watch_timeout) for res in r.job_resources()
        }
        owned = self._owned_by_a_job
        self.child_informers = {
            "Pod": Informer(client, r.PODS, namespace=ns, label_selector=CHILD_SELECTOR, keep=owned, watch_timeout=options.watch_timeout),
            "Service": Informer(client, r.SERVICES, namespace=ns, label_selector=CHILD_SELECTOR, keep=owned, watch_timeout=options.watch_timeout),
            # The reference does not label HPAs, so they are selected by owner instead.
            "HorizontalPodAutoscaler": Informer(client, r.HPAS, namespace=ns, keep=owned, watch_timeout=options.watch_timeout),
        }
        self.pod_group_resource = pod_group_resource(options.gang_scheduler)
        if self.pod_group_resource is not None:
            self.child_informers["PodGroup"] = Informer(
                client, self.pod_group_resource, namespace=ns, keep=owned, watch_timeout=options.watch_timeout
            )
        # Nodes, for the lost-node rule (trainctl extension): cluster-scoped, all of them.
        self.node_informer = Informer(client, r.NODES, watch_timeout=options.watch_timeout)
        self.node_informer.add_handler(self._on_node_event)
        for informer in self.job_informers.values():
            informer.add_handler(self._on_job_event)
        for informer in self.child_informers.values():
            informer.add_handler(self._on_child_event)

        self.elector: Optional[LeaderElector] = None
        if options.leader_elect:
            self.elector = LeaderElector(
                client,
                options.lease_namespace or "default",
                options.lease_name,
                options.identity,
                lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
                on_lost=self._on_lost_lease,
            )

    # --- wiring -----------------------------------------------------------------------------
    @staticmethod
    def _owned_by_a_job(obj: dict[str, Any]) -> bool:
        owner = r.controller_owner(obj)
        return owner is not None and kinds.find(owner.get("kind")) is not None

    def _on_job_event(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        obj = new or old
        assert obj is not None
        meta = obj["metadata"]
        key: JobKey = (obj.get("kind", ""), meta.get("namespace") or "", meta["name"])
        if event_type == "DELETED":
            self.expectations.forget(key)
            self._status_written.pop(key, None)
            with self._once_lock:
                for refusal in [k for k in self._refusals if k[0] == key]:
                    del self._refusals[refusal]
                self._problems.pop(key, None)
        self.queue.add(key)

    def _on_child_event(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        obj = new or old
        assert obj is not None
        owner = r.controller_owner(obj)
        if owner is None:
            return
        key: JobKey = (owner.get("kind", ""), obj["metadata"].get("namespace") or "", owner.get("name", ""))
        if event_type == "DELETED":
            self.queue.add(key)
        else:
            self.queue.add_after(key, self.options.child_update_batch_period)

    def _on_node_event(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        """A node that became not Ready (or Ready again): reconcile the jobs with pods on it."""
        if new is None or old is None or oom.node_memory(new) != oom.node_memory(old):
            self._node_memory_stale = True  # set after the store changed: the next look sees the change
        if new is not None and old is not None and nodes.not_ready(new) == nodes.not_ready(old):
            return  # a heartbeat or a label: nothing the lost-node rule looks at
        name = (new or old or {}).get("metadata", {}).get("name")
        for pod in self.child_informers["Pod"].store.list():
            if (pod.get("spec") or {}).get("nodeName") == name:
                self._on_child_event("DELETED", pod, None)  # at once, not batched

    def _nodes_of(self, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for pod in pods:
            name = (pod.get("spec") or {}).get("nodeName")
            if name and name not in out:
                node = self.node_informer.store.get("", name)
                if node is not None:
                    out[name] = node
        return out

    def _largest_node_memory(self) -> Optional[int]:
        with self._node_memory_lock:
            if self._node_memory_stale:
                self._node_memory_stale = False
                self._node_memory = oom.largest_node_memory(self.node_informer.store.list())
            return self._node_memory

    def _lookup(self, child: ChildKey) -> Optional[dict[str, Any]]:
        kind, namespace, name = child
        informer = self.child_informers.get(kind)
        return informer.store.get(namespace, name) if informer else None

    # --- lifecycle --------------------------------------------------------------------------
    def check_prerequisites(self) -> None:
        """Fail fast on what cannot fix itself; warn about CRDs that may still be installed.

        Raises :class:`ApiError` when the API server cannot be used at all (unreachable,
        unauthorized), :class:`GangSchedulerMissing` when the PodGroup CRD is absent.
        """
        for res in r.job_resources():
            if not self.client.group_version_served(res.group, res.version):
                log.warning(
                    "CRD not installed yet; its jobs are picked up once it is",
                    extra={"crd": f"{res.plural}.{res.group}", "install": "kubectl apply -f manifests/crds/"},
                )
        pod_groups = self.pod_group_resource
        if pod_groups is not None and not self.client.group_version_served(pod_groups.group, pod_groups.version):
            raise GangSchedulerMissing(
                f"gang scheduler {self.options.gang_scheduler!r} needs the PodGroup CRD "
                f"({pod_groups.plural}.{pod_groups.group}/{pod_groups.version}), which is not installed"
            )

    def informers(self) -> list[Informer]:
        return [*self.job_informers.values(), *self.child_informers.values(), self.node_informer]

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers())

    def healthy(self) -> bool:
        return not self._stop.is_set() or any(t.is_alive() for t in self._workers)

    def start(self) -> None:
        """Start informers, then (once leader, if electing) the workers. Does not block."""
        for informer in self.informers():
            informer.start()
        threading.Thread(target=self._start_workers, name="manager", daemon=True).start()

    def _start_workers(self) -> None:
        while not self.synced():
            if self._stop.wait(0.05):
                return
        if self.elector is not None:
            self.elector.start()
            while not self.elector.is_leader.wait(0.1):
                if self._stop.is_set():
                    return
            self.metrics.leader.set(1)
        for i in range(max(1, self.options.workers)):
            thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            thread.start()
            self._workers.append(thread)
        log.info("workers started", extra={"workers": len(self._workers)})

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking work, let in-flight reconciles finish, release the lease."""
        self._stop.set()
        self.queue.shut_down()
        deadline = time.monotonic() + timeout
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.elector is not None:
            self.elector.stop()
            self.elector.release()
            self.metrics.leader.set(0)
        for informer in self.informers():
            informer.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (safe from a signal handler); :meth:`stop` does the work."""
        self._stop.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._stop.wait(timeout)

    def _on_lost_lease(self) -> None:
        self.lost_leadership = True
        self.metrics.leader.set(0)
        self._stop.set()
        self.queue.shut_down()

    # --- the worker loop --------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            started = time.perf_counter()
            result = "ok"
            try:
                requeue_after = self.reconcile_key(key)
                self.queue.forget(key)
                if requeue_after is not None:
                    self.queue.add_after(key, requeue_after)
            except Exception as exc:
                result = "error"
                delay = self.queue.add_rate_limited(key)
                level = logging.WARNING if isinstance(exc, (ApiError, ApplyError)) else logging.ERROR
                log.log(
                    level,
                    "reconcile failed, will retry",
                    exc_info=level == logging.ERROR,
                    extra={"job": _job_name(key), "kind": key[0], "error": str(exc), "retry_in": round(delay, 3)},
                )
            finally:
                self.queue.done(key)
                framework = framework_of(key[0])
                self.metrics.reconcile_duration.labels(framework=framework, result=result).observe(time.perf_counter() - started)

    def reconcile_key(self, key: JobKey) -> Optional[float]:
        """Reconcile one job; returns the requeue delay the plan asked for."""
        kind, namespace, name = key
        informer = self.job_informers.get(kind)
        job = informer.store.get(namespace, name) if informer else None
        if job is None:
            self.expectations.forget(key)
            self._status_written.pop(key, None)
            with self._once_lock:
                self._problems.pop(key, None)
            return None
        if job["metadata"].get("deletionTimestamp"):
            return None
        if not self.expectations.satisfied(key, self._lookup):
            # The watch event that catches the cache up re-queues the job; the requeue is
            # for an event that never comes (the expectation then has lapsed).
            log.debug("waiting for the cache to show our writes", extra={"job": _job_name(key)})
            return self.expectations.expires_in(key) + 0.01
        uid = job["metadata"].get("uid", "")
        pods = self.child_informers["Pod"].store.owned_by(uid)
        observed = Observed(
            pods=pods,
            services=self.child_informers["Service"].store.owned_by(uid),
            hpa=next(iter(self.child_informers["HorizontalPodAutoscaler"].store.owned_by(uid)), None),
            pod_group=next(iter(self.child_informers["PodGroup"].store.owned_by(uid)), None)
            if "PodGroup" in self.child_informers
            else None,
            nodes=self._nodes_of(pods),
            node_memory=self._largest_node_memory(),
        )
        now = self.clock()
        plan = self.reconciler(copy.deepcopy(job), observed, now)
        self.reconciles += 1
        self._record_problems(key, job, plan.problems, now)
        if not plan.empty:
            self.apply(key, job, plan, now)
        return plan.requeue_after

    # --- applying a plan --------------------------------------------------------------------
    def apply(self, key: JobKey, job: dict[str, Any], plan: Plan, now: datetime) -> None:
        errors: list[str] = []
        created = self._create_all(key, job, plan.creates, errors)
        for obj in plan.updates:
            try:
                self.client.replace(r.resource_of(obj), obj)
            except (ApiError, KeyError) as exc:
                errors.append(f"update {obj.get('kind')} {obj['metadata'].get('name')}: {exc}")
        deleted = self._delete_all(key, job, plan.deletes, errors)

        status_written = plan.status is None
        held = self._status_hold(key, job, plan)
        if held > 0:
            # Nothing rides on this status (no transition, Event or counter): a later
            # reconcile writes it, with whatever else changed by then.
            self.queue.add_after(key, held)
        elif plan.status is not None:
            try:
                status_written = self._write_status(job, plan.status) is not None
            except ApiError as exc:
                errors.append(f"status: {exc}")
        job_deleted = False
        if plan.delete_job and status_written:
            try:
                job_deleted = self.client.delete(
                    r.resource_of(job), key[1], key[2], uid=job["metadata"].get("uid")
                )
            except ApiError as exc:
                errors.append(f"delete job: {exc}")
        if status_written:
            framework = framework_of(job.get("kind", ""))
            for name in plan.metrics:
                if name == "deleted" and not job_deleted:
                    continue
                self.metrics.count_job(name, key[1], framework)
            component = component_of(job.get("kind", ""))
            for event in plan.events:
                self.events.record(job, event, component, now)
        log.info(
            "applied plan",
            extra={
                "job": _job_name(key),
                "kind": key[0],
                "creates": created,
                "updates": len(plan.updates),
                "deletes": deleted,
                "status": plan.status is not None and status_written,
                "status_held": round(held, 3),
                "events": ",".join(e.reason for e in plan.events) if status_written else "",
                "job_deleted": job_deleted,
                "requeue_after": plan.requeue_after,
                "errors": len(errors),
            },
        )
        if errors:
            raise ApplyError(errors)

    def _record_problems(self, key: JobKey, job: dict[str, Any], problems: list[Event], now: datetime) -> None:
        """Record each standing problem with the job's settings once, when it appears (the
        core states it in every pass); one that went away and comes back is recorded again."""
        current = frozenset(problems)
        with self._once_lock:
            before = self._problems.pop(key, frozenset())
            if current:
                self._problems[key] = current
        component = component_of(job.get("kind", ""))
        for event in problems:
            if event not in before:
                self.events.record(job, event, component, now)

    def _status_hold(self, key: JobKey, job: dict[str, Any], plan: Plan) -> float:
        """Seconds to hold ``plan.status`` back: the rest of the status batch period when the
        new status only moves replica counts (the Job controller's syncJobBatchPeriod, so
        writes do not grow with pod churn); 0 when it must be written now. A transition
        (conditions, start or completion time, restarts), an Event or a counter is never held."""
        written = self._status_written.get(key)
        period = self.options.status_batch_period
        if plan.status is None or written is None or period <= 0 or plan.events or plan.metrics or plan.delete_job:
            return 0.0
        if _without_counts(plan.status) != _without_counts(job.get("status") or {}):
            return 0.0
        return max(0.0, written + period - time.monotonic())

    def _create_all(self, key: JobKey, job: dict[str, Any], objects: list[dict[str, Any]], errors: list[str]) -> int:
        if not objects:
            return 0
        children: list[ChildKey] = [
            (o.get("kind", ""), o["metadata"].get("namespace") or key[1], o["metadata"]["name"]) for o in objects
        ]
        uid = job["metadata"].get("uid", "")
        self.expectations.expect_creates(key, uid, [k for k in children if k[0] in self.child_informers])

        def create(item: tuple[ChildKey, dict[str, Any]]) -> Optional[str]:
            child, obj = item
            try:
                resource = r.resource_of(obj)
                if not self.client.create(resource, obj).existed:
                    announced.append((plans.create_events(obj), None))
                    return None
                in_the_way = self._in_the_way(resource, child, uid)
                if in_the_way is None:
                    return None  # our own, from an earlier attempt: the cache shows it soon
                self.expectations.creation_failed(key, child)
                refused.append((child, in_the_way))
                return f"create {child[0]} {child[2]}: {in_the_way}"
            except (ApiError, KeyError) as exc:
                self.expectations.creation_failed(key, child)
                if isinstance(exc, ApiError) and not exc.retryable:
                    refused.append((child, exc.message or exc.reason))
                return f"create {child[0]} {child[2]}: {exc}"

        refused: list[tuple[ChildKey, str]] = []
        announced: list[tuple[Optional[plans.ChildEvents], Optional[str]]] = []

        items = list(zip(children, objects, strict=True))
        # PodGroups and HPAs first and in order (a gang must exist before its pods); pods and
        # services, the bulk of a large job, in parallel.
        serial = [i for i in items if i[0][0] not in ("Pod", "Service")]
        parallel = [i for i in items if i[0][0] in ("Pod", "Service")]
        results = [create(i) for i in serial]
        attempted = len(serial) + self._slow_start(parallel, create, results)
        skipped = parallel[attempted - len(serial):]
        for child, _ in skipped:
            self.expectations.creation_failed(key, child)
        failures = [e for e in results if e]
        errors.extend(failures)
        if skipped:
            errors.append(f"{len(skipped)} creates not attempted after a failed batch")
        self._record_outcomes(key, job, announced)
        for child, why in refused:
            self._record_refusal(key, child, why)
        return attempted - len(failures)

    def _in_the_way(self, resource: r.Resource, child: ChildKey, uid: str) -> Optional[str]:
        """Why a create answered AlreadyExists failed: the object under that name is not the
        job's own (None when it is). Typically the pod of a deleted job of the same name,
        still terminating: its deletion event re-queues the job (same namespace and name)."""
        existing = self._lookup(child)
        owner = r.controller_owner(existing) if existing is not None else None
        message = f'{resource.plural} "{child[2]}" already exists'
        if existing is None or owner is None:
            return message  # not a child of any job (or not in the cache yet)
        if owner.get("uid") == uid:
            return None
        terminating = ", terminating" if existing["metadata"].get("deletionTimestamp") else ""
        return f'{message}, owned by {owner.get("kind")} {owner.get("name")} with uid {owner.get("uid")}{terminating}'

    def _slow_start(self, items: list[Any], create: Callable[[Any], Optional[str]], results: list[Optional[str]]) -> int:
        """Create in batches of 1, 2, 4 … (at most ``max_create_batch``), in parallel within a
        batch, stopping after the first batch with a failure (the Job controller's
        slowStartBatch): a server that refuses everything gets one request, not thousands.
        Appends each outcome to ``results``; returns how many items were attempted."""
        done, size = 0, 1
        while done < len(items):
            batch = items[done : done + size]
            outcomes = [create(batch[0])] if len(batch) == 1 else list(self._pool.map(create, batch))
            results.extend(outcomes)
            done += len(batch)
            if any(outcomes):
                break
            size = min(size * 2, self.options.max_create_batch)
        return done

    def _record_outcomes(self, key: JobKey, job: dict[str, Any], outcomes: list[tuple[Optional[plans.ChildEvents], Optional[str]]]) -> None:
        """The plan's per-child Events, once the API calls have answered (error None: success)."""
        component, now = component_of(key[0]), self.clock()
        for events, error in outcomes:
            if events is not None:
                event = events.success if error is None else Event(events.failure.type, events.failure.reason, f"{events.failure.message}: {error}")
                self.events.record(job, event, component, now)

    def _record_refusal(self, key: JobKey, child: ChildKey, why: str) -> None:
        """A Warning Event (the reference's ``FailedCreatePod``) when a child cannot be
        created, e.g. an invalid pod template or another object under its name; repeated
        only when the reason changes."""
        message = f"Error creating: {why}"
        with self._once_lock:
            if self._refusals.get((key, child)) == message:
                return
            self._refusals[(key, child)] = message
        informer = self.job_informers.get(key[0])
        job = informer.store.get(key[1], key[2]) if informer else None
        if job is not None:
            event = Event("Warning", f"FailedCreate{child[0]}", message)
            self.events.record(job, event, component_of(key[0]), self.clock())

    def _delete_all(self, key: JobKey, job: dict[str, Any], refs: list[ObjectRef], errors: list[str]) -> int:
        if not refs:
            return 0
        self.expectations.expect_deletes(key, [((ref.kind, ref.namespace, ref.name), ref.uid) for ref in refs])

        announced: list[tuple[Optional[plans.ChildEvents], Optional[str]]] = []

        def delete(ref: ObjectRef) -> Optional[str]:
            try:
                gone = self.client.delete(
                    r.resource_for(ref.api_version, ref.kind),
                    ref.namespace,
                    ref.name,
                    uid=ref.uid,
                    resource_version=ref.resource_version,
                    grace_period_seconds=0 if ref.force else ref.grace_seconds,
                )
                if gone:
                    announced.append((plans.delete_events(ref), None))
                return None
            except (ApiError, KeyError) as exc:
                self.expectations.deletion_failed(key, (ref.kind, ref.namespace, ref.name))
                if isinstance(exc, ApiError) and exc.code != 409:  # 409: stale decision, looked at again
                    announced.append((plans.delete_events(ref), exc.message or exc.reason))
                return f"delete {ref.kind} {ref.name}: {exc}"

        results = [delete(refs[0])] if len(refs) == 1 else list(self._pool.map(delete, refs))
        self._record_outcomes(key, job, announced)
        failures = [e for e in results if e]
        errors.extend(failures)
        return len(refs) - len(failures)

    def _write_status(self, job: dict[str, Any], status: dict[str, Any], attempts: int = 5) -> Optional[dict[str, Any]]:
        """PUT the new status; on a conflict re-read the job and re-apply it. None if the job is gone."""
        resource = r.resource_of(job)
        meta = job["metadata"]
        body = {**job, "status": status}
        for attempt in range(attempts):
            try:
                updated = self.client.replace(resource, body, subresource="status")
            except ApiError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409 or attempt == attempts - 1:
                    raise
                fresh = self.client.get_or_none(resource, meta.get("namespace"), meta["name"])
                if fresh is None or fresh["metadata"].get("uid") != meta.get("uid"):
                    return None
                body = {**fresh, "status": status}
                continue
            key: JobKey = (job.get("kind", ""), meta.get("namespace") or "", meta["name"])
            self._status_written[key] = time.monotonic()
            # Write-through: the next reconcile must see this status even before the watch
            # delivers it, or it would redo the same transition (events, counters).
            informer = self.job_informers.get(job.get("kind", ""))
            if informer is not None:
                updated.setdefault("kind", job.get("kind"))
                updated.setdefault("apiVersion", job.get("apiVersion"))
                informer.store.upsert(updated, only_if_newer=True)
            if attempt > 0:
                # The job changed under us (that was the conflict), and the cache now holds
                # the changed version, so its watch event will look stale: reconcile again.
                self.queue.add(key)
            return updated
        return None
