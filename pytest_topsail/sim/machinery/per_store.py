"""One object per simulated cluster: ``registry = PerStore(Factory)`` then ``registry(store)`` gives the store's own
instance, made on first use and dropped with the store (several simulators may share a process)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerStore(Generic[T]):
    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._by_store: weakref.WeakKeyDictionary[object, T] = weakref.WeakKeyDictionary()

    def __call__(self, store: object) -> T:
        found = self._by_store.get(store)
        if found is None:
            found = self._by_store[store] = self._make()
        return found
