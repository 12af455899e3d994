"""Reporting: KPIs from every item -> history -> verdicts -> junit properties, terminal summary, HTML report."""
