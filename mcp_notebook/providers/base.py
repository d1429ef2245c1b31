"""What every resource provider offers the hub, and the errors a read can raise."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.models import Contents, Resource, ResourceTemplate


class ResourceNotFound(LookupError):
    """No resource has this URI (the protocol maps it to the era's not-found error)."""

    def __init__(self, uri: str, reason: str | None = None):
        super().__init__(reason or f"Resource not found: {uri}")
        self.uri = uri


class InvalidResourceParams(ValueError):
    """The URI names a resource, but its parameters are wrong (-32602)."""


def int_param(params: dict[str, str], key: str, default: int) -> int:
    """A non-negative whole-number query parameter, or InvalidResourceParams saying what is wrong."""
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidResourceParams(f"{key} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise InvalidResourceParams(f"{key} must not be negative, got {value}")
    return value


class ResourceReadError(RuntimeError):
    """Reading failed for a reason the client should see (a raising or hanging __repr__)."""


@dataclass(slots=True)
class ChangeSet:
    """What one provider saw change during a cell execution (computed in O(names))."""

    list_changed: bool = False
    updated: set[str] = field(default_factory=set)  # URIs known to have changed
    maybe: set[str] = field(default_factory=set)  # watched URIs that need an exact check


class Provider:
    """A family of resources. Subclasses override what they support."""

    def owns(self, uri: str) -> bool:
        raise NotImplementedError

    def list_resources(self) -> list[Resource]:
        return []

    def list_templates(self) -> list[ResourceTemplate]:
        return []

    def read(self, uri: str) -> list[Contents]:
        """Contents of ``uri``; raise ResourceNotFound when it does not exist."""
        raise ResourceNotFound(uri)

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        """Completion values for one template argument; None when the template is not ours."""
        return None

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        """Called on the kernel's main thread after every cell; must cost O(names)."""
        return ChangeSet()

    def digest(self, uri: str) -> bytes | None:
        """An exact fingerprint of a watched resource (runs off the main thread)."""
        return None
