"""pytest-topsail: AI/ML performance and scale tests on Kubernetes as pytest suites."""

__version__ = "0.1.0"
