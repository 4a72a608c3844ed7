"""Address ranges per cluster directory and pod IP allocation."""

import ipaddress

from trainctl.controller.local.network import POD_SPACE, SERVICE_SPACE, cluster_ranges
from trainctl.controller.local.network.ipam import PodIPAllocator


def test_each_directory_gets_its_own_stable_slices(tmp_path):
    pods_a, services_a = cluster_ranges(tmp_path / "a")
    pods_b, services_b = cluster_ranges(tmp_path / "b")
    assert (pods_a, services_a) == cluster_ranges(tmp_path / "a")
    assert ipaddress.ip_network(pods_a).subnet_of(ipaddress.ip_network(POD_SPACE))
    assert ipaddress.ip_network(services_a).subnet_of(ipaddress.ip_network(SERVICE_SPACE))
    assert not ipaddress.ip_network(pods_a).overlaps(ipaddress.ip_network(pods_b))


def test_allocation_is_stable_per_pod_and_does_not_reuse_a_freed_address_at_once():
    ips = PodIPAllocator("127.128.16.0/29")  # six usable addresses: .2 to .7
    first = ips.allocate("a")
    assert first == "127.128.16.2" and ips.allocate("a") == first
    second = ips.allocate("b")
    ips.release("a")
    assert ips.allocate("c") not in (first, second)
    assert ips.lookup("a") is None


def test_pod_index_matches_whole_selectors_within_a_namespace():
    from trainctl.controller.local.kubelet.service_names import PodIndex

    def p(name, namespace, **labels):
        return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}

    pods = [p("a-0", "x", job="a", index="0"), p("a-1", "x", job="a", index="1"),
            p("b-0", "x", job="b", index="0"), p("a-0", "y", job="a", index="0")]
    index = PodIndex(pods)
    assert [q["metadata"]["name"] for q in index.select("x", {"job": "a", "index": "0"})] == ["a-0"]
    assert [q["metadata"]["namespace"] for q in index.select("y", {"job": "a"})] == ["y"]
    assert index.select("x", {}) == [] and index.select("x", None) == []
    assert index.select("x", {"job": "c"}) == []
