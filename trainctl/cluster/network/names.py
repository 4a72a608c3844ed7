"""Rewriting Service names in env values and command lines to the addresses that reach them.

torch's C++ TCPStore and MindSpore resolve host names in C, so a Python-level resolver is
not enough, and /etc/hosts belongs to the machine. Instead the kubelet rewrites a Service
name where a process will read it: env values and container arguments. Only whole tokens
are rewritten (see :data:`_TOKEN`), so a path, a file name or a longer word that merely
contains a Service name is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, Union

from trainctl.cluster.network.ranges import CLUSTER_DOMAIN


@dataclass(frozen=True)
class Pending:
    """The name is a Service (or will be) but has no address yet; the container must wait."""

    reason: str


Resolution = Union[str, Pending, None]  # an address, "wait", or "not a Service name"
Resolver = Callable[[str, str], Resolution]  # (namespace, service) -> Resolution

_SERVICE_LABEL = r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"  # DNS-1035: Service names start with a letter
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"  # DNS-1123: namespaces may start with a digit
# A DNS name preceded by the start of the text, whitespace, one of = , ; @ " ' ( [ or a URL's
# "//", and followed by the end, whitespace, a port's ":", or one of , ; " ' ) ] (and "/"
# after "//", as in http://svc/path). "data/svc", "svc_x", "60" or "10.0.0.1" are not tokens.
_TOKEN = re.compile(
    rf"""(?:^|(?<=[\s=,;@"'(\[])|(?<=//))(?P<name>{_SERVICE_LABEL}(?:\.{_LABEL})*)(?=$|[\s:,;/"')\]])"""
)


def split_service_name(name: str, namespace: str) -> Optional[tuple[str, str]]:
    """``svc``, ``svc.ns``, ``svc.ns.svc`` or ``svc.ns.svc.cluster.local`` -> (namespace, svc)."""
    parts = name.split(".")
    if len(parts) == 1:
        return namespace, parts[0]
    if len(parts) == 2 or (len(parts) == 3 and parts[2] == "svc") or parts[2:] == ["svc", *CLUSTER_DOMAIN.split(".")]:
        return parts[1], parts[0]
    return None


def rewrite(text: str, namespace: str, resolve: Resolver) -> tuple[str, list[str]]:
    """Replace every Service-name token in ``text``; return the new text and what is still pending."""
    pending: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        name = match.group("name")
        end = match.end()
        if end < len(text) and text[end] == "/" and text[max(0, match.start() - 2):match.start()] != "//":
            return name  # "svc/x" is a path, not a URL host
        target = split_service_name(name, namespace)
        if target is None:
            return name
        resolution = resolve(*target)
        if isinstance(resolution, Pending):
            pending.append(resolution.reason)
            return name
        return resolution if resolution else name

    return _TOKEN.sub(substitute, text), pending
