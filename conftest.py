"""Root conftest: loads the cluster-preparation fixtures (fixtures/) as plugins, and pytester for tests/."""

pytest_plugins = [
    "fixtures.cluster",
    "fixtures.gpu_operator",
    "fixtures.rhoai",
    "fixtures.namespaces",
    "pytester",
]
