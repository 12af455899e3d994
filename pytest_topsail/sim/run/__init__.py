"""Running the simulator: the profile of a run, loaded from YAML and checked against the controllers' plugin settings
(profile.py), the command line behind ``python -m pytest_topsail.sim`` (cli.py), ``SimCluster`` that starts it as a
child process (launcher.py), its kubeconfig (kubeconfig.py) and TLS certificates (tls.py). The top layer: it may import
every other subpackage, and none imports it."""
