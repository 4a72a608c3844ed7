"""``/healthz``, ``/livez`` and ``/readyz`` as kube-apiserver answers them.

Load balancers, ``kubectl get --raw '/readyz?verbose'`` and operators' scripts read more than
"ok": each named check on a line of its own (``[+]etcd ok``), one check by its path
(``/readyz/etcd``), ``?exclude=NAME``, and on failure HTTP 500 with the failing check named
and the reason withheld, as kube does for callers it does not trust with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

# name -> why it fails now ("" when it passes)
Check = Callable[[], str]

ENDPOINTS = ("healthz", "livez", "readyz")


def answer(endpoint: str, rest: list[str], query: Mapping[str, str], checks: Mapping[str, Check],
           excluded: list[str]) -> web.Response:
    """The response to ``/<endpoint>[/<check>]`` with ``query``'s ``verbose``."""
    if rest:
        check = checks.get("/".join(rest))
        if check is None:
            return web.Response(status=404, text="404 page not found\n")
        failure = check()
        return web.Response(status=500 if failure else 200,
                            text=f"internal server error: {failure}\n" if failure else "ok")
    lines, failed = [], False
    for name, check in checks.items():
        if name in excluded:
            lines.append(f"[+]{name} excluded: ok")
            continue
        failure = check()
        failed = failed or bool(failure)
        lines.append(f"[-]{name} failed: reason withheld" if failure else f"[+]{name} ok")
    if failed:
        return web.Response(status=500, text="\n".join([*lines, f"{endpoint} check failed", ""]))
    if "verbose" not in query:
        return web.Response(text="ok")
    return web.Response(text="\n".join([*lines, f"{endpoint} check passed", ""]))
