"""dlock._elect: Election, a candidate of a leader election over the C
library's dlock_elect_* (dlock/dlock.h).

Leadership is holding the election's lock; the term is the grant's fence;
is_leader is exactly as strict as Lock.owned(). On ZooKeeper the nodes are
Curator LeaderLatch's, so Java latches and these candidates share one
election. After a loss the candidate campaigns again by itself unless it
resigned.

Threads: any thread may use an Election; on_change runs on one of dlock's
threads (or in Client.dispatch()) and must not call join, wait, resign or
close of the same Election.
"""
import os
import weakref

from ._dlock import ffi, lib
from ._errors import error_for, _text
from ._client import _bytes, _report, parse_duration


@ffi.def_extern()
def _dlock_py_on_change(e, is_leader, term, why, payload):
    try:
        ffi.from_handle(payload).fire(bool(is_leader), term, _text(why))
    except Exception:
        _report('on_change')


class _ChangeState:
    """What on_change reaches, kept apart from the Election (weakly
    referenced) so that the handle given to C makes no reference cycle."""

    def __init__(self, election, callback):
        self.election = weakref.ref(election)
        self.callback = callback

    def fire(self, is_leader, term, why):
        election = self.election()
        if self.callback is not None and election is not None:
            self.callback(election, is_leader, term, why)


def _elect_free(ptr, pid):
    if ptr[0] != ffi.NULL and os.getpid() == pid:
        lib.dlock_elect_free(ptr[0])
    ptr[0] = ffi.NULL


class Election:
    """A candidate in the leader election `name` through `client`.

    id: the participant id others see (Curator's LeaderLatch id on zk://);
    default the lock handle's owner id. lease: as for Lock.
    on_change(election, is_leader, term, why): once per change (won; lost;
    resigned), on dlock's thread: keep it short.

        with dlock.Election(client, 'jobs', id='worker-1') as e:  # join, wait
            while e.is_leader:
                do_one_job(fence=e.term)
    """

    def __init__(self, client, name, *, id=None, lease=None,
                 on_change=None):
        if on_change is not None and not callable(on_change):
            raise TypeError('on_change: expected a callable(election, '
                            'is_leader, term, why)')
        self.client = client
        self.name = name
        self._pid = client._pid
        self._ptr = ffi.new('dlock_election **')
        self._finalizer = weakref.finalize(self, _elect_free, self._ptr,
                                           self._pid)
        self._state = _ChangeState(self, on_change)
        self._state_handle = ffi.new_handle(self._state)
        opts = ffi.new('dlock_elect_options *')
        opts.version = lib.DLOCK_ELECT_OPTIONS_VERSION
        if lease is not None:
            opts.lease_ms = parse_duration(lease, 'lease')
        keep = ffi.NULL
        if id is not None:
            keep = ffi.new('char[]', _bytes(id, 'id'))
            opts.id = keep
        opts.on_change = lib._dlock_py_on_change
        opts.payload = self._state_handle
        rc = lib.dlock_elect_new(self._ptr, client._c, _bytes(name, 'name'),
                                 opts)
        if rc != 0:
            client._raise(rc)

    @property
    def _c(self):
        self.client._c  # closed or forked: say so
        if self._ptr[0] == ffi.NULL:
            raise error_for(lib.DLOCK_ECLOSED, 'the election was closed')
        return self._ptr[0]

    def _error(self, rc):
        return error_for(rc, _text(lib.dlock_elect_errmsg(self._ptr[0])))

    def __repr__(self):
        return '<dlock.Election %r%s>' % (
            self.name, ' leader' if self.is_leader else '')

    def join(self):
        """Campaign in the background; returns at once."""
        rc = lib.dlock_elect_join(self._c)
        if rc != 0:
            raise self._error(rc)

    def wait(self, timeout=None):
        """Wait until leader: True, or False when timeout (seconds) ran
        out; None waits for ever, in slices so that Ctrl-C gets through.
        Raises when not campaigning or the campaign ended."""
        if timeout is None:
            while True:
                rc = lib.dlock_elect_await(self._c, 200)
                if rc != lib.DLOCK_ETIMEDOUT:
                    break
        else:
            rc = lib.dlock_elect_await(self._c,
                                       parse_duration(timeout, 'timeout'))
        if rc == lib.DLOCK_ETIMEDOUT:
            return False
        if rc != 0:
            raise self._error(rc)
        return True

    @property
    def is_leader(self):
        """True while leader, as strictly as Lock.owned()."""
        if os.getpid() != self._pid or self._ptr[0] == ffi.NULL:
            return False
        return bool(lib.dlock_elect_is_leader(self._ptr[0]))

    @property
    def term(self):
        """The term (fence) of the current or last leadership; 0 before."""
        return lib.dlock_elect_term(self._c)

    @property
    def id(self):
        return _text(lib.dlock_elect_id(self._c))

    def resign(self):
        """Leave the election (stop campaigning, or give up leadership)."""
        rc = lib.dlock_elect_resign(self._c)
        if rc != 0:
            raise self._error(rc)

    def close(self):
        """Resign and free the C handle."""
        self._finalizer()

    def __enter__(self):
        self.join()
        try:
            self.wait()
        except BaseException:
            self.resign()
            raise
        return self

    def __exit__(self, typ, exc, tb):
        self.resign()
