"""Address ranges per cluster directory and node, and pod IP allocation."""

import ipaddress

from trainctl.cluster.network.pod_ipam import PodIPAllocator
from trainctl.cluster.network.ranges import (
    NODE_SERVICE_SPACE,
    POD_SPACE,
    SERVICE_SPACE,
    cluster_ranges,
    node_pod_cidr,
    node_service_address,
    node_service_cidr,
)
from trainctl.cluster.network.router import pod_nsswitch, resolv_conf


def test_each_directory_gets_its_own_stable_slices(tmp_path):
    pods_a, services_a = cluster_ranges(tmp_path / "a")
    pods_b, services_b = cluster_ranges(tmp_path / "b")
    assert (pods_a, services_a) == cluster_ranges(tmp_path / "a")
    assert ipaddress.ip_network(pods_a).subnet_of(ipaddress.ip_network(POD_SPACE))
    assert ipaddress.ip_network(services_a).subnet_of(ipaddress.ip_network(SERVICE_SPACE))
    assert not ipaddress.ip_network(pods_a).overlaps(ipaddress.ip_network(pods_b))


def test_each_node_of_a_cluster_serves_the_cluster_ips_at_addresses_of_its_own(tmp_path):
    pods, services = cluster_ranges(tmp_path)
    ranges = [node_service_cidr(tmp_path, node_pod_cidr(tmp_path, index)) for index in range(16)]
    assert all(ipaddress.ip_network(r).subnet_of(ipaddress.ip_network(NODE_SERVICE_SPACE)) for r in ranges)
    assert len(set(ranges)) == 16 and all(ipaddress.ip_network(r).prefixlen == 22 for r in ranges)
    assert ranges[0] == node_service_cidr(tmp_path, node_pod_cidr(tmp_path, 0))
    cluster_ip = str(ipaddress.ip_network(services).network_address + 7)
    assert node_service_address(cluster_ip, services, ranges[2]) == str(ipaddress.ip_network(ranges[2]).network_address + 7)


def test_a_cluster_of_one_node_serves_the_cluster_ips_themselves(tmp_path):
    pods, services = cluster_ranges(tmp_path)
    assert node_service_cidr(tmp_path, pods) is None
    assert node_service_cidr(tmp_path, "10.0.0.0/24") is None  # a pod range of its own choosing
    cluster_ip = str(ipaddress.ip_network(services).network_address + 7)
    assert node_service_address(cluster_ip, services, None) == cluster_ip
    node = node_service_cidr(tmp_path, node_pod_cidr(tmp_path, 1))
    assert node_service_address("10.1.2.3", services, node) == "10.1.2.3"  # not from this cluster's range


def test_allocation_is_stable_per_pod_and_does_not_reuse_a_freed_address_at_once():
    ips = PodIPAllocator("127.128.16.0/29")  # six usable addresses: .2 to .7
    first = ips.allocate("a")
    assert first == "127.128.16.2" and ips.allocate("a") == first
    second = ips.allocate("b")
    ips.release("a")
    assert ips.allocate("c") not in (first, second)
    assert ips.lookup("a") is None


def test_pod_index_matches_whole_selectors_within_a_namespace():
    from trainctl.cluster.kubelet.service_names import PodIndex

    def p(name, namespace, **labels):
        return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}

    pods = [p("a-0", "x", job="a", index="0"), p("a-1", "x", job="a", index="1"),
            p("b-0", "x", job="b", index="0"), p("a-0", "y", job="a", index="0")]
    index = PodIndex(pods)
    assert [q["metadata"]["name"] for q in index.select("x", {"job": "a", "index": "0"})] == ["a-0"]
    assert [q["metadata"]["namespace"] for q in index.select("y", {"job": "a"})] == ["y"]
    assert index.select("x", {}) == [] and index.select("x", None) == []
    assert index.select("x", {"job": "c"}) == []


def test_a_pods_nsswitch_looks_names_up_in_its_hosts_file_then_the_cluster_dns_only():
    machine = "passwd:         files\n# a comment\nhosts:          files mdns4_minimal [NOTFOUND=return] dns\nnetworks: files\n"
    assert pod_nsswitch(machine) == "passwd:         files\n# a comment\nnetworks: files\nhosts: files dns\n"
    assert pod_nsswitch("") == "hosts: files dns\n"


def test_a_pods_resolv_conf_names_the_cluster_dns_with_its_namespace_first():
    assert resolv_conf("10.96.0.10", "team-a").splitlines() == [
        "search team-a.svc.cluster.local svc.cluster.local cluster.local", "nameserver 10.96.0.10", "options ndots:5"]
