"""trainctl's API: PyTorchJob (kubeflow.org/v1) and MSJob (mindspore.gitee.com/v1) as data.

Typed wire models, in-memory defaulting, validation with field paths and CRD generation.
Nothing here does I/O; the controller and the CLI build on it.
"""

from trainctl.api.common import (
    Job,
    JobCondition,
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RunPolicy,
    SchedulingPolicy,
)
from trainctl.api.defaults import default_job
from trainctl.api.errors import FieldError, JobInvalid
from trainctl.api.loader import load_documents, parse_job
from trainctl.api.mindspore import MSJob, MSJobSpec
from trainctl.api.pytorch import ElasticPolicy, PyTorchJob, PyTorchJobSpec, RDZVConf
from trainctl.api.validation import validate

__all__ = [
    "ElasticPolicy",
    "FieldError",
    "Job",
    "JobInvalid",
    "JobCondition",
    "JobStatus",
    "MSJob",
    "MSJobSpec",
    "PyTorchJob",
    "PyTorchJobSpec",
    "RDZVConf",
    "ReplicaSpec",
    "ReplicaStatus",
    "RunPolicy",
    "SchedulingPolicy",
    "default_job",
    "load_documents",
    "parse_job",
    "validate",
]
