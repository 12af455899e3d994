"""The resource types a store serves: the built-ins and those of CustomResourceDefinitions, with the compiled
structural schema of each CRD-served version and the admission of custom resources against it (schema.py)."""

from __future__ import annotations

import json
from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import BUILTIN_TYPES, ResourceType, types_from_crd
from pytest_topsail.sim.registry.builtinfields import prune_unknown
from pytest_topsail.sim.registry.schema import (
    FieldValidation,
    Schema,
    admit,
    compile_schema,
    is_open,
    strict_error_message,
)

Obj = dict[str, Any]
TypeKey = tuple[str, str, str]  # (group, version, plural)
CRD_GROUP = "apiextensions.k8s.io"


def _key(rtype: ResourceType) -> TypeKey:
    return (rtype.group, rtype.version, rtype.plural)


class TypeRegistry:
    """Served (group, version, plural) -> ResourceType, the preferred version of each (group, plural), and the
    structural schemas of CRD-served versions (compiled once per distinct schema text)."""

    def __init__(self) -> None:
        self._types: dict[TypeKey, ResourceType] = {}
        self._preferred: dict[tuple[str, str], ResourceType] = {}
        self._schemas: dict[TypeKey, Schema] = {}
        self._compiled: dict[str, Schema | None] = {}  # openAPIV3Schema as JSON -> compiled (None: accepts all)
        self.generation = 0  # bumped whenever the set of resource types changes (discovery caches)
        for rtype in BUILTIN_TYPES:  # the first version listed of a resource is its preferred one
            self.register(rtype, preferred=rtype.key not in self._preferred)

    # ----------------------------------------------------------------- lookups
    def register(self, rtype: ResourceType, preferred: bool = True) -> None:
        self._types[_key(rtype)] = rtype
        if preferred or rtype.key not in self._preferred:
            self._preferred[rtype.key] = rtype
        self.generation += 1

    def resource_type(self, plural: str, group: str = "") -> ResourceType:
        """The preferred version of a known resource; 404 ApiError if unknown."""
        rtype = self._preferred.get((group, plural))
        if rtype is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({plural}.{group})")
        return rtype

    def preferred(self, key: tuple[str, str]) -> ResourceType | None:
        return self._preferred.get(key)

    def type_for(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def type_for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return next((t for t in self._types.values() if t.group == group and t.version == version and t.kind == kind),
                    None)

    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    def preferred_types(self) -> list[ResourceType]:
        return list(self._preferred.values())

    def served_group_versions(self) -> set[tuple[str, str]]:
        return {(t.group, t.version) for t in self._types.values()}

    # ----------------------------------------------------------------- CRDs
    def crd_types(self, crd: Obj) -> list[ResourceType]:
        """The served versions of a CRD, storage version first; 422 Invalid when it is malformed."""
        name = (crd.get("metadata") or {}).get("name", "")
        try:
            types = types_from_crd(crd)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise apierror.invalid("CustomResourceDefinition", CRD_GROUP, name, [("spec", str(error))]) from error
        self.crd_schemas(crd)
        expected = f"{types[0].plural}.{types[0].group}"
        if name != expected:
            raise apierror.invalid("CustomResourceDefinition", CRD_GROUP, name, [(
                "metadata.name", f'Invalid value: must be spec.names.plural+"."+spec.group ("{expected}")')])
        return types

    def crd_schemas(self, crd: Obj) -> dict[str, Schema | None]:
        """The compiled schema of each version of a CRD (None: open, nothing to enforce), cached by its text."""
        result: dict[str, Schema | None] = {}
        for index, version in enumerate(crd["spec"].get("versions") or []):
            raw = ((version.get("schema") or {}).get("openAPIV3Schema")) if isinstance(version, dict) else None
            if raw is None:
                result[str(version.get("name"))] = None
                continue
            text = json.dumps(raw, sort_keys=True)
            if text not in self._compiled:
                try:
                    compiled = compile_schema(raw)
                except ValueError as error:
                    name = (crd.get("metadata") or {}).get("name", "")
                    raise apierror.invalid("CustomResourceDefinition", CRD_GROUP, name, [
                        (f"spec.versions[{index}].schema.{error}".rpartition(":")[0],
                         f"Invalid value: {str(error).rpartition(': ')[2]}")]) from error
                self._compiled[text] = None if is_open(compiled) else compiled
            result[str(version["name"])] = self._compiled[text]
        return result

    def install(self, crd: Obj) -> list[ResourceType]:
        """Serve the CRD's versions (replacing what it served before) with their schemas."""
        types = self.crd_types(crd)
        self._drop(types[0].key)
        schemas = self.crd_schemas(crd)
        for index, rtype in enumerate(types):
            self.register(rtype, preferred=index == 0)
            compiled = schemas.get(rtype.version)
            if compiled is not None:
                self._schemas[_key(rtype)] = compiled
        return types

    def uninstall(self, key: tuple[str, str]) -> None:
        self._drop(key)
        self._preferred.pop(key, None)
        self.generation += 1

    def _drop(self, key: tuple[str, str]) -> None:
        for served in [t for t in self._types.values() if t.key == key]:
            del self._types[_key(served)]
            self._schemas.pop(_key(served), None)

    # ----------------------------------------------------------------- custom resources
    def schema_for(self, rtype: ResourceType) -> Schema | None:
        """The compiled structural schema of a CRD-served version (None when open or built-in)."""
        return self._schemas.get(_key(rtype))

    def admit(self, rtype: ResourceType, obj: Obj, validation: FieldValidation | None) -> Obj:
        """Pruning, defaulting and schema validation of a custom resource, as kube-apiserver's (see schema.py), and
        the unknown fields of a built-in kind written through the API (builtinfields.py): unknown fields are dropped
        and, per the request's fieldValidation, warned about (Warn), refused with 400 (Strict) or passed over
        (Ignore; also for the simulator's own controllers: ``validation`` None, built-in kinds not looked at)."""
        schema = self._schemas.get(_key(rtype))
        causes: list[tuple[str, str]] = []
        if schema is not None:
            result, unknown, causes = admit(schema, obj)
        elif not rtype.crd_name and validation is not None:
            result, unknown = prune_unknown(rtype, obj)  # built-in kinds: what their decoder would not know
        else:
            return obj
        if unknown and validation is not None:
            if validation.directive == "Strict":
                raise apierror.bad_request(strict_error_message(rtype.kind, rtype.version, unknown))
            if validation.directive == "Warn":
                validation.warnings.extend(f'unknown field "{path}"' for path in unknown)
        if causes:
            raise apierror.invalid(rtype.kind, rtype.group, obj["metadata"].get("name", ""), causes)
        return result


def crd_status(crd: Obj, timestamp: str) -> Obj:
    """What the apiextensions controllers write at once: names accepted, Established, stored versions."""
    spec = crd["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    conditions = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
         "lastTransitionTime": timestamp},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": timestamp},
    ]
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    return {"acceptedNames": names, "conditions": conditions, "storedVersions": stored}


def api_service(group: str, version: str, timestamp: str) -> dict[str, Any]:
    """The apiregistration.k8s.io/v1 APIService of a group-version served by the apiserver itself ("Local")."""
    return {
        "metadata": {"name": f"{version}.{group}", "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 18000 if not group else 1000,
                 "versionPriority": 1 if not group else 15},
        "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": timestamp,
                                   "reason": "Local", "message": "Local APIServices are always available"}]},
    }
