"""The fine-tuning suite's library: settings of one point, the model catalog, the memory estimate, trainer log
parsing and the KPI formulas (docs/fine-tuning.md). Pure logic; Kubernetes access goes through pytest_topsail.kube."""
