"""The cluster's certificates: each made once, kept, and made again only when its CA changed."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from trainctl.cluster.apiserver.auth import pki


def _subject(path: Path) -> str:
    return x509.load_pem_x509_certificate(path.read_bytes()).subject.rfc4514_string()


def test_node_credentials_name_the_node_and_are_kept(tmp_path: Path) -> None:
    first = pki.ensure_node(tmp_path, "node-a", "127.0.0.1")
    assert _subject(first.client_cert) == "CN=system:node:node-a,O=system:nodes"
    assert _subject(first.serving_cert) == "CN=system:node:node-a"
    names = x509.load_pem_x509_certificate(first.serving_cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["node-a"]
    assert (first.client_key.stat().st_mode & 0o777) == 0o600
    kept = first.client_cert.read_bytes()
    assert pki.ensure_node(tmp_path, "node-a", "127.0.0.1") == first and first.client_cert.read_bytes() == kept


def test_a_new_ca_gets_new_certificates(tmp_path: Path) -> None:
    """A CA made again after its key was lost has the same name; what the old one signed is
    not trusted by anyone any more, so it is made again."""
    credentials = pki.ensure_node(tmp_path, "node-a", "127.0.0.1")
    pki.kubelet_client_context(tmp_path)
    old = credentials.serving_cert.read_bytes(), (tmp_path / "apiserver-kubelet-client.crt").read_bytes()
    for name in ("ca.crt", "ca.key"):
        (tmp_path / name).unlink()
    pki.ensure_node(tmp_path, "node-a", "127.0.0.1")
    pki.kubelet_client_context(tmp_path)
    assert credentials.serving_cert.read_bytes() != old[0]
    assert (tmp_path / "apiserver-kubelet-client.crt").read_bytes() != old[1]
