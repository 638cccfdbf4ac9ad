"""The dlock package itself, on file:// (no server): errors made from the
library's list, argument checks, fork, info, callbacks that fail."""
import os
import re
import threading

import pytest

import dlock
from dlock import _errors


def header_codes():
    """(name, value) of DLOCK_ERROR_MAP, read from the header in the tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, '..', '..', 'include', 'dlock',
                           'dlock.h')) as f:
        return re.findall(r'XX\((E\w+|ERROR), (-\d+),', f.read())


def test_one_class_per_error_code():
    codes = header_codes()
    assert len(codes) >= 15
    for name, value in codes:
        cls = dlock.BY_CODE[int(value)]
        assert cls.code == int(value) and cls.name == name
        assert issubclass(cls, dlock.Error)
        assert getattr(dlock, cls.__name__) is cls
    assert set(dlock.BY_CODE) == {int(v) for _, v in codes}
    # FRIENDLY renames only codes that exist.
    assert set(_errors.FRIENDLY) - {n for n, _ in codes} <= {'ECANCELED'}
    e = dlock.Busy('held by x')
    assert (e.code, e.name, e.message) == (-2, 'EBUSY', 'held by x')
    assert str(e) == 'EBUSY: held by x'
    assert isinstance(dlock.Timeout(), TimeoutError)
    assert isinstance(dlock.InvalidArgument(), ValueError)
    assert isinstance(dlock.NotHeld(), RuntimeError)
    assert 'deadline' in str(dlock.Timeout())


def test_bad_arguments_say_which(file_uri):
    with pytest.raises(dlock.NoBackend, match='nosuch'):
        dlock.Client('nosuch://x')
    with pytest.raises(dlock.InvalidArgument):
        dlock.Client(file_uri + '?lease=banana')
    with pytest.raises(TypeError, match='uri'):
        dlock.Client(42)
    with dlock.Client(file_uri) as c:
        with pytest.raises(ValueError, match='name: contains a NUL'):
            c.lock('a\0b')
        with pytest.raises(dlock.InvalidArgument):
            c.lock('')
        with pytest.raises(ValueError, match='lease'):
            c.lock('x', lease='soon')
        with pytest.raises(ValueError, match='lease'):
            c.lock('x', lease=-1)
        with pytest.raises(TypeError, match='on_lost'):
            c.lock('x', on_lost=3)
        lk = c.lock('x')
        with pytest.raises(ValueError, match='non-blocking'):
            lk.acquire(blocking=False, timeout=1)
        with pytest.raises(ValueError, match='timeout'):
            lk.acquire(timeout=-5)
    with pytest.raises(dlock.Closed):
        lk.acquire()
    assert dlock.parse_duration('1.5s') == 1500
    assert dlock.parse_duration(2) == 2000


def test_info_inspect_schemes(file_uri):
    assert 'file' in dlock.schemes()
    assert re.match(r'\d+\.\d+\.\d+', dlock.__version__)
    with dlock.Client(file_uri) as c:
        info = c.info()
        assert info['scheme'] == 'file' and 'fencing' in info['caps']
        lk = c.lock('inspected')
        assert not lk.locked()
        with lk:
            st = c.inspect('inspected')
            assert st['held'] is True and st['owner'] == lk.owner
            assert lk.depth == 1
            assert lk.acquire()  # reentrant: one more level
            assert lk.depth == 2
            lk.release()
        assert lk.depth == 0 and not lk.locked()


def test_blocking_timeout_in_with(file_uri):
    with dlock.Client(file_uri) as c:
        holder = c.lock('bt')
        holder.acquire()
        with pytest.raises(dlock.Timeout):
            with c.lock('bt', blocking_timeout=0.05):
                pass


def test_forked_child_cannot_use_parent_locks(file_uri):
    with dlock.Client(file_uri) as c:
        lk = c.lock('forked')
        assert lk.acquire()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: every use is refused, nothing released
            os.close(r)
            try:
                ok = 0
                for call in (lk.renew, lk.release, lk.acquire, c.info):
                    try:
                        call()
                    except dlock.ForkedError as e:
                        ok += 'forked child' in str(e)
                ok += not lk.owned()
                c.close()  # forgets, does not release the parent's locks
                lk.close()
                os.write(w, b'%d' % ok)
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 16)
        os.close(r)
        os.waitpid(pid, 0)
        assert got == b'5'
        assert lk.owned()
        assert not c.lock('forked').acquire(blocking=False)
        lk.renew()
        lk.release()


def test_failing_callbacks_do_not_break_the_client(file_uri, capsys):
    lines = []
    with dlock.Client(file_uri, log=lambda lvl, msg: lines.append(msg),
                      log_level=dlock.LOG_DEBUG) as c:
        def boom(lock, code, why):
            raise RuntimeError('on_lost callback failed on purpose')
        lk = c.lock('cb', lease=1, on_lost=boom)
        assert lk.acquire()
        os.unlink(os.path.join(file_uri[len('file://'):], 'cb.lock'))
        assert lk.lost.wait(10)
        with pytest.raises(dlock.LockLost):
            lk.release()
        assert lk.acquire()
        lk.release()
    err = capsys.readouterr().err
    assert 'exception in on_lost callback' in err
    assert 'on_lost callback failed on purpose' in err


def test_gil_released_by_every_thread(file_uri):
    """Many threads each block in acquire: all of them wait at once."""
    with dlock.Client(file_uri) as c:
        holder = c.lock('gil')
        holder.acquire()
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            c.lock('gil').acquire(timeout=0.3))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert results == [False] * 8


def test_queued_callbacks_run_on_the_loop(file_uri):
    """queue_callbacks=True: on_lost runs in dispatch(), on the loop's
    thread, once the loop is attached."""
    import asyncio

    async def main():
        with dlock.Client(file_uri, queue_callbacks=True) as c:
            c.attach()
            ran = asyncio.get_running_loop().create_future()
            lk = c.lock('queued', lease=1, on_lost=lambda l, code, why:
                        ran.set_result(threading.get_ident()))
            assert await lk.acquire_async(timeout=5)
            os.unlink(os.path.join(file_uri[len('file://'):], 'queued.lock'))
            assert await asyncio.wait_for(ran, 10) == threading.get_ident()
            assert lk.lost.is_set()
            with pytest.raises(dlock.LockLost):
                lk.release()
    asyncio.run(main())
