"""The cluster of a run and its preparation, part of the installed plugin (registered by ``pytest_topsail.plugin``):

- ``fixture``: the ``cluster`` session fixture (simulator or real cluster), run-wide sharing across xdist workers;
- ``namespaces``: the ``namespace`` fixture (one per suite);
- ``components``: the once-per-run cleanup.before / prepare / cleanup.after / keep sequence of a component;
- ``steps``: preparation steps (``kube_step``: manifests, reproducer, captured objects), rollback, cleanup plans;
- ``rundir``: the run's private shared directory; ``settings``: fixture settings; ``facts``, ``sim_profile``.

Product fixtures (fixtures/ in this repository, or any other repository) use the public names of
``pytest_topsail`` (``topsail.Cluster``, ``topsail.prepare_component``, ``topsail.kube_step``, ``topsail.run_once``...).
"""
