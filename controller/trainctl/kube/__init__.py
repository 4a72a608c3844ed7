"""A client-go-style runtime: the only code that talks to a Kubernetes API server.

``client`` (raw-dict REST with retries and a QPS limit) → ``informer`` (list + watch caches)
→ ``workqueue`` (dedupe, rate-limited backoff), with ``expectations``, ``leader`` (Lease
election), ``events`` (an EventRecorder with client-go's aggregation), ``logs`` and the
``restmapper`` table around them. The controller, the kubelet, the scheduler, the control plane
and the launcher all build on it; none of it knows about training jobs.
"""
