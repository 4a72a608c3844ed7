"""kubectl as a subprocess, against one cluster, never touching the user's own ``~/.kube``."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


def client_env(kubeconfig: Path | str, home: Path | str) -> dict[str, str]:
    """This process's environment minus every ``KUBE*`` variable, with ``KUBECONFIG`` and an
    own ``HOME`` (so kubectl's discovery cache starts cold)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(KUBECONFIG=str(kubeconfig), HOME=str(home))
    return env


@dataclass(frozen=True)
class Kubectl:
    env: dict[str, str]

    @classmethod
    def for_kubeconfig(cls, kubeconfig: Path | str, home: Path | str) -> Kubectl:
        return cls(client_env(kubeconfig, home))

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["kubectl", *args], env=self.env, input=input, capture_output=True,
                                text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stderr.strip()}")
        return result

    def __call__(self, *args: str, **kwargs: Any) -> str:
        return self.run(*args, **kwargs).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))

    def apply(self, obj: dict[str, Any]) -> None:
        self("apply", "-f", "-", input=yaml.safe_dump(obj))

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["kubectl", *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
