"""The imperative shell: the only code that talks to a Kubernetes API server.

``client`` (raw-dict REST with retries and a QPS limit) → ``informer`` (list + watch caches)
→ ``workqueue`` → ``manager`` (reconcile with the pure core, apply the Plan, guarded by
``expectations``), with ``leader`` (Lease election), ``events``, ``metrics``, ``health`` and
``logs`` around it; ``commands`` is ``trainctl controller``.
"""
