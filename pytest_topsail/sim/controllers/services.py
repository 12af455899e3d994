"""Service controller: gives every Service without one a cluster IP from 10.96.0.0/12 (ExternalName and headless
services excepted) and LoadBalancer services an ingress IP. Endpoints are not simulated."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.base import Controller


class ServiceController(Controller):
    name = "services"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.services = self.store.resource_type("services")
        self.used: set[str] = set()
        self._next = 0

    async def on_start(self) -> None:
        self.watch("services", "", self._on_service)
        for service in self.store.list(self.services):
            self._on_service("ADDED", service)

    def _on_service(self, event_type: str, service: dict[str, Any]) -> None:
        spec = service.get("spec") or {}
        ip = spec.get("clusterIP")
        if event_type == "DELETED":
            self.used.discard(ip or "")
            return
        if ip and ip != "None":
            self.used.add(ip)
        needs_ip = not ip and spec.get("type") != "ExternalName"
        needs_lb = spec.get("type") == "LoadBalancer" and not (service.get("status") or {}).get("loadBalancer")
        if needs_ip or needs_lb:
            self.enqueue((service["metadata"].get("namespace") or "", service["metadata"]["name"]))

    def allocate(self) -> str:
        while True:
            self._next += 1
            n = self._next
            ip = f"10.{96 + (n >> 16) % 16}.{(n >> 8) & 255}.{n & 255}"
            if ip not in self.used and n & 255 != 0:
                self.used.add(ip)
                return ip

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = cast(tuple[str, str], key)
        service = self.store.find(self.services, namespace, name)
        if service is None:
            return
        spec = dict(service.get("spec") or {})
        if not spec.get("clusterIP") and spec.get("type") != "ExternalName":
            ip = self.allocate()
            spec.update(clusterIP=ip, clusterIPs=[ip], ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack")
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            service = self.store.update(self.services, {**service, "spec": spec})
        if spec.get("type") == "LoadBalancer" and not (service.get("status") or {}).get("loadBalancer"):
            status = {**(service.get("status") or {}), "loadBalancer": {"ingress": [{"ip": self.allocate()}]}}
            self.store.update(self.services, {**service, "status": status}, subresource="status")
