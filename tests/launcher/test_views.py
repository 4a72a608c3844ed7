"""How ``trainctl run`` shows progress: a live block per job on a terminal, plain lines elsewhere. No cluster."""

from __future__ import annotations

import io
import re

from rich.console import Console

from trainctl.launch.launcher import LaunchResult, Outcome
from trainctl.launch.progress import JobProgress, PlainView, RichView, make_view
from trainctl.launch.summary import summary_lines


def progress(state: str, *, name: str = "mnist", active: int = 2, restarts: int = 0, elapsed: float = 1.0) -> JobProgress:
    conditions = [{"type": "Created", "status": "True"}]
    if state != "Created":
        conditions.append({"type": state, "status": "True", "message": f"PyTorchJob default/{name} is {state.lower()}."})
    return JobProgress(
        kind="PyTorchJob",
        namespace="default",
        name=name,
        elapsed=elapsed,
        condition=conditions[-1],
        replica_statuses={"Master": {"active": 1}, "Worker": {"active": active, "failed": restarts}},
        restarts=restarts,
        pod_phases={f"{name}-master-0": "Running", **{f"{name}-worker-{i}": "Running" for i in range(active)}},
        conditions=tuple(conditions),
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(output: str) -> list[str]:
    """The lines a terminal shows after ``output``: enough of one for rich's live display
    (cursor up, erase line, carriage return; other escape sequences change no text)."""
    lines, row = [""], 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\n|\r)", output):
        if token == "\n":
            row += 1
            if row == len(lines):
                lines.append("")
        elif token == "\x1b[1A":
            row = max(row - 1, 0)
        elif token == "\x1b[2K":
            lines[row] = ""
        elif token and token != "\r" and not token.startswith("\x1b"):
            lines[row] += token
    return [line.rstrip() for line in lines if line.strip()]


def test_on_a_terminal_each_job_has_one_block_redrawn_in_place_while_logs_scroll():
    out = io.StringIO()
    view = RichView(Console(file=out, force_terminal=True, width=120, color_system=None), auto_refresh=False)
    changes = [progress("Created", active=0), progress("Running", active=1), progress("Running"), progress("Running", restarts=1, elapsed=42)]
    view.show(changes[0])
    view.log("mnist-master-0", "[start] RANK=0 WORLD_SIZE=3")
    for change in changes[1:]:
        view.show(change)
    view.log("mnist-master-0", "[step] step=1 world_size=3")
    view.show(progress("Running", name="other", active=4))
    view.note("created PyTorchJob default/other")
    drawn = out.getvalue()
    shown = screen(drawn)
    # Logs and notes scrolled above; below them one block per job, whatever number of changes.
    assert shown[:3] == ["mnist-master-0 | [start] RANK=0 WORLD_SIZE=3", "mnist-master-0 | [step] step=1 world_size=3", "created PyTorchJob default/other"]
    blocks = "\n".join(shown[3:])
    assert blocks.count("PyTorchJob default/mnist  ") == 1 and blocks.count("PyTorchJob default/other  ") == 1
    assert drawn.count("PyTorchJob default/mnist  ") >= len(changes)  # each change was drawn, in place
    mnist = blocks[: blocks.index("PyTorchJob default/other  ")]
    for text in ("Running", "restarts 1", "42s", "Created Running", "Master", "1 active", "Worker", "2 active", "1 failed", "Running 3", "is running."):
        assert text in mnist, text
    assert "4 active" in blocks and "Running 5" in blocks
    assert "| pods:" not in drawn  # nothing in the plain format
    view.close()
    assert screen(out.getvalue()) == shown[:3]  # the blocks go; the summary is printed after


def test_plain_lines_elsewhere_one_per_real_change():
    out = io.StringIO()
    view = make_view(out)
    assert isinstance(view, PlainView)
    for change in (progress("Created", active=0), progress("Running"), progress("Running", elapsed=9)):
        view.show(change)
    view.log("mnist-master-0", "hello")
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines[:2]] == [
        "PyTorchJob default/mnist: Created | Master 1 active; Worker 0 active | pods: Running 1 | restarts 0",
        "PyTorchJob default/mnist: Running | Master 1 active; Worker 2 active | pods: Running 3 | restarts 0",
    ]
    assert lines[2:] == ["mnist-master-0 | hello"]


def test_a_terminal_gets_the_live_view():
    view = make_view(Terminal())
    try:
        assert isinstance(view, RichView)
    finally:
        view.close()


def result(outcome: Outcome, replica_statuses: dict) -> LaunchResult:
    return LaunchResult(
        kind="PyTorchJob", namespace="default", name="elastic", outcome=outcome, message="", condition={"type": outcome.value},
        status={"replicaStatuses": replica_statuses}, duration=12.0, restarts=0, pods=[],
    )


def test_the_summary_of_a_succeeded_job_counts_no_replica_active():
    """The operators write Succeeded a pass before they count the replicas still active succeeded."""
    lagging = {"Worker": {"active": 2, "succeeded": 1, "selector": "x"}}
    assert "  replicas:  Worker 3 succeeded" in summary_lines(result(Outcome.SUCCEEDED, lagging))
    # Of a job that did not succeed, the counts are shown as the status has them.
    assert "  replicas:  Worker 2 active, 1 succeeded" in summary_lines(result(Outcome.TIMED_OUT, lagging))
