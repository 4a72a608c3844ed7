"""The cluster's hosts file, which every kubelet on the shared network writes: writers at
once never fail, and a write that cannot be made is not the kubelet's death."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from trainctl.cluster.network.hosts import HostsFile

WRITERS, WRITES = 8, 150


def _write_many(network_dir: str, writer: int) -> None:
    """One kubelet: installs the resolver as it starts, then rewrites the file again and again."""
    hosts = HostsFile(Path(network_dir))
    hosts.install_resolver()
    for write in range(WRITES):
        hosts.write({f"svc-{writer}-{line}.default.svc.cluster.local": f"10.96.{writer}.{line}"
                     for line in range(write % 5 + 1)})
        content = hosts.path.read_text()
        assert content and all(line.count(" ") == 1 for line in content.splitlines())


def test_many_writers_at_once_never_fail(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(str(tmp_path), writer)) for writer in range(WRITERS)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert [writer.exitcode for writer in writers] == [0] * WRITERS
    assert 1 <= len((tmp_path / "hosts").read_text().splitlines()) <= 5  # one writer's whole file
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hosts", "python"]  # no temporary file left
    assert [path.name for path in (tmp_path / "python").iterdir()] == ["sitecustomize.py"]


def test_a_write_that_fails_is_tried_again_on_the_next(tmp_path, caplog):
    blocked = tmp_path / "network"
    blocked.write_text("a file where the directory should be")
    hosts = HostsFile(blocked)
    hosts.write({"db.default.svc.cluster.local": "10.96.0.10"})  # does not raise
    assert "tried again on the next sync" in caplog.text
    blocked.unlink()
    hosts.write({"db.default.svc.cluster.local": "10.96.0.10"})
    assert (blocked / "hosts").read_text() == "10.96.0.10 db.default.svc.cluster.local\n"
