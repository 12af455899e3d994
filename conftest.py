"""Root conftest: loads this repository's product-preparation fixtures (fixtures/) as plugins. The cluster and
namespace fixtures come with the installed plugin (pytest_topsail.cluster); tests/conftest.py loads pytester."""

pytest_plugins = [
    "fixtures.gpu_operator",
    "fixtures.rhoai",
    "fixtures.tgis_workers",
]
