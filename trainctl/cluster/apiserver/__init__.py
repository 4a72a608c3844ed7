"""The embedded cluster's API server: a Kubernetes-compatible REST API on loopback, backed by
SQLite, that kubectl, the Python ``kubernetes`` client and the kubeflow-training SDK accept.

Run it with ``python -m trainctl.controller.local.apiserver --dir DIR``, or from Python with
``trainctl.controller.local.apiserver.process.start_apiserver(DIR)``.
"""
