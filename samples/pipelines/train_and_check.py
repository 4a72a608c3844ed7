"""A Kubeflow Pipeline: train with a PyTorchJob, then, if it succeeded, run an MSJob.

Compile it (offline; only ``kfp`` and trainctl are needed) and upload the YAML to Kubeflow
Pipelines::

    python samples/pipelines/train_and_check.py train_and_check.yaml

The pipeline's service account needs the RBAC in ``manifests/pipelines/``.
"""

import sys

from kfp import compiler, dsl

from trainctl.pipelines.components import msjob_launcher, pytorchjob_launcher

# The samples' images, as samples/README.md builds them (docker build -t trainctl/samples:0.1.0 samples/).
TRAINING_IMAGE = "trainctl/samples:0.1.0"

# A whole manifest works too; this one checks the MindSpore installation on one Worker.
MSJOB_MANIFEST = """\
apiVersion: mindspore.gitee.com/v1
kind: MSJob
metadata:
  name: mindspore-check
spec:
  runPolicy:
    cleanPodPolicy: Running
  msReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: mindspore
              image: trainctl/samples-mindspore:0.1.0
              command: [python, -c, "import mindspore; mindspore.run_check()"]
"""


@dsl.pipeline(name="train-and-check", description="PyTorchJob training, then an MSJob once it succeeded.")
def train_and_check(workers: int = 2, timeout_seconds: int = 3600) -> None:
    train = pytorchjob_launcher(
        image=TRAINING_IMAGE,
        command=["python", "samples/pytorch/train.py"],
        args=["--steps", "200"],
        replicas=workers,
        cpu="1",
        memory="2Gi",
        timeout_seconds=timeout_seconds,
        delete_when_done=True,
    )
    # A launch has side effects (a job runs): never reuse a cached result.
    train.set_caching_options(False)
    # A step fails when its job fails, so this one only starts after a Succeeded training job.
    check = msjob_launcher(manifest=MSJOB_MANIFEST, timeout_seconds=timeout_seconds).after(train)
    check.set_caching_options(False)


if __name__ == "__main__":
    output = sys.argv[1] if len(sys.argv) > 1 else "train_and_check.yaml"
    compiler.Compiler().compile(train_and_check, output)
    print(f"wrote {output}")
