"""The cluster's DNS server: answers the pod network's Service and pod names, and nothing else.

It runs in the isolated network's router, on the ``kube-dns`` Service's ClusterIP (a local
address of the router, which every pod's default route reaches), UDP and TCP port 53; it
never listens on an address of the machine. Its records come from the kubelets, which
compute them from the Services and Endpoints they watch (:mod:`.dns_records`).

As CoreDNS's kubernetes plugin: a name under ``cluster.local`` that has records gets them
(A, SRV, CNAME; AAAA and other types an empty NOERROR answer); one that has none gets
NXDOMAIN; reverse names of the cluster's addresses get PTR. Every other name is REFUSED:
nothing is forwarded, so no pod traffic leaves the machine through it, and a pod cannot
make it answer (or cache) names of another zone. A message it cannot parse gets FORMERR
when its header can be read and is dropped otherwise; an answer too large for UDP is sent
truncated (the client asks again over TCP).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from typing import Optional

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from trainctl.cluster.network.dns_records import Records
from trainctl.cluster.network.ranges import CLUSTER_DOMAIN

log = logging.getLogger(__name__)

PORT = 53
TTL = 5  # seconds: Services change, and CoreDNS's kubernetes plugin also answers with 5
UDP_LIMIT = 512  # without EDNS
MAX_UDP = 4096  # the most a client's EDNS payload size is believed
MAX_TCP_CONNECTIONS = 32
TCP_IDLE_SECONDS = 10.0
_ZONES = (dns.name.from_text(CLUSTER_DOMAIN), dns.name.from_text("in-addr.arpa"))


class ClusterDNS:
    """Answers queries from :class:`Records` (replaced whole by :meth:`update`)."""

    def __init__(self) -> None:
        self._records = Records()
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._connections = threading.BoundedSemaphore(MAX_TCP_CONNECTIONS)

    def update(self, records: Records) -> None:
        names: set[str] = set()
        for table in (records.a, records.srv, records.cname, records.ptr):
            for name in table:
                labels = name.split(".")
                names.update(".".join(labels[i:]) for i in range(len(labels)))  # a name's parents exist too
        with self._lock:
            self._records, self._names = records, names

    # --- answering ------------------------------------------------------------------------
    def answer(self, wire: bytes, limit: Optional[int] = None) -> Optional[bytes]:
        """The reply to the query ``wire``, at most ``limit`` bytes (UDP); None to send nothing."""
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return _format_error(wire)
        if query.flags & dns.flags.QR:
            return None  # a response: never answer one (no reflection loops)
        response = dns.message.make_response(query)
        response.flags &= ~dns.flags.RA
        if query.opcode() != dns.opcode.QUERY:
            response.set_rcode(dns.rcode.NOTIMP)
        elif len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
        else:
            self._resolve(query.question[0], response)
        if limit is not None and query.edns >= 0:
            limit = max(UDP_LIMIT, min(query.payload, MAX_UDP))
        try:
            return response.to_wire(max_size=limit or 65535)
        except dns.exception.TooBig:
            response.answer.clear()
            response.additional.clear()
            response.flags |= dns.flags.TC
            return response.to_wire()

    def _resolve(self, question: dns.rrset.RRset, response: dns.message.Message) -> None:
        qname, qtype = question.name, question.rdtype
        if question.rdclass != dns.rdataclass.IN or not any(qname.is_subdomain(zone) for zone in _ZONES):
            response.set_rcode(dns.rcode.REFUSED)
            return
        response.flags |= dns.flags.AA
        name = qname.to_text(omit_final_dot=True).lower()
        with self._lock:
            records, exists = self._records, name in self._names
        if not exists:
            response.set_rcode(dns.rcode.NXDOMAIN)
            return
        answer: list[str] = []
        if name in records.cname:
            qtype, answer = dns.rdatatype.CNAME, [records.cname[name] + "."]
        elif qtype == dns.rdatatype.A:
            answer = records.a.get(name, [])
        elif qtype == dns.rdatatype.SRV:
            answer = [f"0 100 {port} {target}." for port, target in records.srv.get(name, [])]
        elif qtype == dns.rdatatype.PTR and name in records.ptr:
            answer = [records.ptr[name] + "."]
        if answer:
            response.answer.append(dns.rrset.from_text_list(qname, TTL, dns.rdataclass.IN, qtype, answer))

    # --- serving --------------------------------------------------------------------------
    def start(self, address: str, port: int = PORT) -> None:
        """Listen on ``address`` (never a wildcard: the caller names one cluster address)."""
        if address in ("", "0.0.0.0", "::"):
            raise ValueError("the cluster DNS listens on a cluster address, not on every address")
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            udp.bind((address, port))
            tcp.bind((address, port))
            tcp.listen(64)
        except OSError:
            udp.close()
            tcp.close()
            raise
        self._sockets = [udp, tcp]
        threading.Thread(target=self._serve_udp, args=(udp,), daemon=True, name="dns-udp").start()
        threading.Thread(target=self._serve_tcp, args=(tcp,), daemon=True, name="dns-tcp").start()
        log.info("cluster DNS on %s:%d (udp, tcp)", address, port)

    def stop(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _serve_udp(self, sock: socket.socket) -> None:
        while True:
            try:
                wire, peer = sock.recvfrom(65535)
            except OSError:
                return
            try:
                reply = self.answer(wire, limit=UDP_LIMIT)
                if reply is not None:
                    sock.sendto(reply, peer)
            except Exception:  # one bad query must never stop the server
                log.exception("DNS query from %s failed", peer)

    def _serve_tcp(self, sock: socket.socket) -> None:
        while True:
            try:
                connection, _ = sock.accept()
            except OSError:
                return
            if not self._connections.acquire(blocking=False):
                connection.close()  # too many at once: a client retries
                continue
            threading.Thread(target=self._serve_connection, args=(connection,), daemon=True, name="dns-tcp").start()

    def _serve_connection(self, connection: socket.socket) -> None:
        try:
            with connection:
                connection.settimeout(TCP_IDLE_SECONDS)
                while True:
                    header = _read_exactly(connection, 2)
                    if header is None:
                        return
                    wire = _read_exactly(connection, struct.unpack("!H", header)[0])
                    if wire is None:
                        return
                    reply = self.answer(wire)
                    if reply is None:
                        return
                    connection.sendall(struct.pack("!H", len(reply)) + reply)
        except OSError:
            pass
        except Exception:
            log.exception("DNS connection failed")
        finally:
            self._connections.release()


def _read_exactly(connection: socket.socket, size: int) -> Optional[bytes]:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _format_error(wire: bytes) -> Optional[bytes]:
    """FORMERR for a message whose header is readable (its id, opcode and RD echoed), else None."""
    if len(wire) < 12:
        return None
    ident, flags = struct.unpack("!HH", wire[:4])
    if flags & 0x8000:
        return None
    return struct.pack("!HHHHHH", ident, 0x8000 | (flags & 0x7900) | dns.rcode.FORMERR, 0, 0, 0, 0)
