"""Helpers shared by the tests, the end-to-end tests and the benchmarks in hack/.

One module per idea: job manifests (``jobs``), status conditions (``conditions``), ports
(``net``), paths in the checkout (``repo``), pods and their processes (``pods``), kubectl
(``kubectl``), the samples (``samples``), waiting on watch events (``waiting``), the
controller under test (``controller``), a stand-in kubelet (``podphase``), a stand-in
controller for the launcher (``launch``), a fault-injecting proxy (``faultproxy``), the
controller's metrics (``metrics``), following a running job (``observer``), an embedded
cluster for the samples (``cluster``) and the pure reconcile tests' tiny cluster
(``reconcile``). Fixtures stay in the conftest files; what a test or a benchmark imports by
name lives here.
"""
