"""A write the store cannot make durable (disk full) leaves no trace: the client is told the
real cause, the object is neither listed nor in the way of a retry, watchers never hear of
it, and a restart finds the state every client was told about.

The server runs in-process here (plain HTTP on loopback), so that the test can shrink the
database's page limit, which is how SQLite reports a full disk.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from trainctl.cluster.apiserver.serving.server import ApiServer
from trainctl.cluster.apiserver.storage.store import Store, storage_error

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
Call = Callable[..., Awaitable[tuple[int, Any]]]


def configmap(name: str, size: int = 10) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"blob": "x" * size}}


def serve(data_dir: Path, test: Callable[[ApiServer, Call], Awaitable[None]], fsync: bool = False) -> None:
    async def main() -> None:
        server = ApiServer(data_dir, "token", fsync=fsync)
        await server.start()
        runner = web.ServerRunner(server.http)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer token"}) as session:
            async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                data = None if body is None else json.dumps(body)
                async with session.request(method, path, data=data, headers={"Content-Type": "application/json"}) as response:
                    if response.content_type != "application/json":
                        return response.status, await response.text()  # the health checks
                    return response.status, await response.json()

            try:
                await test(server, call)
            finally:
                server.end_streams()
                await runner.cleanup()
                await server.close()

    asyncio.run(main())


def fill_disk(server: ApiServer) -> None:
    """Let the database grow no further, as a full disk would."""
    db = server.store._db
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def free_disk(server: ApiServer) -> None:
    server.store._db.execute("PRAGMA max_page_count = 1073741823")


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def test_a_write_that_cannot_be_stored_leaves_no_trace(tmp_path: Path) -> None:
    async def test(server: ApiServer, call: Call) -> None:
        assert (await call("POST", CONFIGMAPS, configmap("kept")))[0] == 201
        code, listed = await call("GET", CONFIGMAPS)
        rv_before = listed["metadata"]["resourceVersion"]
        watcher = server.store.watch("/configmaps", None, lambda obj: True, None)

        fill_disk(server)
        code, status = await call("POST", CONFIGMAPS, configmap("lost", size=200_000))
        assert code == 507, status
        assert "database or disk is full" in status["message"] and "ROLLBACK" not in status["message"]
        assert (await call("GET", CONFIGMAPS + "/lost"))[0] == 404
        code, listed = await call("GET", CONFIGMAPS)
        assert names(listed) == ["kept"] and listed["metadata"]["resourceVersion"] == rv_before
        # An update and a delete that fail leave the old state in place too.
        code, _ = await call("PUT", CONFIGMAPS + "/kept", configmap("kept", size=200_000))
        assert code == 507
        assert (await call("GET", CONFIGMAPS + "/kept"))[1]["data"]["blob"] == "x" * 10
        assert watcher.queue.empty()  # watchers never heard of any of it

        # Retrying is not a conflict: still full, then stored once there is room.
        assert (await call("POST", CONFIGMAPS, configmap("lost", size=200_000)))[0] == 507
        free_disk(server)
        assert (await call("POST", CONFIGMAPS, configmap("lost", size=200_000)))[0] == 201
        event = watcher.queue.get_nowait()
        assert event is not None and (event.type, event.obj["metadata"]["name"]) == ("ADDED", "lost")
        server.store.stop_watch(watcher)

    serve(tmp_path, test)

    async def after_restart(server: ApiServer, call: Call) -> None:
        code, listed = await call("GET", CONFIGMAPS)
        assert names(listed) == ["kept", "lost"]
        assert (await call("GET", CONFIGMAPS + "/kept"))[1]["data"]["blob"] == "x" * 10

    serve(tmp_path, after_restart)


def test_readiness_names_the_storage_while_it_cannot_commit(tmp_path: Path) -> None:
    async def test(server: ApiServer, call: Call) -> None:
        assert await call("GET", "/readyz") == (200, "ok")
        code, text = await call("GET", "/readyz?verbose")
        assert code == 200 and text.splitlines() == ["[+]ping ok", "[+]log ok", "[+]etcd ok", "readyz check passed"]
        fill_disk(server)
        assert (await call("POST", CONFIGMAPS, configmap("lost", size=200_000)))[0] == 507
        code, text = await call("GET", "/readyz")
        assert code == 500 and "[-]etcd failed: reason withheld" in text.splitlines() and text.endswith("readyz check failed\n")
        code, text = await call("GET", "/livez/etcd")
        assert code == 500 and "database or disk is full" in text
        code, text = await call("GET", "/healthz?exclude=etcd&verbose")
        assert code == 200 and "[+]etcd excluded: ok" in text.splitlines()
        assert (await call("GET", "/readyz/nosuch"))[0] == 404
        free_disk(server)
        assert (await call("POST", CONFIGMAPS, configmap("kept")))[0] == 201
        assert await call("GET", "/readyz/etcd") == (200, "ok")

    serve(tmp_path, test)


@pytest.mark.parametrize("fsync", [False, True], ids=["on-loop", "writer-thread"])
def test_writes_queued_behind_a_failed_commit_are_failed_with_it(tmp_path: Path, fsync: bool) -> None:
    """Writes waiting for the same commit may build on the failed one: they fail with it, and
    none of them is left in memory."""

    async def test(server: ApiServer, call: Call) -> None:
        fill_disk(server)
        results = await asyncio.gather(*(call("POST", CONFIGMAPS, configmap(f"cm-{i}", size=50_000)) for i in range(5)))
        assert {code for code, _ in results} == {507}
        assert names((await call("GET", CONFIGMAPS))[1]) == []
        free_disk(server)
        results = await asyncio.gather(*(call("POST", CONFIGMAPS, configmap(f"cm-{i}", size=50_000)) for i in range(5)))
        assert {code for code, _ in results} == {201}

    serve(tmp_path, test, fsync)


def test_readers_see_a_write_only_once_it_is_durable(tmp_path: Path) -> None:
    """A write waiting for its commit is already there for the next write's checks, but a
    reader (get, list, a new watch) sees the state before it until the commit is done."""

    async def main() -> None:
        store = Store(tmp_path / "state.db")
        first = {"metadata": {"name": "a", "namespace": "default"}, "data": {"v": "1"}}
        committed = store.put("/configmaps", first)
        assert store.get("/configmaps", "default", "a") is first  # the next write's view
        assert store.read("/configmaps", "default", "a") is None
        assert store.read_list("/configmaps") == []
        rv_before = store.committed_rv
        await committed
        assert store.read("/configmaps", "default", "a") is first
        assert store.committed_rv == int(first["metadata"]["resourceVersion"]) > rv_before

        second = {**first, "metadata": {**first["metadata"]}, "data": {"v": "2"}}
        committed = store.put("/configmaps", second)
        assert store.read_list("/configmaps", "default") == [first]
        await committed
        assert store.read_list("/configmaps", "default") == [second]

        committed = store.remove("/configmaps", second)
        assert store.read("/configmaps", "default", "a") is second
        await committed
        assert store.read("/configmaps", "default", "a") is None and store.read_list("/configmaps") == []
        store.close()

    asyncio.run(main())


def test_storage_errors_are_told_apart_without_the_sqlite3_result_code_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.10's sqlite3 names no result codes (SQLITE_FULL came with 3.11) and sets no
    ``sqlite_errorcode``: a failed write is still told as a storage error, not an AttributeError."""
    monkeypatch.delattr(sqlite3, "SQLITE_FULL")
    error = storage_error(sqlite3.OperationalError("disk I/O error"))
    assert (error.code, error.reason) == (500, "InternalError")
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    assert storage_error(full).code == 507
