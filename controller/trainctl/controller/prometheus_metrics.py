"""The controller's Prometheus metrics.

The job counters keep the reference operator's names and labels (``job_namespace``,
``framework``) so existing dashboards keep working; they are driven only by the plan's
``metrics`` list, which the core emits once per persisted transition, so a controller
restart does not count a job twice. The rest describe the controller itself.

Each :class:`ControllerMetrics` owns its registry, so two controllers in one process (as in
the leader-election tests) do not collide.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# plan.metrics name -> counter name suffix (training_operator_jobs_<suffix>_total)
JOB_COUNTERS = {
    "created": "created",
    "succeeded": "successful",
    "failed": "failed",
    "restarted": "restarted",
    "deleted": "deleted",
}


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.jobs = {
            name: Counter(
                f"training_operator_jobs_{suffix}",
                f"Counts number of jobs {suffix}",
                ["job_namespace", "framework"],
                registry=self.registry,
            )
            for name, suffix in JOB_COUNTERS.items()
        }
        self.reconcile_duration = Histogram(
            "trainctl_reconcile_duration_seconds",
            "Time to reconcile one job, from dequeue to the last API write.",
            ["framework", "result"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.queue_depth = Gauge("trainctl_workqueue_depth", "Jobs waiting for a worker.", registry=self.registry)
        self.queue_wait = Histogram(
            "trainctl_workqueue_queue_duration_seconds",
            "How long a job key waited in the work queue before a worker took it.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.longest_queue_wait = Gauge(
            "trainctl_workqueue_longest_wait_seconds", "The longest any job key waited in the work queue since start.",
            registry=self.registry,
        )
        self.api_requests = Counter(
            "trainctl_api_requests",
            "Requests to the Kubernetes API server, by verb and HTTP code ('error' when no answer came).",
            ["verb", "code"],
            registry=self.registry,
        )
        self.leader = Gauge("trainctl_leader", "1 while this replica holds the leader lease.", registry=self.registry)
        self._longest_wait = 0.0

    def count_job(self, name: str, namespace: str, framework: str) -> None:
        counter = self.jobs.get(name)
        if counter is not None:
            counter.labels(job_namespace=namespace, framework=framework).inc()

    def observe_queue_wait(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)
        if seconds > self._longest_wait:
            self._longest_wait = seconds
            self.longest_queue_wait.set(seconds)

    def observe_api(self, verb: str, code: str) -> None:
        self.api_requests.labels(verb=verb, code=code).inc()
