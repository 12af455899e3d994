"""Root conftest: loads the cluster-preparation fixtures (fixtures/) as plugins."""
