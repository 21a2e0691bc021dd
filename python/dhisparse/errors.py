"""Exceptions: one DhsError subclass per dhs_status (include/dhs.h).

Every exception carries .status (the C status value), .status_str (the
library's dhs_status_str text) and .call (the C function that answered).
DHS_WAIT is not an error in C; it surfaces as Wait only from calls that cannot
return "not yet" in another way (Context.open; Context.try_open returns None).
"""
from . import _lib

__all__ = ["DhsError", "Wait", "NoMemError", "DeviceNoMemError", "BackendError", "InvalidArgError",
           "MisalignedError", "UnknownRequestError", "UnknownSourceError", "RowRangeError", "NotVisibleError",
           "KTooLargeError", "TooManyQueriesError", "StateError", "AcceptedRangeError", "NotInRoundError",
           "TooLargeError", "StagingError", "UnsupportedError", "ClosedError", "Status", "error_for", "check"]


class Status:
    """dhs_status values (stable, append only)."""
    OK = 0
    WAIT = 1
    ERR_NOMEM = -1
    ERR_DEVICE_NOMEM = -2
    ERR_BACKEND = -3
    ERR_INVALID_ARG = -4
    ERR_MISALIGNED = -5
    ERR_UNKNOWN_REQUEST = -6
    ERR_UNKNOWN_SOURCE = -7
    ERR_ROW_RANGE = -8
    ERR_NOT_VISIBLE = -9
    ERR_K_TOO_LARGE = -10
    ERR_TOO_MANY_QUERIES = -11
    ERR_STATE = -12
    ERR_ACCEPTED_RANGE = -13
    ERR_NOT_IN_ROUND = -14
    ERR_TOO_LARGE = -15
    ERR_STAGING = -16
    ERR_UNSUPPORTED = -17
    ERR_CLOSED = -18


class DhsError(Exception):
    """A call into libdhs answered a status other than DHS_OK."""
    status = None  # set per subclass

    def __init__(self, status, call="", detail=""):
        self.status = int(status)
        self.status_str = _lib.dhs_status_str(self.status).decode()
        self.call = call
        self.detail = detail
        msg = f"{call}: " if call else ""
        msg += f"{self.status_str} (dhs status {self.status})"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


def _make(name, status, doc):
    return type(name, (DhsError,), {"__doc__": doc, "status": status})


Wait = _make("Wait", Status.WAIT, "DHS_WAIT: capacity is short (or every slot is in use); nothing changed, retry later.")
NoMemError = _make("NoMemError", Status.ERR_NOMEM, "DHS_ERR_NOMEM: host allocation failed (or injected).")
DeviceNoMemError = _make("DeviceNoMemError", Status.ERR_DEVICE_NOMEM, "DHS_ERR_DEVICE_NOMEM: device allocation failed.")
BackendError = _make("BackendError", Status.ERR_BACKEND, "DHS_ERR_BACKEND: a backend copy or fence failed.")
InvalidArgError = _make("InvalidArgError", Status.ERR_INVALID_ARG, "DHS_ERR_INVALID_ARG: bad pointer, count or config.")
MisalignedError = _make("MisalignedError", Status.ERR_MISALIGNED, "DHS_ERR_MISALIGNED: buffer not aligned.")
UnknownRequestError = _make("UnknownRequestError", Status.ERR_UNKNOWN_REQUEST, "DHS_ERR_UNKNOWN_REQUEST.")
UnknownSourceError = _make("UnknownSourceError", Status.ERR_UNKNOWN_SOURCE, "DHS_ERR_UNKNOWN_SOURCE.")
RowRangeError = _make("RowRangeError", Status.ERR_ROW_RANGE, "DHS_ERR_ROW_RANGE: a row outside the request's rows.")
NotVisibleError = _make("NotVisibleError", Status.ERR_NOT_VISIBLE, "DHS_ERR_NOT_VISIBLE: selected row not visible.")
KTooLargeError = _make("KTooLargeError", Status.ERR_K_TOO_LARGE, "DHS_ERR_K_TOO_LARGE: k above sel_k.")
TooManyQueriesError = _make("TooManyQueriesError", Status.ERR_TOO_MANY_QUERIES, "DHS_ERR_TOO_MANY_QUERIES: K above spec_width.")
StateError = _make("StateError", Status.ERR_STATE, "DHS_ERR_STATE: call not valid in this state.")
AcceptedRangeError = _make("AcceptedRangeError", Status.ERR_ACCEPTED_RANGE, "DHS_ERR_ACCEPTED_RANGE.")
NotInRoundError = _make("NotInRoundError", Status.ERR_NOT_IN_ROUND, "DHS_ERR_NOT_IN_ROUND.")
TooLargeError = _make("TooLargeError", Status.ERR_TOO_LARGE, "DHS_ERR_TOO_LARGE: can never fit the pool.")
StagingError = _make("StagingError", Status.ERR_STAGING, "DHS_ERR_STAGING: staging arenas exhausted this round.")
UnsupportedError = _make("UnsupportedError", Status.ERR_UNSUPPORTED, "DHS_ERR_UNSUPPORTED: backend or build lacks it.")
ClosedError = _make("ClosedError", Status.ERR_CLOSED, "DHS_ERR_CLOSED: request already closed.")

_BY_STATUS = {c.status: c for c in (
    Wait, NoMemError, DeviceNoMemError, BackendError, InvalidArgError, MisalignedError, UnknownRequestError,
    UnknownSourceError, RowRangeError, NotVisibleError, KTooLargeError, TooManyQueriesError, StateError,
    AcceptedRangeError, NotInRoundError, TooLargeError, StagingError, UnsupportedError, ClosedError)}


def error_for(status, call="", detail=""):
    """The exception instance for a non-OK status (a DhsError for codes this package does not know)."""
    cls = _BY_STATUS.get(int(status), DhsError)
    return cls(status, call, detail)


def check(status, call, detail=""):
    """Raises the status's exception unless it is DHS_OK."""
    if status != 0:
        raise error_for(status, call, detail)
