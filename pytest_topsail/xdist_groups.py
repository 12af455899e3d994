"""``--dist loadgroup`` on pytest >= 9.2 with pytest-xdist <= 3.8 (pytest-xdist issue 1386).

pytest-xdist's worker tells the controller an item's group by appending ``@group`` to the item's node id, written
to ``item._nodeid``. pytest 9.2 derives ``item.nodeid`` from a structured id (``item._id``) instead, so the suffix
is silently lost and every group is spread over all workers (a TGIS worker deployed by each process). Registered
on xdist workers only, after pytest-xdist's own hook: the suffix is carried over to the structured id.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        legacy = item.__dict__.get("_nodeid")
        structured = getattr(item, "_id", None)  # a slot on pytest >= 9.2
        if legacy and structured is not None and str(structured) != legacy:
            object.__setattr__(item, "_id", type(structured).parse(legacy))  # typed on pytest >= 9.2 only
