"""pytest hooks of the reporting pipeline (registered by pytest_topsail.plugin)."""
