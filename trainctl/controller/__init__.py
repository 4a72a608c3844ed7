"""The operator: the pure reconcile core (``reconcile``), one framework plugin per job kind
(``frameworks``), and the job manager that feeds the core from informers and applies its
plans (``manager``, with its ``options``, ``metrics`` and ``health`` endpoints)."""
