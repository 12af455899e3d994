"""pytest_topsail.sim"""
