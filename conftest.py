"""Root conftest: loads the cluster-preparation fixtures (fixtures/) as plugins (tests/conftest.py loads pytester)."""

pytest_plugins = [
    "fixtures.cluster",
    "fixtures.gpu_operator",
    "fixtures.rhoai",
    "fixtures.namespaces",
    "fixtures.tgis_workers",
]
