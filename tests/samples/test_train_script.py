"""The PyTorch sample script's own guarantees, mostly on one process (multi-process runs are e2e's job).

Fault specs parse or fail with one clear line; a checkpoint round-trips and is replaced
atomically; a resumed run continues exactly where the saved one stopped; a fault fires
once per job; a gloo "peer gone" error is told apart from a bug; the loss goes down.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

from tests.support.net import free_port
from tests.support.repo import REPO

SCRIPT = REPO / "samples" / "pytorch" / "train.py"


def step_lines(out: str) -> list[dict[str, str]]:
    return [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in out.splitlines() if line.startswith("[step]")]


# --- fault specs ------------------------------------------------------------------------------


def test_fault_spec_with_exit_code_and_with_signal(train):
    faults = train.parse_faults("rank=1,step=30,exit=137; rank=0, step=5, signal=sigkill")
    assert faults == [
        train.Fault(rank=1, step=30, exit_code=137),
        train.Fault(rank=0, step=5, signal_name="KILL"),
    ]


def test_fault_without_exit_or_signal_exits_1(train):
    assert train.parse_faults("rank=2,step=3") == [train.Fault(rank=2, step=3, exit_code=1)]


def test_empty_fault_spec_means_no_faults(train):
    assert train.parse_faults("") == []
    assert train.parse_faults(" ; ") == []


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("rank=1", "missing step="),
        ("step=1", "missing rank="),
        ("rank=one,step=1", "must be integers"),
        ("rank=1,step=1,exit=300", "exit in 0..255"),
        ("rank=-1,step=1", ">= 0"),
        ("rank=1,step=1,exit=1,signal=KILL", "not both"),
        ("rank=1,step=1,signal=NOPE", "unknown signal"),
        ("rank=1,step=1,when=now", "unknown key(s) when"),
        ("rank=1,step", "expected key=value"),
    ],
)
def test_bad_fault_spec_names_the_problem(train, spec, complaint):
    with pytest.raises(ValueError) as error:
        train.parse_faults(spec)
    assert complaint in str(error.value)
    assert spec.split(",")[0] in str(error.value)


def test_bad_fault_flag_is_one_line_without_traceback(train, capsys):
    with pytest.raises(SystemExit) as exited:
        train.parse_args(["--fault", "rank=x,step=1"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("rank, step and exit must be integers")


def test_fault_fires_once_per_job_when_recorded_in_the_checkpoint_dir(train, tmp_path):
    fault = train.Fault(rank=1, step=30, exit_code=137)
    assert train.due_fault([fault], rank=1, step=30, restart=0, checkpoint_dir=tmp_path) == fault
    assert train.due_fault([fault], rank=0, step=30, restart=0, checkpoint_dir=tmp_path) is None
    assert train.due_fault([fault], rank=1, step=29, restart=0, checkpoint_dir=tmp_path) is None
    (tmp_path / train.FAULT_MARKER_DIR).mkdir()
    (tmp_path / train.FAULT_MARKER_DIR / fault.marker).touch()
    assert train.due_fault([fault], rank=1, step=30, restart=0, checkpoint_dir=tmp_path) is None


def test_fault_without_checkpoint_dir_fires_only_in_the_first_attempt(train):
    fault = train.Fault(rank=0, step=3)
    assert train.due_fault([fault], rank=0, step=3, restart=0, checkpoint_dir=None) == fault
    assert train.due_fault([fault], rank=0, step=3, restart=1, checkpoint_dir=None) is None


def test_injected_fault_exits_with_its_code_then_the_rerun_resumes_and_finishes(train, tmp_path, capsys, monkeypatch):
    flags = ["--steps=8", "--checkpoint-every=2", "--step-sleep=0", f"--checkpoint-dir={tmp_path}",
             "--fault=rank=0,step=5,exit=42"]
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT")}
    # The fault leaves through os._exit, so the first attempt needs a process of its own.
    first = subprocess.run([sys.executable, str(SCRIPT), *flags], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 42, first.stderr
    assert "[fault] rank=0 step=5 exit_code=42" in first.stdout
    assert [s["step"] for s in step_lines(first.stdout)] == ["1", "2", "3", "4", "5"]

    for name in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    assert train.main(flags) == 0
    second = capsys.readouterr().out
    assert "[resume] step=4 " in second
    assert [s["step"] for s in step_lines(second)] == ["5", "6", "7", "8"]
    assert "[fault]" not in second


# --- checkpoints ------------------------------------------------------------------------------


def test_checkpoint_round_trip(train, tmp_path):
    model = train.make_model(4, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    state = {"step": 7, "world_size": 3, "model": model.state_dict(), "optimizer": optimizer.state_dict()}

    path = train.save_checkpoint(tmp_path / "ck", state)
    loaded = train.load_checkpoint(tmp_path / "ck")

    assert path == tmp_path / "ck" / train.CHECKPOINT_FILE
    assert loaded["step"] == 7 and loaded["world_size"] == 3
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded["model"][name], tensor)
    momentum = [s["momentum_buffer"] for s in loaded["optimizer"]["state"].values()]
    assert momentum and all(isinstance(m, torch.Tensor) for m in momentum)


def test_checkpoint_is_replaced_whole_and_leaves_no_temporary_files(train, tmp_path):
    train.save_checkpoint(tmp_path, {"step": 1, "world_size": 1, "model": {}, "optimizer": {}})
    train.save_checkpoint(tmp_path, {"step": 2, "world_size": 1, "model": {}, "optimizer": {}})
    assert train.load_checkpoint(tmp_path)["step"] == 2
    assert [p.name for p in tmp_path.iterdir()] == [train.CHECKPOINT_FILE]


def test_no_checkpoint_yet(train, tmp_path):
    assert train.load_checkpoint(tmp_path) is None
    assert train.load_checkpoint(None) is None


def test_single_process_agrees_with_itself(train):
    state = {"step": 3}
    assert train.agree_on_checkpoint(state, world_size=1) is state


# --- data order on resume -----------------------------------------------------------------------


@pytest.mark.parametrize("start", [0, 3, 8, 13])
def test_resumed_batches_continue_the_same_sequence(train, start):
    dataset = train.make_dataset(40, 2, seed=5)
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=2, rank=1, seed=5)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler, drop_last=True)
    take = 16
    whole = list(itertools.islice(train.batches(loader, sampler, 0), take))
    resumed = list(itertools.islice(train.batches(loader, sampler, start), take - start))
    assert [step for step, _ in whole] == list(range(take))
    assert [step for step, _ in resumed] == list(range(start, take))
    for (_, (x1, _)), (_, (x2, _)) in zip(whole[start:], resumed, strict=True):
        assert torch.equal(x1, x2)


def test_generated_dataset_is_the_same_everywhere(train):
    a, b = train.make_dataset(16, 3, seed=1), train.make_dataset(16, 3, seed=1)
    assert torch.equal(a.tensors[0], b.tensors[0]) and torch.equal(a.tensors[1], b.tensors[1])
    assert not torch.equal(a.tensors[0], train.make_dataset(16, 3, seed=2).tensors[0])


# --- the run ------------------------------------------------------------------------------------


def test_single_process_run_logs_every_step_and_the_loss_goes_down(train, capsys, monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT", "INJECT_FAULT", "CHECKPOINT_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert train.main(["--steps=60", "--step-sleep=0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("[start] RANK=0 WORLD_SIZE=1 MASTER_ADDR= ")
    steps = step_lines(out)
    assert [int(s["step"]) for s in steps] == list(range(1, 61))
    assert {(s["rank"], s["world_size"], s["restart"]) for s in steps} == {("0", "1", "0")}
    first, last = float(steps[0]["loss"]), float(steps[-1]["loss"])
    assert last < first / 4
    assert out.splitlines()[-1].startswith("[done] steps=60 ")


def test_resume_reproduces_an_uninterrupted_run(train, capsys, tmp_path, monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT", "INJECT_FAULT"):
        monkeypatch.delenv(name, raising=False)
    common = ["--step-sleep=0", "--checkpoint-every=5"]
    train.main(["--steps=20", *common])
    straight = step_lines(capsys.readouterr().out)

    train.main(["--steps=10", f"--checkpoint-dir={tmp_path}", *common])
    capsys.readouterr()
    train.main(["--steps=20", f"--checkpoint-dir={tmp_path}", *common])
    out = capsys.readouterr().out
    assert "[resume] step=10 saved_world_size=1 rank=0 world_size=1" in out
    resumed = step_lines(out)
    assert [(s["step"], s["loss"]) for s in resumed] == [(s["step"], s["loss"]) for s in straight[10:]]


@pytest.mark.parametrize(
    ("message", "peer"),
    [
        ("[../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:10140: Connection reset by peer.", True),
        ("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:6867.", True),
        ("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x1)", False),
    ],
)
def test_peer_failures_are_told_apart_from_bugs(train, message, peer):
    assert train.is_peer_failure(RuntimeError(message)) is peer


def test_a_bug_is_not_turned_into_a_retryable_exit(train, monkeypatch):
    monkeypatch.setattr(train, "train", lambda args: (_ for _ in ()).throw(RuntimeError("shape mismatch")))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        train.main(["--peer-failure-exit-code=143"])


def test_a_lost_peer_exits_with_the_configured_code(train, monkeypatch, capsys):
    gone = RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:6867")
    monkeypatch.setattr(train, "train", lambda args: (_ for _ in ()).throw(gone))
    assert train.main(["--peer-failure-exit-code=143"]) == 143
    assert "[error] rank=0 reason=peer-failure" in capsys.readouterr().out


def test_a_real_peer_killed_mid_training_ends_the_survivor_with_the_code_and_its_output(tmp_path):
    # Two real processes in a gloo group; the survivor's exit skips the process group's
    # teardown (os._exit), so everything it printed must already be flushed.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RESTART_COUNT"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", PYTHONUNBUFFERED="1")
    flags = ["--steps=100000", "--step-sleep=0.02", "--peer-failure-exit-code=143", "--timeout=60"]
    logs = {rank: (tmp_path / f"rank{rank}.log").open("w+") for rank in (0, 1)}
    ranks = {rank: subprocess.Popen([sys.executable, str(SCRIPT), *flags], env={**env, "RANK": str(rank)},
                                    stdout=logs[rank], stderr=subprocess.STDOUT) for rank in (0, 1)}
    try:
        deadline = time.monotonic() + 60
        while "[step] step=3 " not in (tmp_path / "rank1.log").read_text():
            assert time.monotonic() < deadline and ranks[1].poll() is None, (tmp_path / "rank1.log").read_text()
            time.sleep(0.05)
        ranks[1].kill()
        assert ranks[0].wait(timeout=60) == 143
    finally:
        for process in ranks.values():
            process.kill()
            process.wait()
    out = (tmp_path / "rank0.log").read_text()
    assert "[error] rank=0 reason=peer-failure" in out.splitlines()[-1], out
    assert step_lines(out), out


def test_bad_env_default_is_a_usage_error_not_a_traceback(train, capsys, monkeypatch):
    monkeypatch.setenv("TRAIN_STEPS", "many")
    with pytest.raises(SystemExit) as exited:
        train.parse_args([])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "argument --steps: invalid int value: 'many'" in err


def test_env_defaults_are_read(train, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAIN_STEPS", "7")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("INJECT_FAULT", "rank=1,step=2,exit=137")
    args = train.parse_args([])
    assert (args.steps, args.checkpoint_dir, args.faults) == (7, tmp_path, [train.Fault(1, 2, 137)])


def test_a_finished_run_leaves_nothing_to_resume_so_the_next_run_starts_over(train, capsys, tmp_path, monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT", "INJECT_FAULT"):
        monkeypatch.delenv(name, raising=False)
    flags = ["--steps=6", "--checkpoint-every=2", "--step-sleep=0", f"--checkpoint-dir={tmp_path}"]
    train.main(flags)
    first = step_lines(capsys.readouterr().out)
    (tmp_path / train.FAULT_MARKER_DIR).mkdir()
    (tmp_path / train.FAULT_MARKER_DIR / "rank0-step3-exit1").touch()

    train.main(flags)
    out = capsys.readouterr().out
    assert "[fresh] reason=previous-run-finished saved_step=6 rank=0 world_size=1" in out
    assert "[resume]" not in out
    assert [(s["step"], s["loss"]) for s in step_lines(out)] == [(s["step"], s["loss"]) for s in first]
    assert not (tmp_path / train.FAULT_MARKER_DIR).exists(), "faults of the finished run fire again"


def test_a_late_member_of_the_run_that_finished_has_nothing_left_to_train(train, capsys, tmp_path, monkeypatch):
    """The same torchrun run id (the job's uid) finds its own final checkpoint: done at once.
    Another run id, or torchrun's default "none", is a new run of the job: it starts over."""
    for name in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT", "INJECT_FAULT"):
        monkeypatch.delenv(name, raising=False)
    flags = ["--steps=6", "--checkpoint-every=2", "--step-sleep=0", f"--checkpoint-dir={tmp_path}"]
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "uid-1")
    train.main(flags)
    capsys.readouterr()

    train.main(flags)
    out = capsys.readouterr().out
    assert "[resume] step=6 " in out and not step_lines(out) and "[done] steps=6 " in out, out
    for other in ("uid-2", "none"):
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", other)
        train.main(flags)
        out = capsys.readouterr().out
        assert "[fresh] reason=previous-run-finished" in out and len(step_lines(out)) == 6, out


def test_the_readme_documents_every_flag_and_only_real_ones(train):
    readme = (REPO / "samples" / "README.md").read_text()
    table = readme[readme.index("| flag | env | default |"):].split("\n\n")[0]
    documented = {row.split("|")[1].strip().strip("`") for row in table.splitlines()[2:]}
    actual = {o for action in train.build_parser()._actions for o in action.option_strings if o.startswith("--")}
    undocumented_on_purpose = {"--help", "--batch-size", "--lr", "--samples", "--features", "--hidden", "--seed", "--timeout"}
    assert documented == actual - undocumented_on_purpose


# --- status page and where checkpoints go ------------------------------------------------------


def get_json(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        assert response.headers["Content-Type"] == "application/json"
        return json.load(response)


def test_the_status_page_serves_what_the_run_posted_last(train):
    board = train.StatusBoard(rank=1, world_size=3, step=0, loss=None)
    server = train.serve_status(0, board)
    try:
        port = server.server_address[1]
        assert get_json(port) == {"rank": 1, "world_size": 3, "step": 0, "loss": None}
        board.post(step=7, loss=0.25)
        assert get_json(port) == {"rank": 1, "world_size": 3, "step": 7, "loss": 0.25}
    finally:
        server.shutdown()
        server.server_close()


def test_a_taken_status_port_is_logged_and_training_goes_on(train, capsys):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        train.start_status_page(port, train.StatusBoard())
    assert capsys.readouterr().out.startswith(f"[status] port={port} error=")


def test_a_training_process_serves_its_progress_while_it_trains(tmp_path):
    port = free_port("0.0.0.0")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "TORCHELASTIC_RESTART_COUNT")}
    env["STATUS_PORT"] = str(port)
    log = (tmp_path / "out.log").open("w")
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--steps=100000", "--step-sleep=0.01"], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        status: dict = {}
        while time.monotonic() < deadline and not (status.get("state") == "training" and status.get("step", 0) >= 3):
            assert process.poll() is None, (tmp_path / "out.log").read_text()
            try:
                status = get_json(port)
            except OSError:
                pass
            time.sleep(0.2)
        assert status.get("state") == "training" and status["step"] >= 3, (status, (tmp_path / "out.log").read_text())
        assert (status["rank"], status["world_size"], status["steps"], status["restart"]) == (0, 1, 100000, 0)
        assert isinstance(status["loss"], float)
    finally:
        process.kill()
        process.wait(30)
        log.close()
    assert f"[status] port={port} url=" in (tmp_path / "out.log").read_text()


def test_a_relative_checkpoint_dir_lies_in_the_clusters_data_dir_when_it_gives_one(train, tmp_path):
    relative = Path("checkpoints/job")
    assert train.checkpoint_location(relative, {"TRAINCTL_DATA_DIR": str(tmp_path)}) == tmp_path / relative
    assert train.checkpoint_location(relative, {}) == relative  # the working directory's, as on a real cluster
    assert train.checkpoint_location(tmp_path / "abs", {"TRAINCTL_DATA_DIR": "/elsewhere"}) == tmp_path / "abs"
    assert train.checkpoint_location(None, {"TRAINCTL_DATA_DIR": str(tmp_path)}) is None


def test_checkpoint_dir_flag_is_resolved_against_the_data_dir(train, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINCTL_DATA_DIR", str(tmp_path))
    assert train.parse_args(["--checkpoint-dir=checkpoints/x"]).checkpoint_dir == tmp_path / "checkpoints" / "x"
