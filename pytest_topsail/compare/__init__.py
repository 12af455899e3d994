"""Compare runs: ``python -m pytest_topsail.compare A B [C ...]`` puts chosen runs side by side (each argument an
artifacts directory, a directory of runs or a run id of the history), matches their items by case settings and says,
per KPI, A's and B's values, the relative difference with a confidence interval bootstrapped from the raw samples the
runs kept (a suite's ``samples(artifact_dir)`` in its kpis.py) and a verdict (better, worse, no significant
difference, not comparable, informational); ``stats`` holds the statistics (pure functions over arrays), ``load``
reads the runs, ``pairs`` matches and judges them, ``output`` writes the terminal table, the HTML page, the matrix of
many runs and the junit file, ``__main__`` is the command (exit codes 0 no significant regression, 1 a significant
regression, 2 not comparable or no baseline, 3 bad input), ``plugin`` the pytest option ``--topsail-baseline RUN``
(this run against RUN, judged by the report before it stores the run: in the terminal summary, a section of
report.html, junit properties ``baseline.<kpi>`` and ``baseline.html``). docs/kpis-and-regressions.md, "Comparing
runs".
"""
