"""pytest_topsail.kube"""
