"""dlock._errors: one exception class per dlock error code.

The classes are made from the library's own error list (dlock_err_name()
walked from -1 down to the first unknown code), so a code added to
DLOCK_ERROR_MAP in dlock.h gets a class at the next build without an edit
here: its name is FRIENDLY's, else the code's name in CamelCase
(ENEWTHING -> ENewthing). FRIENDLY only renames; python/tests/test_api.py
checks that it names no code the library lacks.
"""
from ._dlock import ffi, lib

# Code name -> (class name, extra built-in base or None).
FRIENDLY = {
    'ERROR': ('Failed', None),
    'EBUSY': ('Busy', None),
    'ETIMEDOUT': ('Timeout', TimeoutError),
    'ELOST': ('LockLost', None),
    'ECONNECT': ('ConnectError', ConnectionError),
    'ENOBACKEND': ('NoBackend', None),
    'EINVAL': ('InvalidArgument', ValueError),
    'ENOTOWNER': ('NotOwner', None),
    'ENOTHELD': ('NotHeld', RuntimeError),
    'ENOMEM': ('OutOfMemory', MemoryError),
    'EUNSUPPORTED': ('Unsupported', None),
    'ECLOSED': ('Closed', None),
    'EAUTH': ('AuthError', None),
    'ENOENT': ('NotFound', None),
    'EACCES': ('PermissionDenied', PermissionError),
    'ECANCELED': ('Cancelled', None),
    'EREPLICAS': ('ReplicasError', None),
    'EDEADLK': ('Deadlock', None),
}


class Error(Exception):
    """A dlock failure: .code (negative int), .name ("EBUSY"), .message.

    str() gives the library's message (scheme, operation, lock name and the
    server's own words) or, without one, dlock_strerror()'s sentence.
    """

    code = None
    name = None

    def __init__(self, message=None, code=None):
        if code is not None:
            self.code = code
            self.name = _text(lib.dlock_err_name(code))
        if not message:
            message = _text(lib.dlock_strerror(self.code))
        self.message = message
        super().__init__(message)

    def __str__(self):
        return '%s: %s' % (self.name, self.message)


def _text(p):
    return ffi.string(p).decode('utf-8', 'replace') if p != ffi.NULL else ''


def _codes():
    """(code, name) of every code the library knows, in order."""
    code = -1
    while True:
        name = _text(lib.dlock_err_name(code))
        if name == 'UNKNOWN':
            return
        yield code, name
        code -= 1


BY_CODE = {}
__all__ = ['Error']
for _code, _name in _codes():
    _cls_name, _extra = FRIENDLY.get(_name, (_name[0] + _name[1:].capitalize(),
                                             None))
    _bases = (Error,) if _extra is None else (Error, _extra)
    _cls = type(_cls_name, _bases, {
        'code': _code, 'name': _name, '__module__': 'dlock',
        '__doc__': '%s (%d): %s' % (_name, _code,
                                    _text(lib.dlock_strerror(_code)))})
    BY_CODE[_code] = _cls
    globals()[_cls_name] = _cls
    __all__.append(_cls_name)
del _code, _name, _cls_name, _extra, _bases, _cls


def error_for(code, message=None):
    """The exception for a code (a plain Error for one unknown here)."""
    cls = BY_CODE.get(code)
    if cls is None:
        return Error(message, code)
    return cls(message)


class ForkedError(BY_CODE[lib.DLOCK_ECLOSED]):
    """A forked child used a client or lock of its parent (see README)."""
