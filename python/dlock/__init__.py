"""dlock: distributed locks behind one API (file, Redis, ZooKeeper,
PostgreSQL, MySQL, etcd), over the C library libdlock.

    import dlock
    with dlock.Client("redis://127.0.0.1:6379") as client:
        with client.lock("reports", lease=10):
            ...

See python/README.md for the API beside tooz's, redis-py's and kazoo's.
"""
from ._dlock import ffi as _ffi, lib as _lib
from ._errors import *  # noqa: F401,F403  (one class per error code)
from ._errors import BY_CODE, Error, ForkedError, __all__ as _errors_all
from ._client import (Client, Latch, Lock, acquire_all, parse_duration,
                      release_all)
from ._elect import Election

__version__ = _ffi.string(_lib.dlock_version()).decode()

LOG_ERROR = _lib.DLOCK_LOG_ERROR
LOG_WARN = _lib.DLOCK_LOG_WARN
LOG_INFO = _lib.DLOCK_LOG_INFO
LOG_DEBUG = _lib.DLOCK_LOG_DEBUG


def schemes():
    """The URI schemes this libdlock knows, in lookup order."""
    n = _lib.dlock_backend_schemes(_ffi.NULL, 0)
    out = _ffi.new('const char *[]', n)
    n = min(n, _lib.dlock_backend_schemes(out, n))
    return [_ffi.string(out[i]).decode() for i in range(n)]


__all__ = ['Client', 'Latch', 'Lock', 'Election', 'acquire_all', 'release_all', 'parse_duration',
           'schemes', 'BY_CODE',
           'ForkedError', 'LOG_ERROR', 'LOG_WARN', 'LOG_INFO',
           'LOG_DEBUG'] + _errors_all
