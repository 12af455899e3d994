"""Versioned object storage, the bottom of the simulator's state: per-resource tables of objects with their indexes
(namespace, label, field, uid, owner), the global resourceVersion, the bounded per-resource event log behind watches
and reads at a past resourceVersion, the listeners told of every commit in commit order, and the buffers of pod logs.
It imports only ``machinery``; it knows no resource's semantics (defaults, validation, deletion policy live in
``registry``, which builds the ``Store`` on top of it). Not thread-safe: one event loop's thread."""
