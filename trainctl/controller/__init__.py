"""trainctl's controller: the reconcile core, the Kubernetes shell around it, the embedded cluster and the CLI."""
