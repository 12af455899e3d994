"""Root conftest. The cluster preparation fixtures (gpu_operator, rhoai, storage, tgis_workers) and the cluster and
namespace fixtures come with the installed plugin (pytest_topsail/prepare/, pytest_topsail/cluster/);
tests/conftest.py loads pytester."""
