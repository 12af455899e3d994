"""Reporting, on the controller (or the only process): each finished item's record (``pytest_topsail.items``) is
judged against the KPI history as its report arrives (``item_outputs``: verdicts on junit, teamcity and pytest-html
with the report), each suite's report settings coming from the session's report context (``context``); at the
session's end the run's KPIs are stored (``history_index``) and every output written (``session_outputs``:
``kpis.prom``, ``regression_summary.yaml``, ``verdicts.json``, the HTML report); ``plugin`` holds the hooks and the
``kpis`` fixture, ``replot`` rebuilds records from saved artifacts (``--topsail-replot``)."""
