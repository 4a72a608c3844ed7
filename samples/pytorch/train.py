"""A small data-parallel PyTorch training job that survives restarts.

This is the script behind every PyTorch sample in this directory. It runs the same way in
three settings, with nothing but the environment telling them apart:

* alone (no distributed env): one process, world size 1;
* as a static DDP replica (``python train.py``): the PyTorchJob controller injects
  ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``;
* as an elastic worker (``torchrun train.py``): torchrun reads ``PET_*`` from the env, does
  the rendezvous and starts this script with ``RANK``/``WORLD_SIZE`` of the current round.

Elastic training restarts every worker on each membership change, and a controller may
recreate any pod, so the script checkpoints every ``--checkpoint-every`` steps (atomic
rename) and every start resumes from the newest checkpoint any rank can see. The ranks
agree on that checkpoint through the process group, so resuming also works when pods do
not share a volume.

A checkpoint that has already reached ``--steps`` is left over from a finished run of the
same job: the new run starts from step 0 (and its injected faults fire again). Unless the
checkpoint was written under this run's torchrun run id (``TORCHELASTIC_RUN_ID``, which a
controller sets to the job's uid): then this process joined the run after its training
ended (a pod replaced during the upload that followed, say) and has nothing left to do.

Output is one line per event, ``[event] key=value ...``, for people and tests to grep:
``[start]`` (the distributed env as seen), ``[resume]`` or ``[fresh]``, ``[step]``,
``[checkpoint]``, ``[fault]``, ``[done]`` and ``[error]``.

With ``--status-port`` / ``$STATUS_PORT`` the process also serves its progress (rank,
world size, step, loss, ...) as JSON over HTTP on that port, on every address, for
``kubectl port-forward`` and ``curl``: the samples declare it as the container port
``status`` (8080).

Faults for tests are injected with ``--fault`` / ``$INJECT_FAULT``:
``rank=1,step=30,exit=137`` makes rank 1 exit with code 137 once it has done 30 steps;
``signal=KILL`` instead of ``exit=`` kills the process with a signal. Several faults are
separated by ``;``. A fault fires once per job: with a checkpoint directory the firing is
recorded there, without one it only fires in the first attempt of a torchrun agent.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import http.server
import io
import itertools
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

# The sample image and venv carry no numpy; torch only warns about it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

CHECKPOINT_FILE = "checkpoint.pt"
# trainctl's embedded cluster sets it in every pod: a directory all pods of the namespace
# share, on every node, for as long as the cluster's directory lives (docs/local-cluster.md).
DATA_DIR_VARIABLE = "TRAINCTL_DATA_DIR"
FAULT_MARKER_DIR = "faults"


# --- fault injection ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Fault:
    """Make ``rank`` leave at ``step``: with ``exit_code``, or killed by ``signal_name``."""

    rank: int
    step: int
    exit_code: Optional[int] = None
    signal_name: Optional[str] = None

    @property
    def marker(self) -> str:
        how = f"exit{self.exit_code}" if self.signal_name is None else f"sig{self.signal_name}"
        return f"rank{self.rank}-step{self.step}-{how}"


def parse_faults(text: str) -> list[Fault]:
    """Parse ``rank=R,step=S,exit=C`` (or ``signal=NAME``) items separated by ``;``.

    Raises ``ValueError`` with one line naming the problem.
    """
    faults = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        fields: dict[str, str] = {}
        for pair in filter(None, (p.strip() for p in item.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not value.strip():
                raise ValueError(f"fault {item!r}: expected key=value, got {pair!r}")
            fields[key.strip()] = value.strip()
        unknown = set(fields) - {"rank", "step", "exit", "signal"}
        if unknown:
            raise ValueError(f"fault {item!r}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("rank", "step"):
            if key not in fields:
                raise ValueError(f"fault {item!r}: missing {key}=")
        if "exit" in fields and "signal" in fields:
            raise ValueError(f"fault {item!r}: give exit= or signal=, not both")
        try:
            rank, step = int(fields["rank"]), int(fields["step"])
            exit_code = int(fields["exit"]) if "exit" in fields else None
        except ValueError:
            raise ValueError(f"fault {item!r}: rank, step and exit must be integers") from None
        if rank < 0 or step < 0 or not (exit_code is None or 0 <= exit_code <= 255):
            raise ValueError(f"fault {item!r}: rank and step must be >= 0 and exit in 0..255")
        signal_name = None
        if "signal" in fields:
            signal_name = fields["signal"].upper().removeprefix("SIG")
            if not isinstance(getattr(signal, f"SIG{signal_name}", None), signal.Signals):
                raise ValueError(f"fault {item!r}: unknown signal {fields['signal']!r}")
        elif exit_code is None:
            exit_code = 1
        faults.append(Fault(rank=rank, step=step, exit_code=exit_code, signal_name=signal_name))
    return faults


def due_fault(faults: Sequence[Fault], rank: int, step: int, restart: int, checkpoint_dir: Optional[Path]) -> Optional[Fault]:
    """The fault that fires now, if any; each fires once per job (see the module docstring)."""
    for fault in faults:
        if fault.rank != rank or fault.step != step:
            continue
        if checkpoint_dir is not None:
            if (checkpoint_dir / FAULT_MARKER_DIR / fault.marker).exists():
                continue
        elif restart > 0:
            continue
        return fault
    return None


def fire(fault: Fault, checkpoint_dir: Optional[Path]) -> None:
    """Record the fault (so it fires once) and leave the way it says."""
    if checkpoint_dir is not None:
        markers = checkpoint_dir / FAULT_MARKER_DIR
        markers.mkdir(parents=True, exist_ok=True)
        (markers / fault.marker).touch()
    how = {"signal": f"SIG{fault.signal_name}"} if fault.signal_name else {"exit_code": fault.exit_code}
    log("fault", rank=fault.rank, step=fault.step, **how)
    sys.stdout.flush()
    if fault.signal_name:
        os.kill(os.getpid(), getattr(signal, f"SIG{fault.signal_name}"))
    os._exit(fault.exit_code if fault.exit_code is not None else 1)


# --- checkpoints ----------------------------------------------------------------------------


def save_checkpoint(directory: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` so that readers see the old file or the new one, never half of one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    tmp = directory / f".{CHECKPOINT_FILE}.{os.getpid()}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def torchrun_run_id() -> str:
    """torchrun's rendezvous run id, or "" when there is none to tell runs apart by."""
    value = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return "" if value == "none" else value  # torchrun's default id: every job has it


def checkpoint_location(path: Optional[Path], environ: dict[str, str]) -> Optional[Path]:
    """Where ``--checkpoint-dir`` is: a relative path lies under ``$TRAINCTL_DATA_DIR`` when
    it is set, so each embedded cluster keeps its own checkpoints; else under the working
    directory (``/workspace`` in the sample image, where a shared volume belongs)."""
    data_dir = environ.get(DATA_DIR_VARIABLE, "")
    if path is None or path.is_absolute() or not data_dir:
        return path
    return Path(data_dir) / path


def load_checkpoint(directory: Optional[Path]) -> Optional[dict[str, Any]]:
    """The checkpoint in ``directory``, or None when there is none yet."""
    if directory is None:
        return None
    path = directory / CHECKPOINT_FILE
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        return None


def agree_on_checkpoint(local: Optional[dict[str, Any]], world_size: int) -> Optional[dict[str, Any]]:
    """Every rank gets the newest checkpoint that any rank could read.

    With a shared volume all ranks read the same file and this is a no-op in effect; with
    per-pod storage the rank that holds the newest state sends it to the others, so all
    ranks resume from the same step and run the same number of collectives.
    """
    if world_size == 1:
        return local
    # Tensor collectives only: the object collectives need numpy, which torch does not pull in.
    steps = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
    dist.all_gather(steps, torch.tensor([local["step"] if local else -1]))
    newest = max(range(world_size), key=lambda r: (int(steps[r]), -r))
    if int(steps[newest]) < 0:
        return None
    payload = _to_bytes(local) if dist.get_rank() == newest else torch.empty(0, dtype=torch.uint8)
    size = torch.tensor([payload.numel()])
    dist.broadcast(size, src=newest)
    if dist.get_rank() != newest:
        payload = torch.empty(int(size), dtype=torch.uint8)
    dist.broadcast(payload, src=newest)
    return torch.load(io.BytesIO(bytes(payload.untyped_storage())), map_location="cpu", weights_only=True)


def _to_bytes(state: Optional[dict[str, Any]]) -> torch.Tensor:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


# --- status page ----------------------------------------------------------------------------


class StatusBoard:
    """What the status page shows: the latest values the training loop posted."""

    def __init__(self, **fields: Any) -> None:
        self._lock = threading.Lock()
        self._fields: dict[str, Any] = dict(fields)

    def post(self, **fields: Any) -> None:
        with self._lock:
            self._fields.update(fields)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._fields)


def serve_status(port: int, board: StatusBoard) -> http.server.ThreadingHTTPServer:
    """Serve ``board`` as JSON on ``port`` of every address (0: any free port), from a daemon
    thread, so the page goes away with the process. Raises OSError if the port is taken."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = (json.dumps(board.snapshot(), sort_keys=True) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the training log stays one line per training event

    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="status", daemon=True).start()
    return server


def start_status_page(port: int, board: StatusBoard) -> None:
    """Serve the status page if asked to; a taken port is logged, never fatal to training."""
    if port <= 0:
        return
    try:
        serve_status(port, board)
    except OSError as e:
        log("status", port=port, error=repr(e.strerror or str(e)))
    else:
        log("status", port=port, url=f"http://0.0.0.0:{port}/")


# --- data and model -------------------------------------------------------------------------


def make_dataset(samples: int, features: int, seed: int) -> TensorDataset:
    """A noisy linear regression problem, identical on every rank (nothing downloaded)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    true_w = torch.randn(features, 1, generator=generator)
    y = x @ true_w / features**0.5 + 0.1 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def make_model(features: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def batches(loader: DataLoader, sampler: DistributedSampler, start_step: int) -> Iterator[tuple[int, Any]]:
    """(global step, batch) from ``start_step`` on, epoch after epoch, resuming mid-epoch."""
    per_epoch = len(loader)
    epoch, skip = divmod(start_step, per_epoch)
    step = start_step
    while True:
        sampler.set_epoch(epoch)
        for batch in itertools.islice(loader, skip, None):
            yield step, batch
            step += 1
        epoch, skip = epoch + 1, 0


# --- the run --------------------------------------------------------------------------------


def spin(seconds: float) -> None:
    """Keep one core busy for ``seconds`` (load that shows in the pod's CPU usage)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def log(event: str, **fields: Any) -> None:
    text = " ".join(f"{k}={v:.6f}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
    print(f"[{event}] {text}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get  # string defaults go through `type`, so a bad env value is a usage error
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=env("TRAIN_STEPS", "60"), help="total optimizer steps (default 60)")
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--samples", type=int, default=2048, help="size of the generated dataset")
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-sleep", type=float, default=env("TRAIN_STEP_SLEEP", "0.05"),
                   help="seconds to sleep per step, standing in for real work (default 0.05)")
    p.add_argument("--busy-steps", type=int, default=env("TRAIN_BUSY_STEPS", "0"),
                   help="the first N steps spend --step-sleep on the CPU instead of sleeping (a CPU-bound "
                        "phase for an autoscaler to react to)")
    p.add_argument("--busy-while", type=Path, default=env("TRAIN_BUSY_WHILE") or None, metavar="FILE",
                   help="steps spend --step-sleep on the CPU while FILE exists")
    p.add_argument("--checkpoint-dir", type=Path, default=env("CHECKPOINT_DIR") or None,
                   help="directory for the checkpoint (default $CHECKPOINT_DIR; none: no checkpoints)")
    p.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints")
    p.add_argument("--fault", default=env("INJECT_FAULT", ""), help="faults to inject, e.g. rank=1,step=30,exit=137")
    p.add_argument("--peer-failure-exit-code", type=int, default=env("PEER_FAILURE_EXIT_CODE", "1"),
                   help="exit code when a collective fails because a peer is gone (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait for peers")
    p.add_argument("--status-port", type=int, default=env("STATUS_PORT", "0"),
                   help="serve the run's progress as JSON over HTTP on this port (default $STATUS_PORT; 0: no page)")
    p.add_argument("--hold-memory-mb", type=int, default=env("HOLD_MEMORY_MB", "0"),
                   help="allocate and touch this many MiB before training (to exceed a memory limit on purpose)")
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.checkpoint_every < 1 or args.samples < args.batch_size:
        p.error("--steps, --batch-size and --checkpoint-every must be >= 1 and --samples >= --batch-size")
    args.checkpoint_dir = checkpoint_location(args.checkpoint_dir, dict(os.environ))
    try:
        args.faults = parse_faults(args.fault)
    except ValueError as e:
        p.error(str(e))
    return args


def train(args: argparse.Namespace) -> float:
    torch.set_num_threads(1)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log("start", RANK=rank, WORLD_SIZE=world_size, MASTER_ADDR=os.environ.get("MASTER_ADDR", ""),
        MASTER_PORT=os.environ.get("MASTER_PORT", ""), LOCAL_RANK=os.environ.get("LOCAL_RANK", "0"),
        restart=restart, pid=os.getpid())
    status = StatusBoard(state="starting", pod=os.environ.get("HOSTNAME", ""), rank=rank, world_size=world_size,
                         restart=restart, step=0, steps=args.steps, loss=None)
    start_status_page(args.status_port, status)
    ballast = bytearray(args.hold_memory_mb * 1024 * 1024)  # zero-filled: every page is touched
    if ballast:
        log("holding", memory_mib=args.hold_memory_mb, rank=rank)
    distributed = world_size > 1
    if distributed:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))

    torch.manual_seed(args.seed)
    model = make_model(args.features, args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    checkpoint = agree_on_checkpoint(load_checkpoint(args.checkpoint_dir), world_size)
    run_id = torchrun_run_id()
    finished_here = bool(run_id) and checkpoint is not None and checkpoint.get("run_id") == run_id
    if checkpoint is not None and checkpoint["step"] >= args.steps and not finished_here:
        # A checkpoint that already reached --steps belongs to a run that finished: this is
        # a new run of the same job, so it trains from the start and its faults fire again.
        log("fresh", reason="previous-run-finished", saved_step=checkpoint["step"], rank=rank, world_size=world_size)
        checkpoint = None
        if rank == 0:
            shutil.rmtree(args.checkpoint_dir / FAULT_MARKER_DIR, ignore_errors=True)
        if distributed:
            dist.barrier()
    start_step = 0
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_step = checkpoint["step"]
        status.post(step=start_step)
        log("resume", step=start_step, saved_world_size=checkpoint["world_size"], rank=rank, world_size=world_size)
    ddp = DistributedDataParallel(model) if distributed else model

    dataset = make_dataset(args.samples, args.features, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    loss_fn = nn.MSELoss()

    loss_value = float("nan")
    status.post(state="training")
    for step, (x, y) in batches(loader, sampler, start_step):
        if step >= args.steps:
            break
        fault = due_fault(args.faults, rank, step, restart, args.checkpoint_dir)
        if fault is not None:
            fire(fault, args.checkpoint_dir)
        began = time.monotonic()
        optimizer.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        if step < args.busy_steps or (args.busy_while is not None and args.busy_while.exists()):
            spin(args.step_sleep)
        else:
            time.sleep(args.step_sleep)
        done = step + 1
        status.post(step=done, loss=loss_value)
        log("step", step=done, loss=loss_value, rank=rank, world_size=world_size, restart=restart,
            step_time=time.monotonic() - began, ts=time.time())
        if args.checkpoint_dir is not None and rank == 0 and (done % args.checkpoint_every == 0 or done == args.steps):
            path = save_checkpoint(args.checkpoint_dir, {
                "step": done, "world_size": world_size, "run_id": run_id,
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            })
            log("checkpoint", step=done, path=path)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    status.post(state="done")
    log("done", steps=args.steps, final_loss=loss_value, rank=rank, world_size=world_size, restart=restart)
    return loss_value


# gloo reports a vanished peer as a plain RuntimeError; these fragments tell it apart from a bug.
PEER_FAILURE_MARKERS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Connection refused",
    "Broken pipe",
    "Timed out",
    "Socket Timeout",
)


def is_peer_failure(error: BaseException) -> bool:
    """Did a collective fail because another rank is gone (rather than a bug in this one)?"""
    if isinstance(error, dist.DistError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in PEER_FAILURE_MARKERS)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        train(args)
    except RuntimeError as e:
        if not is_peer_failure(e):
            raise
        # A membership change for torchrun; for the controller, a retryable exit code if asked.
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        log("error", rank=os.environ.get("RANK", "0"), reason="peer-failure", message=repr(message[:200]))
        return args.peer_failure_exit_code
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # After a peer failure, tearing down the process group at interpreter exit waits on the
    # dead peer for a second or more, which delays torchrun's restart by as much; everything
    # worth keeping is already on disk and flushed, so leave at once.
    os._exit(code)
