"""The embedded cluster's API server: a Kubernetes-compatible REST API on loopback, backed by
SQLite, that kubectl, the Python ``kubernetes`` client and the kubeflow-training SDK accept.

Run it with ``python -m trainctl.cluster.apiserver --dir DIR``, or from Python with
``trainctl.cluster.apiserver.process.start_apiserver(DIR)``. Its parts stand in layers:
``serving`` (HTTP) over ``auth`` over ``storage`` over ``admission`` over ``apimachinery``
(docs/architecture.md says how to add a verb).
"""
