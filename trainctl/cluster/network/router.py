"""The isolated pod network's router: one process per cluster, in namespaces of its own.

``python -m trainctl.cluster.network`` runs under ``unshare -U -r -n -m``: an unprivileged
user namespace (so no root is needed) with a network and a mount namespace. Nothing of it
touches the machine's own network. Inside, as a real cluster's nodes and CNI plugin do:

- each node gets a bridge, ``cbr<k>``, holding its podCIDR's first address (the pods'
  gateway); the router forwards between the bridges, so every pod reaches every other pod;
- each pod gets a *sandbox*: a pause process holding a network and a mount namespace of
  its own, a veth pair (``eth0`` inside, on the node's bridge outside), its IP and a default
  route, and its ServiceAccount directory at ``/var/run/secrets/kubernetes.io/serviceaccount``
  (on a tmpfs over ``/run`` when the machine has no such directory); the kubelet starts the
  pod's processes inside it with ``nsenter`` (:class:`~.podnet.IsolatedNetwork`);
- ClusterIPs are local addresses of the router (``ip route add local SERVICE_CIDR dev lo``);
  the kernel forwards them to the endpoints the kubelets send (nftables NAT, :mod:`.nat`),
  or where it cannot, a userspace proxy (:mod:`.proxy`) listens on them. The `kubernetes`
  Service's ClusterIP:443 is always the proxy's: it forwards to the API server's unix
  socket (a path crosses network namespaces);
- the cluster DNS (:mod:`.cluster_dns`) answers on the ``kube-dns`` Service's ClusterIP, port
  53, from the records the kubelets send; each pod's ``/etc/resolv.conf`` names it, with
  the ``<ns>.svc.cluster.local`` search path and ``ndots:5``;
- processes outside (the kubelets) get connections into the pod network from here: a
  ``dial`` answers with the connected socket (SCM_RIGHTS), and each kubelet's own path to
  the API server runs through a relay here, which is what ``node partition`` cuts.

Partition takes the node's pod links down and holds its kubelet's relays (bytes wait, as on
a cut cable); heal gives the kubelet its path back first and the pods their links only when
the kubelet asks (``restore``), after it has killed the processes of the pods deleted
meanwhile, so no old process of a replaced pod reaches its job again.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import logging
import os
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster import unixsock
from trainctl.cluster.apiserver import system_objects
from trainctl.cluster.apiserver.process import UNIX_SOCKET
from trainctl.cluster.network import control, degrade, nat
from trainctl.cluster.network.cluster_dns import ClusterDNS
from trainctl.cluster.network.dns_records import Records
from trainctl.cluster.network.proxy import Backend, Frontend, ServiceProxy

log = logging.getLogger(__name__)

Message = dict[str, Any]
PARTITIONED, HEALING = "partitioned", "healing"
SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# The pause process: holds the pod's network, mount and UTS namespaces (its hostname, the
# pod's) until the router closes its stdin or dies.
_PAUSE = ["unshare", "-n", "-m", "-u", "--propagation", "private", "--",
          "sh", "-c", 'hostname "$1" && echo ready && exec cat >/dev/null', "sh"]
# Inside the pod's mount namespace: its own /etc/hosts (its hostname is its IP, as the
# kubelet's managed hosts file says; gloo and others find their address that way), its own
# nsswitch.conf (see pod_nsswitch), the ServiceAccount directory where pods look for it and
# its own resolv.conf (over the file a symlinked /etc/resolv.conf names, when it exists).
# The machine's own tree is never written: without that directory, a tmpfs over /run holds it.
_MOUNTS = (
    'mount --bind "$3" /etc/hosts || exit 1; '
    '[ ! -e /etc/nsswitch.conf ] || mount --bind "$4" /etc/nsswitch.conf || exit 1; '
    'target="$2"; [ -d "$target" ] || mount -t tmpfs -o mode=755 tmpfs /run || exit 1; '
    'mkdir -p "$target" && mount --bind "$1" "$target" || exit 1; '
    'resolv=$(readlink -f /etc/resolv.conf); [ ! -e "$resolv" ] || mount --bind "$5" "$resolv"')


def hosts_file(ip: str, hostname: str) -> str:
    """A pod's /etc/hosts, as the kubelet writes it."""
    return ("# Kubernetes-managed hosts file (the local cluster's isolated network).\n"
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            f"{ip}\t{hostname}\n")


def pod_nsswitch(machine: str) -> str:
    """A pod's nsswitch.conf: the machine's, with names looked up in the hosts file, then
    the cluster DNS (and nowhere else: mdns or myhostname would reach past the pod).

    The cluster DNS answers every query at once (a reverse lookup of an address it does not
    know is NXDOMAIN), so torch's c10d, which names both ends of every socket with
    getnameinfo, falls back to the numeric address without warning "err=-3"."""
    lines = [line for line in machine.splitlines() if line.split(":", 1)[0].strip() != "hosts"]
    return "\n".join([*lines, "hosts: files dns"]) + "\n"


def resolv_conf(nameserver: str, namespace: str) -> str:
    """A pod's resolv.conf for dnsPolicy ClusterFirst, as the kubelet writes it."""
    return (f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local\n"
            f"nameserver {nameserver}\noptions ndots:5\n")


class NetworkSetupError(Exception):
    """A command that builds the network failed; the message says which and why."""


def run(argv: list[str], stdin: str = "") -> None:
    result = subprocess.run(argv, input=stdin.encode(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            timeout=30, check=False)
    if result.returncode != 0:
        raise NetworkSetupError(f"{' '.join(argv)}: {result.stderr.decode(errors='replace').strip()}")


@dataclass
class Node:
    name: str
    bridge: str
    cidr: ipaddress.IPv4Network
    state: str = ""  # "", PARTITIONED or HEALING
    relays: set["Relay"] = field(default_factory=set)
    links: degrade.LinkFaults = degrade.LinkFaults()  # its pods' links: lossy or slow (``node degrade``)

    @property
    def gateway(self) -> str:
        return str(self.cidr.network_address + 1)

    @property
    def bridge_mac(self) -> str:
        """A fixed, locally administered address made from the gateway's: a bridge without
        one takes the lowest of its ports' addresses, so it changes as pods come and go, and
        when the port whose address it had leaves, every pod's cached gateway address goes
        nowhere until its ARP entry expires (about a minute without Service or API server)."""
        return "02:00:" + ":".join(f"{octet:02x}" for octet in ipaddress.IPv4Address(self.gateway).packed)


@dataclass
class Sandbox:
    uid: str
    node: str
    ip: str
    veth: str
    pause: subprocess.Popen[bytes]


class Relay:
    """A kubelet's connection to the API server, copied both ways; held while its node is
    partitioned, closed when it heals (the kubelet reconnects)."""

    def __init__(self, client: socket.socket, server: socket.socket, open_: threading.Event) -> None:
        self._sockets = (client, server)
        self._open = open_
        self._closed = threading.Event()
        self._running = 2
        self._lock = threading.Lock()
        for source, target in ((client, server), (server, client)):
            threading.Thread(target=self._copy, args=(source, target), daemon=True, name="api-relay").start()

    def _copy(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                while not self._open.wait(1.0):
                    if self._closed.is_set():
                        return
                if self._closed.is_set():
                    return
                target.sendall(data)
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
        except OSError:
            self.close()
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                self.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class Router:
    """The pod network of one cluster (run inside its namespaces; see the module doc)."""

    def __init__(self, directory: Path, service_cidr: str) -> None:
        self.directory = directory
        self.service_cidr = service_cidr
        self.kubernetes_ip = system_objects.cluster_ip(service_cidr)
        self.dns_ip = system_objects.dns_cluster_ip(service_cidr)
        self.dns = ClusterDNS()
        self._lock = threading.Lock()
        self._nodes: dict[str, Node] = {}
        self._open: dict[str, threading.Event] = {}  # per node: its kubelet's relays may copy
        self._sandboxes: dict[str, Sandbox] = {}
        self._rules: dict[str, dict[Frontend, list[Backend]]] = {}  # per node, oldest update first
        self._veths = itertools.count()
        self._bridges = itertools.count()
        self.proxy = ServiceProxy()
        self.kernel_nat = False
        self._applied: Optional[tuple[Any, ...]] = None
        self._apply_lock = threading.Lock()
        self._listener: Optional[socket.socket] = None
        self._degrade_lock = threading.Lock()
        self._netem_missing: Optional[str] = None  # why packets cannot be delayed here, once asked

    # --- start and stop ---------------------------------------------------------------------
    def start(self) -> None:
        run(["ip", "link", "set", "lo", "up"])
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        run(["ip", "route", "add", "local", self.service_cidr, "dev", "lo"])
        refused = nat.probe()
        self.kernel_nat = refused is None
        services = ("kernel (nftables NAT)" if self.kernel_nat
                    else f"userspace proxy ({refused}; install nftables for the kernel's)")
        self._say_services(services)
        self.proxy.start()
        self.dns.start(self.dns_ip)
        self._apply_rules()
        self._listener = unixsock.listen(self.directory / control.SOCKET)
        threading.Thread(target=self._serve, daemon=True, name="network-control").start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            sandboxes = list(self._sandboxes.values())
            self._sandboxes.clear()
        for sandbox in sandboxes:
            self._release(sandbox)
        self.proxy.stop()
        self.dns.stop()

    def _serve(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(sock,), daemon=True, name="network-request").start()

    def _handle(self, sock: socket.socket) -> None:
        with sock:
            connection: Optional[socket.socket] = None
            try:
                message = control.read_request(sock)
                handler = getattr(self, f"op_{message.get('op')}", None)
                if handler is None:
                    raise NetworkSetupError(f"unknown request {message.get('op')!r}")
                reply, connection = handler(message)
            except (NetworkSetupError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
                reply = {"error": str(exc) or type(exc).__name__}
            except Exception as exc:  # a bug here must not leave the caller without an answer
                log.exception("request failed")
                reply = {"error": f"the network router failed: {exc!r}"}
            with contextlib.suppress(OSError):
                control.answer(sock, reply, connection)
            if connection is not None:
                connection.close()

    # --- nodes ------------------------------------------------------------------------------
    def op_node(self, message: Message) -> tuple[Message, None]:
        """A kubelet starts: its node's bridge exists, and sandboxes a previous kubelet of the
        node left (their processes were killed) are removed."""
        name, cidr = str(message["node"]), ipaddress.IPv4Network(str(message["cidr"]))
        with self._lock:
            node = self._nodes.get(name)
            new = node is None
            if node is None:
                node = self._nodes[name] = Node(name, f"cbr{next(self._bridges)}", cidr)
                self._open[name] = threading.Event()
                self._open[name].set()
            left = [s for s in self._sandboxes.values() if s.node == name]
            for sandbox in left:
                del self._sandboxes[sandbox.uid]
            self._rules.pop(name, None)
        for sandbox in left:
            self._release(sandbox)
        if new:
            try:
                run(["ip", "link", "add", node.bridge, "address", node.bridge_mac, "type", "bridge"])
                run(["ip", "addr", "add", f"{node.gateway}/{cidr.prefixlen}", "dev", node.bridge])
                run(["ip", "link", "set", node.bridge, "up"])
            except NetworkSetupError:
                with self._lock:
                    del self._nodes[name]
                with contextlib.suppress(NetworkSetupError):
                    run(["ip", "link", "del", node.bridge])
                raise
            log.info("node %s: bridge %s, pods %s, gateway %s", name, node.bridge, cidr, node.gateway)
            self._apply_rules()  # its bridge's hairpin rule
        return {"gateway": node.gateway, "kubernetes": self.kubernetes_ip}, None

    def _node(self, name: str) -> Node:
        node = self._nodes.get(name)
        if node is None:
            raise NetworkSetupError(f"node {name} {control.UNKNOWN_NODE} (its kubelet has not started)")
        return node

    def op_partition(self, message: Message) -> tuple[Message, None]:
        with self._lock:
            node = self._node(str(message["node"]))
            node.state = PARTITIONED
            self._open[node.name].clear()
            links = [s.veth for s in self._sandboxes.values() if s.node == node.name]
        for veth in links:
            self._link(veth, up=False)
        log.info("node %s partitioned: %d pod link(s) down, its kubelet's API path held", node.name, len(links))
        return {"pods": len(links)}, None

    def op_heal(self, message: Message) -> tuple[Message, None]:
        """The kubelet's path comes back (its held connections are closed: it reconnects and
        relists); the pods' links wait for its ``restore``."""
        with self._lock:
            node = self._node(str(message["node"]))
            if node.state != PARTITIONED:
                raise NetworkSetupError(f"node {node.name} is not partitioned")
            node.state = HEALING
            relays, node.relays = node.relays, set()
            self._open[node.name].set()
        for relay in relays:
            relay.close()
        log.info("node %s healing: kubelet path restored, pod links wait for the kubelet", node.name)
        return {}, None

    def op_restore(self, message: Message) -> tuple[Message, None]:
        """The kubelet has killed what was deleted while it was cut off: links come back for
        the pods it still runs (``uids``), the others stay down until torn down."""
        keep = set(message.get("uids") or [])
        with self._lock:
            node = self._node(str(message["node"]))
            if node.state != HEALING:
                return {"restored": 0}, None
            node.state = ""
            links = [s.veth for s in self._sandboxes.values() if s.node == node.name and s.uid in keep]
        for veth in links:
            self._link(veth, up=True)
        log.info("node %s healed: %d pod link(s) up", node.name, len(links))
        return {"restored": len(links)}, None

    def op_degrade(self, message: Message) -> tuple[Message, None]:
        """The node's pods' links lose ``loss`` percent of their packets and delay them by
        ``delay_ms`` (each absent: unchanged; 0: lifted), now and for pods started later."""
        with self._degrade_lock:
            with self._lock:
                node = self._node(str(message["node"]))
                old = node.links
            links = degrade.LinkFaults(loss=int(message.get("loss", old.loss)),
                                       delay_ms=int(message.get("delay_ms", old.delay_ms)))
            if not 0 <= links.loss <= 100 or links.delay_ms < 0:
                raise NetworkSetupError(f"bad link degradation {links}")
            if links.delay_ms and not old.delay_ms:
                if self._netem_missing is None:
                    self._netem_missing = degrade.netem_missing() or ""
                if self._netem_missing:
                    raise NetworkSetupError(self._netem_missing)
            with self._lock:
                node.links = links
                veths = [s.veth for s in self._sandboxes.values() if s.node == node.name]
            try:
                self._apply_loss()
                if links.delay_ms != old.delay_ms:
                    for veth in veths:
                        self._delay(veth, links.delay_ms)
            except (OSError, NetworkSetupError):
                with self._lock:
                    node.links = old
                self._apply_loss()
                raise
        log.info("node %s: pod links lose %d%% and are delayed %d ms (%d link(s))", node.name, links.loss,
                 links.delay_ms, len(veths))
        return {"pods": len(veths)}, None

    def _apply_loss(self) -> None:
        with self._lock:
            lossy = {node.name: (node.links.loss, [s.veth for s in self._sandboxes.values() if s.node == node.name])
                     for node in self._nodes.values() if node.links.loss}
        degrade.apply_loss(lossy)

    def _delay(self, veth: str, delay_ms: int) -> None:
        error = degrade.set_delay(veth, delay_ms)
        if error and delay_ms:
            raise NetworkSetupError(f"delay on {veth}: {error}")

    def _links_changed(self, node_name: str) -> None:
        """A pod of ``node_name`` came or went: its node's degradation covers exactly its pods."""
        with self._lock:
            node = self._nodes.get(node_name)
            links = node.links if node is not None else degrade.LinkFaults()
        if links.loss:
            with self._degrade_lock, contextlib.suppress(OSError):
                self._apply_loss()

    def op_status(self, _message: Message) -> tuple[Message, None]:
        with self._lock:
            return {"nodes": {n.name: {"state": n.state, "cidr": str(n.cidr), "bridge": n.bridge}
                              for n in self._nodes.values()},
                    "pods": len(self._sandboxes), "kubernetes": self.kubernetes_ip, "dns": self.dns_ip,
                    "services": "kernel" if self.kernel_nat else "proxy"}, None

    # --- sandboxes --------------------------------------------------------------------------
    def op_sandbox(self, message: Message) -> tuple[Message, None]:
        uid, ip = str(message["uid"]), str(ipaddress.IPv4Address(str(message["ip"])))
        account = Path(str(message["serviceaccount"]))
        hostname = str(message.get("hostname") or "pod")[:63]
        with self._lock:
            existing = self._sandboxes.get(uid)
            if existing is not None and existing.pause.poll() is None:
                return {"pid": existing.pause.pid}, None
            node = self._node(str(message["node"]))
            veth = f"vh{next(self._veths)}"
        if ipaddress.IPv4Address(ip) not in node.cidr:
            raise NetworkSetupError(f"pod IP {ip} is not in node {node.name}'s range {node.cidr}")
        account.mkdir(parents=True, exist_ok=True)
        hosts = account.parent / "etc-hosts"
        hosts.write_text(hosts_file(ip, hostname))
        nsswitch = account.parent / "etc-nsswitch.conf"
        with contextlib.suppress(OSError):  # a machine without one: the pod goes without too
            nsswitch.write_text(pod_nsswitch(Path("/etc/nsswitch.conf").read_text()))
        resolv = account.parent / "etc-resolv.conf"
        resolv.write_text(str(message.get("resolv_conf") or resolv_conf(self.dns_ip, str(message.get("namespace") or "default"))))
        pause = subprocess.Popen([*_PAUSE, hostname], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        sandbox = Sandbox(uid, node.name, ip, veth, pause)
        try:
            assert pause.stdout is not None
            if not pause.stdout.readline():
                raise NetworkSetupError(f"pause process: {pause.communicate()[1].decode(errors='replace').strip()}")
            pid = str(pause.pid)
            run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pid])
            run(["ip", "link", "set", veth, "master", node.bridge])
            run(["nsenter", "-t", pid, "-n", "ip", "-batch", "-"],
                f"addr add {ip}/{node.cidr.prefixlen} dev eth0\nlink set eth0 up\nlink set lo up\n"
                f"route add default via {node.gateway}\n")
            run(["nsenter", "-t", pid, "-m", "sh", "-c", _MOUNTS, "sh", str(account), SERVICE_ACCOUNT_PATH, str(hosts),
                 str(nsswitch), str(resolv)])
            with self._lock:
                self._sandboxes[uid] = sandbox
                up = node.state != PARTITIONED
            if node.links.delay_ms:
                self._delay(veth, node.links.delay_ms)
            self._links_changed(node.name)  # before its link is up: a lossy node's pod is never spared
            if up:  # a pod started on a partitioned node waits for the heal like the others
                self._link(veth, up=True)
        except BaseException:
            self._release(sandbox)
            raise
        return {"pid": pause.pid}, None

    def op_teardown(self, message: Message) -> tuple[Message, None]:
        with self._lock:
            sandbox = self._sandboxes.pop(str(message["uid"]), None)
        if sandbox is not None:
            self._release(sandbox)
            self._links_changed(sandbox.node)
        return {}, None

    def _release(self, sandbox: Sandbox) -> None:
        """The pod loses its network at once (its veth goes), whatever still runs in it."""
        with contextlib.suppress(OSError, NetworkSetupError, subprocess.TimeoutExpired):
            run(["ip", "link", "del", sandbox.veth])
        sandbox.pause.kill()
        sandbox.pause.communicate()

    def _link(self, veth: str, up: bool) -> None:
        with contextlib.suppress(NetworkSetupError):  # gone with its pod meanwhile
            run(["ip", "link", "set", veth, "up" if up else "down"])

    # --- connections into the pod network ---------------------------------------------------
    def op_dial(self, message: Message) -> tuple[Message, socket.socket]:
        timeout = float(message.get("timeout") or 10.0)
        return {}, socket.create_connection((str(message["host"]), int(message["port"])), timeout=timeout)

    def op_apiserver(self, message: Message) -> tuple[Message, socket.socket]:
        """A connection to the API server for a kubelet, relayed here so a partition cuts it."""
        with self._lock:
            node = self._node(str(message["node"]))
            if node.state == PARTITIONED:
                raise NetworkSetupError(f"node {node.name} is partitioned")
            healing = node.state == HEALING
        server = unixsock.connect(self.directory / UNIX_SOCKET, timeout=10)
        server.settimeout(None)
        kubelet_end, relay_end = socket.socketpair()
        relay = Relay(relay_end, server, self._open[node.name])
        with self._lock:
            node.relays = {r for r in node.relays if not r.closed} | {relay}
        return {"healing": healing}, kubelet_end

    # --- Services ---------------------------------------------------------------------------
    def op_services(self, message: Message) -> tuple[Message, None]:
        """A kubelet's proxy rules (every node computes the same from the cluster's caches;
        the newest update wins where they differ)."""
        rules = {(str(f[0]), int(f[1])): [(str(b[0]), int(b[1])) for b in backends]
                 for f, backends in message.get("rules") or []}
        with self._lock:
            self._rules.pop(str(message["node"]), None)
            self._rules[str(message["node"])] = rules
        self._apply_rules()
        return {}, None

    def op_names(self, message: Message) -> tuple[Message, None]:
        """A kubelet's DNS records (each computes the same from its caches; the newest wins)."""
        self.dns.update(Records.from_json(message.get("records") or {}))
        return {}, None

    def _say_services(self, how: str) -> None:
        log.info("Service ClusterIPs: %s", how)
        (self.directory / nat.SERVICES_FILE).write_text(how + "\n")

    def _apply_rules(self) -> None:
        # Kubelets' updates arrive on threads of their own: one at a time, each from the
        # newest rules, so an older set is never applied over a newer one.
        with self._apply_lock:
            with self._lock:
                merged: dict[Frontend, list[Backend]] = {}
                for rules in self._rules.values():
                    merged.update(rules)
                bridges = tuple(sorted(n.bridge for n in self._nodes.values()))
            # The DNS answers on its ClusterIP itself; the `kubernetes` Service goes to the API
            # server's unix socket (relative to DIR, our cwd).
            merged = {f: b for f, b in merged.items() if f[0] != self.dns_ip}
            merged[(self.kubernetes_ip, 443)] = [(str(UNIX_SOCKET), 0)]
            everything = tuple(sorted(merged.items()))
            if (everything, bridges, self.kernel_nat) == self._applied:
                return
            proxied = merged
            if self.kernel_nat:
                in_kernel = {f: b for f, b in merged.items() if all(port for _, port in b)}
                try:
                    nat.apply(in_kernel, bridges)
                    proxied = {f: b for f, b in merged.items() if f not in in_kernel}
                except (OSError, subprocess.SubprocessError) as exc:
                    log.error("Service ClusterIPs: the kernel refused the rules (%s); the userspace proxy takes "
                              "them all from now on", exc)
                    self.kernel_nat = False
                    self._say_services(f"userspace proxy (the kernel refused the rules: {exc})")
                    with contextlib.suppress(OSError, subprocess.SubprocessError):
                        nat.remove()
            self.proxy.update(proxied)
            self._applied = (everything, bridges, self.kernel_nat)


def serve(directory: Path, service_cidr: str, ready_fd: Optional[int]) -> None:
    """Build the network, say ready, and serve until SIGTERM (raised as SystemExit)."""
    os.chdir(directory)
    router = Router(directory, service_cidr)
    router.start()
    log.info("pod network ready: services %s (kubernetes at %s:443)", service_cidr, router.kubernetes_ip)
    if ready_fd is not None:
        with contextlib.suppress(OSError):
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
    try:
        threading.Event().wait()
    finally:
        router.stop()
