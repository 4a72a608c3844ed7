"""A watch that ends while events are still queued for it (its client read slowly, and the
timeout came) must not end with a bookmark past them: the client re-watches from a
bookmark's version, so the events in between would be lost to it for good (seen at scale:
a thousand nodes' pods, one slow watcher, thousands of updates never delivered)."""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from typing import Any

from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import CONFIGMAPS


def test_the_last_bookmark_of_a_slow_watch_claims_only_what_was_sent(apiserver: Any) -> None:
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    try:
        start = client.list(CONFIGMAPS, "default")[1]
        tls = ssl.create_default_context(cafile=str(apiserver.ca_cert))
        request = urllib.request.Request(
            f"{apiserver.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true"
            f"&timeoutSeconds=2&resourceVersion={start}", headers={"Authorization": f"Bearer {apiserver.token}"})
        response = urllib.request.urlopen(request, timeout=60, context=tls)
        # Far more than the sockets' buffers hold, so the server is still writing when the
        # watch's time is up, with events left in its queue.
        blob = "x" * 900_000
        names = [f"big-{i}" for i in range(40)]
        for name in names:
            client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": name, "namespace": "default"}, "data": {"blob": blob}})
        time.sleep(3)  # the deadline passes while nothing is read
        seen: list[str] = []
        last_bookmark = None
        last_event_rv = int(start)
        for line in response:
            event = json.loads(line)
            rv = int(event["object"]["metadata"]["resourceVersion"])
            if event["type"] == "BOOKMARK":
                last_bookmark = rv
            else:
                seen.append(event["object"]["metadata"]["name"])
                last_event_rv = rv
        response.close()
        assert last_bookmark is not None
        if seen != names:  # the watch ended before sending everything: the bookmark must not skip the rest
            assert last_bookmark <= last_event_rv, (len(seen), last_bookmark, last_event_rv)
        # Re-watching from the bookmark delivers whatever this watch did not.
        rest, _ = client.list(CONFIGMAPS, "default")
        missed = [obj["metadata"]["name"] for obj in rest if int(obj["metadata"]["resourceVersion"]) > last_bookmark]
        assert sorted(seen + missed) == sorted(names)
    finally:
        client.close()


def test_a_burst_of_events_goes_out_in_few_writes(apiserver: Any) -> None:
    """Events published together (a group commit carries many writes) are sent to a watcher
    in one chunk, not a TLS record and a send each: at a thousand nodes' scale the per-event
    writes were the largest single cost of the API server. Every event still arrives, in order."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor

    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, pool_size=32)
    try:
        start = client.list(CONFIGMAPS, "default")[1]
        tls = ssl.create_default_context(cafile=str(apiserver.ca_cert))
        host, port = apiserver.url.removeprefix("https://").rsplit(":", 1)
        connection = http.client.HTTPSConnection(host, int(port), context=tls, timeout=60)
        connection.request("GET", f"/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=20&resourceVersion={start}",
                           headers={"Authorization": f"Bearer {apiserver.token}"})
        response = connection.getresponse()
        assert response.status == 200 and response.chunked
        names = [f"burst-{i:03d}" for i in range(400)]
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda name: client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "metadata": {"name": name, "namespace": "default"}}),
                          names))
        per_chunk: list[int] = []
        seen: list[tuple[int, str]] = []
        while len(seen) < len(names):  # the chunks as the server wrote them
            size = int(response.fp.readline().split(b";")[0], 16)
            assert size, "the watch ended early"
            chunk = response.fp.read(size)
            response.fp.read(2)
            lines = chunk.splitlines()
            per_chunk.append(len(lines))
            seen += [(int(e["object"]["metadata"]["resourceVersion"]), e["object"]["metadata"]["name"])
                     for e in map(json.loads, lines)]
        connection.close()
        assert sorted(name for _, name in seen) == names
        assert [rv for rv, _ in seen] == sorted(rv for rv, _ in seen)
        assert len(per_chunk) < len(names) and max(per_chunk) > 1, per_chunk
    finally:
        client.close()
