"""Cluster preparation shipped with the plugin: the session fixtures a suite stands on, each a pytest plugin module
registered by pytest_topsail/plugin.py (so a suite in another repository gets the same preparation after
``pip install``):

- ``gpu_operator``: Node Feature Discovery and the NVIDIA GPU operator through OLM, until the GPU nodes advertise
  ``nvidia.com/gpu``;
- ``rhoai``: OpenShift AI (or Open Data Hub) through OLM, its DSCInitialization and DataScienceCluster with the
  components the suites in scope need Managed;
- ``storage``: a PVC and a download Job putting models and datasets on it (TOPSAIL's ``storage download_to_pvc``);
- ``tgis_workers``: the TGIS model servers, one per (model, config), and ``--tgis-record``;
- ``stack``: runs, before a suite's first item, the fixtures its ``cluster.stack`` lists, in order.

``olm`` holds what the operator installs share (manifests/ templates, Subscriptions, CSV waits).
"""
