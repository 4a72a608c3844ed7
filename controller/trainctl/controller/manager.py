"""The manager: informers feed a work queue, workers reconcile, plans become API calls.

This is the imperative shell around the pure core (docs/architecture.md), composed of
parts that each own one responsibility:

- ``caches``: the informers on jobs, their children and Nodes, and what the core is told
  about one job (``Observed``);
- ``handlers``: which watch events enqueue which job keys;
- ``plan_applier``: a Plan as API calls, through ``children`` (creates, updates and deletes
  with bounded concurrency, slow start and expectations), ``status_writer`` (the
  ``status`` subresource, batched, retried on conflict) and ``recorder`` (the plan's
  Events and counters, each once).

For each job key a worker takes from the queue, the manager reads the job from the cache
(never from the API); waits, if the cache has not yet caught up with this controller's own
writes (expectations), because a stale cache is how duplicate pods are born; calls
``reconcile(job, observed, now)`` and applies the Plan; and re-queues the job with per-job
exponential back-off on any error, or after the plan's ``requeue_after``.

Leader election, when on, gates the workers only: caches warm up on every replica so a new
leader starts with a synced cache.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.controller.caches import Caches
from trainctl.controller.child_writer import ChildApplier
from trainctl.controller.handlers import EventHandlers
from trainctl.controller.hang_observer import ProgressObserver
from trainctl.controller.keys import JobKey
from trainctl.controller.options import ManagerOptions
from trainctl.controller.plan_applier import ApplyError, PlanApplier
from trainctl.controller.prometheus_metrics import ControllerMetrics
from trainctl.controller.reconcile.plan import Observed, Plan
from trainctl.controller.recorder import JobRecorder
from trainctl.controller.status_writer import StatusWriter
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.expectations import Expectations
from trainctl.kube.leader import LeaderElector
from trainctl.kube.workqueue import WorkQueue

log = logging.getLogger("trainctl.controller")

Reconciler = Callable[[dict[str, Any], Observed, datetime], Plan]


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
        self.queue: WorkQueue[JobKey] = WorkQueue(on_depth=self.metrics.queue_depth.set, on_wait=self.metrics.observe_queue_wait)
        self.expectations = Expectations()
        self.events = EventRecorder(client)
        self.recorder = JobRecorder(self.events, self.metrics, clock)
        self.caches = Caches(client, options)
        self.status = StatusWriter(client, self.caches, self.queue, batch_period=options.status_batch_period)
        self.children = ChildApplier(
            client,
            self.caches,
            self.expectations,
            self.recorder,
            concurrency=options.create_concurrency,
            max_batch=options.max_create_batch,
        )
        self.applier = PlanApplier(client, children=self.children, status=self.status, recorder=self.recorder)
        self.progress = ProgressObserver(client, self.caches, self.queue)
        EventHandlers(
            self.caches,
            self.queue,
            child_update_batch_period=options.child_update_batch_period,
            on_job_gone=self._forget,
        ).register()
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self.lost_leadership = False
        self.reconciles = 0
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
        self.progress.start()
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
        self.progress.stop()
        if self.elector is not None:
            self.elector.stop()
            self.elector.release()
            self.metrics.leader.set(0)
        self.caches.stop()
        self.children.shutdown()

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
                duration = time.perf_counter() - started
                self.metrics.reconcile_duration.labels(framework=key.framework, result=result).observe(duration)

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
        observed.progress = self.progress.progress(observed.pods)
        now = self.clock()
        plan = self.reconciler(copy.deepcopy(job), observed, now)
        self.reconciles += 1
        self.recorder.record_problems(key, job, plan.problems, now)
        if not plan.empty:
            self.applier.apply(key, job, plan, now)
        return plan.requeue_after

    def apply(self, key: tuple[str, str, str], job: dict[str, Any], plan: Plan, now: datetime) -> None:
        """Apply ``plan`` to the job under ``key`` (kind, namespace, name)."""
        self.applier.apply(JobKey(*key), job, plan, now)

    def _forget(self, key: JobKey) -> None:
        """The job is gone: drop what the shell remembers about it."""
        self.expectations.forget(key)
        self.status.forget(key)
        self.recorder.forget(key)
