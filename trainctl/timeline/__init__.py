"""A picture of what happened to a training job: ``trainctl timeline`` and ``trainctl run --timeline``.

``model`` rebuilds a job's history (pod phases, restarts, conditions, world size) from
plain API objects; ``live_recorder`` keeps what a launcher's watches saw live; ``drawing`` draws
the result with matplotlib; ``fetch`` reads a job's objects and logs from a cluster.
"""
