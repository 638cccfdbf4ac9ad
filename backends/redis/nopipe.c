/*
 * nopipe.c: hiredis's calls that write, with no SIGPIPE.
 *
 * hiredis writes with write(2). On a connection that the server or the
 * network reset, that raises SIGPIPE in the calling thread, and its default
 * action ends the process: an application holding a Redis lock would die
 * of a cut connection instead of seeing DLOCK_ECONNECT. libpq, MariaDB
 * Connector/C, the ZooKeeper client and libcurl send with MSG_NOSIGNAL;
 * hiredis cannot be told to. So the backend writes only through these
 * functions: each blocks SIGPIPE on the calling thread for the length of
 * hiredis's call and takes back a SIGPIPE that became pending meanwhile,
 * then restores the mask (libpq's way where MSG_NOSIGNAL is missing). A
 * SIGPIPE already pending before the call stays pending; the application's
 * disposition of SIGPIPE is never touched. Three system calls per call,
 * beside a round trip; redisGetReply() is guarded even when its output
 * buffer looks empty, as only its length (an sds) could say so for sure.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <time.h>

#include "rd.h"

struct guard {
    sigset_t old;
    bool blocked, was_pending;
};

static void pipe_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGPIPE);
}

static void guard_begin(struct guard *g)
{
    sigset_t set, pending;

    pipe_set(&set);
    g->blocked = pthread_sigmask(SIG_BLOCK, &set, &g->old) == 0;
    /* Unblocked, a pending SIGPIPE would have been delivered already. */
    g->was_pending = !g->blocked ||
                     (sigismember(&g->old, SIGPIPE) &&
                      (sigpending(&pending) != 0 ||
                       sigismember(&pending, SIGPIPE)));
}

static void guard_end(const struct guard *g)
{
    static const struct timespec zero = {0, 0};
    sigset_t set, pending;
    int saved = errno;

    if (!g->blocked)
        return;
    pipe_set(&set);
    if (!g->was_pending && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGPIPE))
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
            ;
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = saved;
}

redisReply *dlock__rd_command(redisContext *rc, const char *fmt, ...)
{
    struct guard g;
    va_list ap;
    void *r;

    guard_begin(&g);
    va_start(ap, fmt);
    r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    guard_end(&g);
    return r;
}

redisReply *dlock__rd_command_argv(redisContext *rc, int argc,
                                   const char **argv, const size_t *lens)
{
    struct guard g;
    void *r;

    guard_begin(&g);
    r = redisCommandArgv(rc, argc, argv, lens);
    guard_end(&g);
    return r;
}

int dlock__rd_get_reply(redisContext *rc, redisReply **reply)
{
    struct guard g;
    void *r = NULL;
    int ok;

    guard_begin(&g);
    ok = redisGetReply(rc, &r);
    guard_end(&g);
    *reply = r;
    return ok;
}

int dlock__rd_buffer_write(redisContext *rc, int *done)
{
    struct guard g;
    int ok;

    guard_begin(&g);
    ok = redisBufferWrite(rc, done);
    guard_end(&g);
    return ok;
}
