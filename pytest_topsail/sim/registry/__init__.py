"""What each resource means, as the apiserver's registry strategies: the ``Store`` (store.py) that creates, updates,
patches and deletes through them; create defaults and validation (defaults.py, builtinfields.py), CRD types and their
structural schemas (typeregistry.py, schema.py, crd_schemas.py), patch types (patch.py), field management
(fieldmanager.py), garbage collection and namespace lifecycle, and the policy of the pods' and workloads'
subresources (binding, eviction under PodDisruptionBudgets, scale). It imports ``machinery`` and ``storage`` only; it
speaks Python objects and ``ApiError``, never HTTP, so the API server and the in-process controllers share it."""
