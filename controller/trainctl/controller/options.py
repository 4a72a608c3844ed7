"""The controller's settings: one object that owns every default, and the flags made from it.

:class:`ManagerOptions` holds what ``trainctl controller`` can be told, with its defaults;
its ``reconcile`` field is the core's :class:`~trainctl.controller.reconcile.ReconcileConfig`.
:func:`add_flags` makes one command-line flag per field of both dataclasses (``max_replicas``
becomes ``--max-replicas``), reading type and default from the field, so a new setting is
reachable from the command line the moment it is declared. :func:`from_args` turns the
parsed flags back into the options object.

Every field carries ``metadata`` with its ``help`` (declared with ``setting``, the one place a
setting is described); it may also carry ``flag`` (another flag name), ``choices``,
``minimum``, ``metavar``, ``env`` (an environment variable that overrides the default) and
``parse`` (a function from the flag's text to the value, raising ValueError with the rule).
A ReconcileConfig field that ManagerOptions also has (the gang scheduler, which the manager
needs for its PodGroup informer) is set through the manager's flag only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from trainctl.api.durations import parse_duration
from trainctl.controller.reconcile.config import ReconcileConfig
from trainctl.controller.reconcile.config import setting as _setting


@dataclass(frozen=True)
class ManagerOptions:
    namespace: Optional[str] = _setting(None, "watch only this namespace (default: all)", env="KUBEFLOW_NAMESPACE")
    workers: int = _setting(4, "jobs reconciled in parallel", minimum=1)
    create_concurrency: int = _setting(32, "children created in parallel", minimum=1)
    # Pods and Services are created in slow-start batches (1, 2, 4 … up to this), so a
    # failing API server gets a bounded burst; a batch larger than create_concurrency keeps
    # the pool busy between batch boundaries.
    max_create_batch: int = _setting(256, "largest slow-start batch of pod/service creates", minimum=1)
    # Child ADDED/MODIFIED events within this window share one reconcile (as the Job
    # controller's pod-update batch period does), so pods starting together cost one
    # reconcile; deletions still reconcile at once, to fill the gap fast.
    child_update_batch_period: float = _setting(
        0.025, "reconcile a job once per this window of pod/service updates (0 = at once)", metavar="SECONDS", minimum=0
    )
    # Within this period of a job's last status write, a status that only moves replica
    # counts waits for the period's end (the Job controller's syncJobBatchPeriod), so status
    # writes per job stay bounded while pods churn; transitions are written at once.
    status_batch_period: float = _setting(
        1.0, "write replica-count changes of a job's status at most about once per this period (0 = at once)",
        metavar="SECONDS", minimum=0,
    )
    qps: float = _setting(100.0, "client-side API request rate (0 = unlimited)", minimum=0)
    burst: int = _setting(200, "client-side API request burst", minimum=1)
    gang_scheduler: Optional[str] = _setting(
        None, "gang-schedule pods with Volcano, or with scheduler-plugins under this scheduler name",
        metavar="volcano|scheduler-plugins|NAME",
    )
    leader_elect: bool = _setting(False, "take a coordination.k8s.io Lease before acting")
    # None: this pod's namespace ($POD_NAMESPACE, the service account's), else "default".
    lease_namespace: Optional[str] = _setting(
        None, "namespace of the Lease (default: this pod's namespace, else 'default')", flag="leader-elect-namespace"
    )
    lease_name: str = _setting("trainctl-controller", "name of the Lease", flag="leader-elect-name")
    identity: str = _setting("", "this replica's name in the Lease (default: host name and a random suffix)")
    lease_duration: float = _setting(15.0, "seconds a Lease is valid", minimum=0)
    renew_deadline: float = _setting(10.0, "seconds the leader may fail to renew before stepping down", minimum=0)
    retry_period: float = _setting(2.0, "seconds between Lease attempts", minimum=0)
    watch_timeout: int = _setting(300, "seconds a watch lasts before the server ends it and it is renewed", minimum=1)
    metrics_port: int = _setting(8080, "Prometheus /metrics port (0 = off)", minimum=0)
    health_port: int = _setting(8081, "/healthz and /readyz port (0 = off)", minimum=0)
    bind_address: str = _setting("0.0.0.0", "address for the metrics and health ports")
    log_format: str = _setting("text", "log line format", choices=("text", "json"))
    log_level: str = _setting("info", "log level", choices=("debug", "info", "warning", "error"))
    reconcile: ReconcileConfig = field(default_factory=ReconcileConfig)

    def __post_init__(self) -> None:
        if self.reconcile.gang_scheduler != self.gang_scheduler:
            object.__setattr__(self, "reconcile", dataclasses.replace(self.reconcile, gang_scheduler=self.gang_scheduler))


# --- flags -----------------------------------------------------------------------------------
def _flag_fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init and not dataclasses.is_dataclass(hints[f.name])]


def _reconcile_fields() -> list[tuple[dataclasses.Field[Any], Any]]:
    owned = {f.name for f in dataclasses.fields(ManagerOptions)}
    return [(f, hint) for f, hint in _flag_fields(ReconcileConfig) if f.name not in owned]


def _flag(f: dataclasses.Field[Any]) -> str:
    return "--" + (f.metadata.get("flag") or f.name.replace("_", "-"))


def _parser_for(value_type: type, minimum: Optional[float]) -> Any:
    def parse(text: str) -> Any:
        try:
            value = value_type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'a whole number' if value_type is int else 'a number'}, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        return value

    parse.__name__ = value_type.__name__  # argparse names the type in its errors
    return parse


def duration_or_never(text: str) -> Optional[float]:
    """A duration flag ("30s", "2m", a number of seconds) that "never" turns off."""
    if text.strip().lower() == "never":
        return None
    seconds = parse_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 30s or 2m, or 'never', got {text!r}")
    return seconds


def _parsed_by(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def checked(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None

    return checked


def _add_flag(group: argparse._ArgumentGroup, f: dataclasses.Field[Any], hint: Any) -> None:
    default: Any = None
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    env = f.metadata.get("env")
    if env and os.environ.get(env):
        default = os.environ[env]
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)  # Optional[X] -> X
    help_text = f.metadata.get("help")
    if not help_text:  # every setting says what it does, once: there is no other source of --help
        raise TypeError(f"setting {f.name} has no help text: declare it with setting(default, help)")
    if env:
        help_text += f"; env {env}"
    kwargs: dict[str, Any] = {"dest": f.name, "default": default}
    if base is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif f.metadata.get("parse") == "duration-or-never":
        kwargs["type"] = duration_or_never
        kwargs["metavar"] = f.metadata.get("metavar")
        if default is not None:
            help_text += f" (default: {default:g}s)"
    elif callable(f.metadata.get("parse")):
        kwargs["type"] = _parsed_by(f.metadata["parse"])
        kwargs["metavar"] = f.metadata.get("metavar")
        if default is not None:
            help_text += f" (default: {default})"
    else:
        kwargs["type"] = _parser_for(base, f.metadata.get("minimum")) if base in (int, float) else base
        if f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        if f.metadata.get("metavar"):
            kwargs["metavar"] = f.metadata["metavar"]
        if default is not None and default != "":
            help_text += f" (default: {default})"
    group.add_argument(_flag(f), help=help_text, **kwargs)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ManagerOptions and ReconcileConfig field, defaults from the dataclasses."""
    controller = parser.add_argument_group("controller")
    for f, hint in _flag_fields(ManagerOptions):
        _add_flag(controller, f, hint)
    reconcile = parser.add_argument_group("reconcile", "settings of the reconcile core (ReconcileConfig)")
    for f, hint in _reconcile_fields():
        _add_flag(reconcile, f, hint)


def from_args(args: argparse.Namespace) -> ManagerOptions:
    """The options the parsed flags of :func:`add_flags` say."""
    reconcile = ReconcileConfig(**{f.name: getattr(args, f.name) for f, _ in _reconcile_fields()})
    values = {f.name: getattr(args, f.name) for f, _ in _flag_fields(ManagerOptions)}
    return ManagerOptions(**values, reconcile=reconcile)
