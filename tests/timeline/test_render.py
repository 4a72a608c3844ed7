"""The timeline drawn with matplotlib: the SVG holds a row per pod, its marks, the conditions and the world size."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from trainctl.cli.main import main
from trainctl.timeline import drawing as render
from trainctl.timeline import model

from .factories import EPOCH0, event, job, pod, running, terminated

SVG = "{http://www.w3.org/2000/svg}"


def three_pods() -> model.Timeline:
    pods = [
        pod("mnist-master-0", replica_type="Master", phase="Succeeded", state=terminated(4, 60)),
        pod("mnist-worker-0", index=0, node="node-b", phase="Succeeded", state=terminated(25, 58), last_state=terminated(4, 20, reason="Error", code=1), restarts=1),
        pod("mnist-worker-1", index=1, state=running(5), deleting=62),
    ]
    lines = [model.LogLine("mnist-master-0", EPOCH0 + 5, "[start] RANK=0 WORLD_SIZE=3"), model.LogLine("mnist-master-0", EPOCH0 + 26, "[step] world_size=2")]
    conditions = job("mnist", ("Created", "True", 0), ("Running", "False", 4), ("Succeeded", "True", 60))  # as Succeeded leaves Running
    events = [event("PyTorchJobRestarting", "PyTorchJob mnist is restarting because 1 Worker replica(s) failed.", 20, type_="Warning")]
    return model.build_timeline(job=conditions, pods=pods, now=EPOCH0 + 70, container="pytorch", log_lines=lines, events=events)


def ids(svg: str) -> set[str]:
    return {el.get("id") for el in ET.fromstring(svg).iter() if el.get("id")}


def texts(svg: str) -> str:
    return " ".join("".join(el.itertext()) for el in ET.fromstring(svg).iter(f"{SVG}text"))


def test_the_svg_has_a_row_per_pod_its_phases_marks_conditions_and_world_size():
    svg = render.render_svg(three_pods())
    found = ids(svg)
    assert {f"row:mnist-{p}" for p in ("master-0", "worker-0", "worker-1")} <= found
    assert {i for i in found if i.startswith("row:")} == {"row:mnist-master-0", "row:mnist-worker-0", "row:mnist-worker-1"}
    assert {"span:mnist-master-0:Running", "span:mnist-master-0:Succeeded", "span:mnist-worker-0:Waiting", "span:mnist-worker-1:Terminating"} <= found
    assert {i for i in found if i.startswith("mark:")} == {"mark:mnist-worker-0:restart:0"}
    assert {"condition:Created", "condition:Running", "condition:Succeeded", "world-size", "job-mark:PyTorchJobRestarting"} <= found
    labels = texts(svg)
    assert "mnist-master-0 (node-a)" in labels and "mnist-worker-0 (node-b)" in labels
    assert "Error (exit 1)" in labels  # the restart's reason, next to its mark
    assert "PyTorchJob default/mnist: 3 pod(s)" in labels
    assert "WORLD_SIZE" in labels and "Master ×1" in labels and "Worker ×2" in labels
    assert "events" in labels and "PyTorchJobRestarting" in labels  # the job's Warning Events, on their lane


def test_the_html_page_is_standalone_with_a_title_a_legend_and_the_svg(tmp_path):
    path = render.write(three_pods(), tmp_path / "t.html")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>Timeline of PyTorchJob default/mnist</title>" in page
    assert "Legend" in page and all(phase in page for phase in model.PHASES)
    svg = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert "row:mnist-worker-1" in ids(svg)
    assert not re.search(r"<script|<link|\ssrc=", page)  # nothing to fetch: the page stands alone


# What a file of each format starts with: the bytes a viewer goes by, whatever the name says.
MAGIC = {".svg": b"<?xml", ".html": b"<!DOCTYPE html>", ".htm": b"<!DOCTYPE html>", ".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-"}


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_write_draws_the_format_its_extension_names(tmp_path, suffix):
    path = render.write(three_pods(), tmp_path / f"t{suffix.upper() if suffix == '.png' else suffix}")
    data = path.read_bytes()
    assert data.startswith(MAGIC[suffix]), data[:16]
    assert render.format_of(path) in ("svg", "html", "png", "pdf")
    if suffix == ".svg":
        assert "row:mnist-master-0" in ids(data.decode())


@pytest.mark.parametrize("name", ["t.jpg", "t.svgz", "timeline"])
def test_write_refuses_a_file_name_whose_extension_names_no_format(tmp_path, name):
    with pytest.raises(render.UnknownFormat) as refused:
        render.write(three_pods(), tmp_path / name)
    assert f"cannot write a timeline to {tmp_path / name}: " in str(refused.value)
    assert str(refused.value).endswith("use .svg, .html, .htm, .png, .pdf")
    assert not (tmp_path / name).exists()


def test_a_hundred_pods_stay_readable_the_figure_grows_and_marks_lose_only_their_text():
    pods = [pod("big-master-0", replica_type="Master", state=running(2))]
    pods += [pod(f"big-worker-{i}", index=i, state=running(12), last_state=terminated(2, 10, reason="Error", code=1), restarts=1) for i in range(99)]
    big = model.build_timeline(job=job("big"), pods=pods, now=EPOCH0 + 30, container="pytorch")
    svg = render.render_svg(big)
    found = ids(svg)
    assert len({i for i in found if i.startswith("row:")}) == 100
    assert len({i for i in found if i.startswith("mark:")}) == 99
    labels = texts(svg)
    assert "big-worker-98 (node-a)  ↻1" in labels and "Worker ×99" in labels
    assert "Error (exit 1)" not in labels  # 99 annotations would overlap
    height = lambda text: float(re.match(r"[\d.]+", ET.fromstring(text).get("height")).group())  # noqa: E731
    assert height(svg) > 4 * height(render.render_svg(three_pods()))


def test_an_empty_job_still_draws():
    empty = model.build_timeline(job=job("new"), pods=[], now=EPOCH0 + 1)
    svg = render.render_svg(empty)
    assert "PyTorchJob default/new: 0 pod(s)" in texts(svg)


def test_trainctl_timeline_refuses_an_unknown_format_before_reading_the_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    with pytest.raises(SystemExit) as exit_:
        main(["timeline", "mnist", "-o", str(tmp_path / "mnist.gif")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"cannot write a timeline to {tmp_path / 'mnist.gif'}: .gif is not a format" in err
    assert not (tmp_path / "mnist.gif").exists()
