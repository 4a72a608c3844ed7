"""Distributed MNIST-style training the way Kubeflow's PyTorchJob examples do it.

Kubeflow's classic example downloads MNIST inside every pod. This one has the same shape
(a small CNN, ``DistributedSampler``, ``--backend``, ``--epochs``, one line per logged
batch) but generates MNIST-shaped data instead, so it runs where nothing can be
downloaded: each of the ten classes is a fixed random 28×28 pattern, and every sample is
its class pattern plus noise. Under a PyTorchJob it reads the env the controller injects
(``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``); under torchrun it reads the
env torchrun sets; alone it trains on one process.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Optional, Sequence

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_mnist(samples: int, seed: int) -> TensorDataset:
    """MNIST-shaped (N, 1, 28, 28) images with labels 0–9, the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    patterns = torch.randn(10, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    images = patterns[labels] + 0.5 * torch.randn(samples, 1, 28, 28, generator=generator)
    return TensorDataset(images, labels)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description="PyTorch distributed MNIST-style example (synthetic data)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--samples", type=int, default=2048, help="images in the generated training set")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=5, help="batches between log lines")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.log_interval < 1:
        p.error("--epochs, --batch-size and --log-interval must be >= 1")

    torch.set_num_threads(1)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    print(f"[start] RANK={rank} WORLD_SIZE={world_size} MASTER_ADDR={os.environ.get('MASTER_ADDR', '')}", flush=True)
    distributed = world_size > 1
    if distributed:
        dist.init_process_group(args.backend)

    torch.manual_seed(args.seed)
    dataset = synthetic_mnist(args.samples, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    model: nn.Module = Net()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        for batch, (images, labels) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(images), labels)
            loss.backward()
            optimizer.step()
            if batch % args.log_interval == 0 or batch == len(loader) - 1:
                print(f"[step] epoch={epoch} batch={batch + 1}/{len(loader)} loss={loss.item():.4f} "
                      f"rank={rank} world_size={world_size}", flush=True)
    if distributed:
        dist.destroy_process_group()
    print(f"[done] epochs={args.epochs} final_loss={loss.item():.4f} rank={rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
