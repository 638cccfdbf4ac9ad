"""dlock._client: Client and Lock over the C library (dlock/dlock.h).

Divisions: helpers; callbacks from C; Client; Lock; count-down latches;
interruptible waits; asyncio.

Threads: as in C, a Client is shared by any number of threads and a Lock
is used by one thread at a time. Every C call releases the GIL (cffi does
that for each call), so a thread blocked in acquire() never stops others.
"""
import asyncio
import logging
import os
import sys
import threading
import time
import traceback
import weakref

from ._dlock import ffi, lib
from ._errors import ForkedError, error_for, _text

_LOG_LEVELS = {lib.DLOCK_LOG_ERROR: logging.ERROR,
               lib.DLOCK_LOG_WARN: logging.WARNING,
               lib.DLOCK_LOG_INFO: logging.INFO,
               lib.DLOCK_LOG_DEBUG: logging.DEBUG}

# ---- helpers -----------------------------------------------------------------


def _bytes(value, what):
    if isinstance(value, str):
        value = value.encode('utf-8')
    if not isinstance(value, bytes):
        raise TypeError('%s: expected str or bytes, got %s'
                        % (what, type(value).__name__))
    if b'\0' in value:
        raise ValueError('%s: contains a NUL byte' % what)
    return value


def parse_duration(value, what='duration'):
    """Milliseconds of seconds (int or float) or of dlock's text ("250ms")."""
    if isinstance(value, bool):
        raise TypeError('%s: expected seconds or a duration like "5s"' % what)
    if isinstance(value, (int, float)):
        if not value >= 0 or value * 1000 >= lib.DLOCK_WAIT_FOREVER:
            raise ValueError('%s: expected 0 to 49 days of seconds, got %r'
                             % (what, value))
        return int(round(value * 1000))
    out = ffi.new('uint32_t *')
    if lib.dlock_parse_duration(_bytes(value, what), out) != 0:
        raise ValueError('%s: expected seconds or a duration like 250ms, '
                         '5s, 1.5s, 2m, 1h; got %r' % (what, value))
    return out[0]


def _caps(bits):
    names = []
    bit = 1
    while bit <= bits:
        if bits & bit:
            name = lib.dlock_cap_name(bit)
            names.append(_text(name) if name != ffi.NULL else hex(bit))
        bit <<= 1
    return names


# ---- callbacks from C --------------------------------------------------------
#
# They run with the GIL taken by cffi, on the watchdog's thread (on_lost,
# log) or a pool thread (async done), or inside Client.dispatch() when the
# client queues callbacks. Each is short and never lets an exception
# escape into C: a failing user callback is printed, as threading does.

def _report(what):
    try:
        sys.stderr.write('dlock: exception in %s callback:\n' % what)
        traceback.print_exc()
    except Exception:  # stderr closed at exit: nothing left to do
        pass


@ffi.def_extern()
def _dlock_py_on_lost(lk, code, why, payload):
    try:
        ffi.from_handle(payload).fire(code, _text(why))
    except Exception:
        _report('on_lost')


@ffi.def_extern()
def _dlock_py_log(level, msg, payload):
    try:
        ffi.from_handle(payload)(level, _text(msg))
    except Exception:
        _report('log')


@ffi.def_extern()
def _dlock_py_done(lk, rc, payload):
    try:
        ffi.from_handle(payload).done(rc)
    except Exception:
        _report('acquire_async')


class _LostState:
    """What on_lost reaches: the event, the user's callback, the Lock.

    Kept apart from the Lock (which holds it, with weak reference back)
    so that the handle given to C makes no reference cycle.
    """

    def __init__(self, lock, callback):
        self.lock = weakref.ref(lock)
        self.callback = callback
        self.event = threading.Event()
        self.code = None
        self.why = None

    def fire(self, code, why):
        # The callback first: once lost is set, on_lost has run.
        self.code, self.why = code, why
        try:
            lock = self.lock()
            if self.callback is not None and lock is not None:
                self.callback(lock, code, why)
        finally:
            self.event.set()


# Clients still open, closed at exit before Python's finalisation starts, so
# no watchdog thread calls into a finalising interpreter.
_open_clients = weakref.WeakSet()


def _close_all():
    for c in list(_open_clients):
        c.close()


import atexit  # noqa: E402  (next to what it registers)
atexit.register(_close_all)


# ---- Client ------------------------------------------------------------------

def _client_close(ptr, pid):
    # A forked child must not close its parent's client: that would release
    # the parent's locks over the connections they share.
    if ptr[0] != ffi.NULL and os.getpid() == pid:
        lib.dlock_client_close(ptr[0])
    ptr[0] = ffi.NULL


class Client:
    """A connection to one lock service, named by a URI.

    Client(uri=None, *, log=None, log_level=None, queue_callbacks=False)

    uri: as for dlock_client_open(): "file:///run/locks",
    "redis://host:6379?lease=10s", "zk://h1,h2,h3", "postgres://...";
    None or "": $DLOCK_URI, else the build's default.
    log: a logging.Logger, or a callable(level, message) with dlock's
    levels (dlock.LOG_ERROR ... dlock.LOG_DEBUG); called from dlock's
    threads. log_level: the most verbose dlock level passed (default WARN).
    queue_callbacks: run every callback (on_lost, async completions) from
    dispatch() instead of dlock's threads (DLOCK_CLIENT_QUEUE_CALLBACKS);
    acquire_async() attaches the running asyncio loop by itself.

    A context manager: close() at the end releases every lock still held
    through this client. Not usable in a forked child (ForkedError).
    """

    def __init__(self, uri=None, *, log=None, log_level=None,
                 queue_callbacks=False):
        self._pid = os.getpid()
        self._ptr = ffi.new('dlock_client **')
        self._finalizer = weakref.finalize(self, _client_close, self._ptr,
                                           self._pid)
        opts = ffi.new('dlock_client_options *')
        opts.version = lib.DLOCK_CLIENT_OPTIONS_VERSION
        opts.log_level = lib.DLOCK_LOG_WARN if log_level is None else log_level
        self._log_handle = None
        if log is not None:
            if isinstance(log, logging.Logger):
                logger = log
                log = lambda level, msg: logger.log(  # noqa: E731
                    _LOG_LEVELS.get(level, logging.DEBUG), '%s', msg)
            if not callable(log):
                raise TypeError('log: expected a logging.Logger or a '
                                'callable(level, message)')
            self._log_handle = ffi.new_handle(log)
            opts.log = lib._dlock_py_log
            opts.payload = self._log_handle
        if queue_callbacks:
            opts.flags |= lib.DLOCK_CLIENT_QUEUE_CALLBACKS
        self.queue_callbacks = bool(queue_callbacks)
        self._dispatch_lock = threading.Lock()
        self._loops = weakref.WeakSet()
        c_uri = ffi.NULL if not uri else _bytes(uri, 'uri')
        rc = lib.dlock_client_open(self._ptr, c_uri, opts)
        if rc != 0:
            msg = (_text(lib.dlock_client_errmsg(self._ptr[0]))
                   if self._ptr[0] != ffi.NULL else '')
            self.close()
            raise error_for(rc, msg)
        _open_clients.add(self)

    # The C pointer, checked: not closed, not inherited through fork().
    @property
    def _c(self):
        if os.getpid() != self._pid:
            raise ForkedError(
                'this client was opened in process %d; a forked child (%d) '
                'cannot use it or its locks: open a new Client in the child'
                % (self._pid, os.getpid()))
        if self._ptr[0] == ffi.NULL:
            raise error_for(lib.DLOCK_ECLOSED, 'the client was closed')
        return self._ptr[0]

    def _raise(self, rc):
        raise error_for(rc, _text(lib.dlock_client_errmsg(self._ptr[0])))

    def close(self):
        """Release every lock still held through this client and disconnect.

        Idempotent. No other thread may be inside a call on this client or
        its locks meanwhile. In a forked child it only forgets the client.
        """
        _open_clients.discard(self)
        if not self.closed and os.getpid() == self._pid:
            for loop in list(self._loops):
                if not loop.is_closed():
                    loop.remove_reader(lib.dlock_client_event_fd(self._c))
        self._finalizer()

    @property
    def closed(self):
        return self._ptr[0] == ffi.NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return '<dlock.Client closed>'
        return '<dlock.Client %s>' % self.info()['uri']

    def info(self):
        """The backend, mode and settings, as `dlock info` shows them."""
        out = ffi.new('dlock_info *')
        out.version = lib.DLOCK_INFO_VERSION
        rc = lib.dlock_client_info(self._c, out)
        if rc != 0:
            self._raise(rc)
        return {'scheme': _text(out.scheme), 'mode': _text(out.mode),
                'caps': _caps(out.caps), 'uri': _text(out.uri),
                'owner': _text(out.owner), 'lease': out.lease_ms / 1000.0,
                'timeout': out.timeout_ms / 1000.0,
                'summary': _text(out.summary)}

    def inspect(self, name):
        """What the backend can tell of a name without taking it: a dict of
        held (True/False/None when unknown), owner, fence, remaining
        (seconds or None) and waiters (None when unknown)."""
        st = ffi.new('dlock_state *')
        st.version = lib.DLOCK_STATE_VERSION
        st.held, st.remaining_ms, st.waiters = -1, -1, -1
        rc = lib.dlock_inspect(self._c, _bytes(name, 'name'), st)
        if rc != 0:
            self._raise(rc)
        return {'held': None if st.held < 0 else bool(st.held),
                'owner': _text(st.owner) or None,
                'fence': st.fence or None,
                'remaining': (None if st.remaining_ms < 0
                              else st.remaining_ms / 1000.0),
                'waiters': None if st.waiters < 0 else st.waiters}

    def lock(self, name, lease=None, shared=False, watchdog=True,
             on_lost=None, blocking_timeout=None):
        """A Lock on name (no I/O until acquire)."""
        return Lock(self, name, lease=lease, shared=shared,
                    watchdog=watchdog, on_lost=on_lost,
                    blocking_timeout=blocking_timeout)

    def latch(self, name):
        """A count-down Latch on name (no I/O until used)."""
        return Latch(self, name)

    # -- queued callbacks (queue_callbacks=True) --

    def event_fd(self):
        """The descriptor that is readable while callbacks wait for
        dispatch() (queue_callbacks=True only)."""
        fd = lib.dlock_client_event_fd(self._c)
        if fd < 0:
            raise error_for(lib.DLOCK_EINVAL, 'event_fd: the client was not '
                            'opened with queue_callbacks=True')
        return fd

    def attach(self, loop=None):
        """Run this client's queued callbacks from an asyncio loop (the
        running one by default): loop.add_reader(event_fd(), dispatch).
        Done by the first acquire_async(); on_lost of a queue_callbacks
        client runs only once a loop (or the caller) dispatches."""
        loop = loop or asyncio.get_running_loop()
        if self.queue_callbacks and loop not in self._loops:
            loop.add_reader(self.event_fd(), self.dispatch)
            self._loops.add(loop)

    def dispatch(self):
        """Run the queued callbacks; returns how many ran."""
        with self._dispatch_lock:
            n = lib.dlock_client_dispatch(self._c)
        if n < 0:
            self._raise(n)
        return n

    def shutdown(self):
        """Wake every acquire waiting on this client: they fail with
        Closed (or Cancelled); the client is closed by close()."""
        lib.dlock_client_shutdown(self._c)


# ---- Lock --------------------------------------------------------------------

def _lock_free(ptr, pid):
    if ptr[0] != ffi.NULL and os.getpid() == pid:
        lib.dlock_lock_free(ptr[0])
    ptr[0] = ffi.NULL


class Lock:
    """One lock name through one client; the owner is this object.

    acquire(blocking=True, timeout=-1) returns True or False as
    threading.Lock's does (timeout in seconds); other failures raise a
    dlock.Error. Reentrant: acquiring a Lock it already holds counts one
    more level, released as many times.

    permits=N (1 to DLOCK_PERMITS_MAX) makes the Lock one permit of a
    counting semaphore: at most N holders of the name at once, each with
    its own lease and fence; every holder must give the same N.

    lost: a threading.Event set when a held lock is found lost (lease ran
    out, session ended, key deleted); cleared by the next acquire.
    on_lost(lock, code, why): called then, on dlock's watchdog thread (or
    from Client.dispatch()): keep it short; never call back into this
    client from it.
    """

    def __init__(self, client, name, *, lease=None, shared=False,
                 permits=0, watchdog=True, on_lost=None,
                 blocking_timeout=None):
        if on_lost is not None and not callable(on_lost):
            raise TypeError('on_lost: expected a callable(lock, code, why)')
        self.client = client
        self.name = name
        self.blocking_timeout = blocking_timeout
        self._pid = client._pid
        self._ptr = ffi.new('dlock_lock **')
        self._finalizer = weakref.finalize(self, _lock_free, self._ptr,
                                           self._pid)
        self._state = _LostState(self, on_lost)
        self._state_handle = ffi.new_handle(self._state)
        opts = ffi.new('dlock_lock_options *')
        opts.version = lib.DLOCK_LOCK_OPTIONS_VERSION
        if lease is not None:
            opts.lease_ms = parse_duration(lease, 'lease')
        if shared:
            opts.flags |= lib.DLOCK_LOCK_SHARED
        if not isinstance(permits, int) or isinstance(permits, bool):
            raise TypeError('permits: expected an int (0 for a lock)')
        if not 0 <= permits <= lib.DLOCK_PERMITS_MAX:
            raise ValueError('permits: %d (expected 0 for a lock, or 1 to '
                             '%d)' % (permits, lib.DLOCK_PERMITS_MAX))
        opts.permits = permits
        if not watchdog:
            opts.flags |= lib.DLOCK_LOCK_NO_WATCHDOG
        opts.on_lost = lib._dlock_py_on_lost
        opts.payload = self._state_handle
        rc = lib.dlock_lock_new(self._ptr, client._c, _bytes(name, 'name'),
                                opts)
        if rc != 0:
            client._raise(rc)

    @property
    def lost(self):
        """threading.Event: set when the lock was found lost."""
        return self._state.event

    @property
    def _c(self):
        self.client._c  # closed or forked: say so
        if self._ptr[0] == ffi.NULL:
            raise error_for(lib.DLOCK_ECLOSED, 'the lock was freed')
        return self._ptr[0]

    def _error(self, rc):
        return error_for(rc, _text(lib.dlock_lock_errmsg(self._ptr[0])))

    def __repr__(self):
        return '<dlock.Lock %r%s>' % (self.name,
                                      ' owned' if self.owned() else '')

    def close(self):
        """Release (every level) if held and free the C handle."""
        self._finalizer()

    # -- taking and giving back --

    def acquire(self, blocking=True, timeout=-1):
        """Take the lock: True when granted, False on timeout or (when not
        blocking) when another owner holds it; other failures raise.

        timeout: seconds, -1 to wait for ever. Ctrl-C while waiting in the
        main thread cancels the wait (nothing stays held) and raises
        KeyboardInterrupt.
        """
        ms = _timeout_ms(blocking, timeout)
        lk = self._c
        self._state.event.clear()
        # An exception from a signal handler (Ctrl-C) may land anywhere in
        # here, also just after a grant: the caller would never learn it
        # holds the lock. The depth says whether this call took a level.
        depth = lib.dlock_lock_depth(lk)
        try:
            if ms == 0:
                rc = lib.dlock_acquire(lk, 0)
            else:
                rc = _wait_interruptibly(self, lk, ms)
            if rc == 0:
                return True
        except BaseException:
            if lib.dlock_lock_depth(lk) > depth:
                lib.dlock_release(lk)
            raise
        if rc in (lib.DLOCK_EBUSY, lib.DLOCK_ETIMEDOUT):
            return False
        raise self._error(rc)

    def release(self):
        """Drop one level; the last one releases on the server.

        Raises NotHeld, LockLost (it had been lost; free to acquire again),
        NotOwner (another owner has it now) or ConnectError (released here
        all the same; the server frees it when the lease or session ends).
        """
        rc = lib.dlock_release(self._c)
        if rc != 0:
            raise self._error(rc)

    def renew(self):
        """Renew now: extend the lease or prove the session alive."""
        rc = lib.dlock_renew(self._c)
        if rc != 0:
            raise self._error(rc)

    def downgrade(self):
        """Turn this writer into a reader with no moment free, so a writer
        waiting meanwhile stays out (dlock_downgrade()); the Lock is shared
        from then on. Raises Unsupported where the mode cannot do it
        atomically (the lock is still held exclusive)."""
        rc = lib.dlock_downgrade(self._c)
        if rc != 0:
            raise self._error(rc)

    def owned(self):
        """True while this Lock holds the lock, as far as dlock can vouch
        (dlock_held(): no network I/O)."""
        if os.getpid() != self._pid or self._ptr[0] == ffi.NULL:
            return False
        return bool(lib.dlock_held(self._ptr[0]))

    def locked(self):
        """True if anyone holds the lock now (dlock_inspect()).

        Raises Unsupported for a mode that cannot look at a name without
        taking it (then owned() alone is known)."""
        if self.owned():
            return True
        held = self.client.inspect(self.name)['held']
        if held is None:
            raise error_for(lib.DLOCK_EUNSUPPORTED,
                            "locked: this backend's mode cannot tell who "
                            "holds %r" % (self.name,))
        return held

    @property
    def fence(self):
        """The fencing token of the current holding, or None (not held, or
        the mode gives none)."""
        return lib.dlock_fence(self._c) or None

    @property
    def depth(self):
        return lib.dlock_lock_depth(self._c)

    @property
    def owner(self):
        return _text(lib.dlock_lock_owner(self._c))

    @property
    def remaining(self):
        """Seconds left of the lease as the client measured it; None for a
        lock without lease, 0 when not held."""
        ms = lib.dlock_lock_remaining(self._c)
        return None if ms == lib.DLOCK_WAIT_FOREVER else ms / 1000.0

    # -- asyncio --

    async def acquire_async(self, timeout=-1):
        """acquire() for asyncio: True when granted, False on timeout.

        The wait runs on the client's acquire threads (dlock_acquire_async)
        and completes a future on the loop, through the client's event
        descriptor when it queues callbacks, else call_soon_threadsafe.
        Cancelling the task cancels the wait; a grant that raced it is
        released before CancelledError goes on.
        """
        ms = _timeout_ms(True, timeout)
        lk = self._c
        loop = asyncio.get_running_loop()
        self.client.attach(loop)
        op = _AsyncAcquire(loop, self.client.queue_callbacks)
        op.lock = self  # C has the handle until done: keep it alive
        self._state.event.clear()
        rc = lib.dlock_acquire_async(lk, ms, op.cx, lib._dlock_py_done,
                                     op.handle)
        if rc != 0:
            raise self._error(rc)
        _pending.add(op)
        try:
            rc = await asyncio.shield(op.future)
        except asyncio.CancelledError:
            lib.dlock_cancel_fire(op.cx)
            while not op.future.done():
                try:
                    await asyncio.shield(op.future)
                except asyncio.CancelledError:
                    pass
            if op.future.result() == 0:
                lib.dlock_release(lk)
            raise
        if rc == 0:
            return True
        if rc in (lib.DLOCK_EBUSY, lib.DLOCK_ETIMEDOUT):
            return False
        raise self._error(rc)

    async def __aenter__(self):
        if not await self.acquire_async(-1 if self.blocking_timeout is None
                                        else self.blocking_timeout):
            raise error_for(lib.DLOCK_ETIMEDOUT,
                            '%r not granted within %ss'
                            % (self.name, self.blocking_timeout))
        return self

    async def __aexit__(self, typ, exc, tb):
        self.__exit__(typ, exc, tb)

    # -- with --

    def __enter__(self):
        if self.blocking_timeout is None:
            self.acquire()
        elif not self.acquire(timeout=self.blocking_timeout):
            raise error_for(lib.DLOCK_ETIMEDOUT,
                            '%r not granted within %ss'
                            % (self.name, self.blocking_timeout))
        return self

    def __exit__(self, typ, exc, tb):
        try:
            self.release()
        except Exception as e:
            if exc is None:
                raise
            # Keep the block's own exception; say what release found.
            if hasattr(exc, 'add_note'):
                exc.add_note('dlock: release failed too: %s' % e)


def _timeout_ms(blocking, timeout):
    """threading.Lock's (blocking, timeout) in dlock's milliseconds."""
    if not blocking:
        if timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        return 0
    if timeout is None or timeout == -1:
        return lib.DLOCK_WAIT_FOREVER
    if isinstance(timeout, (int, float)) and not isinstance(
            timeout, bool) and timeout >= 0:
        return min(int(round(timeout * 1000)), lib.DLOCK_WAIT_FOREVER - 1)
    raise ValueError('timeout: expected -1 or seconds >= 0, got %r'
                     % (timeout,))


# ---- count-down latches ------------------------------------------------------

def _latch_free(ptr, pid):
    if ptr[0] != ffi.NULL and os.getpid() == pid:
        lib.dlock_latch_free(ptr[0])
    ptr[0] = ffi.NULL


class Latch:
    """A count-down latch named name through client (dlock_latch_*): one
    process sets a count, others count it down, any number wait for zero.
    On redis:// it is Redisson's RCountDownLatch.

    set(count) is Redisson's trySetCount: True when set, False when the
    latch is counting already. count_down() returns the count left;
    count is the count now (0: open, or never set). wait(timeout=None)
    returns True once the count is zero, False on timeout (seconds);
    Ctrl-C while waiting in the main thread ends the wait. Raises
    Unsupported on a backend without latches.
    """

    def __init__(self, client, name):
        self.client = client
        self.name = name
        self._pid = client._pid
        self._ptr = ffi.new('dlock_latch **')
        self._finalizer = weakref.finalize(self, _latch_free, self._ptr,
                                           self._pid)
        rc = lib.dlock_latch_new(self._ptr, client._c, _bytes(name, 'name'))
        if rc != 0:
            client._raise(rc)

    @property
    def _c(self):
        self.client._c  # closed or forked: say so
        if self._ptr[0] == ffi.NULL:
            raise error_for(lib.DLOCK_ECLOSED, 'the latch was freed')
        return self._ptr[0]

    def _check(self, rc):
        if rc != 0:
            raise error_for(rc, _text(lib.dlock_latch_errmsg(self._ptr[0])))

    def __repr__(self):
        return '<dlock.Latch %r>' % (self.name,)

    def close(self):
        """Free the C handle (the latch itself stays)."""
        self._finalizer()

    def set(self, count):
        """Set the count (1 to DLOCK_LATCH_COUNT_MAX) if the latch is at
        zero: True; False if it is counting already (nothing changed)."""
        if not isinstance(count, int) or isinstance(count, bool):
            raise TypeError('count: expected an int')
        if not 1 <= count <= lib.DLOCK_LATCH_COUNT_MAX:
            raise ValueError('count: %d (expected 1 to %d)'
                             % (count, lib.DLOCK_LATCH_COUNT_MAX))
        rc = lib.dlock_latch_set(self._c, count)
        if rc == lib.DLOCK_EBUSY:
            return False
        self._check(rc)
        return True

    def count_down(self):
        """Take one off (nothing at zero); the count left."""
        left = ffi.new('uint32_t *')
        self._check(lib.dlock_latch_down(self._c, left))
        return left[0]

    @property
    def count(self):
        """The count now (0: open, or never set)."""
        out = ffi.new('uint32_t *')
        self._check(lib.dlock_latch_count(self._c, out))
        return out[0]

    def wait(self, timeout=None):
        """True once the count is zero; False when timeout (seconds; None:
        no limit) ran out first."""
        ms = _timeout_ms(True, -1 if timeout is None else timeout)
        lt = self._c

        def call(t, cx):
            rc = lib.dlock_latch_await_cancellable(lt, t, cx)
            # The first look of _interruptibly: "not yet" is EBUSY there.
            return lib.DLOCK_EBUSY if t == 0 and rc == lib.DLOCK_ETIMEDOUT \
                else rc

        rc = _interruptibly(self.name, call, lambda: None, ms)
        if rc in (lib.DLOCK_EBUSY, lib.DLOCK_ETIMEDOUT):
            return False
        self._check(rc)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- interruptible waits -----------------------------------------------------

def _wait_interruptibly(lock, lk, ms):
    """dlock_acquire(lk, ms), such that Ctrl-C ends it promptly."""
    return _interruptibly(
        lock.name, lambda t, cx: lib.dlock_acquire_cancellable(lk, t, cx),
        lambda: lib.dlock_release(lk), ms)


def _interruptibly(label, call, undo, ms):
    """call(ms, cancel) -> rc, such that Ctrl-C ends it promptly.

    Python runs signal handlers in the main thread only, and only between
    bytecodes: a main thread inside a C call that blocks for 10 s would see
    Ctrl-C 10 s late. So in the main thread the C call runs in a helper
    thread with a cancel token while the main thread waits on an Event,
    which a signal interrupts. On KeyboardInterrupt (or any exception from
    a signal handler) the token is fired, the helper waited for (the
    library returns within 100 ms of a cancel), a grant that raced the
    cancel is given back with undo(), and the exception goes on. Other
    threads call directly. One attempt comes first, in the calling thread:
    a free lock costs no thread start (about 0.1 ms).
    """
    if threading.current_thread() is not threading.main_thread():
        return call(ms, ffi.NULL)
    start = time.monotonic()
    rc = call(0, ffi.NULL)
    if rc != lib.DLOCK_EBUSY:
        return rc
    if ms != lib.DLOCK_WAIT_FOREVER:
        ms = max(0, ms - int((time.monotonic() - start) * 1000))
    cx_out = ffi.new('dlock_cancel **')
    rc = lib.dlock_cancel_new(cx_out)
    if rc != 0:
        raise error_for(rc)
    cx = ffi.gc(cx_out[0], lib.dlock_cancel_free)
    result = []
    done = threading.Event()

    def run():
        try:
            result.append(call(ms, cx))
        finally:
            done.set()

    # Not Thread.join() to wait: in Python 3.11 a join interrupted by
    # Ctrl-C may mark a live thread stopped (bpo-45274's fix), and
    # is_alive() lies. start() is inside the try: KeyboardInterrupt can
    # land inside it after the helper exists (blocking signals around it
    # does not prevent that: a signal taken by another thread meanwhile
    # still raises in the main thread), and the helper must then be
    # cancelled and waited for like any other.
    helper = threading.Thread(target=run, name='dlock-acquire %s' % (label,))
    try:
        helper.start()
        done.wait()
        rc = result[0]
    except BaseException:
        lib.dlock_cancel_fire(cx)
        # Interrupted inside start(): wait only for a helper that exists.
        if helper._started.wait(1.0):
            _wait_through_signals(done)
        if result and result[0] == 0:
            undo()
        raise
    return rc


def acquire_all(locks, blocking=True, timeout=-1):
    """Take every Lock of locks, or none (dlock_acquire_all()).

    The locks may belong to different clients and backends. They are
    taken in one order that does not depend on the list (lock name, then
    URI), so two callers listing the same locks in different orders never
    deadlock; timeout (seconds, -1 for ever) covers the whole call. True
    when all are held; False when one was busy (not blocking) or the
    timeout ran out, and then none is held; other failures raise, with the
    message of the lock that failed. Ctrl-C while waiting in the main
    thread cancels the wait, holding nothing.
    """
    locks = list(locks)
    if not locks:
        raise ValueError('acquire_all: expected at least one Lock')
    ms = _timeout_ms(blocking, timeout)
    lks = ffi.new('dlock_lock *[]', [lock._c for lock in locks])
    n = len(locks)
    failed = ffi.new('int *', -1)
    depths = [lib.dlock_lock_depth(lk) for lk in lks]

    def give_back():
        for lk, depth in reversed(list(zip(lks, depths))):
            if lib.dlock_lock_depth(lk) > depth:
                lib.dlock_release(lk)

    for lock in locks:
        lock._state.event.clear()
    try:
        rc = _interruptibly(
            'all', lambda t, cx: lib.dlock_acquire_all(lks, n, t, cx, failed),
            give_back, ms)
    except BaseException:
        give_back()
        raise
    if rc == 0:
        return True
    if rc in (lib.DLOCK_EBUSY, lib.DLOCK_ETIMEDOUT):
        return False
    if failed[0] >= 0:
        raise locks[failed[0]]._error(rc)
    raise error_for(rc, 'acquire_all: %d locks' % n)


def release_all(locks):
    """Release each Lock of locks (one level each), last first; every one
    is released whatever the others say, then the first failure raises."""
    first = None
    for lock in reversed(list(locks)):
        try:
            lock.release()
        except Exception as e:  # noqa: BLE001 - raised below, after all
            if first is None:
                first = e
    if first is not None:
        raise first


def _wait_through_signals(done):
    while not done.is_set():
        try:
            done.wait()
        except BaseException:  # a second Ctrl-C: still wait for C
            pass


# ---- asyncio -----------------------------------------------------------------

# Acquires started and not yet done: C holds their handles.
_pending = set()


class _AsyncAcquire:
    """One dlock_acquire_async(): its cancel token, and the future that
    its done callback completes on the loop."""

    def __init__(self, loop, on_loop):
        out = ffi.new('dlock_cancel **')
        rc = lib.dlock_cancel_new(out)
        if rc != 0:
            raise error_for(rc)
        self.cx = ffi.gc(out[0], lib.dlock_cancel_free)
        self.loop = loop
        self.on_loop = on_loop  # done runs in dispatch(), on the loop
        self.future = loop.create_future()
        self.handle = ffi.new_handle(self)

    def done(self, rc):
        if self.on_loop:
            self._complete(rc)
        else:
            self.loop.call_soon_threadsafe(self._complete, rc)

    def _complete(self, rc):
        _pending.discard(self)
        if not self.future.done():
            self.future.set_result(rc)
