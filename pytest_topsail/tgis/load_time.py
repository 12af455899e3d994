"""How long a model server took to load its model, in the cluster's own time (never the client's wall clock).

- On the simulator, the pod carries the simulated storage download and model load the KServe/TGIS simulation gave
  it (``sim.topsail.io/model-download-seconds``, ``sim.topsail.io/model-load-seconds``; the stages themselves run on
  the profile's time scale, pytest_topsail.tgis.simulation): the simulated duration, the same for a model, config
  and GPU profile whatever the load of the machine running the simulator. A pod timed by hand
  (``sim.topsail.io/initialize-delay-ms``, ``ready-delay-ms``) reads those.
- On a real cluster: the pod's Ready condition time minus its creationTimestamp (the kubelet's and API server's
  clocks, 1 s resolution), not the time a client took to notice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

SIM_SECONDS = ("sim.topsail.io/model-download-seconds", "sim.topsail.io/model-load-seconds")
SIM_STAGES = ("sim.topsail.io/initialize-delay-ms", "sim.topsail.io/ready-delay-ms")


def pod_load_seconds(pod: dict[str, Any]) -> float | None:
    """Seconds from the pod's creation to its model served; None when the pod tells neither (not Ready yet)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if SIM_SECONDS[1] in annotations:
        try:
            return sum(float(annotations.get(key) or 0) for key in SIM_SECONDS)
        except ValueError:
            return None
    if SIM_STAGES[1] in annotations:
        try:
            return sum(float(annotations.get(key) or 0) for key in SIM_STAGES) / 1000.0
        except ValueError:
            return None
    created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
    ready = next((_time(c.get("lastTransitionTime")) for c in (pod.get("status") or {}).get("conditions") or ()
                  if c.get("type") == "Ready" and c.get("status") == "True"), None)
    if created is None or ready is None:
        return None
    return max(0.0, ready - created)


def _time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
