/*
 * raw.h: plain hiredis calls on the single test server
 * ($DLOCK_TEST_REDIS_URI), failing the current cmocka test when the
 * server does not answer as expected.
 */
#ifndef DLOCK_TEST_REDIS_RAW_H
#define DLOCK_TEST_REDIS_RAW_H

#include <hiredis/hiredis.h>

/* A new connection with a 5 s timeout. */
redisContext *raw(void);
/* A command's reply (never NULL). */
redisReply *rcmd(redisContext *rc, const char *fmt, ...);
/* A command's integer reply. */
long long rint_(redisContext *rc, const char *fmt, ...);

#endif
