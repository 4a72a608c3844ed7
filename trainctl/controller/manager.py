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

from trainctl.controller.caches import Caches
from trainctl.controller.handlers import EventHandlers
from trainctl.controller.keys import JobKey
from trainctl.controller.metrics import ControllerMetrics
from trainctl.controller.options import ManagerOptions
from trainctl.controller.reconcile import plan as plans
from trainctl.controller.reconcile.plan import ObjectRef, Observed, Plan
from trainctl.controller.recorder import ChildOutcome, JobRecorder, Refusal
from trainctl.controller.status_writer import StatusWriter
from trainctl.kube import resources as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.expectations import ChildKey, Expectations
from trainctl.kube.leader import LeaderElector
from trainctl.kube.workqueue import WorkQueue

log = logging.getLogger("trainctl.controller")

Reconciler = Callable[[dict[str, Any], Observed, datetime], Plan]


class ApplyError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))
        self.errors = errors


def default_reconciler(options: ManagerOptions) -> Reconciler:
    """The reconcile core with the options' ReconcileConfig."""
    from trainctl.controller.reconcile import reconcile

    def run(job: dict[str, Any], observed: Observed, now: datetime) -> Plan:
        return reconcile(job, observed, now, options.reconcile)

    return run


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
        self.recorder = JobRecorder(self.events, self.metrics, clock)
        self.caches = Caches(client, options)
        self.status = StatusWriter(client, self.caches, self.queue, batch_period=options.status_batch_period)
        EventHandlers(
            self.caches,
            self.queue,
            child_update_batch_period=options.child_update_batch_period,
            on_job_gone=self._forget,
        ).register()

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

    def _forget(self, key: JobKey) -> None:
        """The job is gone: drop what the shell remembers about it."""
        self.expectations.forget(key)
        self.status.forget(key)
        self.recorder.forget(key)

    # --- lifecycle --------------------------------------------------------------------------
    def check_prerequisites(self) -> None:
        """Fail fast on what cannot fix itself (see :meth:`Caches.check_prerequisites`)."""
        self.caches.check_prerequisites()

    def synced(self) -> bool:
        return self.caches.synced()

    def healthy(self) -> bool:
        return not self._stop.is_set() or any(t.is_alive() for t in self._workers)

    def start(self) -> None:
        """Start informers, then (once leader, if electing) the workers. Does not block."""
        self.caches.start()
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
        self.caches.stop()
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
                    extra={"job": key.namespaced_name, "kind": key.kind, "error": str(exc), "retry_in": round(delay, 3)},
                )
            finally:
                self.queue.done(key)
                framework = key.framework
                self.metrics.reconcile_duration.labels(framework=framework, result=result).observe(time.perf_counter() - started)

    def reconcile_key(self, key: JobKey) -> Optional[float]:
        """Reconcile one job; returns the requeue delay the plan asked for."""
        job = self.caches.job(key)
        if job is None:
            self._forget(key)
            return None
        if job["metadata"].get("deletionTimestamp"):
            return None
        if not self.expectations.satisfied(key, self.caches.lookup):
            # The watch event that catches the cache up re-queues the job; the requeue is
            # for an event that never comes (the expectation then has lapsed).
            log.debug("waiting for the cache to show our writes", extra={"job": key.namespaced_name})
            return self.expectations.expires_in(key) + 0.01
        observed = self.caches.observed(job)
        now = self.clock()
        plan = self.reconciler(copy.deepcopy(job), observed, now)
        self.reconciles += 1
        self.recorder.record_problems(key, job, plan.problems, now)
        if not plan.empty:
            self.apply(key, job, plan, now)
        return plan.requeue_after

    # --- applying a plan --------------------------------------------------------------------
    def apply(self, job_key: tuple[str, str, str], job: dict[str, Any], plan: Plan, now: datetime) -> None:
        key = JobKey(*job_key)
        errors: list[str] = []
        created = self._create_all(key, job, plan.creates, errors)
        for obj in plan.updates:
            try:
                self.client.replace(r.resource_of(obj), obj)
            except (ApiError, KeyError) as exc:
                errors.append(f"update {obj.get('kind')} {obj['metadata'].get('name')}: {exc}")
        deleted = self._delete_all(key, job, plan.deletes, errors)

        status = self.status.apply(key, job, plan)
        if status.error:
            errors.append(status.error)
        status_written, held = status.persisted, status.held
        job_deleted = False
        if plan.delete_job and status_written:
            try:
                job_deleted = self.client.delete(
                    r.resource_of(job), key.namespace, key.name, uid=job["metadata"].get("uid")
                )
            except ApiError as exc:
                errors.append(f"delete job: {exc}")
        if status_written:
            self.recorder.record_plan(key, job, plan, job_deleted=job_deleted, now=now)
        log.info(
            "applied plan",
            extra={
                "job": key.namespaced_name,
                "kind": key.kind,
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

    def _create_all(self, key: JobKey, job: dict[str, Any], objects: list[dict[str, Any]], errors: list[str]) -> int:
        if not objects:
            return 0
        children: list[ChildKey] = [
            (o.get("kind", ""), o["metadata"].get("namespace") or key.namespace, o["metadata"]["name"]) for o in objects
        ]
        uid = job["metadata"].get("uid", "")
        self.expectations.expect_creates(key, uid, [k for k in children if k[0] in self.caches.child_informers])

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
        self.recorder.record_outcomes(key, job, [ChildOutcome(e, error) for e, error in announced if e is not None])
        for child, why in refused:
            self.recorder.record_refusal(key, Refusal(child, why), job=self.caches.job(key))
        return attempted - len(failures)

    def _in_the_way(self, resource: r.Resource, child: ChildKey, uid: str) -> Optional[str]:
        """Why a create answered AlreadyExists failed: the object under that name is not the
        job's own (None when it is). Typically the pod of a deleted job of the same name,
        still terminating: its deletion event re-queues the job (same namespace and name)."""
        existing = self.caches.lookup(child)
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
        self.recorder.record_outcomes(key, job, [ChildOutcome(e, error) for e, error in announced if e is not None])
        failures = [e for e in results if e]
        errors.extend(failures)
        return len(refs) - len(failures)
