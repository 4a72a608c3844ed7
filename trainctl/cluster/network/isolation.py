"""Which pod network a cluster runs: isolated where the machine allows it, else shared.

The isolated network (:mod:`.router`) needs an unprivileged user namespace with a network
namespace in it, and util-linux's ``unshare``/``nsenter`` and iproute2's ``ip``. Some
machines refuse user namespaces (``kernel.unprivileged_userns_clone=0``, AppArmor's
``restrict_unprivileged_userns``, a container's seccomp profile); there the cluster runs in
shared mode, as before, and says so. Asking for ``isolated`` there is an error.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from typing import Optional

ISOLATED, SHARED, AUTO = "isolated", "shared", "auto"
MODES = (ISOLATED, SHARED)

# Inside the cluster's own namespaces the ranges can be Kubernetes' usual ones: no other
# cluster sees them. Node i gets 10.244.i.0/24; the `kubernetes` Service is 10.96.0.1.
POD_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
NODE_PREFIX = 24
# On each Node: which network its pods have (the scheduler's port rule depends on it).
POD_NETWORK_LABEL = "trainctl.io/pod-network"

DESCRIPTIONS = {
    ISOLATED: "isolated: each pod has its own network namespace, IP and ports (pods on the default port run side by side)",
    SHARED: "shared: every pod on this machine's network, its ports host ports (jobs on one port wait for each other)",
}


def tool_path() -> str:
    """PATH with the system directories ``ip`` lives in (a user's PATH may lack /usr/sbin)."""
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    return os.pathsep.join(parts + [d for d in ("/usr/sbin", "/sbin") if d not in parts])


def node_cidr(index: int) -> str:
    """The podCIDR of the cluster's ``index``-th node (0-based) in the isolated network."""
    slices = ipaddress.ip_network(POD_CIDR).subnets(new_prefix=NODE_PREFIX)
    for i, cidr in enumerate(slices):
        if i == index:
            return str(cidr)
    raise ValueError(f"an isolated local cluster has at most {2 ** (NODE_PREFIX - 16)} nodes")


def isolation_problem() -> Optional[str]:
    """Why this machine cannot run the isolated network (None: it can)."""
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool, path=tool_path()) is None:
            return f"{tool} is not installed"
    try:
        probe = subprocess.run(["unshare", "-U", "-r", "-n", "-m", "--", "ip", "link", "add", "probe0", "type", "bridge"],
                               env={**os.environ, "PATH": tool_path()}, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare: {exc}"
    if probe.returncode != 0:
        return "unprivileged user and network namespaces are refused here (" + \
            " ".join(probe.stderr.decode(errors="replace").split())[:200] + ")"
    return None


def describe(mode: str, reason: str) -> str:
    """``isolated: each pod has its own ... (why)``: the chosen network as users are told it."""
    return f"{DESCRIPTIONS.get(mode, mode)} ({reason})"


def choose(requested: str) -> tuple[str, str]:
    """(mode, why) for ``--network requested``; ``isolated`` where refused raises ValueError."""
    if requested == SHARED:
        return SHARED, "asked for"
    problem = isolation_problem()
    if problem is None:
        return ISOLATED, "asked for" if requested == ISOLATED else "this machine allows it"
    if requested == ISOLATED:
        raise ValueError(f"--network isolated: {problem}; use --network shared")
    return SHARED, f"isolated is not possible: {problem}"
