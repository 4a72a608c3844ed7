"""A node's pods' data links made lossy or slow, in the router's namespace (isolated network).

``trainctl local node degrade NODE --net-loss PERCENT`` drops that share of the packets
crossing any of the node's pods' links, each way: a packet from a pod of the node to a pod
elsewhere crosses one such link, one between two pods of the node crosses two. At 100 % the
node's pods reach nothing and nothing reaches them, while its kubelet, whose path to the
API server is a relay of the router's and not a pod link, keeps the node Ready: a dead data
link, unlike ``partition``. The drops are one nftables table of the ``bridge`` family,
``trainctl_degrade``, matching the host ends of the pods' veths (``numgen random``), replaced
whole whenever a degraded node's pods come or go.

``--net-delay DURATION`` holds each packet sent to the node's pods that long (one netem
queue per pod link, host end), where the kernel has ``sch_netem``; where it has not, the
request is refused and says so (:func:`netem_missing`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

TABLE = "trainctl_degrade"
_REPLACE = f"add table bridge {TABLE}\ndelete table bridge {TABLE}\n"
_PROBE_LINK = "netemprobe0"


@dataclass(frozen=True)
class LinkFaults:
    """What is done to one node's pod links: percent of packets lost, delay in ms."""

    loss: int = 0
    delay_ms: int = 0

    def __bool__(self) -> bool:
        return bool(self.loss or self.delay_ms)


def _names(veths: Sequence[str]) -> str:
    return "{ " + ", ".join(f'"{veth}"' for veth in sorted(veths)) + " }"


def ruleset(lossy: Mapping[str, tuple[int, Sequence[str]]]) -> str:
    """The whole table for ``{node: (loss percent, its pods' veths)}``: a packet is dropped as
    it enters the bridge from a pod link, and as it leaves the bridge to one."""
    entering, leaving = [], []
    for node, (loss, veths) in sorted(lossy.items()):
        if not veths or loss <= 0:
            continue
        drop = "drop" if loss >= 100 else f"numgen random mod 100 < {loss} drop"
        entering.append(f"iifname {_names(veths)} {drop} comment \"{node}\"")
        leaving.append(f"oifname {_names(veths)} {drop} comment \"{node}\"")
    chains = []
    for name, hook, rules in (("entering", "prerouting", entering), ("leaving", "postrouting", leaving)):
        body = "".join(f"    {rule}\n" for rule in rules)
        chains.append(f"  chain {name} {{\n    type filter hook {hook} priority 0; policy accept;\n{body}  }}\n")
    return f"{_REPLACE}table bridge {TABLE} {{\n{''.join(chains)}}}\n"


def apply_loss(lossy: Mapping[str, tuple[int, Sequence[str]]]) -> None:
    _nft(ruleset(lossy) if any(loss > 0 and veths for loss, veths in lossy.values()) else _REPLACE)


def _nft(script: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError(f"nftables refused the packet loss rules: {done.stderr.strip() or done.returncode}")


def delay_argv(veth: str, delay_ms: int) -> list[str]:
    """The command that sets (``delay_ms`` > 0) or removes the delay on one pod link."""
    if delay_ms <= 0:
        return ["tc", "qdisc", "del", "dev", veth, "root"]
    return ["tc", "qdisc", "replace", "dev", veth, "root", "netem", "delay", f"{delay_ms}ms"]


def _run(argv: list[str]) -> str:
    """"" when ``argv`` succeeded, else its error output."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit status {done.returncode}")


def netem_missing() -> Optional[str]:
    """None where the kernel can delay packets here (``sch_netem``), else why not."""
    error = _run(["ip", "link", "add", _PROBE_LINK, "type", "dummy"])
    if error:
        return f"no link to try netem on: {error}"
    try:
        error = _run(delay_argv(_PROBE_LINK, 1))
    finally:
        _run(["ip", "link", "del", _PROBE_LINK])
    if not error:
        return None
    if "unknown" in error.lower():
        return f"this kernel has no sch_netem (tc qdisc netem: {error}), so packet delay cannot be staged here"
    return f"tc qdisc netem refused here: {error}"


def set_delay(veth: str, delay_ms: int) -> str:
    """Apply (or remove) one pod link's delay; "" or the error."""
    return _run(delay_argv(veth, delay_ms))
