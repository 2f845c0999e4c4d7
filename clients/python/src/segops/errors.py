"""errors.py: the typed exceptions of the segops client, one per wire code of the error table
(proto/segops_types.h, SEGOPS_ERRNO_MAP; proto/API.md): the classes are generated from it."""


class SegopsError(Exception):
    """An error reported by the segops server, or a transport failure talking to it.

    status: the HTTP status (0 when no response came back), code: the wire error code
    (e.g. "invalid_argument"), message: the server's message, retry_after: seconds from the
    answer's Retry-After, when it had one. unreachable (a SegopsConnectionError's): True when
    nothing answered at all (refused, reset or closed before any answer), as while a daemon
    restarts; False when something answered that is no HTTP.
    """

    code_name = None  # wire code a subclass stands for
    unreachable = False

    def __init__(self, status, code, message, *, retry_after=None):
        # The status is shown when a daemon answered with it: a refusal of the client's own
        # (its message starts with "segops: ") sent nothing.
        sent = status and not str(message).startswith("segops: ")
        super().__init__(f"{code} ({status}): {message}" if sent else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


# BEGIN generated: error table (scripts/gen_optable.py; edit proto/segops_types.h instead)
class InvalidArgument(SegopsError):
    """invalid_argument (HTTP 400): invalid argument."""

    code_name = "invalid_argument"


class MalformedBody(SegopsError):
    """malformed_body (HTTP 400): malformed request body."""

    code_name = "malformed_body"


class NotFound(SegopsError):
    """not_found (HTTP 404): not found."""

    code_name = "not_found"


class TooLarge(SegopsError):
    """too_large (HTTP 413): request too large."""

    code_name = "too_large"


class UnsupportedMediaType(SegopsError):
    """unsupported_media_type (HTTP 415): unsupported media type."""

    code_name = "unsupported_media_type"


class NotAcceptable(SegopsError):
    """not_acceptable (HTTP 406): not acceptable."""

    code_name = "not_acceptable"


class Unauthenticated(SegopsError):
    """unauthenticated (HTTP 401): missing or invalid bearer token."""

    code_name = "unauthenticated"


class MethodNotAllowed(SegopsError):
    """method_not_allowed (HTTP 405): method not allowed."""

    code_name = "method_not_allowed"


class Unavailable(SegopsError):
    """unavailable (HTTP 503): service unavailable."""

    code_name = "unavailable"


class ResourceExhausted(SegopsError):
    """resource_exhausted (HTTP 503): resource exhausted."""

    code_name = "resource_exhausted"


class DeadlineExceeded(SegopsError):
    """deadline_exceeded (HTTP 504): deadline exceeded."""

    code_name = "deadline_exceeded"


class Internal(SegopsError):
    """internal (HTTP 500): internal error."""

    code_name = "internal"


class Unimplemented(SegopsError):
    """not_implemented (HTTP 501): not implemented."""

    code_name = "not_implemented"


class SegopsConnectionError(SegopsError, ConnectionError):
    """connection_error (status 0: the client's own, no answer): no connection to the daemon."""

    code_name = "connection_error"


class SegopsTimeout(SegopsError, TimeoutError):
    """timeout (status 0: the client's own, no answer): the call's timeout passed."""

    code_name = "timeout"


class ProtocolError(SegopsError):
    """protocol_error (status 0: the client's own, no answer): the daemon's answer breaks the protocol."""

    code_name = "protocol_error"


class ShmRegionUnknown(SegopsError):
    """shm_region_unknown (HTTP 404): shared-memory region not registered."""

    code_name = "shm_region_unknown"


# the daemon's wire codes -> class (another code, or a client-side one, in an answer: SegopsError)
_BY_CODE = {
    "invalid_argument": InvalidArgument,
    "malformed_body": MalformedBody,
    "not_found": NotFound,
    "too_large": TooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "not_acceptable": NotAcceptable,
    "unauthenticated": Unauthenticated,
    "method_not_allowed": MethodNotAllowed,
    "unavailable": Unavailable,
    "resource_exhausted": ResourceExhausted,
    "deadline_exceeded": DeadlineExceeded,
    "internal": Internal,
    "not_implemented": Unimplemented,
    "shm_region_unknown": ShmRegionUnknown,
}
# HTTP status -> the wire code of its first row, for an error answer that names none (a proxy's page)
_BY_STATUS = {
    400: "invalid_argument",
    401: "unauthenticated",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
    500: "internal",
    501: "not_implemented",
    503: "unavailable",
    504: "deadline_exceeded",
}
# END generated: error table


def error_for(status, code, message, retry_after=None):
    """The exception instance for an HTTP error response (unknown codes give SegopsError)."""
    if not code:
        code = _BY_STATUS.get(status, "http_%d" % status)
    cls = _BY_CODE.get(code, SegopsError)
    if cls is Unauthenticated and "SEGOPS_TOKEN" not in message:
        message = f"{message} (pass the daemon's token: $SEGOPS_TOKEN, or Client(token=...))"
    return cls(status, code, message, retry_after=retry_after)
