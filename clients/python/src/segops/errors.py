"""errors.py: the typed exceptions of the segops client, one per server error code (proto/API.md)."""


class SegopsError(Exception):
    """An error reported by the segops server, or a transport failure talking to it.

    status: the HTTP status (0 when no response came back), code: the wire error code
    (e.g. "invalid_argument"), message: the server's message.
    """

    code_name = None  # wire code a subclass stands for

    def __init__(self, status, code, message, *, retry_after=None):
        # The status is shown when a daemon answered with it: a refusal of the client's own
        # (its message starts with "segops: ") sent nothing.
        sent = status and not str(message).startswith("segops: ")
        super().__init__(f"{code} ({status}): {message}" if sent else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after  # seconds from Retry-After, when the server sent one


class InvalidArgument(SegopsError):
    code_name = "invalid_argument"


class MalformedBody(SegopsError):
    code_name = "malformed_body"


class Unauthenticated(SegopsError):
    code_name = "unauthenticated"


class NotFound(SegopsError):
    code_name = "not_found"


class MethodNotAllowed(SegopsError):
    code_name = "method_not_allowed"


class NotAcceptable(SegopsError):
    code_name = "not_acceptable"


class TooLarge(SegopsError):
    code_name = "too_large"


class UnsupportedMediaType(SegopsError):
    code_name = "unsupported_media_type"


class Unavailable(SegopsError):
    code_name = "unavailable"


class ResourceExhausted(SegopsError):
    code_name = "resource_exhausted"


class DeadlineExceeded(SegopsError):
    code_name = "deadline_exceeded"


class Internal(SegopsError):
    code_name = "internal"


class ShmRegionUnknown(SegopsError):
    """The daemon does not know a shared-memory region the call named (it restarted, or the region
    belongs to another uid). The client registers its regions again and resends: every call is pure."""

    code_name = "shm_region_unknown"


class SegopsConnectionError(SegopsError, ConnectionError):
    """No HTTP response: the server could not be reached or dropped the connection. unreachable:
    True when nothing answered at all (refused, reset or closed before any answer), as while a
    daemon restarts; False when something answered that is no HTTP."""

    code_name = "connection_error"
    unreachable = False


class SegopsTimeout(SegopsError, TimeoutError):
    """The server did not answer within the client's timeout."""

    code_name = "timeout"


class ProtocolError(SegopsError):
    """The server answered something the client cannot decode."""

    code_name = "protocol_error"


_BY_CODE = {
    cls.code_name: cls
    for cls in (
        InvalidArgument,
        MalformedBody,
        Unauthenticated,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        TooLarge,
        UnsupportedMediaType,
        Unavailable,
        ResourceExhausted,
        DeadlineExceeded,
        Internal,
        ShmRegionUnknown,
    )
}

# When an error body carries no code (e.g. a proxy's page), the status picks the class.
_BY_STATUS = {
    400: "invalid_argument",
    401: "unauthenticated",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
    500: "internal",
    503: "unavailable",
    504: "deadline_exceeded",
}


def error_for(status, code, message, retry_after=None):
    """The exception instance for an HTTP error response (unknown codes give SegopsError)."""
    if not code:
        code = _BY_STATUS.get(status, "http_%d" % status)
    cls = _BY_CODE.get(code, SegopsError)
    if cls is Unauthenticated and "SEGOPS_TOKEN" not in message:
        message = f"{message} (pass the daemon's token: $SEGOPS_TOKEN, or Client(token=...))"
    return cls(status, code, message, retry_after=retry_after)
