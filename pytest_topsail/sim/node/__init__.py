"""What a node's kubelet and agents show of the simulated pods: GPU activity per pod (gpuactivity.py), the workload
runtime that runs real processes for matching images (realworkload.py), the dcgm-exporter and cAdvisor-like metrics
(exporters.py), nvidia-smi output (nvidiasmi.py) and the kubelet's rendering of pod logs (podlogs.py). It imports
``machinery`` and the store only through duck-typed reads, never ``api``; the pod lifecycle controller drives it."""
