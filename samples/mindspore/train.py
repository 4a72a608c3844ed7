"""Data-parallel MindSpore training on MindSpore's dynamic cluster, as an MSJob runs it.

Every pod of the MSJob runs this script. MindSpore's ``init()`` reads the env that
ms-operator (and trainctl) inject: ``MS_ROLE``, ``MS_SCHED_HOST``, ``MS_SCHED_PORT``,
``MS_WORKER_NUM``, ``MS_SERVER_NUM`` and ``MS_NODE_ID``. In the Scheduler pod (``MS_SCHED``)
``init()`` runs the cluster's meta server and returns only when every worker has left;
in a Worker pod it registers, gets a rank and sets up the collective backend (mccl on
CPU, nccl on GPU, hccl on Ascend).

Each worker fits a small linear regression (``nn.Dense``) on data of its own; the gradients
are averaged across workers (DATA_PARALLEL, ``DistributedGradReducer``), so every worker
must end with the same weights. The last line of a worker says so in a form tests can
compare: ``[done] rank=R world_size=N weights=w1,w2,... bias=b``.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from typing import Optional, Sequence

# MindSpore 2.10 leaves the cluster (the worker unregisters from the Scheduler) in an exit
# hook it registers on import; the native teardown after that crashes with SIGSEGV in a few
# percent of CPU runs, turning a finished worker into a failed pod. A hook registered before
# the import runs after MindSpore's, and ends a worker that finished cleanly right there.
_finished_with: Optional[int] = None


def _skip_native_teardown() -> None:
    if _finished_with is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_finished_with)


atexit.register(_skip_native_teardown)

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402
from mindspore import nn, ops  # noqa: E402
from mindspore.communication import get_group_size, get_rank, init  # noqa: E402

DEVICE_TARGETS = ("CPU", "GPU", "Ascend")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device-target", choices=DEVICE_TARGETS, default=os.environ.get("DEVICE_TARGET", "CPU"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--features", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.features < 1:
        p.error("--steps, --batch-size and --features must be >= 1")
    return args


def worker_data(features: int, samples: int, seed: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's shard: the same true weights everywhere, different samples per rank."""
    true_w = np.random.RandomState(seed).randn(features, 1).astype(np.float32)
    x = np.random.RandomState(seed + 1 + rank).randn(samples, features).astype(np.float32)
    y = x @ true_w + 0.01 * np.random.RandomState(seed + 1001 + rank).randn(samples, 1).astype(np.float32)
    return x, y


def fmt(values: np.ndarray) -> str:
    return ",".join(f"{v:.6f}" for v in values.reshape(-1))


def train(args: argparse.Namespace) -> None:
    rank, world_size = get_rank(), get_group_size()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(args.seed)
    net = nn.Dense(args.features, 1)
    loss_fn = nn.MSELoss()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=args.lr)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, optimizer.parameters)
    reducer = nn.DistributedGradReducer(optimizer.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        optimizer(reducer(grads))
        return loss

    x, y = worker_data(args.features, args.steps * args.batch_size, args.seed, rank)
    for step in range(args.steps):
        batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
        loss = train_step(ms.Tensor(x[batch]), ms.Tensor(y[batch]))
        print(f"[step] step={step + 1} loss={float(loss.asnumpy()):.6f} rank={rank} world_size={world_size}", flush=True)

    weight, bias = net.weight.asnumpy(), net.bias.asnumpy()
    # Cross-check through the collective itself: the sum over ranks is world_size × ours.
    summed = ops.AllReduce()(net.weight.value()).asnumpy()
    consistent = bool(np.allclose(summed, world_size * weight, atol=1e-5))
    print(f"[check] rank={rank} allreduced_weights_match={consistent}", flush=True)
    print(f"[done] rank={rank} world_size={world_size} weights={fmt(weight)} bias={fmt(bias)}", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    role = os.environ.get("MS_ROLE", "")
    print(f"[start] MS_ROLE={role} MS_NODE_ID={os.environ.get('MS_NODE_ID', '')} "
          f"MS_SCHED_HOST={os.environ.get('MS_SCHED_HOST', '')} MS_SCHED_PORT={os.environ.get('MS_SCHED_PORT', '')} "
          f"MS_WORKER_NUM={os.environ.get('MS_WORKER_NUM', '')} device={args.device_target}", flush=True)
    if role not in ("MS_SCHED", "MS_WORKER"):
        print(f"[error] MS_ROLE must be MS_SCHED or MS_WORKER (got {role!r}): run this under an MSJob "
              "with a Scheduler, or set the MS_* variables by hand", file=sys.stderr)
        return 2
    ms.set_context(mode=ms.GRAPH_MODE)
    # The scheduler only does networking (always over mccl); its pod needs no accelerator.
    ms.set_device(args.device_target if role == "MS_WORKER" else "CPU")
    # In the Scheduler, init() runs the meta server and ends the process when every worker
    # has unregistered (exit 0) or one timed out (exit 1): it does not return.
    init()
    train(args)
    global _finished_with
    _finished_with = 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
