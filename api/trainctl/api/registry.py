"""A registry: named entries in registration order, which code outside trainctl can extend.

The job kinds (``trainctl.api.kinds``) and their framework plugins
(``trainctl.controller.frameworks``) are each one. Readers look entries up at call time
and never copy the registry into tables of their own, so a kind registered after import
(by a program embedding trainctl, or by a test with ``registered``) is served everywhere
at once, and an unregistered one is gone everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Entries by name (``key(entry)``), iterated in registration order.

    ``check`` raises ``ValueError`` for an entry that cannot be registered yet (a plugin
    whose kind is not registered).
    """

    def __init__(self, what: str, key: Callable[[T], str], check: Optional[Callable[[T], None]] = None):
        self._what = what
        self._key = key
        self._check = check
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        """Add ``entry``; a name registered already is refused (``ValueError``)."""
        name = self._key(entry)
        if name in self._entries:
            raise ValueError(f"{self._what} {name!r} is registered already")
        if self._check is not None:
            self._check(entry)
        self._entries[name] = entry
        return entry

    def unregister(self, entry: T) -> None:
        """Remove ``entry`` (and only it: another entry under its name stays)."""
        name = self._key(entry)
        if self._entries.get(name) is entry:
            del self._entries[name]

    @contextmanager
    def registered(self, entry: T) -> Iterator[T]:
        """``entry`` registered for the duration of a ``with`` block."""
        self.register(entry)
        try:
            yield entry
        finally:
            self.unregister(entry)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self._what}: {', '.join(self._entries)})"
