"""The cluster of a run and its preparation, part of the installed plugin (registered by ``pytest_topsail.plugin``).
Layered so that no module imports one above it (tests/engine/test_floor_plan.py fails on any cycle):

- ``plugin``: the pytest face (options, hooks, the ``cluster`` and ``namespace`` fixtures), light at import;
- ``state``: the per-process state (``ClusterSession`` in ``config.stash``, the ``Cluster`` value) and the run-wide
  sharing across xdist workers (``run_once``, ``add_cleanup``, ``shared_dir``, ``opened_cluster``);
- ``fixture``: opening the cluster (simulator or real cluster), its facts, the end of the session;
- ``namespaces``: the ``namespace`` fixture (one per suite); ``ownership``: the labels of what a run creates (and of
  what it keeps); ``killed_runs``: removing what killed runs of the project left on a real cluster;
- ``components``: the once-per-run cleanup.before / prepare / cleanup.after / keep sequence of a component;
- ``steps``: preparation steps (``kube_step``: manifests, reproducer, captured objects), rollback, cleanup plans;
- ``rundir``: the run's private shared directory; ``settings``: fixture settings; ``facts``, ``sim_profile``,
  ``clock`` (intervals in the cluster's time).

Product fixtures (fixtures/ in this repository, or any other repository) use the public names of
``pytest_topsail`` (``topsail.Cluster``, ``topsail.prepare_component``, ``topsail.kube_step``, ``topsail.run_once``...).
"""
