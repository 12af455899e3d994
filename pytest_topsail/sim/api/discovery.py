"""Discovery documents: /version, /api, /api/v1, /apis, /apis/{group}, /apis/{group}/{version}."""

from __future__ import annotations

from typing import Any

from pytest_topsail.sim.machinery.resources import ResourceType

KUBERNETES_VERSION = {"major": "1", "minor": "32"}
GIT_VERSION = "v1.32.0+topsail.sim"

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "scale": ["get", "patch", "update"],
                      "finalize": ["update"], "exec": ["create", "get"], "attach": ["create", "get"],
                      "portforward": ["create", "get"], "eviction": ["create"], "binding": ["create"],
                      "proxy": ["create", "delete", "get", "patch", "update"], "token": ["create"],
                      "ephemeralcontainers": ["get", "patch", "update"], "approval": ["get", "patch", "update"]}


_SUBRESOURCE_KINDS = {"eviction": {"group": "policy", "version": "v1", "kind": "Eviction"},
                      "binding": {"kind": "Binding"}, "token": {"group": "authentication.k8s.io", "version": "v1",
                                                               "kind": "TokenRequest"}}


def version_info() -> dict[str, Any]:
    return {
        **KUBERNETES_VERSION,
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _groups(types: list[ResourceType], preferred: list[ResourceType]) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for rtype in types:
        if not rtype.group:
            continue
        group = groups.setdefault(rtype.group, {"name": rtype.group, "versions": []})
        entry = {"groupVersion": rtype.api_version, "version": rtype.version}
        if entry not in group["versions"]:
            group["versions"].append(entry)
    for rtype in preferred:
        if rtype.group in groups and "preferredVersion" not in groups[rtype.group]:
            groups[rtype.group]["preferredVersion"] = {"groupVersion": rtype.api_version, "version": rtype.version}
    return groups


def api_group_list(types: list[ResourceType], preferred: list[ResourceType]) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(_groups(types, preferred).values())}


def api_group(types: list[ResourceType], preferred: list[ResourceType], name: str) -> dict[str, Any] | None:
    group = _groups(types, preferred).get(name)
    return None if group is None else {"kind": "APIGroup", "apiVersion": "v1", **group}


def api_resource_list(types: list[ResourceType], group: str, version: str) -> dict[str, Any] | None:
    selected = [t for t in types if t.group == group and t.version == version]
    if not selected:
        return None
    resources: list[dict[str, Any]] = []
    for rtype in selected:
        entry: dict[str, Any] = {
            "name": rtype.plural, "singularName": rtype.singular_name, "namespaced": rtype.namespaced,
            "kind": rtype.kind, "verbs": list(rtype.verbs),
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            entry["categories"] = list(rtype.categories)
        resources.append(entry)
        for sub in rtype.subresources:
            entry = {"name": f"{rtype.plural}/{sub}", "singularName": "", "namespaced": rtype.namespaced,
                     "kind": rtype.kind, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
            if sub == "scale":  # the scale client needs the Scale kind's group and version
                entry.update({"group": "autoscaling", "version": "v1", "kind": "Scale"})
            elif sub in _SUBRESOURCE_KINDS:
                entry.update(_SUBRESOURCE_KINDS[sub])
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": selected[0].api_version,
            "resources": resources}
