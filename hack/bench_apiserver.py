#!/usr/bin/env python3
"""Benchmark the embedded API server: pod creates with concurrent clients, and watch fan-out.

Starts a fresh server (HTTPS, token, SQLite in WAL mode; ``--fsync`` for synchronous=FULL) in a
temporary directory, then measures

  1. throughput and latency of POST /api/v1/namespaces/default/pods from N concurrent
     clients (each its own keep-alive connection), and
  2. how long one write takes to reach M open watches (from sending the write to each
     watcher reading the event).

Usage: .venv/bin/python hack/bench_apiserver.py [--pods 4000] [--clients 8] [--watchers 10] [--events 200] [--fsync]
       [--creates-only]   (skip the watch fan-out, e.g. to compare create throughput before and after a change)
       [--updates 2000]   (also time status updates of one pod, one after another)
Targets (issue 4): >= 1,000 creates/s with 8 clients, p50 write latency <= 5 ms, p50 watch
delivery to 10 watchers <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainctl.cluster.apiserver.process import start_apiserver  # noqa: E402


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"training.kubeflow.org/job-name": "bench",
                                              "training.kubeflow.org/replica-type": "worker"}},
        "spec": {"containers": [{
            "name": "pytorch", "image": "trainctl/samples:0.1.0", "command": ["python", "train.py"],
            "env": [{"name": "MASTER_ADDR", "value": "bench-master-0"}, {"name": "WORLD_SIZE", "value": "8"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        }]},
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def creates(host: str, port: int, headers: dict, ssl_ctx: ssl.SSLContext, total: int,
            clients: int, prefix: str) -> tuple[float, list[float], int]:
    """``clients`` threads, each with its own keep-alive HTTPS connection (http.client is
    the lightest Python client, so the client steals little CPU from the server)."""
    latencies: list[float] = []
    failures = 0
    counter = iter(range(total))
    bodies = [orjson.dumps(pod(f"{prefix}-{i}")) for i in range(total)]
    start = threading.Barrier(clients + 1)

    def client() -> None:
        nonlocal failures
        connection = http.client.HTTPSConnection(host, port, context=ssl_ctx)
        connection.request("GET", "/api/v1/namespaces/default/pods?limit=1", headers=headers)
        connection.getresponse().read()  # TLS handshake before the clock starts
        start.wait()
        for i in counter:
            started = time.perf_counter()
            connection.request("POST", "/api/v1/namespaces/default/pods", body=bodies[i], headers=headers)
            response = connection.getresponse()
            response.read()
            latencies.append(time.perf_counter() - started)
            if response.status != 201:
                failures += 1
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies, failures


def status_updates(host: str, port: int, headers: dict, ssl_ctx: ssl.SSLContext, total: int) -> list[float]:
    """Latency of ``total`` status updates of one pod, one after another, as a kubelet sends them."""
    connection = http.client.HTTPSConnection(host, port, context=ssl_ctx)
    path = "/api/v1/namespaces/default/pods/updated"
    connection.request("POST", "/api/v1/namespaces/default/pods", body=orjson.dumps(pod("updated")), headers=headers)
    current = orjson.loads(connection.getresponse().read())
    current["metadata"].pop("resourceVersion", None)
    latencies = []
    for i in range(total):
        current["status"] = {"phase": "Running", "podIP": "10.0.0.7", "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": f"2026-01-01T00:{i % 60:02d}:00Z"}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": "pytorch", "ready": True, "restartCount": i, "image": "trainctl/samples:0.1.0",
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
        started = time.perf_counter()
        connection.request("PUT", path + "/status", body=orjson.dumps(current),
                           headers={**headers, "User-Agent": "kubelet/v1.32.0 (linux/amd64)"})
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            raise SystemExit(f"status update answered {response.status}")
    connection.close()
    return latencies


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fanout(url: str, headers: dict, ssl_ctx: ssl.SSLContext, watchers: int, events: int) -> list[float]:
    """Delivery delay of each (event, watcher) pair."""
    delays: list[float] = []
    sent: dict[str, float] = {}
    ready = asyncio.Semaphore(0)
    done = asyncio.Event()
    received = 0

    async def watch(session: aiohttp.ClientSession) -> None:
        nonlocal received
        async with session.get(f"{url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={start_rv}",
                               headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as response:
            ready.release()
            async for line in response.content:
                now = time.perf_counter()
                event = orjson.loads(line)
                name = event["object"]["metadata"]["name"]
                delays.append(now - sent[name])
                received += 1
                if received == watchers * events:
                    done.set()
                    return
                if done.is_set():
                    return

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_ctx)) as session:
        async with session.get(f"{url}/api/v1/namespaces/default/configmaps", headers=headers) as response:
            start_rv = (await response.json())["metadata"]["resourceVersion"]
        tasks = [asyncio.create_task(watch(session)) for _ in range(watchers)]
        for _ in range(watchers):
            await ready.acquire()
        for i in range(events):
            name = f"fan-{i}"
            sent[name] = time.perf_counter()
            async with session.post(f"{url}/api/v1/namespaces/default/configmaps", headers=headers,
                                    data=orjson.dumps({"metadata": {"name": name}, "data": {"i": str(i)}})) as response:
                await response.read()
            await asyncio.sleep(0.01)  # pacing: one event at a time, as a controller would see them
        await asyncio.wait_for(done.wait(), 30)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--fsync", action="store_true", help="run the server with --fsync (every commit fsynced)")
    parser.add_argument("--creates-only", action="store_true", help="measure creates only, not the watch fan-out")
    parser.add_argument("--updates", type=int, default=0,
                        help="then time this many status updates of one pod (the cost of field ownership tracking)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="create rounds; the median round is reported (the machine is shared, single runs are noisy)")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        server = start_apiserver(Path(tmp) / "apiserver", extra_args=["--fsync"] if args.fsync else [])
        try:
            headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json",
                       "Accept": "application/json"}
            ssl_ctx = ssl.create_default_context(cafile=str(server.ca_cert))
            rounds = []
            for n in range(args.rounds):
                cpu_before = cpu_seconds(server.pid)
                elapsed, latencies, failures = creates(server.host, server.port, headers, ssl_ctx, args.pods,
                                                       args.clients, f"round{n}")
                server_cpu = (cpu_seconds(server.pid) - cpu_before) / len(latencies)
                rounds.append((len(latencies) / elapsed, elapsed, latencies, failures, server_cpu))
                print(f"round {n + 1}: {rounds[-1][0]:.0f} creates/s, p50 {percentile(latencies, 0.5) * 1e3:.2f} ms, "
                      f"server CPU {server_cpu * 1e6:.0f} us/create, load {os.getloadavg()[0]:.2f}")
            rate, elapsed, latencies, failures, server_cpu = sorted(rounds, key=lambda r: r[0])[len(rounds) // 2]
            updates: list[float] = []
            if args.updates:
                cpu_before = cpu_seconds(server.pid)
                updates = status_updates(server.host, server.port, headers, ssl_ctx, args.updates)
                update_cpu = (cpu_seconds(server.pid) - cpu_before) / args.updates
            delays = [] if args.creates_only else asyncio.run(fanout(server.url, headers, ssl_ctx, args.watchers, args.events))
            db_size = sum(f.stat().st_size for f in (Path(tmp) / "apiserver").glob("state.db*"))
        finally:
            server.stop()
    load_after = os.getloadavg()

    p50, p99 = percentile(latencies, 0.5) * 1e3, percentile(latencies, 0.99) * 1e3

    def verdict(ok: bool) -> str:
        return "ok " if ok else "MISS"

    print(f"machine: {os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    mode = "synchronous=FULL (--fsync)" if args.fsync else "synchronous=NORMAL"
    print(f"storage: SQLite WAL, {mode}, group commit; {db_size / 1e6:.1f} MB on disk after the run")
    print(f"creates (median of {args.rounds} rounds): {len(latencies)} pods, {args.clients} clients, "
          f"{elapsed:.2f} s, {failures} failed")
    print(f"  [{verdict(rate >= 1000)}] throughput      {rate:8.0f} creates/s   (target >= 1000)")
    print(f"  [{verdict(p50 <= 5)}] latency p50     {p50:8.2f} ms          (target <= 5)")
    print(f"         latency p99     {p99:8.2f} ms   mean {statistics.mean(latencies) * 1e3:.2f} ms")
    print(f"         server CPU      {server_cpu * 1e6:8.0f} us per create")
    if updates:
        print(f"status updates of one pod, one client: {len(updates)}")
        print(f"         latency p50     {percentile(updates, 0.5) * 1e3:8.2f} ms   p99 {percentile(updates, 0.99) * 1e3:.2f} ms")
        print(f"         server CPU      {update_cpu * 1e6:8.0f} us per update")
    if delays:
        d50, d99 = percentile(delays, 0.5) * 1e3, percentile(delays, 0.99) * 1e3
        print(f"watch fan-out: {args.events} events x {args.watchers} watchers = {len(delays)} deliveries")
        print(f"  [{verdict(d50 <= 10)}] delivery p50    {d50:8.2f} ms          (target <= 10)")
        print(f"         delivery p99    {d99:8.2f} ms")
    return 0 if all(r[3] == 0 for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
