"""pytest_topsail.history"""
