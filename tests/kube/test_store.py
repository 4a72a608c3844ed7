"""The informer cache: owner index, stale-event protection, relist diffs."""

from __future__ import annotations

import time

from trainctl.kube.informer import Store
from trainctl.kube.ratelimit import TokenBucket


def _obj(name: str, rv: str, owner: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "ns", "resourceVersion": rv, "managedFields": [{}]}
    if owner:
        meta["ownerReferences"] = [{"kind": "PyTorchJob", "name": "j", "uid": owner, "controller": True}]
    return {"metadata": meta}


def test_owner_index_follows_updates_and_deletes():
    s = Store()
    s.upsert(_obj("a", "1", owner="u1"))
    s.upsert(_obj("b", "2", owner="u1"))
    s.upsert(_obj("c", "3", owner="u2"))
    assert sorted(o["metadata"]["name"] for o in s.owned_by("u1")) == ["a", "b"]
    s.upsert(_obj("b", "4", owner="u2"))
    assert [o["metadata"]["name"] for o in s.owned_by("u1")] == ["a"]
    s.delete(_obj("a", "5"))
    assert s.owned_by("u1") == []
    assert "managedFields" not in s.get("ns", "c")["metadata"]


def test_stale_and_replayed_events_do_not_overwrite_newer_objects():
    s = Store()
    assert s.upsert(_obj("a", "10"), only_if_newer=True) == (True, None)
    changed, _ = s.upsert(_obj("a", "9"), only_if_newer=True)
    assert not changed
    changed, _ = s.upsert(_obj("a", "10"), only_if_newer=True)
    assert not changed
    assert s.get("ns", "a")["metadata"]["resourceVersion"] == "10"


def test_relist_synthesises_the_missed_events():
    s = Store()
    s.upsert(_obj("kept", "1"))
    s.upsert(_obj("changed", "2"))
    s.upsert(_obj("gone", "3"))
    events = s.replace([_obj("kept", "1"), _obj("changed", "5"), _obj("new", "6")])
    summary = sorted((t, (n or o)["metadata"]["name"]) for t, n, o in events)
    assert summary == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]


def test_filter_drops_objects_that_stop_matching():
    s = Store(keep=lambda o: bool(o["metadata"].get("ownerReferences")))
    s.upsert(_obj("a", "1", owner="u"))
    changed, old = s.upsert(_obj("a", "2"))
    assert changed and old is not None
    assert s.get("ns", "a") is None


def test_token_bucket_allows_the_burst_then_paces_at_qps():
    started = time.monotonic()
    bucket = TokenBucket(qps=100, burst=5)
    waits = [bucket.acquire() for _ in range(10)]
    elapsed = time.monotonic() - started
    assert all(w == 0 for w in waits[:5])
    assert sum(waits) <= 0.1
    assert elapsed >= 0.045  # five tokens beyond the burst at 100 per second: at least 50 ms
    assert TokenBucket(qps=0, burst=1).acquire() == 0
