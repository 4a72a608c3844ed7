"""The Event correlator: client-go's aggregation, repeat counting and per-object spam filter."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from trainctl.controller.reconcile import plan as plans
from trainctl.controller.reconcile.plan import Event, ObjectRef
from trainctl.kube.client import ApiError
from trainctl.kube.events import COMBINED_PREFIX, CorrelatorLimits, EventCorrelator, EventRecorder, event_object

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "big", "namespace": "default", "uid": "u1"}}
OTHER = {**JOB, "metadata": {**JOB["metadata"], "name": "other", "uid": "u2"}}


def created(name: str) -> Event:
    return Event("Normal", "SuccessfulCreatePod", f"Created pod: {name}")


def correlate(correlator: EventCorrelator, event: Event, at: datetime = T0, job=JOB):
    return correlator.correlate(event_object(job, event, "pytorchjob-controller", at), at)


def test_reference_messages_for_children():
    pod = {"kind": "Pod", "metadata": {"name": "big-worker-3"}}
    service = {"kind": "Service", "metadata": {"name": "big-worker-3"}}
    assert plans.create_events(pod).success == Event("Normal", "SuccessfulCreatePod", "Created pod: big-worker-3")
    assert plans.create_events(service).success == Event("Normal", "SuccessfulCreateService", "Created service: big-worker-3")
    assert plans.create_events(pod).failure == Event("Warning", "FailedCreatePod", "Error creating")
    deleted = plans.delete_events(ObjectRef("v1", "Pod", "default", "big-worker-3"))
    assert deleted.success == Event("Normal", "SuccessfulDeletePod", "Deleted pod: big-worker-3")
    assert deleted.failure == Event("Warning", "FailedDeletePod", "Error deleting")
    assert plans.create_events({"kind": "PodGroup", "metadata": {"name": "big"}}) is None


def test_a_repeat_patches_count_and_last_timestamp_of_the_same_event():
    correlator = EventCorrelator()
    first = correlate(correlator, created("big-master-0"))
    assert first.patch is None and first.event["count"] == 1
    again = correlate(correlator, created("big-master-0"), T0 + timedelta(seconds=30))
    assert again.event["metadata"]["name"] == first.event["metadata"]["name"]
    assert again.patch == {"count": 2, "lastTimestamp": "2024-05-01T12:00:30Z", "message": "Created pod: big-master-0"}
    assert again.event["firstTimestamp"] == "2024-05-01T12:00:00Z"


def test_from_the_tenth_similar_message_events_are_combined_into_one():
    correlator = EventCorrelator()
    writes = [correlate(correlator, created(f"big-worker-{i}")) for i in range(15)]
    names = {w.event["metadata"]["name"] for w in writes}
    assert len(names) == 10  # nine of their own, then one combined Event
    assert [w.event["message"] for w in writes[:9]] == [f"Created pod: big-worker-{i}" for i in range(9)]
    combined = writes[9:]
    assert combined[0].patch is None and combined[0].event["message"] == COMBINED_PREFIX + "Created pod: big-worker-9"
    assert [w.patch["count"] for w in combined[1:]] == [2, 3, 4, 5, 6]
    assert combined[-1].patch["message"] == COMBINED_PREFIX + "Created pod: big-worker-14"
    # Another reason of the same object is counted on its own.
    assert correlate(correlator, Event("Normal", "SuccessfulCreateService", "Created service: big-worker-0")).event["message"] == (
        "Created service: big-worker-0"
    )


def test_similar_messages_stop_combining_after_ten_quiet_minutes():
    correlator = EventCorrelator()
    for i in range(12):
        correlate(correlator, created(f"big-worker-{i}"))
    later = correlate(correlator, created("big-worker-99"), T0 + timedelta(minutes=10, seconds=1))
    assert later.event["message"] == "Created pod: big-worker-99" and later.patch is None


def test_the_spam_filter_allows_25_writes_per_object_and_reason_then_one_per_five_minutes():
    correlator = EventCorrelator()
    allowed = [correlate(correlator, created(f"big-worker-{i}")) for i in range(1000)]
    assert sum(w is not None for w in allowed) == 25
    # The dropped repeats still count: the next write carries them.
    later = correlate(correlator, created("big-worker-1000"), T0 + timedelta(minutes=5))
    assert later is not None and later.patch["count"] == 1000 - 9 + 1
    assert correlate(correlator, created("big-worker-1001"), T0 + timedelta(minutes=5, seconds=1)) is None
    # The bucket is per object: another job still has its burst.
    assert correlate(correlator, created("other-worker-0"), job=OTHER) is not None


def test_children_events_never_starve_the_jobs_own_condition_event():
    correlator = EventCorrelator()
    for i in range(1000):
        correlate(correlator, created(f"big-worker-{i}"))
    succeeded = Event("Normal", "PyTorchJobSucceeded", "PyTorchJob big is successfully completed.")
    written = correlate(correlator, succeeded)
    assert written is not None and written.event["reason"] == "PyTorchJobSucceeded"


def test_writes_stay_bounded_for_an_hour_of_events_every_second():
    correlator = EventCorrelator()
    writes = sum(
        correlate(correlator, created(f"big-worker-{s % 500}"), T0 + timedelta(seconds=s)) is not None for s in range(3600)
    )
    limits = CorrelatorLimits()
    assert writes <= limits.burst + 3600 / limits.refill_seconds + 1


class FakeClient:
    def __init__(self, missing: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.missing = missing

    def create(self, resource, obj):
        self.calls.append(("create", obj["metadata"]["name"]))

    def patch(self, resource, namespace, name, patch):
        self.calls.append(("patch", name))
        if self.missing:
            raise ApiError(404, "NotFound", "gone")


def test_the_recorder_patches_repeats_and_recreates_an_event_that_is_gone():
    client = FakeClient()
    recorder = EventRecorder(client)
    for _ in range(2):
        recorder.record(JOB, created("big-master-0"), "pytorchjob-controller", T0)
    assert [verb for verb, _ in client.calls] == ["create", "patch"] and client.calls[0][1] == client.calls[1][1]
    client.missing = True
    recorder.record(JOB, created("big-master-0"), "pytorchjob-controller", T0)
    assert [verb for verb, _ in client.calls] == ["create", "patch", "patch", "create"]
    for i in range(100):
        recorder.record(JOB, created(f"big-worker-{i}"), "pytorchjob-controller", T0)
    assert recorder.writes == 25 and recorder.dropped == 103 - 25
