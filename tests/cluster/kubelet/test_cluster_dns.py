"""The cluster DNS: its records from Services and Endpoints, and what it answers (and refuses)."""

import os
import socket
import struct

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from trainctl.cluster.network.cluster_dns import ClusterDNS
from trainctl.cluster.network.dns_records import Records, cluster_records


def service(name, namespace="default", **spec):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def endpoints(name, addresses, namespace="default", ports=()):
    return {"metadata": {"name": name, "namespace": namespace},
            "subsets": [{"addresses": addresses, "ports": list(ports)}]}


RECORDS = cluster_records(
    [service("web", clusterIP="10.96.0.20", ports=[{"name": "http", "port": 80, "protocol": "TCP"}, {"port": 81}]),
     service("workers", "train", clusterIP="None", selector={"app": "w"}),
     service("ext", type="ExternalName", externalName="db.example.org."),
     service("pending", clusterIP="")],
    [endpoints("workers", [{"ip": "10.244.0.5", "hostname": "worker-0"}, {"ip": "10.244.1.7"}], "train",
               ports=[{"name": "nccl", "port": 29500, "protocol": "TCP"}])])


def ask(server, name, rdtype="A", limit=None):
    wire = server.answer(dns.message.make_query(name, rdtype).to_wire(), limit=limit)
    return dns.message.from_wire(wire)


def addresses(response):
    return sorted(item.to_text() for rrset in response.answer for item in rrset)


@pytest.fixture
def server():
    dns_server = ClusterDNS()
    dns_server.update(Records.from_json(RECORDS.to_json()))  # as the router gets them: through JSON
    return dns_server


def test_records_are_those_coredns_serves_for_services_and_headless_endpoints():
    assert RECORDS.a["web.default.svc.cluster.local"] == ["10.96.0.20"]
    assert RECORDS.srv["_http._tcp.web.default.svc.cluster.local"] == [(80, "web.default.svc.cluster.local")]
    assert RECORDS.a["workers.train.svc.cluster.local"] == ["10.244.0.5", "10.244.1.7"]
    assert RECORDS.a["worker-0.workers.train.svc.cluster.local"] == ["10.244.0.5"]
    assert RECORDS.a["10-244-1-7.workers.train.svc.cluster.local"] == ["10.244.1.7"]
    assert RECORDS.srv["_nccl._tcp.workers.train.svc.cluster.local"] == [
        (29500, "worker-0.workers.train.svc.cluster.local"), (29500, "10-244-1-7.workers.train.svc.cluster.local")]
    assert RECORDS.cname["ext.default.svc.cluster.local"] == "db.example.org"
    assert RECORDS.ptr["5.0.244.10.in-addr.arpa"] == "worker-0.workers.train.svc.cluster.local"
    assert not any(name.startswith("pending.") for name in RECORDS.a)


def test_it_answers_service_and_pod_names(server):
    assert addresses(ask(server, "web.default.svc.cluster.local.")) == ["10.96.0.20"]
    assert addresses(ask(server, "WORKERS.train.svc.cluster.local.")) == ["10.244.0.5", "10.244.1.7"]
    assert addresses(ask(server, "worker-0.workers.train.svc.cluster.local.")) == ["10.244.0.5"]
    assert addresses(ask(server, "_http._tcp.web.default.svc.cluster.local.", "SRV")) == [
        "0 100 80 web.default.svc.cluster.local."]
    assert addresses(ask(server, "5.0.244.10.in-addr.arpa.", "PTR")) == ["worker-0.workers.train.svc.cluster.local."]
    assert addresses(ask(server, "ext.default.svc.cluster.local.")) == ["db.example.org."]
    response = ask(server, "web.default.svc.cluster.local.")
    assert response.flags & dns.flags.AA and not response.flags & dns.flags.RA


def test_a_known_name_without_the_asked_type_is_nodata_and_an_unknown_one_nxdomain(server):
    nodata = ask(server, "web.default.svc.cluster.local.", "AAAA")
    assert nodata.rcode() == dns.rcode.NOERROR and not nodata.answer
    assert ask(server, "default.svc.cluster.local.").rcode() == dns.rcode.NOERROR  # a parent of a name
    for unknown in ("nope.default.svc.cluster.local.", "web.other.svc.cluster.local.", "9.9.9.10.in-addr.arpa."):
        assert ask(server, unknown).rcode() == dns.rcode.NXDOMAIN, unknown


def test_names_outside_the_cluster_are_refused_never_forwarded(server):
    for name in ("example.com.", "web.default.svc.other-cluster.local.", "cluster.local.example.com."):
        response = ask(server, name)
        assert response.rcode() == dns.rcode.REFUSED and not response.answer, name


def test_records_are_replaced_whole(server):
    server.update(cluster_records([service("db", clusterIP="10.96.0.30")], []))
    assert ask(server, "web.default.svc.cluster.local.").rcode() == dns.rcode.NXDOMAIN
    assert addresses(ask(server, "db.default.svc.cluster.local.")) == ["10.96.0.30"]


def test_an_answer_too_big_for_udp_is_truncated_and_whole_over_tcp():
    many = [{"ip": f"10.244.{i // 250}.{i % 250 + 1}"} for i in range(200)]
    server = ClusterDNS()
    server.update(cluster_records([service("big", clusterIP="None", selector={"a": "b"})], [endpoints("big", many)]))
    udp = ask(server, "big.default.svc.cluster.local.", limit=512)
    assert udp.flags & dns.flags.TC and not udp.answer
    assert len(addresses(ask(server, "big.default.svc.cluster.local."))) == 200


def test_malformed_queries_get_formerr_or_nothing_and_never_break_it(server):
    query = dns.message.make_query("web.default.svc.cluster.local.", "A")
    wire = query.to_wire()
    formerr = dns.message.from_wire(server.answer(wire[:-3]))
    assert formerr.id == query.id and formerr.rcode() == dns.rcode.FORMERR
    assert server.answer(b"\x00\x01") is None
    response = dns.message.make_response(query).to_wire()
    assert server.answer(response) is None  # never answers an answer
    two = dns.message.make_query("web.default.svc.cluster.local.", "A")
    two.question.append(dns.message.make_query("x.cluster.local.", "A").question[0])
    assert dns.message.from_wire(server.answer(two.to_wire())).rcode() == dns.rcode.FORMERR
    # Label pointers in a loop, a huge question count, random bytes: each answered or dropped.
    for junk in (wire[:12] + b"\xc0\x0c\x00\x01\x00\x01", struct.pack("!HHHHHH", 7, 0, 65535, 0, 0, 0),
                 *(os.urandom(n) for n in (12, 100, 512, 65535))):
        server.answer(junk)
    assert addresses(ask(server, "web.default.svc.cluster.local.")) == ["10.96.0.20"]


def test_it_never_listens_on_every_address():
    for wildcard in ("0.0.0.0", ""):
        with pytest.raises(ValueError):
            ClusterDNS().start(wildcard)


def test_it_serves_udp_and_tcp_on_the_address_it_is_given(server):
    server.start("127.0.0.1", 0)
    try:
        udp_port = server._sockets[0].getsockname()[1]
        tcp_port = server._sockets[1].getsockname()[1]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.settimeout(30)
            client.sendto(b"garbage that is not DNS", ("127.0.0.1", udp_port))  # the server lives on
            client.sendto(dns.message.make_query("web.default.svc.cluster.local.", "A").to_wire(), ("127.0.0.1", udp_port))
            reply = dns.message.from_wire(client.recv(65535))
            while reply.rcode() == dns.rcode.FORMERR:
                reply = dns.message.from_wire(client.recv(65535))
        assert addresses(reply) == ["10.96.0.20"]
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=30) as client:
            wire = dns.message.make_query("worker-0.workers.train.svc.cluster.local.", "A").to_wire()
            client.sendall(struct.pack("!H", len(wire)) + wire)
            size = struct.unpack("!H", client.recv(2, socket.MSG_WAITALL))[0]
            assert addresses(dns.message.from_wire(client.recv(size, socket.MSG_WAITALL))) == ["10.244.0.5"]
    finally:
        server.stop()


def test_the_kubelets_service_sync_sends_the_records_it_computes(tmp_path):
    from trainctl.cluster.kubelet.service_names import ServiceNames
    from trainctl.cluster.kubelet.service_rules import ServiceRules
    from trainctl.cluster.network.hosts import HostsFile
    from trainctl.cluster.network.pod_ipam import PodIPAllocator
    from trainctl.kube.informer import Store

    class Proxy:
        def update(self, rules):
            self.rules = rules

    sent = []
    names = ServiceNames(None, Store(), Store(), PodIPAllocator("10.244.0.0/24"))
    rules = ServiceRules(names, HostsFile(tmp_path), Proxy(), publish_names=sent.append)
    web = service("web", clusterIP="10.96.0.20", selector={"app": "web"}, ports=[{"port": 80}])
    rules.sync([], [web], [])
    assert [records.a for records in sent] == [{"web.default.svc.cluster.local": ["10.96.0.20"]}]
