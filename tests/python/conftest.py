"""conftest.py: the URIs the dlock package's tests run against, and how
each backend's lock is taken away behind its holder's back.

Run by meson (tests/python/meson.build) as

    with-servers.sh KINDS -- python3 -m pytest tests/python \
        --uri NAME=URI [--uri NAME=URI ...]

with PYTHONPATH at the build's python/ directory. URIs are those of the
conformance list: $VARS are expanded from with-servers.sh's environment
and @TMPDIR@ becomes a fresh directory. Every test that takes the `uri`
fixture runs once per --uri, with NAME in its id.
"""
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse

import pytest


def pytest_addoption(parser):
    parser.addoption('--uri', action='append', default=[],
                     help='NAME=URI to run the backend tests against '
                          '(repeatable; default file=file://@TMPDIR@)')


def pytest_generate_tests(metafunc):
    if 'uri' in metafunc.fixturenames:
        specs = metafunc.config.getoption('uri') or ['file=file://@TMPDIR@']
        pairs = [s.split('=', 1) for s in specs]
        metafunc.parametrize('uri', [p[1] for p in pairs],
                             ids=[p[0] for p in pairs], indirect=True)


@pytest.fixture(scope='session')
def _tmpdir():
    d = tempfile.mkdtemp(prefix='dlock-py-')
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def uri(request, _tmpdir):
    raw = request.param
    missing = [v for v in re.findall(r'\$(\w+)', raw) if v not in os.environ]
    if missing:
        pytest.fail('%s unset: run under tests/servers/with-servers.sh'
                    % ', '.join(missing))
    return os.path.expandvars(raw).replace('@TMPDIR@', _tmpdir)


_serial = itertools.count()


@pytest.fixture
def name(request):
    """A lock name no other test (or earlier run) uses."""
    return 'py-%d-%d-%s' % (os.getpid(), next(_serial),
                            re.sub(r'[^a-z0-9]+', '-',
                                   request.node.originalname.lower()))


# ---- taking a lock away behind its holder's back ------------------------------

def _mode(uri):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    return q.get('mode', [''])[0]


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          timeout=30, **kw).stdout


def _redis(hostport, *args):
    host, port = hostport.rsplit(':', 1)
    return _run(['redis-cli', '-h', host, '-p', port] + list(args))


def _psql(sql):
    return _run(['psql', '-X', '-q', '-At', os.environ['DLOCK_TEST_PG_ADMIN_URI'],
                 '-c', sql])


def _mysql(sql):
    u = urllib.parse.urlsplit(os.environ['DLOCK_TEST_MYSQL_ADMIN_URI'])
    return _run(['mariadb', '--no-defaults', '--protocol=tcp', '-h',
                 u.hostname, '-P', str(u.port), '-u', u.username,
                 '-p' + u.password, '-N', '-B', u.path.lstrip('/'), '-e', sql])


def _etcdctl(uri, *args):
    if uri.startswith('etcds:'):
        d = os.environ['DLOCK_TEST_ETCDTLS_DIR']
        ep = ['--endpoints', os.environ['DLOCK_TEST_ETCDTLS_ENDPOINTS'],
              '--cacert', d + '/ca.pem', '--cert', d + '/client.pem',
              '--key', d + '/client.key']
    else:
        ep = ['--endpoints', os.environ['DLOCK_TEST_ETCD_ENDPOINTS']]
    return _run(['etcdctl'] + ep + list(args), env=dict(os.environ,
                                                         ETCDCTL_API='3'))


def lose(uri, name):
    """Make the lock `name`, held by this process, be lost; None when the
    backend has no way to do that from outside without stopping the
    holder (ZooKeeper: see test_lost_when_the_holder_stops)."""
    scheme = uri.split(':', 1)[0]
    mode = _mode(uri)
    if scheme == 'file':
        # Someone removes the lock file: the next holder would lock a new
        # file, so the holder's check must report the lock lost.
        os.unlink(os.path.join(urllib.parse.urlsplit(uri).path,
                               name + '.lock'))
    elif scheme == 'redis':
        hp = urllib.parse.urlsplit(uri).netloc
        for key in _redis(hp, '--scan', '--pattern', '*%s*' % name).split():
            _redis(hp, 'DEL', key)
    elif scheme == 'redlock':
        for hp in os.environ['DLOCK_TEST_REDIS5_HOSTS'].split(','):
            for key in _redis(hp, '--scan', '--pattern',
                              '*%s*' % name).split():
                _redis(hp, 'DEL', key)
    elif scheme == 'postgres' and mode == 'lease':
        # Every lease row, but the marker (the one-byte key): without it
        # the table counts as reset and grants wait out the grace.
        _psql('DELETE FROM dlock_leases_u WHERE length(key) = 32')
    elif scheme == 'postgres':
        # The connection that holds the lock ends, as when an administrator
        # or a failover ends it (the backend names them dlock:<pid>, with
        # " owner:<id>" after it while advisory_xact or for_update hold).
        _psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
              " WHERE split_part(application_name, ' ', 1) = 'dlock:%d'" % os.getpid())
    elif scheme == 'mysql' and mode in ('', 'insert'):
        _mysql('DELETE FROM dlock_locks')
    elif scheme == 'mysql':
        for cid in _mysql("SELECT ID FROM information_schema.PROCESSLIST "
                          "WHERE USER = 'dlock'").split():
            _mysql('KILL CONNECTION %s' % cid)
    elif scheme in ('etcd', 'etcds'):
        # The holder's lease ends (the keep-alive finds it gone).
        for line in _etcdctl(uri, 'lease', 'list').splitlines():
            m = re.match(r'\s*([0-9a-f]+)\s*$', line)
            if m:
                _etcdctl(uri, 'lease', 'revoke', m.group(1))
    else:
        return None
    return True


@pytest.fixture
def file_uri(request, _tmpdir):
    """A file:// URI, for the tests of the package itself (no server): run
    in the pytest run that has file:// among its --uri (or none)."""
    specs = request.config.getoption('uri')
    if specs and not any(s.split('=', 1)[1].startswith('file:')
                         for s in specs):
        pytest.skip('package tests run with the file:// URIs')
    return 'file://' + _tmpdir
