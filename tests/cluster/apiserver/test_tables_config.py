"""kubectl get configmaps, secrets, serviceaccounts, leases, CRDs and endpoints, and a pod's RESTARTS, as kube prints them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from trainctl.cluster.apiserver.serving import tables


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_configmaps_count_data_and_binary_data(kubectl):
    kubectl("create", "configmap", "settings", "--from-literal=a=1", "--from-literal=b=2")
    table = rows(kubectl("get", "configmaps", "settings"))
    assert table[0] == ["NAME", "DATA", "AGE"]
    assert table[1][:2] == ["settings", "2"]


def test_secrets_show_their_type_and_data(kubectl):
    kubectl("create", "secret", "generic", "token", "--from-literal=key=value")
    table = rows(kubectl("get", "secrets", "token"))
    assert table[0] == ["NAME", "TYPE", "DATA", "AGE"]
    assert table[1][:3] == ["token", "Opaque", "1"]


def test_services_show_node_ports_and_external_addresses(kubectl):
    kubectl("create", "service", "nodeport", "np", "--tcp=80:8080")
    kubectl("create", "service", "externalname", "ext", "--external-name=example.org")
    kubectl("create", "service", "loadbalancer", "lb", "--tcp=443:8443")
    table = {row[0]: row for row in rows(kubectl("get", "services", "np", "ext", "lb"))[1:]}
    node_port = json.loads(kubectl("get", "service", "np", "-o", "json"))["spec"]["ports"][0]["nodePort"]
    assert table["np"][1:5] == ["NodePort", table["np"][2], "<none>", f"80:{node_port}/TCP"]
    assert table["ext"][1:4] == ["ExternalName", "<none>", "example.org"]
    assert table["lb"][3] == "<pending>" and table["lb"][4].startswith("443:")


def test_serviceaccounts_show_their_secrets(kubectl):
    kubectl("create", "serviceaccount", "trainer")
    table = rows(kubectl("get", "serviceaccounts", "trainer"))
    assert table[0] == ["NAME", "SECRETS", "AGE"]
    assert table[1][:2] == ["trainer", "0"]


def test_leases_show_their_holder(kubectl):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
             "spec": {"holderIdentity": "controller-0_4f2a"}}
    kubectl("create", "-f", "-", input=json.dumps(lease))
    table = rows(kubectl("get", "leases", "leader"))
    assert table[0] == ["NAME", "HOLDER", "AGE"]
    assert table[1][:2] == ["leader", "controller-0_4f2a"]


def test_crds_show_when_they_were_created(kubectl):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kubectl("create", "-f", "-", input=json.dumps(crd))
    table = rows(kubectl("get", "crd", "widgets.example.com"))
    assert table[0] == ["NAME", "CREATED", "AT"]
    assert table[1][0] == "widgets.example.com"
    assert datetime.fromisoformat(table[1][1].replace("Z", "+00:00")).year >= 2024


def test_restarts_say_how_long_ago_the_last_one_was():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    ended = (now - timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T11:00:00Z"},
           "spec": {"containers": [{"name": "main"}]},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "main", "restartCount": 5, "ready": True, "state": {"running": {"startedAt": ended}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ended}}}]}}
    _, cells = tables._pod_columns()
    assert cells(pod, now)[3] == "5 (20s ago)"
    never = {**pod, "status": {"phase": "Running", "containerStatuses": [{"name": "main", "restartCount": 0, "state": {"running": {}}}]}}
    assert cells(never, now)[3] == "0"


def test_endpoints_list_each_ports_addresses_and_shorten_after_three():
    two_ports = {"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"name": "http", "port": 80}, {"name": "m", "port": 9090}]}]}
    assert tables.endpoints_cell(two_ports) == "10.0.0.1:80,10.0.0.2:80,10.0.0.1:9090 + 1 more..."
    headless = {"metadata": {"name": "h"}, "subsets": [{"addresses": [{"ip": "10.0.0.3"}, {"ip": "fd00::1"}]}]}
    assert tables.endpoints_cell(headless) == "10.0.0.3,fd00::1"
    assert tables.endpoints_cell({"metadata": {"name": "v6"}, "subsets": [
        {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]}) == "[fd00::1]:80"
    assert tables.endpoints_cell({"metadata": {"name": "none"}}) == "<none>"
    assert tables.endpoints_cell({"metadata": {"name": "unready"}, "subsets": [
        {"notReadyAddresses": [{"ip": "10.0.0.4"}], "ports": [{"port": 80}]}]}) == ""
