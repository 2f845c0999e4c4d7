"""_status.py: segops.Status, what Client.health() and Client.ready() both return."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    """The answer of a probe endpoint (/healthz, /readyz).

    ok: the daemon said yes (HTTP 200); a Status is truthy exactly when ok.
    status: the daemon's word: "ok" (alive), "ready", or why it is not ready ("starting",
    "draining", "the backend cannot take work").
    http_status: the HTTP status of the answer (200, or 503 when not ready)."""

    ok: bool
    status: str
    http_status: int

    def __bool__(self) -> bool:
        return self.ok
