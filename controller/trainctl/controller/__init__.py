"""The operator: the pure reconcile core (``reconcile``), one framework plugin per job kind
(``frameworks``), and the shell that feeds the core from informers and applies its plans:
``manager`` composes ``caches``, ``handlers``, ``plan_applier`` (over ``child_writer``,
``status_writer`` and ``recorder``), with its ``options``, ``prometheus_metrics`` and ``health`` endpoints."""
