"""Expectations hold a job back until the cache shows the controller's own writes."""

from __future__ import annotations

import time

from trainctl.kube.expectations import Expectations


def _pod(name: str, uid: str, terminating: bool = False, owner: str = "job-uid") -> dict:
    meta = {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": [{"uid": owner, "controller": True}]}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_unsatisfied_until_every_created_child_is_in_the_cache():
    cache: dict = {}
    e = Expectations()
    e.expect_creates("job", "job-uid", [("Pod", "ns", "a"), ("Pod", "ns", "b")])
    assert not e.satisfied("job", cache.get)
    cache[("Pod", "ns", "a")] = _pod("a", "1")
    assert not e.satisfied("job", cache.get)
    cache[("Pod", "ns", "b")] = _pod("b", "2")
    assert e.satisfied("job", cache.get)


def test_a_create_is_seen_only_as_the_jobs_own_object():
    """A job re-created under the same name: its predecessor's pod is not the one it created."""
    cache = {("Pod", "ns", "a"): _pod("a", "old", terminating=True, owner="old-job-uid")}
    e = Expectations()
    e.expect_creates("job", "job-uid", [("Pod", "ns", "a")])
    assert not e.satisfied("job", cache.get)
    cache[("Pod", "ns", "a")] = _pod("a", "new")
    assert e.satisfied("job", cache.get)


def test_a_refused_create_is_not_waited_for():
    e = Expectations()
    e.expect_creates("job", "job-uid", [("Pod", "ns", "a")])
    e.creation_failed("job", ("Pod", "ns", "a"))
    assert e.satisfied("job", {}.get)


def test_delete_is_seen_when_the_uid_is_gone_replaced_or_terminating():
    cache = {("Pod", "ns", "a"): _pod("a", "old")}
    e = Expectations()
    e.expect_deletes("job", [(("Pod", "ns", "a"), "old")])
    assert not e.satisfied("job", cache.get)
    cache[("Pod", "ns", "a")] = _pod("a", "old", terminating=True)
    assert e.satisfied("job", cache.get)

    e.expect_deletes("job", [(("Pod", "ns", "a"), "old")])
    cache[("Pod", "ns", "a")] = _pod("a", "new")  # recreated under the same name
    assert e.satisfied("job", cache.get)


def test_expectations_expire():
    e = Expectations(ttl=0.05)
    e.expect_creates("job", "job-uid", [("Pod", "ns", "never")])
    assert not e.satisfied("job", {}.get)
    time.sleep(0.06)
    assert e.satisfied("job", {}.get)


def test_unknown_jobs_are_satisfied_and_forget_clears():
    e = Expectations()
    assert e.satisfied("nobody", {}.get)
    e.expect_creates("job", "job-uid", [("Pod", "ns", "a")])
    e.forget("job")
    assert e.satisfied("job", {}.get)
