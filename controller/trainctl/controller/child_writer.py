"""Creating, updating and deleting a job's children as a plan says, within bounds.

Creates run in parallel with bounded concurrency (the reference creates them one by one,
issue #2361), in slow-start batches of 1, 2, 4 … that stop at the first batch with a
failure (the Job controller's slowStartBatch), so a server that refuses everything gets one
request, not thousands. PodGroups and HPAs go first and in order: a gang must exist before
its pods. Every create and delete is first recorded as an expectation, so a reconcile never
acts on a cache that has not yet seen this controller's own writes (that is how duplicate
pods are born), and withdrawn when the call fails or is never made.

A create answered AlreadyExists is a success only when the object there is the job's own
(controller ownerReference uid); otherwise it is a failure, typically a deleted job's pod of
the same name, still terminating. A create the server refuses becomes a Warning Event.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

from trainctl.controller import recorder as rec
from trainctl.controller.caches import Caches
from trainctl.controller.keys import JobKey
from trainctl.controller.reconcile import plan as plans
from trainctl.controller.reconcile.plan import ObjectRef
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.expectations import ChildKey, Expectations

Item = TypeVar("Item")


@dataclass(frozen=True)
class Done:
    """What a set of calls came to: how many did what the plan asked, a line per failure."""

    succeeded: int = 0
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """One create or delete, as the API server answered it."""

    error: Optional[str] = None  # None: the call did what the plan asked
    outcome: Optional[rec.ChildOutcome] = None  # the plan's Event about it, to record
    refusal: Optional[rec.Refusal] = None  # a create the server will not make


class ChildApplier:
    """Applies a plan's creates, updates and deletes of children; records their Events."""

    def __init__(
        self,
        client: KubeClient,
        caches: Caches,
        expectations: Expectations,
        recorder: rec.JobRecorder,
        *,
        concurrency: int,
        max_batch: int,
    ) -> None:
        self.client = client
        self.caches = caches
        self.expectations = expectations
        self.recorder = recorder
        self.max_batch = max_batch
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="apply")

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- creates ----------------------------------------------------------------------------
    def create_all(self, key: JobKey, job: dict[str, Any], objects: list[dict[str, Any]]) -> Done:
        if not objects:
            return Done()
        children: list[ChildKey] = [
            (o.get("kind", ""), o["metadata"].get("namespace") or key.namespace, o["metadata"]["name"]) for o in objects
        ]
        uid = job["metadata"].get("uid", "")
        self.expectations.expect_creates(key, uid, [k for k in children if k[0] in self.caches.child_informers])

        def create(item: tuple[ChildKey, dict[str, Any]]) -> Answer:
            return self._create(key, uid, *item)

        items = list(zip(children, objects, strict=True))
        # PodGroups and HPAs first and in order (a gang must exist before its pods); pods and
        # services, the bulk of a large job, in parallel.
        serial = [i for i in items if i[0][0] not in ("Pod", "Service")]
        parallel = [i for i in items if i[0][0] in ("Pod", "Service")]
        answers = [create(i) for i in serial] + self._slow_start(parallel, create)
        skipped = parallel[len(answers) - len(serial):]
        for child, _ in skipped:
            self.expectations.creation_failed(key, child)
        self.recorder.record_outcomes(key, job, [a.outcome for a in answers if a.outcome is not None])
        for answer in answers:
            if answer.refusal is not None:
                self.recorder.record_refusal(key, answer.refusal, job=self.caches.job(key))
        failures = tuple(a.error for a in answers if a.error)
        not_attempted = (f"{len(skipped)} creates not attempted after a failed batch",) if skipped else ()
        return Done(succeeded=len(answers) - len(failures), errors=failures + not_attempted)

    def _create(self, key: JobKey, uid: str, child: ChildKey, obj: dict[str, Any]) -> Answer:
        try:
            resource = r.resource_of(obj)
            if not self.client.create(resource, obj).existed:
                events = plans.create_events(obj)
                return Answer(outcome=rec.ChildOutcome(events) if events is not None else None)
            in_the_way = self._in_the_way(resource, child, uid)
            if in_the_way is None:
                return Answer()  # our own, from an earlier attempt: the cache shows it soon
            self.expectations.creation_failed(key, child)
            return Answer(error=f"create {child[0]} {child[2]}: {in_the_way}", refusal=rec.Refusal(child, in_the_way))
        except (ApiError, KeyError) as exc:
            self.expectations.creation_failed(key, child)
            error = f"create {child[0]} {child[2]}: {exc}"
            if isinstance(exc, ApiError) and not exc.retryable:
                return Answer(error=error, refusal=rec.Refusal(child, exc.message or exc.reason))
            return Answer(error=error)

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

    def _slow_start(self, items: list[Item], create: Callable[[Item], Answer]) -> list[Answer]:
        """Create in batches of 1, 2, 4 … (at most ``max_batch``), in parallel within a
        batch, stopping after the first batch with a failure (the Job controller's
        slowStartBatch). Returns the answers of the items attempted, in order."""
        answers: list[Answer] = []
        size = 1
        while len(answers) < len(items):
            batch = items[len(answers) : len(answers) + size]
            outcomes = self._map(create, batch)
            answers.extend(outcomes)
            if any(a.error for a in outcomes):
                break
            size = min(size * 2, self.max_batch)
        return answers

    def _map(self, call: Callable[[Item], Answer], items: list[Item]) -> list[Answer]:
        """``call`` on each item, in parallel on the pool unless there is only one."""
        return [call(items[0])] if len(items) == 1 else list(self._pool.map(call, items))

    # --- updates and deletes ----------------------------------------------------------------
    def update_all(self, objects: list[dict[str, Any]]) -> Done:
        """PUT each object (a PodGroup or HPA the plan changed), one after the other."""
        errors: list[str] = []
        for obj in objects:
            try:
                self.client.replace(r.resource_of(obj), obj)
            except (ApiError, KeyError) as exc:
                errors.append(f"update {obj.get('kind')} {obj['metadata'].get('name')}: {exc}")
        return Done(succeeded=len(objects) - len(errors), errors=tuple(errors))

    def delete_all(self, key: JobKey, job: dict[str, Any], refs: list[ObjectRef]) -> Done:
        if not refs:
            return Done()
        self.expectations.expect_deletes(key, [((ref.kind, ref.namespace, ref.name), ref.uid) for ref in refs])
        answers = self._map(lambda ref: self._delete(key, ref), refs)
        self.recorder.record_outcomes(key, job, [a.outcome for a in answers if a.outcome is not None])
        failures = tuple(a.error for a in answers if a.error)
        return Done(succeeded=len(refs) - len(failures), errors=failures)

    def _delete(self, key: JobKey, ref: ObjectRef) -> Answer:
        events = plans.delete_events(ref)
        try:
            gone = self.client.delete(
                r.resource_for(ref.api_version, ref.kind),
                ref.namespace,
                ref.name,
                uid=ref.uid,
                resource_version=ref.resource_version,
                grace_period_seconds=0 if ref.force else ref.grace_seconds,
            )
        except (ApiError, KeyError) as exc:
            self.expectations.deletion_failed(key, (ref.kind, ref.namespace, ref.name))
            error = f"delete {ref.kind} {ref.name}: {exc}"
            if events is not None and isinstance(exc, ApiError) and exc.code != 409:  # 409: stale decision, looked at again
                return Answer(error=error, outcome=rec.ChildOutcome(events, exc.message or exc.reason))
            return Answer(error=error)
        return Answer(outcome=rec.ChildOutcome(events) if gone and events is not None else None)
