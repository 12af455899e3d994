"""pytest_topsail.scale"""
