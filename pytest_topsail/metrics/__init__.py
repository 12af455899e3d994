"""GPU and container metrics of each item from Prometheus: queries as data per suite (``metrics:``), KPIs and
over-time figures, the raw series saved for replots (docs/metrics.md).

settings.py (the ``metrics:`` section and the default queries), client.py (Prometheus's HTTP API), local.py (a real
Prometheus scraping the simulator), source.py (which Prometheus: local, OpenShift's Thanos Querier, or a URL),
collect.py (one item's queries, KPIs, figures), plugin.py (the pytest fixtures and hooks).
"""
