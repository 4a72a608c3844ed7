"""Resolve Kubernetes Service names from trainctl's hosts file (loaded by Python at start-up).

This file is copied next to the cluster's hosts file and put first on a pod's PYTHONPATH by
the local kubelet. It must not import trainctl: the pod may run another interpreter. Names
are looked up as given, then with the pod namespace's DNS search list, like a pod's
resolv.conf; anything else goes to the normal resolver. A sitecustomize that was already on
the path is still run afterwards.
"""

import importlib.machinery
import importlib.util
import os
import socket
import sys
from typing import Any, Optional, cast

_HOSTS = os.environ.get("TRAINCTL_HOSTS_FILE", "")
_NAMESPACE = os.environ.get("TRAINCTL_POD_NAMESPACE", "default")
_SEARCH = (f"{_NAMESPACE}.svc.cluster.local", "svc.cluster.local", "cluster.local")
# Annotations naming builtin generics are quoted: the pod's interpreter may be older than them.
_cache: "dict[str, Any]" = {"mtime": None, "table": {}}


def _table() -> "dict[str, str]":
    try:
        mtime = os.stat(_HOSTS).st_mtime_ns
    except OSError:
        return {}
    if mtime != _cache["mtime"]:
        table: dict[str, str] = {}
        with open(_HOSTS, encoding="utf-8") as hosts:
            for line in hosts:
                fields = line.split()
                for name in fields[1:]:
                    table[name.lower()] = fields[0]
        _cache["mtime"], _cache["table"] = mtime, table
    return cast("dict[str, str]", _cache["table"])


def _lookup(host: object) -> Optional[str]:
    if not isinstance(host, str) or not host:
        return None
    name = host.lower().rstrip(".")
    table = _table()
    if name in table:
        return table[name]
    if not host.endswith("."):
        for suffix in _SEARCH:
            if f"{name}.{suffix}" in table:
                return table[f"{name}.{suffix}"]
    return None


_getaddrinfo = socket.getaddrinfo
_gethostbyname = socket.gethostbyname
_gethostbyname_ex = socket.gethostbyname_ex


def getaddrinfo(host: "bytes | str | None", *args: Any, **kwargs: Any) -> "list[Any]":
    return _getaddrinfo(_lookup(host) or host, *args, **kwargs)


def gethostbyname(host: str) -> str:
    return _lookup(host) or _gethostbyname(host)


def gethostbyname_ex(host: str) -> "tuple[str, list[str], list[str]]":
    address = _lookup(host)
    return (host, [], [address]) if address else _gethostbyname_ex(host)


if _HOSTS:
    socket.getaddrinfo = getaddrinfo
    socket.gethostbyname = gethostbyname
    socket.gethostbyname_ex = gethostbyname_ex


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec and spec.loader and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
