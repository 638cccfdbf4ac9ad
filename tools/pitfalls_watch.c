/*
 * pitfalls_watch.c: the optimistic row of `dlock demo inventory` on a stock
 * kept in Redis, run here in dlock-pitfalls because it speaks Redis itself
 * (WATCH, MULTI/EXEC: Redis's own optimistic transactions, no lock at all)
 * through hiredis, which the `dlock` command must not link. dlock runs
 *
 *     dlock-pitfalls __inventory-watch URI KEY STOCK WORKERS
 *
 * with stdout on the pipe its inventory rounds read: this puts STOCK into
 * KEY, starts WORKERS processes of two threads that sell from it, each
 * thread on a connection of its own, and each process writes the line an
 * inventory worker writes ("sold failure mode max_fence conflicts errmsg");
 * then it removes KEY.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "pitfalls.h"

#ifdef DLOCK_TOOL_HIREDIS
#define THREADS_PER_WORKER 2

/*
 * One optimistic sale: WATCH the key, GET it, work, then MULTI, SET, EXEC:
 * the server runs the transaction only if no one wrote the key since the
 * WATCH, else EXEC answers nil. 1 sold, 0 out of stock, -1 a conflict
 * (retry), -2 the server failed.
 */
static int sell_watch(redisContext *rc, const char *key,
                      const struct timespec *work)
{
    redisReply *r;
    long stock;
    int out;

    freeReplyObject(redisCommand(rc, "WATCH %s", key));
    r = redisCommand(rc, "GET %s", key);
    stock = r != NULL && r->type == REDIS_REPLY_STRING ? atol(r->str) : -1;
    freeReplyObject(r);
    if (stock <= 0) {
        freeReplyObject(redisCommand(rc, "UNWATCH"));
        return stock < 0 ? -2 : 0;
    }
    nanosleep(work, NULL);
    freeReplyObject(redisCommand(rc, "MULTI"));
    freeReplyObject(redisCommand(rc, "SET %s %ld", key, stock - 1));
    r = redisCommand(rc, "EXEC");
    out = r == NULL                     ? -2
          : r->type == REDIS_REPLY_NIL ? -1
          : r->type == REDIS_REPLY_ARRAY ? 1
                                         : -2;
    freeReplyObject(r);
    return out;
}

struct seller {
    const char *uri, *key;
    pthread_mutex_t mutex;
    long sold, conflicts;
    int failure; /* a dlock error code, or 0 */
    char errmsg[256];
};

static void *sell(void *arg)
{
    struct seller *s = arg;
    struct timespec work = {0, 200000}; /* 0.2 ms between read and write */
    char err[256] = "";
    redisContext *rc = pf_redis_connect(s->uri, err, sizeof err);
    long sold = 0, conflicts = 0;
    int r = rc != NULL ? 1 : -2;

    while (r != 0 && r != -2) {
        r = sell_watch(rc, s->key, &work);
        sold += r == 1;
        conflicts += r == -1;
    }
    redisFree(rc);
    pthread_mutex_lock(&s->mutex);
    if (r == -2 && s->failure == 0) {
        s->failure = DLOCK_ECONNECT;
        snprintf(s->errmsg, sizeof s->errmsg, "%s",
                 err[0] ? err : "the compare-and-set failed");
    }
    s->sold += sold;
    s->conflicts += conflicts;
    pthread_mutex_unlock(&s->mutex);
    return NULL;
}

static void worker(const char *uri, const char *key)
{
    struct seller s = {.uri = uri, .key = key};
    pthread_t t[THREADS_PER_WORKER];

    pthread_mutex_init(&s.mutex, NULL);
    for (int i = 0; i < THREADS_PER_WORKER; i++)
        pthread_create(&t[i], NULL, sell, &s);
    for (int i = 0; i < THREADS_PER_WORKER; i++)
        pthread_join(t[i], NULL);
    printf("%ld %d - 0 %ld %s\n", s.sold, s.failure, s.conflicts, s.errmsg);
    fflush(stdout);
    _exit(0);
}

int pf_inventory_watch(int argc, char **argv)
{
    char err[256];
    redisContext *rc;
    unsigned long stock, workers;

    if (argc != 5 || !tool_uint("demo inventory", "STOCK", argv[3], 0,
                                1000000, &stock) ||
        !tool_uint("demo inventory", "WORKERS", argv[4], 1, 64, &workers)) {
        tool_err("demo inventory", "usage: dlock-pitfalls __inventory-watch "
                                   "URI KEY STOCK WORKERS");
        return EXIT_USAGE;
    }
    if ((rc = pf_redis_connect(argv[1], err, sizeof err)) == NULL) {
        printf("0 %d - 0 0 %s\n", DLOCK_ECONNECT, err);
        return 0;
    }
    freeReplyObject(redisCommand(rc, "SET %s %lu", argv[2], stock));
    fflush(stdout);
    for (unsigned long i = 0; i < workers; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            redisFree(rc);
            worker(argv[1], argv[2]);
        }
        if (pid < 0)
            tool_err("demo inventory", "fork failed");
    }
    while (wait(NULL) > 0)
        ;
    freeReplyObject(redisCommand(rc, "DEL %s", argv[2]));
    redisFree(rc);
    return 0;
}
#else
int pf_inventory_watch(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("0 %d - 0 0 dlock-pitfalls was built without hiredis\n",
           DLOCK_EUNSUPPORTED);
    return 0;
}
#endif
