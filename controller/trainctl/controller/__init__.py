"""The operator: the pure reconcile core (``reconcile``), one framework plugin per job kind
(``frameworks``), and the shell that feeds the core from informers and applies its plans:
``manager`` composes ``caches``, ``handlers``, ``plan_applier`` (over ``children``,
``status_writer`` and ``recorder``), with its ``options``, ``metrics`` and ``health`` endpoints."""
