"""Access and identity reviews (authorization.k8s.io, authentication.k8s.io): answered on create, never stored.

The simulator has one user (the kubeconfig's token) allowed to do everything, like a cluster admin in
``system:masters``: every access review is allowed, a token review authenticates only that token.
"""

from __future__ import annotations

import hmac
from typing import Any

from pytest_topsail.sim.machinery.resources import ResourceType

USER = {"username": "topsail-sim-admin", "groups": ["system:masters", "system:authenticated"]}
_ALLOWED = {"allowed": True, "reason": "the simulated cluster has no RBAC: its one user may do everything"}


def answer(rtype: ResourceType, body: dict[str, Any], namespace: str | None, token: str) -> dict[str, Any]:
    """The review with its ``status`` filled in, as the apiserver returns it (201)."""
    spec = body.get("spec") or {}
    metadata = {**(body.get("metadata") or {}), "creationTimestamp": None}
    if namespace:
        metadata["namespace"] = namespace
    review: dict[str, Any] = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": metadata}
    if rtype.plural == "selfsubjectreviews":
        review["status"] = {"userInfo": USER}
        return review
    review["spec"] = spec
    if rtype.plural == "selfsubjectrulesreviews":
        review["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    elif rtype.plural == "tokenreviews":
        given = str(spec.get("token") or "")
        known = hmac.compare_digest(given.encode(), token.encode())
        review["spec"] = {key: value for key, value in spec.items() if key != "token"}  # never echo a token
        review["status"] = {"authenticated": True, "user": USER, "audiences": spec.get("audiences") or []} \
            if known else {"authenticated": False, "error": "invalid bearer token"}
    else:
        review["status"] = dict(_ALLOWED)
    return review
