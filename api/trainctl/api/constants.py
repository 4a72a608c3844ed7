"""The wire names trainctl shares with Kubeflow's training-operator and MindSpore's ms-operator.

Every label key, port, container name and reason prefix that a client (kubectl, the
kubeflow-training SDK, dashboards) can observe lives here, so that compatibility is one
file to read and no module invents its own spelling.
"""

from __future__ import annotations

from typing import Literal, get_args

# --- PyTorchJob (kubeflow.org/v1) ---------------------------------------------------------
KUBEFLOW_GROUP = "kubeflow.org"
KUBEFLOW_VERSION = "v1"
KUBEFLOW_API_VERSION = f"{KUBEFLOW_GROUP}/{KUBEFLOW_VERSION}"
PYTORCHJOB_KIND = "PyTorchJob"
PYTORCHJOB_PLURAL = "pytorchjobs"
PYTORCHJOB_SINGULAR = "pytorchjob"
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_DEFAULT_PORT = 23456
PYTORCH_DEFAULT_RESTART_POLICY: RestartPolicy = "OnFailure"
PYTORCH_DEFAULT_NPROC = "auto"
PYTORCH_FRAMEWORK = "pytorch"
PYTORCH_CONTROLLER_NAME = "pytorchjob-controller"
PYTORCH_REPLICA_TYPES = ("Master", "Worker")

# --- MSJob (mindspore.gitee.com/v1) ------------------------------------------------------
MINDSPORE_GROUP = "mindspore.gitee.com"
MINDSPORE_VERSION = "v1"
MINDSPORE_API_VERSION = f"{MINDSPORE_GROUP}/{MINDSPORE_VERSION}"
MSJOB_KIND = "MSJob"
MSJOB_PLURAL = "msjobs"
MSJOB_SINGULAR = "msjob"
MINDSPORE_CONTAINER = "mindspore"
MINDSPORE_PORT_NAME = "msjob-port"
MINDSPORE_DEFAULT_PORT = 2222
MINDSPORE_DEFAULT_RESTART_POLICY: RestartPolicy = "Never"
MINDSPORE_DEFAULT_CLEAN_POD_POLICY: CleanPodPolicy = "Running"
MINDSPORE_FRAMEWORK = "mindspore"
MINDSPORE_CONTROLLER_NAME = "msjob-controller"
MINDSPORE_REPLICA_TYPES = ("Scheduler", "PS", "Worker")

# --- Labels shared by every Kubeflow-style job ---------------------------------------------
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"
# ms-operator duplicates these without the prefix (kubeflow/common v0.4.1 legacy keys).
LEGACY_LABEL_GROUP_NAME = "group-name"
LEGACY_LABEL_JOB_NAME = "job-name"
LEGACY_LABEL_REPLICA_TYPE = "replica-type"
LEGACY_LABEL_REPLICA_INDEX = "replica-index"

# --- Policies -------------------------------------------------------------------------------
# Enumerations as Literal types (the models' field types) with their values as tuples.
RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]
RESTART_POLICIES: tuple[str, ...] = get_args(RestartPolicy)
CleanPodPolicy = Literal["All", "Running", "None"]
CLEAN_POD_POLICIES: tuple[str, ...] = get_args(CleanPodPolicy)
ManagedBy = Literal["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]
MANAGED_BY_VALUES: tuple[str, ...] = get_args(ManagedBy)
MANAGED_BY_TRAINING_OPERATOR, MANAGED_BY_MULTIKUEUE = MANAGED_BY_VALUES
MSSuccessPolicy = Literal["", "AllWorkers"]
MS_SUCCESS_POLICY_ALL_WORKERS = get_args(MSSuccessPolicy)[1]
RdzvBackend = Literal["c10d", "etcd", "etcd-v2"]
RDZV_BACKENDS: tuple[str, ...] = get_args(RdzvBackend)
NPROC_PATTERN = r"^(auto|cpu|gpu|[1-9][0-9]*)$"

# --- Condition types -----------------------------------------------------------------------
CONDITION_CREATED = "Created"
CONDITION_RUNNING = "Running"
CONDITION_RESTARTING = "Restarting"
CONDITION_SUCCEEDED = "Succeeded"
CONDITION_FAILED = "Failed"
CONDITION_SUSPENDED = "Suspended"

# --- The environment the pods receive -------------------------------------------------------
# PyTorchJob: torchrun takes each option from a PET_* variable (PET_NNODES is --nnodes …).
ENV_MASTER_ADDR = "MASTER_ADDR"
ENV_MASTER_PORT = "MASTER_PORT"
ENV_WORLD_SIZE = "WORLD_SIZE"
ENV_RANK = "RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"
PET_NODE_RANK = "PET_NODE_RANK"
PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
PET_RDZV_BACKEND = "PET_RDZV_BACKEND"
PET_RDZV_ID = "PET_RDZV_ID"
PET_RDZV_CONF = "PET_RDZV_CONF"
PET_MAX_RESTARTS = "PET_MAX_RESTARTS"
PET_STANDALONE = "PET_STANDALONE"
PET_LOCAL_ADDR = "PET_LOCAL_ADDR"  # trainctl's: the agent's own address (status.podIP)
# MSJob: MindSpore's dynamic-cluster variables.
MS_SCHED_HOST = "MS_SCHED_HOST"
MS_SCHED_PORT = "MS_SCHED_PORT"
MS_NODE_ID = "MS_NODE_ID"
MS_SERVER_NUM = "MS_SERVER_NUM"
MS_WORKER_NUM = "MS_WORKER_NUM"
MS_LOCAL_WORKER = "MS_LOCAL_WORKER"
MS_ROLE = "MS_ROLE"

# --- Accelerators ---------------------------------------------------------------------------
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_ASCEND_PREFIX = "huawei.com/Ascend"
RESOURCE_HUAWEI_NPU = "huawei.com/npu"

# --- trainctl's own annotations and labels ------------------------------------------------
# Opt a job back into the exact environment the reference operator injects.
ANNOTATION_REFERENCE_ENV = "trainctl.io/reference-env"
LABEL_COMPONENT = "trainctl.io/component"
# trainctl extensions: a pod whose node has been not Ready this long is replaced (a
# duration such as "30s" or "2m"; "never" leaves eviction to Kubernetes).
ANNOTATION_NODE_LOST_GRACE = "trainctl.io/node-lost-grace"
NODE_LOST_GRACE_NEVER = "never"
# Opt-in: relaunch a replica killed as OOMKilled with its memory limit and request times this
# factor, never above the maximum (a quantity); the new pod says "<previous> -> <new>".
ANNOTATION_OOM_MEMORY_FACTOR = "trainctl.io/oom-memory-factor"
ANNOTATION_OOM_MEMORY_MAX = "trainctl.io/oom-memory-max"
ANNOTATION_OOM_MEMORY = "trainctl.io/oom-memory"
# The taint a node gets when its machine is about to be reclaimed (a spot instance's notice),
# NoExecute: nothing new lands on it and its pods are evicted gracefully. The value is the
# deadline, in seconds since the epoch, after which the machine is gone.
TAINT_SPOT_RECLAIM = "trainctl.io/spot-reclaim"
