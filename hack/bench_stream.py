#!/usr/bin/env python3
"""Benchmark kubectl's streaming paths on the embedded cluster: exec round trips and
port-forward throughput.

    .venv/bin/python hack/bench_stream.py [--execs 20] [--megabytes 128] [--rounds 3]

Starts a LocalCluster (no controller) in a temporary directory with two pods, then measures:
- ``kubectl exec POD -- true``, one after another: wall time per call (p50, p90), beside
  ``kubectl get pod POD`` (the same kubectl start-up, discovery and one API round trip, no
  stream) to show what the stream itself costs;
- port-forward throughput: a pod serves ``--megabytes`` MiB on a TCP port; the time to read
  all of it directly from the pod's address, and through ``kubectl port-forward`` (kubectl →
  API server → kubelet → pod, SPDY in WebSocket over TLS), best of ``--rounds``; the ratio.
Numbers go to docs/benchmarks.md ("Streaming").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainctl.cluster.local_cluster import LocalCluster  # noqa: E402

SOURCE = """
import socket, sys
size, port = int(sys.argv[1]), int(sys.argv[2])
server = socket.create_server(("0.0.0.0", port), reuse_port=True)
block = b"x" * (1 << 20)
while True:
    conn, _ = server.accept()
    try:
        with conn:
            for _ in range(size):
                conn.sendall(block)
    except OSError:  # a reader that left early
        pass
"""


def pod(name: str, command: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "python", "command": command}]}}


def kubectl(env: dict[str, str], *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, check=True, **kwargs)  # type: ignore[call-overload]


def timed(env: dict[str, str], args: list[str], count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        kubectl(env, *args)
        times.append(time.perf_counter() - started)
    return times


def read_all(host: str, port: int, expected: int) -> float:
    """Seconds to read ``expected`` bytes from a fresh connection."""
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=60) as conn:
        got = 0
        while got < expected:
            chunk = conn.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"connection ended after {got} of {expected} bytes")
            got += len(chunk)
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execs", type=int, default=20)
    parser.add_argument("--megabytes", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", controller=False, workdir=Path(tmp)) as cluster:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env.update(KUBECONFIG=str(cluster.kubeconfig), HOME=tmp)
        port = free_port()
        for name, command in (("sleeper", ["python", "-c", "import time; time.sleep(3600)"]),
                              ("source", ["python", "-c", SOURCE, str(args.megabytes), str(port)])):
            kubectl(env, "apply", "-f", "-", input=json.dumps(pod(name, command)))
        for name in ("sleeper", "source"):
            kubectl(env, "wait", "--for=jsonpath={.status.phase}=Running", f"pod/{name}", "--timeout=60s")
        load = os.getloadavg()[0]

        kubectl(env, "exec", "sleeper", "--", "true")  # discovery cache warm, as for a user's second call
        execs = timed(env, ["exec", "sleeper", "--", "true"], args.execs)
        gets = timed(env, ["get", "pod", "sleeper"], args.execs)
        print(f"kubectl exec -- true:  p50 {statistics.median(execs) * 1000:.0f} ms, "
              f"p90 {percentile(execs, 0.9) * 1000:.0f} ms (n={args.execs})")
        print(f"kubectl get pod:       p50 {statistics.median(gets) * 1000:.0f} ms, "
              f"p90 {percentile(gets, 0.9) * 1000:.0f} ms (the same kubectl start-up, no stream)")

        pod_ip = json.loads(kubectl(env, "get", "pod", "source", "-o", "json").stdout)["status"]["podIP"]
        size = args.megabytes << 20
        deadline = time.monotonic() + 30
        while True:  # the server may still be binding
            try:
                read_all(pod_ip, port, 1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        direct = min(read_all(pod_ip, port, size) for _ in range(args.rounds))
        forwarder = subprocess.Popen(["kubectl", "port-forward", "pod/source", f"0:{port}"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert forwarder.stdout is not None
            local = int(re.search(r"127\.0\.0\.1:(\d+)", forwarder.stdout.readline()).group(1))  # type: ignore[union-attr]
            forwarded = min(read_all("127.0.0.1", local, size) for _ in range(args.rounds))
        finally:
            forwarder.terminate()
            forwarder.wait(30)
        mib = args.megabytes
        print(f"direct to the pod:     {mib / direct:.0f} MiB/s ({mib} MiB in {direct:.2f} s, best of {args.rounds})")
        print(f"through port-forward:  {mib / forwarded:.0f} MiB/s ({mib} MiB in {forwarded:.2f} s)")
        print(f"ratio port-forward / direct: {direct / forwarded:.3f}")
        print(f"load average at start: {load:.1f}")


if __name__ == "__main__":
    main()
