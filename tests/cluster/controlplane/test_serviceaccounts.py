"""The ServiceAccount controller: which namespaces lack their default ServiceAccount."""

from __future__ import annotations

from trainctl.cluster.controlplane.serviceaccounts_controller import missing


def test_the_service_account_controller_finds_active_namespaces_without_default() -> None:
    namespaces = [{"metadata": {"name": n}, "status": {"phase": "Active"}} for n in ("a", "b")]
    namespaces.append({"metadata": {"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Terminating"}})
    accounts = [{"metadata": {"name": "default", "namespace": "a"}}, {"metadata": {"name": "other", "namespace": "b"}}]
    assert missing(namespaces, accounts) == ["b"]
