"""pytest-topsail: AI/ML performance and scale tests on Kubernetes as pytest suites.

PYTEST_DONT_REWRITE: an editable install is found by setuptools' own import finder, which pytest's assertion
rewriter does not see; without this marker every pytester run in the same process warns that the package "cannot be
rewritten". The package uses no bare asserts that would need rewriting.
"""

__version__ = "0.1.0"
