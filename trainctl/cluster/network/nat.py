"""Service ClusterIPs forwarded by the kernel: nftables NAT in the router's namespace.

kube-proxy's iptables and nftables modes, inside the cluster's own network namespace (an
unprivileged user namespace holds the rights; nothing of the machine's tables is touched).
A connection to ``ClusterIP:port`` is rewritten (DNAT) to one ready endpoint, chosen at
random per connection, when its first packet enters the router; every later packet is
forwarded by the kernel's connection tracking, with no process on the path. That matters
for the traffic training lives on: a userspace proxy is one more interpreter between a
torchrun agent and its rendezvous store, and on a loaded machine its delays were long
enough for torch to take live agents for dead ones.

A pod that reaches a Service backed by a pod on its own bridge would get the answer
straight from that pod, from an address it never called; such hairpin connections are
masqueraded behind the gateway, as kube-proxy does. Where ``nft`` is missing or the kernel
refuses NAT in the namespace, :func:`probe` says why and the router keeps the userspace
proxy (:mod:`.proxy`) for every Service.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional

from trainctl.cluster.network.proxy import Backend, Frontend

TABLE = "trainctl"
SERVICES_FILE = Path("run") / "network.services"  # which path forwards ClusterIPs, and why (for `status`)
_REPLACE = f"add table ip {TABLE}\ndelete table ip {TABLE}\n"  # "add" first: the delete is safe on a first run


def probe() -> Optional[str]:
    """None where the kernel can forward Services here, else why not (run in the router)."""
    if shutil.which("nft") is None:
        return "nft (nftables) is not installed"
    try:
        _apply(ruleset({}, ()))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nftables NAT is refused here: {exc}"
    return None


def ruleset(rules: Mapping[Frontend, Sequence[Backend]], bridges: Iterable[str]) -> str:
    """The whole table, replaced in one transaction (connections already made keep their
    translation: it lives in connection tracking, not in the rules)."""
    services: list[str] = []
    endpoint_chains: list[str] = []
    for index, ((cluster_ip, port), backends) in enumerate(sorted(rules.items())):
        if not backends:
            continue  # no rule: the packet is delivered to the router, where nothing listens (refused)
        match = f"ip daddr {cluster_ip} tcp dport {port}"
        if len(backends) == 1:
            services.append(f"{match} dnat to {_address(backends[0])}")
            continue
        names = [f"svc{index}_ep{k}" for k in range(len(backends))]
        choices = ", ".join(f"{k} : jump {name}" for k, name in enumerate(names))
        services.append(f"{match} numgen random mod {len(backends)} vmap {{ {choices} }}")
        endpoint_chains += [f"  chain {name} {{\n    meta l4proto tcp dnat to {_address(backend)}\n  }}"
                            for name, backend in zip(names, backends, strict=True)]
    hairpins = [f'iifname "{bridge}" oifname "{bridge}" ct status dnat masquerade' for bridge in sorted(bridges)]
    body = "\n".join([
        _chain("services", services),
        *endpoint_chains,
        _chain("prerouting", ["type nat hook prerouting priority dstnat; policy accept;", "jump services"]),
        _chain("output", ["type nat hook output priority -100; policy accept;", "jump services"]),
        _chain("postrouting", ["type nat hook postrouting priority srcnat; policy accept;", *hairpins]),
    ])
    # The new table follows the old one's removal in the same transaction: no packet sees a
    # half-written rule set.
    return f"{_REPLACE}table ip {TABLE} {{\n{body}\n}}\n"


def apply(rules: Mapping[Frontend, Sequence[Backend]], bridges: Iterable[str]) -> None:
    _apply(ruleset(rules, bridges))


def remove() -> None:
    _apply(_REPLACE)


def _apply(script: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"nft exited with {done.returncode}")


def _chain(name: str, statements: Sequence[str]) -> str:
    lines = "".join(f"    {statement}\n" for statement in statements)
    return f"  chain {name} {{\n{lines}  }}"


def _address(backend: Backend) -> str:
    return f"{backend[0]}:{backend[1]}"
