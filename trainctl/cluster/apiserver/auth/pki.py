"""The cluster's certificate authority and the certificates it signs.

kubectl (client-go) does not send a bearer token to an ``http://`` server, so the server
speaks HTTPS: on first start it makes a CA and a serving certificate for its loopback
address (ECDSA P-256: key generation takes milliseconds, which keeps start-up fast), keeps
them in ``DIR/pki`` (keys mode 0600) and reuses them on every restart, so kubeconfigs stay
valid.

The API server and the kubelets trust each other as kubeadm sets them up: the API server
reaches a kubelet with a client certificate of its own (``apiserver-kubelet-client``, CN
``kube-apiserver-kubelet-client``: worthless against the API server, which knows no such
user) and checks the kubelet's serving certificate against the CA; each kubelet has, in
``DIR/pki/nodes/NAME``, a serving certificate (CN ``system:node:NAME``, the node's address
and name) and a client certificate (CN ``system:node:NAME``, O ``system:nodes``) it
authenticates to the API server with, so NodeRestriction and the node's RBAC apply to it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=3650)
KUBELET_CLIENT_NAME = "kube-apiserver-kubelet-client"  # who the API server is to kubelets
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"


@dataclass
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        """The API server's TLS: its serving certificate; a client certificate the CA signed
        is checked when one is offered (a kubelet's), and a request may come without one."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        context.load_verify_locations(self.ca_cert)
        context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()


@dataclass(frozen=True)
class NodeCredentials:
    """A kubelet's files: its serving certificate and key, its client certificate and key."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    client_cert: Path
    client_key: Path


def write_atomically(path: Path, data: bytes, private: bool) -> None:
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


# The names a pod reaches the API server by, through the ``kubernetes`` Service.
SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


def serving_names(host: str, service_ip: str | None = None) -> list[x509.GeneralName]:
    """The serving certificate's names: loopback, ``host``, and (with ``service_ip``) the
    ``kubernetes`` Service's ClusterIP and DNS names, as kube-apiserver's certificate has."""
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(host))]
    if host != "127.0.0.1":
        names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    if service_ip is not None:
        names += [x509.IPAddress(ipaddress.ip_address(service_ip)), *(x509.DNSName(n) for n in SERVICE_NAMES)]
    return names


@dataclass(frozen=True)
class _Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate


def _not_before() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)


def _authority(directory: Path) -> _Authority:
    """The CA of ``directory`` (``ca.crt``, ``ca.key``), made on first use."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    cert_path, key_path = directory / "ca.crt", directory / "ca.key"
    if cert_path.exists() and key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return _Authority(key, x509.load_pem_x509_certificate(cert_path.read_bytes()))
    now = _not_before()
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("trainctl-local-ca"))
        .issuer_name(_name("trainctl-local-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    write_atomically(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()), private=True)
    write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return _Authority(key, cert)


def _issue(ca: _Authority, subject: x509.Name, usage: x509.ObjectIdentifier, cert_path: Path, key_path: Path,
           names: list[x509.GeneralName] | None = None) -> None:
    """A certificate for ``subject`` signed by ``ca``, for ``usage`` (server or client auth)."""
    now = _not_before()
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    write_atomically(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()), private=True)
    write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)


def _signed_by(cert_path: Path, ca: _Authority) -> bool:
    """Whether the certificate at ``cert_path`` is there and ``ca`` signed it (a new CA, made
    after ``DIR/pki`` lost its key, has the same name: the signature tells them apart)."""
    if not cert_path.exists():
        return False
    try:
        x509.load_pem_x509_certificate(cert_path.read_bytes()).verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def ensure(directory: Path, host: str, service_ip: str | None = None) -> Pki:
    """Load the CA and serving certificate from ``directory``, creating what is missing."""
    pki = Pki(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
    names = serving_names(host, service_ip)
    ca = _authority(directory)
    if not (pki.server_key.exists() and _signed_by(pki.server_cert, ca) and _covers(pki.server_cert, names)):
        _issue(ca, _name("trainctl-local-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, pki.server_cert,
               pki.server_key, names)
    return pki


def kubelet_client_context(directory: Path) -> ssl.SSLContext:
    """How the API server dials kubelets: with its kubelet client certificate (made on first
    use), trusting only serving certificates the cluster CA signed for the address dialled."""
    ca = _authority(directory)
    cert, key = directory / "apiserver-kubelet-client.crt", directory / "apiserver-kubelet-client.key"
    if not (key.exists() and _signed_by(cert, ca)):
        _issue(ca, _name(KUBELET_CLIENT_NAME), ExtendedKeyUsageOID.CLIENT_AUTH, cert, key)
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=directory / "ca.crt")
    context.load_cert_chain(cert, key)
    return context


def ensure_node(directory: Path, node: str, address: str) -> NodeCredentials:
    """The credentials of node ``node``'s kubelet, serving on ``address``; made when missing
    (or signed by another CA)."""
    ca = _authority(directory)
    home = directory / "nodes" / node
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    credentials = NodeCredentials(directory / "ca.crt", home / "kubelet.crt", home / "kubelet.key",
                                  home / "kubelet-client.crt", home / "kubelet-client.key")
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName(node)]
    if not (credentials.serving_key.exists() and _signed_by(credentials.serving_cert, ca)
            and _covers(credentials.serving_cert, names)):
        _issue(ca, _name(f"{NODE_PREFIX}{node}"), ExtendedKeyUsageOID.SERVER_AUTH, credentials.serving_cert,
               credentials.serving_key, names)
    if not (credentials.client_key.exists() and _signed_by(credentials.client_cert, ca)):
        _issue(ca, _name(f"{NODE_PREFIX}{node}", NODES_GROUP), ExtendedKeyUsageOID.CLIENT_AUTH,
               credentials.client_cert, credentials.client_key)
    return credentials


def common_name(peer: dict[str, object] | None) -> str | None:
    """The CN of a peer certificate as ``ssl.SSLSocket.getpeercert()`` gives it."""
    names = _attribute(peer, "commonName")
    return names[0] if names else None


def organizations(peer: dict[str, object] | None) -> list[str]:
    return _attribute(peer, "organizationName")


def _attribute(peer: dict[str, object] | None, name: str) -> list[str]:
    subject = (peer or {}).get("subject") or ()
    return [str(value) for rdn in subject for key, value in rdn if key == name]  # type: ignore[attr-defined]


def _covers(cert_path: Path, names: list[x509.GeneralName]) -> bool:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        present = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return all(name in present for name in names)


def service_account_key(directory: Path) -> ec.EllipticCurvePrivateKey:
    """The key ServiceAccount tokens are signed with (``DIR/pki/sa.key``), made on first use and
    kept, so tokens handed out before a restart stay valid after it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / "sa.key"
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key
    key = ec.generate_private_key(ec.SECP256R1())
    write_atomically(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()), private=True)
    return key
