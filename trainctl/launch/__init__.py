"""Launch-and-wait for training jobs: the code ``trainctl run`` and the pipeline components share.

``launch(api, job, namespace, view, timeout=…)`` creates a PyTorchJob or MSJob, follows it
and its lead pod's log with watches, and returns a ``LaunchResult``. Its ``api`` comes from ``connect``, the precedence rule
every component uses (:mod:`trainctl.kube.connect`).
"""

from trainctl.kube.connect import ClusterConfigError, NoClusterConfigured, connect, default_namespace
from trainctl.launch.launcher import (
    JobExists,
    Launcher,
    LaunchError,
    LaunchResult,
    Outcome,
    launch,
    sigterm_as_interrupt,
)
from trainctl.launch.progress import PlainView, ProgressView, RichView, make_view

__all__ = [
    "ClusterConfigError",
    "JobExists",
    "LaunchError",
    "LaunchResult",
    "Launcher",
    "NoClusterConfigured",
    "Outcome",
    "PlainView",
    "ProgressView",
    "RichView",
    "connect",
    "default_namespace",
    "launch",
    "make_view",
    "sigterm_as_interrupt",
]
