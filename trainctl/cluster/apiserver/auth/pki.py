"""The server's own certificate authority and serving certificate.

kubectl (client-go) does not send a bearer token to an ``http://`` server, so the server
speaks HTTPS: on first start it makes a CA and a serving certificate for its loopback
address (ECDSA P-256: key generation takes milliseconds, which keeps start-up fast), keeps
them in ``DIR/pki`` (keys mode 0600) and reuses them on every restart, so kubeconfigs stay
valid.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=3650)


@dataclass
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()


def _write(path: Path, data: bytes, private: bool) -> None:
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


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


def ensure(directory: Path, host: str, service_ip: str | None = None) -> Pki:
    """Load the CA and serving certificate from ``directory``, creating what is missing."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki = Pki(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
    ca_key_path = directory / "ca.key"
    names = serving_names(host, service_ip)
    if pki.server_cert.exists() and pki.server_key.exists() and pki.ca_cert.exists() and _covers(pki.server_cert, names):
        return pki
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    if pki.ca_cert.exists() and ca_key_path.exists():
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("trainctl-local-ca"))
            .issuer_name(_name("trainctl-local-ca"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        _write(ca_key_path, ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), private=True)
        _write(pki.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("trainctl-local-apiserver"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    _write(pki.server_key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()), private=True)
    _write(pki.server_cert, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return pki


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
    _write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()), private=True)
    return key
