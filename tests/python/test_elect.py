"""dlock.Election on every backend and mode the suite starts (issue 14):
two candidates on two clients, one leader at a time, hand-over by
resigning, the listener told once per change."""
import threading

import pytest

import dlock


def test_two_candidates_hand_over(uri, name):
    heard = []
    lock = threading.Lock()

    def on_change(election, is_leader, term, why):
        with lock:
            heard.append((election.id, is_leader, term))

    with dlock.Client(uri) as c1, dlock.Client(uri) as c2:
        a = dlock.Election(c1, name, id='cand-a', on_change=on_change)
        b = dlock.Election(c2, name, id='cand-b', on_change=on_change)
        assert a.id == 'cand-a' and not a.is_leader and a.term == 0
        with a:  # join and wait
            assert a.is_leader
            b.join()
            assert b.wait(0.3) is False
            assert not b.is_leader
        # a resigned on leaving the block: b leads.
        assert b.wait(20)
        assert b.is_leader and not a.is_leader
        if 'fencing' in c1.info()['caps']:
            assert b.term > a.term > 0
        b.resign()
        assert not b.is_leader
        with pytest.raises(dlock.NotHeld):
            b.wait(0)
        a.close()
        b.close()
    ids = [(i, lead) for i, lead, _ in heard]
    assert ids == [('cand-a', True), ('cand-a', False), ('cand-b', True),
                   ('cand-b', False)]


def test_bad_arguments(uri, name):
    with dlock.Client(uri) as c:
        with pytest.raises(dlock.InvalidArgument, match='id'):
            dlock.Election(c, name, id='')
        with pytest.raises(ValueError, match='id: contains a NUL'):
            dlock.Election(c, name, id='a\0b')
        with pytest.raises(TypeError, match='on_change'):
            dlock.Election(c, name, on_change=3)
        e = dlock.Election(c, name)
        with pytest.raises(dlock.NotHeld):
            e.wait(0)
        e.join()
        with pytest.raises(dlock.InvalidArgument, match='already'):
            e.join()
        e.close()
        e.close()
        assert not e.is_leader
