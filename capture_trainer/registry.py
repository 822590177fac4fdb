"""One small registry type: the single source of a kind of thing's names.

Each package keeps its own registries (manipulator models, guidance laws, device
backends, participant kinds, built-in scenarios and protocols, clocks, conditions); the
CLI's choices, file validation and the "did you mean" hints all read the names from
there, so no second list of the same names exists anywhere::

    LAWS: Registry[LawClass] = Registry("guidance law", error=GuidanceConfigError)
    LAWS.register("dg", DynamicGuidance)        # a call ...

    @CLOCKS.register("headless")                # ... or a decorator
    class HeadlessClock: ...

    LAWS.names()      # ("dg", ...) in registration order
    LAWS.get("dgg")   # GuidanceConfigError: unknown guidance law 'dgg'; did you mean 'dg'? known: dg, apf, ng
"""

from __future__ import annotations

import difflib
from importlib import resources
from importlib.resources.abc import Traversable
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar, cast, overload

from capture_trainer.errors import UnknownNameError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
#: What a decorator registers keeps its own type (a class stays that class).
D = TypeVar("D")


def suggestion(name: str, names: Iterable[str]) -> str | None:
    """The registered name closest to ``name`` (difflib), or None when none is close."""
    close = difflib.get_close_matches(str(name), list(names), n=1)
    return close[0] if close else None


class Lookup(Protocol[T_co]):
    """The read side of a :class:`Registry`, for code that only looks names up (and may
    receive a registry from a package it must not import)."""

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        ...

    def get(self, name: str) -> T_co:
        """The entry called ``name``; raises with a did-you-mean when there is none."""
        ...

    def __contains__(self, name: object) -> bool: ...


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order.

    Args:
        kind: what an entry is, for messages ("guidance law", "device backend").
        error: the exception raised for an unknown name (called with one message);
            the package's own error, so callers catch what they already catch.
        hint: appended to the unknown-name message (e.g. "or give a .toml path").
    """

    def __init__(self, kind: str, error: Callable[[str], Exception] = UnknownNameError, hint: str = "") -> None:
        self.kind = kind
        self._error = error
        self._hint = hint
        self._entries: dict[str, T] = {}

    @overload
    def register(self, name: str) -> Callable[[D], D]: ...

    @overload
    def register(self, name: str, entry: T) -> T: ...

    def register(self, name: str, entry: T | None = None) -> T | Callable[[D], D]:
        """Register ``entry`` as ``name``; without ``entry``, a decorator that does.

        Raises:
            ValueError: ``name`` is empty or already registered (a programming error).
        """
        if entry is None:
            def decorator(item: D) -> D:
                self.register(name, cast(T, item))
                return item

            return decorator
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def get(self, name: str) -> T:
        """The entry called ``name``.

        Raises:
            The registry's error: ``name`` is not registered. The one-line message says
            what was asked, the closest name and every registered one.
        """
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None

    def unknown(self, name: object) -> Exception:
        """The error for an unknown ``name`` (not raised: for callers that add context)."""
        return self._error(self.unknown_message(name))

    def unknown_message(self, name: object) -> str:
        """``unknown <kind> 'x'; did you mean 'y'? known: a, b, c`` (one line)."""
        names = self.names()
        close = suggestion(str(name), names)
        hint = f"; did you mean {close!r}?" if close else ";"
        known = ", ".join(names) if names else "(none)"
        extra = f" ({self._hint})" if self._hint else ""
        return f"unknown {self.kind} {name!r}{hint} known: {known}{extra}"

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, entry)`` pairs, in registration order."""
        return tuple(self._entries.items())

    def values(self) -> tuple[T, ...]:
        """The entries, in registration order."""
        return tuple(self._entries.values())

    def keys(self) -> tuple[str, ...]:
        """Same as :meth:`names` (so ``dict(registry)`` works)."""
        return self.names()

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


def packaged_files(kind: str, package: str, suffix: str, *, error: Callable[[str], Exception] = UnknownNameError,
                   hint: str = "") -> Registry[Traversable]:
    """The files ending in ``suffix`` that ``package`` ships (its resources), by name
    without the suffix, sorted: e.g. the built-in scenarios or protocols."""
    registry: Registry[Traversable] = Registry(kind, error=error, hint=hint)
    entries = sorted((entry for entry in resources.files(package).iterdir() if entry.name.endswith(suffix)),
                     key=lambda entry: entry.name)
    for entry in entries:
        registry.register(entry.name.removesuffix(suffix), entry)
    return registry
