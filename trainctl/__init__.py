"""trainctl: distributed training jobs on Kubernetes, and a Kubernetes on one machine to run them.

The packages, by responsibility (docs/architecture.md draws the map):

- ``api``: the job kinds' wire models, defaulting, validation and CRDs, as data.
- ``controller``: the operator: the pure reconcile core, the per-kind framework plugins and the
  job manager that runs them against an API server.
- ``kube``: a client-go-style runtime any component here uses: REST client, informers, work
  queue, expectations, leader election, Events.
- ``cluster``: the embedded single-machine cluster (API server, scheduler, kubelets, control
  plane) that ``trainctl local`` runs.
- ``launch``, ``pipelines``, ``timeline``: client-side tools: launch a job and follow it,
  Kubeflow Pipelines components, a job's history drawn on one time axis.
- ``cli``: every ``trainctl`` subcommand.
"""
