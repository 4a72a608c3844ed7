"""``python -m trainctl.cluster.apiserver --dir DIR``: run the API server in the foreground.

It serves HTTPS with its own CA (``DIR/pki``, see ``pki``). Once it is ready it writes
``DIR/kubeconfig`` (embedding the CA) and ``DIR/token`` (both mode 0600) and, last,
``DIR/apiserver.port``, so a supervisor can wait for that file. Data lives in
``DIR/state.db``. SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import ipaddress
import logging
import os
import secrets
import signal
import sqlite3
import sys
from pathlib import Path

import yaml
from aiohttp import web

from trainctl.cluster import unixsock
from trainctl.cluster.apiserver import system_objects
from trainctl.cluster.apiserver.auth import pki
from trainctl.cluster.apiserver.process import PORT_FILE, UNIX_SOCKET
from trainctl.cluster.apiserver.serving.server import STATE_FILE, ApiServer

CLUSTER_NAME = "trainctl-local"


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only, atomically."""
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(partial, 0o600)
    os.replace(partial, path)


def load_or_create_token(data_dir: Path) -> str:
    path = data_dir / "token"
    if path.exists():
        token = path.read_text().strip()
        if token:
            os.chmod(path, 0o600)
            return token
    token = secrets.token_urlsafe(32)
    write_private(path, token + "\n")
    return token


def kubeconfig(server_url: str, token: str, ca_pem: bytes) -> str:
    cluster = {"server": server_url, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
        "users": [{"name": CLUSTER_NAME, "user": {"token": token}}],
        "contexts": [{"name": CLUSTER_NAME,
                      "context": {"cluster": CLUSTER_NAME, "user": CLUSTER_NAME, "namespace": "default"}}],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainctl.cluster.apiserver",
                                     description="A Kubernetes-compatible API server on loopback, backed by SQLite.")
    parser.add_argument("--dir", required=True, type=Path, help="working directory (state.db, kubeconfig, token)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--service-cidr", default="127.96.0.0/16", help="range Service ClusterIPs come from")
    parser.add_argument("--bookmark-interval", type=float, default=30.0,
                        help="seconds between BOOKMARK events on idle watches that allow them")
    parser.add_argument("--watch-window", type=int, default=10_000,
                        help="events kept for watches to resume from; older versions get 410 Expired")
    parser.add_argument("--fsync", action="store_true",
                        help="fsync every commit (survives power loss, not only a crash of the server; slower)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> str | None:
    try:
        host = ipaddress.ip_address(args.host)
    except ValueError:
        return f"--host {args.host!r} is not an IP address"
    if not host.is_loopback:
        return f"--host {args.host} is not a loopback address; this server only listens on loopback"
    try:
        ipaddress.ip_network(args.service_cidr)
    except ValueError as exc:
        return f"--service-cidr: {exc}"
    if not 0 <= args.port <= 65535:
        return f"--port {args.port} is out of range"
    return None


async def serve(args: argparse.Namespace) -> int:
    data_dir: Path = args.dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / PORT_FILE).unlink(missing_ok=True)
    token = load_or_create_token(data_dir)
    certificates = pki.ensure(data_dir / "pki", args.host, system_objects.cluster_ip(args.service_cidr))
    try:
        server = ApiServer(data_dir, token, args.service_cidr, args.bookmark_interval, args.watch_window, args.fsync)
    except sqlite3.Error as exc:  # damaged, not a database, unreadable
        print(f"apiserver: cannot use {data_dir / STATE_FILE}: {exc}", file=sys.stderr)
        return 1
    await server.start()
    # Stored objects are long-lived and acyclic: keep the cycle collector from rescanning
    # them (the ones loaded from disk are frozen; new ones are collected far less often).
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    runner = web.ServerRunner(server.http, shutdown_timeout=2.0,
                              access_log=logging.getLogger("apiserver.access") if args.verbose else None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, reuse_address=True, ssl_context=certificates.server_context())
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        await server.close()
        print(f"apiserver: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # The same server on a unix socket: the path crosses network namespaces, so pods of the
    # isolated network reach it (the `kubernetes` Service) through the cluster's router.
    await web.SockSite(runner, unixsock.listen(data_dir / UNIX_SOCKET),
                       ssl_context=certificates.server_context()).start()
    url = f"https://{args.host}:{port}"
    await server.listening(args.host, port)
    write_private(data_dir / "kubeconfig", kubeconfig(url, token, certificates.ca_pem()))
    write_private(data_dir / PORT_FILE, f"{port}\n")
    logging.getLogger(__name__).info("serving on %s (data in %s)", url, data_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    (data_dir / PORT_FILE).unlink(missing_ok=True)
    server.end_streams()
    await runner.cleanup()
    await server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    problem = check_args(args)
    if problem:
        print(f"apiserver: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s apiserver %(levelname)s %(message)s")
    try:
        import uvloop  # libuv's event loop: a third less CPU per request than asyncio's own
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        return runner(serve(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
