"""The vocabulary every layer of the simulator shares, as Kubernetes' apimachinery: ``ApiError`` (a ``kind: Status``
answer, apierror.py), Go-compatible JSON (gojson.py), the table of built-in resource types (resources.py) and label and
field selectors (selectors.py). It imports nothing else of the simulator, so any module of it may import from here;
its functions are pure (no store, no event loop, no I/O)."""
