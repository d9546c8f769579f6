"""``with`` support for every object that owns a resource and has ``close()``."""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T", bound="Closing")


class Closing:
    """Mixin: ``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out, even on
    error."""

    def close(self) -> None:  # pragma: no cover - every user overrides it
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
