/*
 * test_uri.c: unit tests of core/uri.c, the URI parser, the durations and
 * the typed parameter readers of backend.h.
 *
 * Areas, in order: the grammar that must parse (uri__*), a table of
 * malformed URIs that must not (uri__malformed_table), the password's
 * absence from every message and from the redacted text (redact__*),
 * durations (duration__*), the readers (param__*, reader__*), and the check
 * of a backend's parameters (check_params__*). Every test compares what it
 * got with a value written out here, so a parser that changes behaviour
 * makes one of them fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "uri.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Parse a NUL-terminated URI, failing the test if it does not parse. */
static struct dlock_uri *parse_ok(const char *text)
{
    struct dlock_uri *u = NULL;
    char err[DLOCK__ERRMSG_MAX] = "";
    int rc = dlock__uri_parse(&u, text, strlen(text), err, sizeof err);

    if (rc != DLOCK_OK || u == NULL)
        fail_msg("parse of \"%s\" failed with %d: %s", text, rc, err);
    return u;
}

/*
 * Parse text[0..len) expecting DLOCK_EINVAL; copy the message to err and
 * check the usual form: non-empty, one line, printable ASCII.
 */
static void parse_bad(const char *text, size_t len, char *err, size_t cap)
{
    struct dlock_uri *u = (struct dlock_uri *)&u;
    int rc;

    err[0] = '\0';
    rc = dlock__uri_parse(&u, text, len, err, cap);
    if (rc != DLOCK_EINVAL)
        fail_msg("parse of \"%.*s\" gave %d, expected DLOCK_EINVAL (%s)",
                 (int)(len > 80 ? 80 : len), text, rc, err);
    if (u != NULL)
        fail_msg("parse of \"%.*s\" failed but left *out set",
                 (int)(len > 80 ? 80 : len), text);
    if (err[0] == '\0')
        fail_msg("parse of \"%.*s\" failed with no message",
                 (int)(len > 80 ? 80 : len), text);
    for (const char *p = err; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            fail_msg("message for \"%.*s\" has byte 0x%02x: %s",
                     (int)(len > 80 ? 80 : len), text, (unsigned char)*p,
                     err);
}

/* Fail unless msg starts with "<component>:". */
static void assert_component(const char *msg, const char *component)
{
    size_t n = strlen(component);

    if (strncmp(msg, component, n) != 0 || msg[n] != ':')
        fail_msg("message does not start with \"%s:\": %s", component, msg);
}

static void assert_contains(const char *msg, const char *part)
{
    if (strstr(msg, part) == NULL)
        fail_msg("message lacks \"%s\": %s", part, msg);
}

/* Fail if msg holds any piece of secret three bytes or longer. */
static void assert_no_piece(const char *msg, const char *secret)
{
    size_t n = strlen(secret);

    for (size_t i = 0; i + 3 <= n; i++)
        for (size_t k = 3; i + k <= n; k++) {
            char piece[64];
            memcpy(piece, secret + i, k);
            piece[k] = '\0';
            if (strstr(msg, piece) != NULL)
                fail_msg("message holds \"%s\" of the password: %s", piece,
                         msg);
        }
}

/* ------------------------------------------------------------------------ */
/* The grammar                                                              */
/* ------------------------------------------------------------------------ */

static void uri__single_host(void **state)
{
    struct dlock_uri *u = parse_ok("redis://localhost:6379");

    (void)state;
    assert_string_equal(u->scheme, "redis");
    assert_null(u->user);
    assert_null(u->password);
    assert_int_equal(u->nhosts, 1);
    assert_non_null(u->hosts);
    assert_string_equal(u->hosts[0].host, "localhost");
    assert_int_equal(u->hosts[0].port, 6379);
    assert_int_equal(u->hosts[0].ipv6, 0);
    assert_string_equal(u->path, "");
    assert_int_equal(u->nparams, 0);
    assert_string_equal(u->redacted, "redis://localhost:6379");
    dlock__uri_free(u);
}

static void uri__host_without_port(void **state)
{
    struct dlock_uri *u = parse_ok("zk://zoo.example.com/locks");

    (void)state;
    assert_int_equal(u->nhosts, 1);
    assert_string_equal(u->hosts[0].host, "zoo.example.com");
    assert_int_equal(u->hosts[0].port, 0);
    assert_string_equal(u->path, "/locks");
    dlock__uri_free(u);
}

static void uri__port_bounds(void **state)
{
    struct dlock_uri *u = parse_ok("redis://a:1,b:65535,c:00080");

    (void)state;
    assert_int_equal(u->nhosts, 3);
    assert_int_equal(u->hosts[0].port, 1);
    assert_int_equal(u->hosts[1].port, 65535);
    assert_int_equal(u->hosts[2].port, 80);
    dlock__uri_free(u);
}

static void uri__multi_host(void **state)
{
    struct dlock_uri *u =
        parse_ok("redlock://r1:7000,r2:7001,r3,r4:7003,r5:7004");
    static const char *const names[] = {"r1", "r2", "r3", "r4", "r5"};
    static const uint16_t ports[] = {7000, 7001, 0, 7003, 7004};

    (void)state;
    assert_string_equal(u->scheme, "redlock");
    assert_int_equal(u->nhosts, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(u->hosts[i].host, names[i]);
        assert_int_equal(u->hosts[i].port, ports[i]);
        assert_int_equal(u->hosts[i].ipv6, 0);
    }
    dlock__uri_free(u);
}

static void uri__ipv6_with_port(void **state)
{
    struct dlock_uri *u = parse_ok("redis://[::1]:6379");

    (void)state;
    assert_int_equal(u->nhosts, 1);
    assert_string_equal(u->hosts[0].host, "::1");
    assert_int_equal(u->hosts[0].port, 6379);
    assert_int_equal(u->hosts[0].ipv6, 1);
    assert_string_equal(u->redacted, "redis://[::1]:6379");
    dlock__uri_free(u);
}

static void uri__ipv6_without_port(void **state)
{
    struct dlock_uri *u = parse_ok("postgres://[2001:db8::7]/app");

    (void)state;
    assert_string_equal(u->hosts[0].host, "2001:db8::7");
    assert_int_equal(u->hosts[0].port, 0);
    assert_int_equal(u->hosts[0].ipv6, 1);
    assert_string_equal(u->path, "/app");
    dlock__uri_free(u);
}

static void uri__ipv6_with_ipv4_tail(void **state)
{
    struct dlock_uri *u = parse_ok("redis://[::ffff:10.0.0.1]:1");

    (void)state;
    assert_string_equal(u->hosts[0].host, "::ffff:10.0.0.1");
    assert_int_equal(u->hosts[0].ipv6, 1);
    dlock__uri_free(u);
}

static void uri__mixed_host_list(void **state)
{
    struct dlock_uri *u = parse_ok(
        "zk://10.0.0.1:2181,[fe80::1]:2182,zk-3.example.com,_zk4:2184,"
        "[::2]");

    (void)state;
    assert_int_equal(u->nhosts, 5);
    assert_string_equal(u->hosts[0].host, "10.0.0.1");
    assert_int_equal(u->hosts[0].port, 2181);
    assert_int_equal(u->hosts[0].ipv6, 0);
    assert_string_equal(u->hosts[1].host, "fe80::1");
    assert_int_equal(u->hosts[1].port, 2182);
    assert_int_equal(u->hosts[1].ipv6, 1);
    assert_string_equal(u->hosts[2].host, "zk-3.example.com");
    assert_int_equal(u->hosts[2].port, 0);
    assert_string_equal(u->hosts[3].host, "_zk4");
    assert_int_equal(u->hosts[3].port, 2184);
    assert_string_equal(u->hosts[4].host, "::2");
    assert_int_equal(u->hosts[4].port, 0);
    assert_int_equal(u->hosts[4].ipv6, 1);
    dlock__uri_free(u);
}

static void uri__host_percent_decoded(void **state)
{
    struct dlock_uri *u = parse_ok("redis://%2Ftmp%2Fredis.sock");

    (void)state;
    assert_string_equal(u->hosts[0].host, "/tmp/redis.sock");
    dlock__uri_free(u);
}

static void uri__userinfo_percent_encoded(void **state)
{
    struct dlock_uri *u =
        parse_ok("redis://us%40er%3A1:p%3Aa%40ss:w%25@h:6379/0");

    (void)state;
    assert_string_equal(u->user, "us@er:1");
    assert_string_equal(u->password, "p:a@ss:w%");
    assert_string_equal(u->hosts[0].host, "h");
    assert_int_equal(u->hosts[0].port, 6379);
    assert_string_equal(u->path, "/0");
    assert_string_equal(u->redacted, "redis://us%40er%3A1:***@h:6379/0");
    dlock__uri_free(u);
}

static void uri__userinfo_user_only(void **state)
{
    struct dlock_uri *u = parse_ok("mysql://app@db:3306/locks");

    (void)state;
    assert_string_equal(u->user, "app");
    assert_null(u->password);
    assert_string_equal(u->redacted, "mysql://app@db:3306/locks");
    dlock__uri_free(u);
}

static void uri__userinfo_empty_parts(void **state)
{
    struct dlock_uri *u = parse_ok("redis://:secretpw@h");
    struct dlock_uri *v = parse_ok("redis://bob:@h");

    (void)state;
    assert_string_equal(u->user, "");
    assert_string_equal(u->password, "secretpw");
    assert_string_equal(u->redacted, "redis://:***@h");
    assert_string_equal(v->user, "bob");
    assert_string_equal(v->password, "");
    assert_string_equal(v->redacted, "redis://bob:@h");
    dlock__uri_free(u);
    dlock__uri_free(v);
}

static void uri__no_userinfo(void **state)
{
    struct dlock_uri *u = parse_ok("postgres://db.local:5432/app?mode=lease");

    (void)state;
    assert_null(u->user);
    assert_null(u->password);
    assert_string_equal(u->hosts[0].host, "db.local");
    assert_int_equal(u->nparams, 0); /* mode= is core's */
    assert_string_equal(u->mode, "lease");
    dlock__uri_free(u);
}

static void uri__empty_authority_with_path(void **state)
{
    struct dlock_uri *u = parse_ok("file:///var/lock/x");

    (void)state;
    assert_string_equal(u->scheme, "file");
    assert_int_equal(u->nhosts, 0);
    assert_string_equal(u->path, "/var/lock/x");
    assert_string_equal(u->redacted, "file:///var/lock/x");
    dlock__uri_free(u);
}

static void uri__empty_authority_alone(void **state)
{
    struct dlock_uri *u = parse_ok("file://");
    struct dlock_uri *v = parse_ok("file://?lease=2s");

    (void)state;
    assert_int_equal(u->nhosts, 0);
    assert_string_equal(u->path, "");
    assert_int_equal(u->nparams, 0);
    assert_int_equal(v->nhosts, 0);
    assert_int_equal(v->lease_ms, 2000);
    dlock__uri_free(u);
    dlock__uri_free(v);
}

static void uri__path_decoding(void **state)
{
    struct dlock_uri *u =
        parse_ok("file:///var/lock/my%20app/%E2%9C%93/a+b/caf\xc3\xa9");

    (void)state;
    assert_string_equal(u->path,
                        "/var/lock/my app/\xe2\x9c\x93/a+b/caf\xc3\xa9");
    dlock__uri_free(u);
}

static void uri__query_decoding(void **state)
{
    struct dlock_uri *u = parse_ok(
        "redis://h?mode=hash&k%3D=a%26b&plus=a+b&flag&empty=&x=1=2");

    (void)state;
    assert_int_equal(u->nparams, 5);
    assert_string_equal(u->mode, "hash"); /* core's, not a param */
    assert_string_equal(u->params[0].key, "k=");
    assert_string_equal(u->params[0].value, "a&b");
    assert_string_equal(u->params[1].key, "plus");
    assert_string_equal(u->params[1].value, "a+b");
    assert_string_equal(u->params[2].key, "flag");
    assert_string_equal(u->params[2].value, "");
    assert_string_equal(u->params[3].key, "empty");
    assert_string_equal(u->params[3].value, "");
    assert_string_equal(u->params[4].key, "x");
    assert_string_equal(u->params[4].value, "1=2");
    dlock__uri_free(u);
}

static void uri__empty_query(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h/?");

    (void)state;
    assert_string_equal(u->path, "/");
    assert_int_equal(u->nparams, 0);
    dlock__uri_free(u);
}

static void uri__common_params_consumed(void **state)
{
    struct dlock_uri *u = parse_ok(
        "redis://h?lease=10s&mode=setnx&timeout=250ms&retry_min=10ms&"
        "retry_max=1.5s&namespace=app%2Fone&db=3");

    (void)state;
    assert_int_equal(u->lease_ms, 10000);
    assert_int_equal(u->timeout_ms, 250);
    assert_int_equal(u->retry_min_ms, 10);
    assert_int_equal(u->retry_max_ms, 1500);
    assert_string_equal(u->ns, "app/one");
    assert_int_equal(u->nparams, 1);
    assert_string_equal(u->mode, "setnx");
    assert_string_equal(u->params[0].key, "db");
    assert_null(dlock_uri_param(u, "mode"));
    assert_null(dlock_uri_param(u, "lease"));
    assert_null(dlock_uri_param(u, "namespace"));
    dlock__uri_free(u);
}

static void uri__common_params_defaulted(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?retry_max=2s");

    (void)state;
    assert_int_equal(u->lease_ms, DLOCK__DEFAULT_LEASE_MS);
    assert_int_equal(u->timeout_ms, DLOCK__DEFAULT_TIMEOUT_MS);
    assert_int_equal(u->retry_min_ms, 0);
    assert_int_equal(u->retry_max_ms, 2000);
    assert_non_null(u->ns);
    assert_string_equal(u->ns, "");
    assert_int_equal(u->nparams, 0);
    dlock__uri_free(u);
}

static void uri__common_params_edges(void **state)
{
    struct dlock_uri *u =
        parse_ok("redis://h?lease=1ms&retry_min=1s&retry_max=1s&"
                 "namespace=&timeout=4294967294ms");

    (void)state;
    assert_int_equal(u->lease_ms, 1);
    assert_int_equal(u->retry_min_ms, 1000);
    assert_int_equal(u->retry_max_ms, 1000);
    assert_int_equal(u->timeout_ms, UINT32_MAX - 1);
    assert_string_equal(u->ns, "");
    dlock__uri_free(u);
}

static void uri__namespace_length(void **state)
{
    char text[600], err[DLOCK__ERRMSG_MAX];
    struct dlock_uri *u;
    int n = snprintf(text, sizeof text, "redis://h?namespace=");

    (void)state;
    memset(text + n, 'n', 256);
    text[n + 256] = '\0';
    u = parse_ok(text);
    assert_int_equal(strlen(u->ns), 256);
    dlock__uri_free(u);
    text[n + 256] = 'n';
    text[n + 257] = '\0';
    parse_bad(text, strlen(text), err, sizeof err);
    assert_component(err, "namespace");
    assert_contains(err, "256");
}

static void uri__alias_scheme_kept(void **state)
{
    static const char *const texts[] = {
        "postgresql://h/db", "redlock://a,b,c", "mariadb://h/db",
        "rediss://h", "zookeeper://h:2181",
    };
    static const char *const schemes[] = {
        "postgresql", "redlock", "mariadb", "rediss", "zookeeper",
    };

    (void)state;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct dlock_uri *u = parse_ok(texts[i]);
        assert_string_equal(u->scheme, schemes[i]);
        dlock__uri_free(u);
    }
}

static void uri__scheme_lower_cased(void **state)
{
    struct dlock_uri *u = parse_ok("ReDiS+Tls.v-2://H:1");

    (void)state;
    assert_string_equal(u->scheme, "redis+tls.v-2");
    assert_string_equal(u->hosts[0].host, "H");
    assert_string_equal(u->redacted, "ReDiS+Tls.v-2://H:1");
    dlock__uri_free(u);
}

static void uri__reads_only_len_bytes(void **state)
{
    /* An exactly sized heap copy with no NUL: ASan reports any overread. */
    static const char text[] = "redis://u:pw@h:6379/p?a=1GARBAGE";
    size_t len = strlen(text) - strlen("GARBAGE");
    char *buf = malloc(len), err[DLOCK__ERRMSG_MAX];
    struct dlock_uri *u = NULL;

    (void)state;
    assert_non_null(buf);
    memcpy(buf, text, len);
    assert_int_equal(dlock__uri_parse(&u, buf, len, err, sizeof err),
                     DLOCK_OK);
    assert_string_equal(u->params[0].value, "1");
    assert_string_equal(u->redacted, "redis://u:***@h:6379/p?a=1");
    dlock__uri_free(u);
    /* Cut inside the port: the port is what was given. */
    assert_int_equal(dlock__uri_parse(&u, buf, strlen("redis://u:pw@h:63"),
                                      err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(u->hosts[0].port, 63);
    dlock__uri_free(u);
    free(buf);
}

static void uri__longest_accepted(void **state)
{
    char *text = malloc(DLOCK__URI_MAX + 1), err[DLOCK__ERRMSG_MAX];
    struct dlock_uri *u = NULL;

    (void)state;
    assert_non_null(text);
    memcpy(text, "file:///", 8);
    memset(text + 8, 'a', DLOCK__URI_MAX - 8);
    assert_int_equal(dlock__uri_parse(&u, text, DLOCK__URI_MAX, err,
                                      sizeof err),
                     DLOCK_OK);
    assert_int_equal(strlen(u->path), DLOCK__URI_MAX - 7);
    dlock__uri_free(u);
    text[DLOCK__URI_MAX] = 'a';
    parse_bad(text, DLOCK__URI_MAX + 1, err, sizeof err);
    assert_component(err, "uri");
    assert_contains(err, "8193");
    free(text);
}

static void uri__many_hosts_and_params(void **state)
{
    /* Worst cases for the one-block sizing: every byte a separator. */
    char *text = malloc(DLOCK__URI_MAX), err[DLOCK__ERRMSG_MAX];
    struct dlock_uri *u = NULL;
    size_t n = 0, nhosts = 1;

    (void)state;
    assert_non_null(text);
    n += (size_t)sprintf(text, "redis://");
    while (n + 2 < 4000) {
        text[n++] = 'h';
        text[n++] = ',';
        nhosts++;
    }
    text[n++] = 'h';
    text[n++] = '?';
    for (int i = 0; n + 8 < DLOCK__URI_MAX; i++)
        n += (size_t)sprintf(text + n, "%x&", i);
    text[n++] = 'z';
    assert_int_equal(dlock__uri_parse(&u, text, n, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(u->nhosts, nhosts);
    assert_true(nhosts > 1900);
    assert_true(u->nparams > 500);
    assert_string_equal(u->params[u->nparams - 1].key, "z");
    dlock__uri_free(u);
    free(text);
}

static void uri__free_null(void **state)
{
    (void)state;
    dlock__uri_free(NULL);
    assert_true(1);
}

static void uri__null_arguments(void **state)
{
    struct dlock_uri *u = (struct dlock_uri *)&u;
    char err[DLOCK__ERRMSG_MAX];

    (void)state;
    assert_int_equal(dlock__uri_parse(NULL, "redis://h", 9, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock__uri_parse(&u, NULL, 5, err, sizeof err),
                     DLOCK_EINVAL);
    assert_null(u);
    assert_int_equal(dlock__uri_parse(&u, NULL, 0, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock__uri_parse(&u, "redis://h:0", 11, NULL, 0),
                     DLOCK_EINVAL);
    /* A tiny err buffer is cut, not overrun. */
    memset(err, 'X', sizeof err);
    assert_int_equal(dlock__uri_parse(&u, "redis://h:0", 11, err, 5),
                     DLOCK_EINVAL);
    assert_int_equal(err[4], '\0');
    assert_int_equal(err[5], 'X');
}

/* ------------------------------------------------------------------------ */
/* Malformed URIs                                                           */
/* ------------------------------------------------------------------------ */

struct bad_case {
    const char *text;
    size_t len;          /* 0: strlen(text) */
    const char *component; /* the message starts with "<component>:" */
    const char *part;    /* and contains this, if not NULL */
};

static const struct bad_case bad_cases[] = {
    /* Ports. */
    {"redis://h:0", 0, "port", "\"0\""},
    {"redis://h:99999", 0, "port", "\"99999\""},
    {"redis://h:65536", 0, "port", "1 to 65535"},
    {"redis://h:99999999999999999999999", 0, "port", "range"},
    {"redis://h:", 0, "port", "empty"},
    {"redis://h:12a", 0, "port", "\"12a\""},
    {"redis://h:-1", 0, "port", "not a number"},
    {"redis://h:+1", 0, "port", "not a number"},
    {"redis://[::1]:", 0, "port", "empty"},
    {"redis://a:1,b:0", 0, "port", "\"0\""},
    /* Hosts. */
    {"redis://[::1", 0, "host", "closing ']'"},
    {"redis://[zz::1]:1", 0, "host", "\"[zz::1]\""},
    {"redis://[]", 0, "host", "IPv6"},
    {"redis://[::1]x", 0, "host", "\"x\""},
    {"redis://[fe80::1%25eth0]", 0, "host", "zone"},
    {"redis://[1:2:3:4:5:6:7:8:9]", 0, "host", "IPv6"},
    {"redis://::1", 0, "host", "brackets"},
    {"redis://h:6379:1", 0, "host", "more than one ':'"},
    {"redis://:6379", 0, "host", "no name"},
    {"redis://h%zz", 0, "host", "\"%zz\""},
    {"redis://h%4", 0, "host", "percent-escape"},
    {"redis://h%", 0, "host", "percent-escape"},
    {"redis://h%00", 0, "host", "NUL"},
    {"redis://h p", 0, "host", "\" \""},
    {"redis://h\tp", 0, "host", "\"\\x09\""},
    {"redis://h\n", 0, "host", "\"\\x0a\""},
    {"redis://h\0x", 11, "host", "\"\\x00\""},
    {"redis://h\xc3\xa9", 0, "host", "\"\\xc3\""},
    {"redis://h[1]", 0, "host", "\"[\""},
    {"redis://h,", 0, "host", "empty entry"},
    {"redis://,h", 0, "host", "empty entry"},
    {"redis://a,,b", 0, "host", "empty entry"},
    {"redis://999.1.1.1", 0, "host", "IPv4"},
    {"redis://1.2.3", 0, "host", "IPv4"},
    {"redis://u@", 0, "host", "missing"},
    {"redis://u:p@/x", 0, "host", "missing"},
    /* User info. */
    {"redis://u@h@x", 0, "userinfo", "%40"},
    {"redis://us%zzer@h", 0, "userinfo", "\"%zz\""},
    {"redis://us er@h", 0, "userinfo", "\" \""},
    {"redis://u:p%00@h", 0, "userinfo", "NUL"},
    /* Schemes. */
    {"", 0, "scheme", "empty"},
    {"://h", 0, "scheme", "missing"},
    {"1redis://h", 0, "scheme", "\"1redis\""},
    {" redis://h", 0, "scheme", "\" \""},
    {"redis:/h", 0, "scheme", "\"://\""},
    {"redis//h", 0, "scheme", "\"redis\""},
    {"redis:h", 0, "scheme", "\"://\""},
    {"red is://h", 0, "scheme", "\"red\""},
    {"\xff://h", 0, "scheme", "\"\\xff\""},
    /* Paths. */
    {"file:///x%00y", 0, "path", "NUL"},
    {"file:///a\tb", 0, "path", "\"\\x09\""},
    {"file:///a b", 0, "path", "\" \""},
    {"file:///a%g0", 0, "path", "\"%g0\""},
    {"file:///a%", 0, "path", "\"%\""},
    {"file:///a\x7f", 0, "path", "\"\\x7f\""},
    /* Queries. */
    {"redis://h?a=1&a=2", 0, "query", "\"a\""},
    {"redis://h?a&a", 0, "query", "repeated"},
    {"redis://h?a=1&%61=2", 0, "query", "repeated"},
    {"redis://h?=1", 0, "query", "empty key"},
    {"redis://h?a=1&&b=2", 0, "query", "empty parameter"},
    {"redis://h?a=1&", 0, "query", "empty parameter"},
    {"redis://h?a=%zz", 0, "query", "\"%zz\""},
    {"redis://h?a%00=1", 0, "query", "NUL"},
    {"redis://h?a=b\x7f", 0, "query", "\"\\x7f\""},
    {"redis://h?a=1 2", 0, "query", "\" \""},
    {"redis://h?lease=1s&lease=2s", 0, "query", "\"lease\""},
    /* Fragments. */
    {"redis://h#frag", 0, "fragment", "\"#frag\""},
    {"file:///p#", 0, "fragment", "'#'"},
    {"redis://h?a=1#x", 0, "fragment", "\"#x\""},
    /* Common parameters. */
    {"redis://h?lease=5", 0, "lease", "no unit"},
    {"redis://h?lease=5x", 0, "lease",
     "\"5x\" is not a duration (expected a number with ms, s, m or h, "
     "e.g. 250ms)"},
    {"redis://h?lease=-1s", 0, "lease", "\"-1s\""},
    {"redis://h?lease=0", 0, "lease", "at least 1ms"},
    {"redis://h?lease=0ms", 0, "lease", "at least 1ms"},
    {"redis://h?lease=", 0, "lease", "\"\""},
    {"redis://h?lease=1.5ms", 0, "lease", "whole number"},
    {"redis://h?lease=99999999h", 0, "lease", "too long"},
    {"redis://h?timeout=0s", 0, "timeout", "at least 1ms"},
    {"redis://h?timeout", 0, "timeout", "not a duration"},
    {"redis://h?retry_max=fast", 0, "retry_max", "\"fast\""},
    {"redis://h?retry_min=2s&retry_max=1s", 0, "retry_min", "\"2s\""},
    {"redis://h?retry_max=1s&retry_min=1001ms", 0, "retry_min",
     "retry_max"},
};

static void uri__malformed_table(void **state)
{
    char err[DLOCK__ERRMSG_MAX];
    size_t n = sizeof bad_cases / sizeof bad_cases[0];

    (void)state;
    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        const struct bad_case *bc = &bad_cases[i];
        size_t len = bc->len != 0 ? bc->len : strlen(bc->text);

        parse_bad(bc->text, len, err, sizeof err);
        assert_component(err, bc->component);
        if (bc->part != NULL)
            assert_contains(err, bc->part);
    }
}

static void uri__too_long(void **state)
{
    size_t len = 9000;
    char *text = malloc(len), err[DLOCK__ERRMSG_MAX];

    (void)state;
    assert_non_null(text);
    memcpy(text, "redis://h/", 10);
    memset(text + 10, 'a', len - 10);
    parse_bad(text, len, err, sizeof err);
    assert_component(err, "uri");
    assert_contains(err, "9000 bytes");
    assert_contains(err, "8192");
    free(text);
}

static void uri__long_values_truncated_in_messages(void **state)
{
    char text[400], err[DLOCK__ERRMSG_MAX];

    (void)state;
    snprintf(text, sizeof text, "redis://h?lease=%0200d", 7);
    parse_bad(text, strlen(text), err, sizeof err);
    assert_component(err, "lease");
    assert_contains(err, "...\"");
    assert_true(strlen(err) < 200);
}

static void uri__quotes_escaped_in_messages(void **state)
{
    const char *t = "redis://h?lease=a\"b\\c";
    char err[DLOCK__ERRMSG_MAX];

    (void)state;
    parse_bad(t, strlen(t), err, sizeof err);
    assert_component(err, "lease");
    assert_contains(err, "\"a\\\"b\\\\c\"");
}

static void uri__host_name_length(void **state)
{
    char text[300], err[DLOCK__ERRMSG_MAX];
    struct dlock_uri *u;

    (void)state;
    memcpy(text, "redis://", 8);
    memset(text + 8, 'a', 255);
    text[8 + 255] = '\0';
    u = parse_ok(text);
    assert_int_equal(strlen(u->hosts[0].host), 255);
    dlock__uri_free(u);
    text[8 + 255] = 'a';
    text[8 + 256] = '\0';
    parse_bad(text, strlen(text), err, sizeof err);
    assert_component(err, "host");
    assert_contains(err, "longer than 255 bytes");
}

/* ------------------------------------------------------------------------ */
/* The password: never in a message, never in redacted                     */
/* ------------------------------------------------------------------------ */

#define PW "Zq8Wx3Vy"

struct secret_case {
    const char *text;
    const char *component;
};

static const struct secret_case secret_cases[] = {
    {"redis://bob:" PW "@h:0", "port"},
    {"redis://bob:" PW "@h p", "host"},
    {"redis://bob:" PW "@[zz::1]", "host"},
    {"redis://bob:" PW "@h,", "host"},
    {"redis://bob:" PW "@", "host"},
    {"redis://bob:" PW "@h?a=1&a=2", "query"},
    {"redis://bob:" PW "@h?x=1&x=" PW, "query"},
    {"redis://bob:" PW "@h?lease=5x", "lease"},
    {"redis://bob:" PW "@h?lease=" PW, "lease"},
    {"redis://bob:" PW "@h?retry_min=" PW "&retry_max=1s", "retry_min"},
    {"redis://bob:" PW "@h%00", "host"},
    {"redis://bob:" PW "@h#" PW, "fragment"},
    {"redis://bob:" PW "@h/" PW "%00", "path"},
    {"redis://bob:Zq8W%zzx3Vy@h", "userinfo"},
    {"redis://bob:Zq8Wx3Vy%@h", "userinfo"},
    {"redis://bob:Zq8W x3Vy@h", "userinfo"},
    {"redis://bob:Zq8W\x01x3Vy@h", "userinfo"},
    {"redis://bob:Zq8W%00x3Vy@h", "userinfo"},
    {"redis://bob:Zq8W@x3Vy@h", "userinfo"},
    {"redis://b%zzob:" PW "@h", "userinfo"},
    /* A raw '/', '?' or '#' ends the authority inside the password. */
    {"redis://bob:Zq8W/x3Vy@h", "port"},
    {"redis://bob:Zq8W?x3Vy@h", "port"},
    {"redis://bob:Zq8W#x3Vy@h", "port"},
    {"redis://bob:12/" PW "@h p", "path"},
    {"redis://bob:12?lease=" PW "@h", "lease"},
    /* The decoded password, written again elsewhere. */
    {"redis://bob:Zq8%57x3Vy@h?lease=" PW, "lease"},
    {"redis://bob:Zq8%57x3Vy@" PW ":0", "port"},
};

static void redact__errors_never_show_password(void **state)
{
    char err[DLOCK__ERRMSG_MAX];

    (void)state;
    for (size_t i = 0; i < sizeof secret_cases / sizeof secret_cases[0];
         i++) {
        const struct secret_case *sc = &secret_cases[i];

        parse_bad(sc->text, strlen(sc->text), err, sizeof err);
        assert_component(err, sc->component);
        assert_no_piece(err, PW);
        assert_no_piece(err, "Zq8%57x3Vy");
    }
}

static void redact__errors_still_explain(void **state)
{
    char err[DLOCK__ERRMSG_MAX];
    const char *t = "redis://bob:" PW "@h?x=1&x=" PW;

    (void)state;
    parse_bad(t, strlen(t), err, sizeof err);
    assert_contains(err, "\"x=***\"");
    t = "redis://bob:Zq8W%zzx3Vy@h";
    parse_bad(t, strlen(t), err, sizeof err);
    assert_contains(err, "\"bob:***\"");
}

static void redact__redacted_hides_password(void **state)
{
    static const char *const texts[] = {
        "redis://bob:" PW "@h:6379/0?mode=hash",
        "redis://bob:Zq8%57x3Vy@h",
        "postgres://:" PW "@[::1]:5432/db",
        "redlock://u:" PW "@a:1,b:2,c:3?lease=5s",
        "mysql://app:p%40" PW "%3A@db/locks",
    };
    static const char *const want[] = {
        "redis://bob:***@h:6379/0?mode=hash",
        "redis://bob:***@h",
        "postgres://:***@[::1]:5432/db",
        "redlock://u:***@a:1,b:2,c:3?lease=5s",
        "mysql://app:***@db/locks",
    };

    (void)state;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct dlock_uri *u = parse_ok(texts[i]);
        assert_string_equal(u->redacted, want[i]);
        assert_no_piece(u->redacted, PW);
        dlock__uri_free(u);
    }
}

static void redact__redacted_parses_again(void **state)
{
    struct dlock_uri *u = parse_ok("redis://bob:" PW "@h:1,[::1]/p?a=b");
    struct dlock_uri *v = parse_ok(u->redacted);

    (void)state;
    assert_string_equal(v->password, "***");
    assert_string_equal(v->user, "bob");
    assert_int_equal(v->nhosts, 2);
    assert_string_equal(v->redacted, u->redacted);
    dlock__uri_free(u);
    dlock__uri_free(v);
}

static void redact__readers_mask_password(void **state)
{
    struct dlock_uri *u =
        parse_ok("redis://bob:" PW "@h?n=" PW "&d=x" PW "&b=" PW "&c=" PW);
    static const char *const choices[] = {"one", "two", NULL};
    char err[DLOCK__ERRMSG_MAX];
    uint32_t v;
    int iv;

    (void)state;
    assert_int_equal(dlock_uri_uint(u, "n", 0, 0, 9, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_no_piece(err, PW);
    assert_contains(err, "\"***\"");
    assert_int_equal(dlock_uri_duration(u, "d", 0, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_no_piece(err, PW);
    assert_int_equal(dlock_uri_bool(u, "b", 0, &iv, err, sizeof err),
                     DLOCK_EINVAL);
    assert_no_piece(err, PW);
    assert_int_equal(
        dlock_uri_choice(u, "c", choices, 0, &iv, err, sizeof err),
        DLOCK_EINVAL);
    assert_no_piece(err, PW);
    dlock__uri_free(u);
}

/* ------------------------------------------------------------------------ */
/* Durations                                                                */
/* ------------------------------------------------------------------------ */

static void duration__good_table(void **state)
{
    static const struct {
        const char *text;
        uint32_t ms;
    } cases[] = {
        {"0", 0},
        {"0ms", 0},
        {"0s", 0},
        {"0.0s", 0},
        {"1ms", 1},
        {"250ms", 250},
        {"5s", 5000},
        {"1.5s", 1500},
        {"1.50s", 1500},
        {"0.001s", 1},
        {"1.0ms", 1},
        {"0.25m", 15000},
        {"2m", 120000},
        {"1h", 3600000},
        {"1.5h", 5400000},
        {"00010s", 10000},
        {"1.000000000000000000000s", 1000},
        {"4294967294ms", 4294967294u},
        {"4294967.294s", 4294967294u},
        {"1193h", 4294800000u},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t v = 12345;
        int rc = dlock_parse_duration(cases[i].text, &v);

        if (rc != DLOCK_OK || v != cases[i].ms)
            fail_msg("\"%s\": rc %d, %lu ms, expected %lu", cases[i].text,
                     rc, (unsigned long)v, (unsigned long)cases[i].ms);
    }
}

static void duration__bad_table(void **state)
{
    static const char *const cases[] = {
        "",      "5",        "1.5",       "-1s",          "+1s",
        " 1s",   "1s ",      "1 s",       "5x",           "5sec",
        "1.s",   ".5s",      "1.5ms",     "0.0005s",      "0.0000005h",
        "1S",    "1MS",      "ms",        "s",            "00",
        "0.0",   "1e3ms",    "0x10s",     "1h30m",        "1,5s",
        "4294967295ms",      "4294967.295s",              "1194h",
        "99999999999999999999999999h", "1.00000000001s", "\t1s",
        /* 64 digits after the point: 10^k must not wrap to 0. */
        "1.0000000000000000000000000000000000000000000000000000000000000001s",
        "0.1234567890123456789012345678901234567890h",
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t v = 12345;
        int rc = dlock_parse_duration(cases[i], &v);

        if (rc != DLOCK_EINVAL || v != 12345)
            fail_msg("\"%s\": rc %d, %lu ms, expected DLOCK_EINVAL and no "
                     "change",
                     cases[i], rc, (unsigned long)v);
    }
}

static void duration__null_arguments(void **state)
{
    uint32_t v = 7;

    (void)state;
    assert_int_equal(dlock_parse_duration(NULL, &v), DLOCK_EINVAL);
    assert_int_equal(dlock_parse_duration("1s", NULL), DLOCK_EINVAL);
    assert_int_equal(v, 7);
}

/* ------------------------------------------------------------------------ */
/* Parameter readers                                                        */
/* ------------------------------------------------------------------------ */

static void param__lookup(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?kind=hash&flag&db=");

    (void)state;
    assert_string_equal(dlock_uri_param(u, "kind"), "hash");
    assert_string_equal(dlock_uri_param(u, "flag"), "");
    assert_string_equal(dlock_uri_param(u, "db"), "");
    assert_null(dlock_uri_param(u, "Kind"));
    assert_null(dlock_uri_param(u, "absent"));
    assert_null(dlock_uri_param(u, NULL));
    assert_null(dlock_uri_param(NULL, "kind"));
    dlock__uri_free(u);
}

static void reader__duration(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?wait=1.5s&bad=3&worse=x");
    char err[DLOCK__ERRMSG_MAX];
    uint32_t v = 0;

    (void)state;
    assert_int_equal(dlock_uri_duration(u, "wait", 9, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 1500);
    assert_int_equal(dlock_uri_duration(u, "absent", 9, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 9);
    assert_int_equal(dlock_uri_duration(u, "bad", 9, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "bad");
    assert_contains(err, "\"3\" has no unit");
    assert_int_equal(dlock_uri_duration(u, "worse", 9, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "worse");
    assert_contains(err, "\"x\" is not a duration");
    assert_int_equal(v, 9);
    dlock__uri_free(u);
}

static void reader__uint_range(void **state)
{
    struct dlock_uri *u = parse_ok(
        "redis://h?db=5&big=50&word=abc&empty=&neg=-1&huge="
        "99999999999999999999&max=4294967295&lead=007");
    char err[DLOCK__ERRMSG_MAX];
    uint32_t v = 0;

    (void)state;
    assert_int_equal(dlock_uri_uint(u, "db", 0, 0, 15, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 5);
    assert_int_equal(dlock_uri_uint(u, "lead", 0, 0, 15, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 7);
    assert_int_equal(
        dlock_uri_uint(u, "max", 0, 0, UINT32_MAX, &v, err, sizeof err),
        DLOCK_OK);
    assert_int_equal(v, UINT32_MAX);
    assert_int_equal(dlock_uri_uint(u, "nope", 3, 0, 15, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 3);
    assert_int_equal(dlock_uri_uint(u, "big", 0, 1, 10, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "big");
    assert_contains(err, "\"50\" is out of range (expected 1 to 10)");
    assert_int_equal(dlock_uri_uint(u, "word", 0, 1, 10, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "word");
    assert_contains(err, "not a whole number (expected 1 to 10)");
    assert_int_equal(
        dlock_uri_uint(u, "empty", 0, 1, 10, &v, err, sizeof err),
        DLOCK_EINVAL);
    assert_int_equal(dlock_uri_uint(u, "neg", 0, 0, 10, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(
        dlock_uri_uint(u, "huge", 0, 0, UINT32_MAX, &v, err, sizeof err),
        DLOCK_EINVAL);
    assert_contains(err, "out of range");
    assert_int_equal(v, 3);
    assert_int_equal(dlock_uri_uint(u, "db", 0, 9, 1, &v, err, sizeof err),
                     DLOCK_EINVAL);
    dlock__uri_free(u);
}

static void reader__bool_values(void **state)
{
    struct dlock_uri *u = parse_ok(
        "redis://h?a=1&b=0&c=true&d=FALSE&e=Yes&f=no&g=ON&h=off&x=maybe"
        "&y=&z=2");
    static const char *const keys = "abcdefgh";
    static const int want[] = {1, 0, 1, 0, 1, 0, 1, 0};
    char err[DLOCK__ERRMSG_MAX], key[2] = "";
    int v;

    (void)state;
    for (int i = 0; i < 8; i++) {
        key[0] = keys[i];
        v = -1;
        assert_int_equal(dlock_uri_bool(u, key, -1, &v, err, sizeof err),
                         DLOCK_OK);
        assert_int_equal(v, want[i]);
    }
    assert_int_equal(dlock_uri_bool(u, "absent", 1, &v, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(v, 1);
    assert_int_equal(dlock_uri_bool(u, "x", 1, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "x");
    assert_contains(err, "\"maybe\" is not a boolean (expected 1, 0, true, "
                         "false, yes, no, on or off)");
    assert_int_equal(dlock_uri_bool(u, "y", 1, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_bool(u, "z", 1, &v, err, sizeof err),
                     DLOCK_EINVAL);
    dlock__uri_free(u);
}

static void reader__choice_lists_choices(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?kind=HASH&bad=lua");
    static const char *const modes[] = {"setnx", "hash", "redlock", NULL};
    static const char *const none[] = {NULL};
    char err[DLOCK__ERRMSG_MAX];
    int v = -1;

    (void)state;
    assert_int_equal(
        dlock_uri_choice(u, "kind", modes, 0, &v, err, sizeof err),
        DLOCK_OK);
    assert_int_equal(v, 1);
    assert_int_equal(
        dlock_uri_choice(u, "absent", modes, 2, &v, err, sizeof err),
        DLOCK_OK);
    assert_int_equal(v, 2);
    assert_int_equal(
        dlock_uri_choice(u, "bad", modes, 0, &v, err, sizeof err),
        DLOCK_EINVAL);
    assert_component(err, "bad");
    assert_contains(err, "\"lua\"");
    assert_contains(err, "setnx, hash or redlock");
    assert_int_equal(
        dlock_uri_choice(u, "mode", none, 0, &v, err, sizeof err),
        DLOCK_EINVAL);
    assert_int_equal(
        dlock_uri_choice(u, "mode", NULL, 0, &v, err, sizeof err),
        DLOCK_EINVAL);
    dlock__uri_free(u);
}

static void reader__null_arguments(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?a=1");
    static const char *const ch[] = {"1", NULL};
    char err[DLOCK__ERRMSG_MAX];
    uint32_t v;
    int iv;

    (void)state;
    assert_int_equal(dlock_uri_duration(NULL, "a", 0, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_duration(u, NULL, 0, &v, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_duration(u, "a", 0, NULL, NULL, 0),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_uint(NULL, "a", 0, 0, 1, &v, NULL, 0),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_uint(u, "a", 0, 0, 1, NULL, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_bool(u, NULL, 0, &iv, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_bool(u, "a", 0, NULL, err, sizeof err),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_choice(NULL, "a", ch, 0, &iv, err, 1),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_uri_choice(u, "a", ch, 0, NULL, NULL, 0),
                     DLOCK_EINVAL);
    /* A parse failure leaves nothing, and the readers accept no URI. */
    assert_int_equal(dlock__uri_check_params(NULL, NULL, err, sizeof err),
                     DLOCK_EINVAL);
    dlock__uri_free(u);
}

/* ------------------------------------------------------------------------ */
/* Checking a backend's parameters                                          */
/* ------------------------------------------------------------------------ */

static void check_params__allowed_pass(void **state)
{
    struct dlock_uri *u =
        parse_ok("redis://h?mode=hash&db=2&lease=5s&namespace=x");
    static const char *const allowed[] = {"mode", "db", "tls", NULL};
    char err[DLOCK__ERRMSG_MAX] = "";

    (void)state;
    assert_int_equal(dlock__uri_check_params(u, allowed, err, sizeof err),
                     DLOCK_OK);
    dlock__uri_free(u);
}

static void check_params__unknown_named(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?mode=hash&colour=red");
    static const char *const allowed[] = {"mode", "db", NULL};
    char err[DLOCK__ERRMSG_MAX] = "";

    (void)state;
    assert_int_equal(dlock__uri_check_params(u, allowed, err, sizeof err),
                     DLOCK_EINVAL);
    assert_component(err, "query");
    assert_contains(err, "\"colour\"");
    assert_contains(err, "redis takes mode, db");
    assert_contains(err, "lease, timeout, namespace, retry_min, retry_max");
    dlock__uri_free(u);
}

static void check_params__none_allowed(void **state)
{
    struct dlock_uri *u = parse_ok("file:///tmp/x?kind=1");
    struct dlock_uri *v = parse_ok("file:///tmp/x?lease=1s&mode=ofd");
    char err[DLOCK__ERRMSG_MAX] = "";

    (void)state;
    assert_int_equal(dlock__uri_check_params(u, NULL, err, sizeof err),
                     DLOCK_EINVAL);
    assert_contains(err, "\"kind\"");
    assert_contains(err, "file takes none of its own");
    assert_int_equal(dlock__uri_check_params(v, NULL, err, sizeof err),
                     DLOCK_OK);
    dlock__uri_free(u);
    dlock__uri_free(v);
}

static void check_params__long_list_cut(void **state)
{
    struct dlock_uri *u = parse_ok("redis://h?nope=1");
    static const char *const allowed[] = {
        "parameter_00", "parameter_01", "parameter_02", "parameter_03",
        "parameter_04", "parameter_05", "parameter_06", "parameter_07",
        "parameter_08", "parameter_09", "parameter_10", "parameter_11",
        "parameter_12", "parameter_13", "parameter_14", "parameter_15",
        "parameter_16", "parameter_17", "parameter_18", "parameter_19",
        "parameter_20", "parameter_21", "parameter_22", "parameter_23",
        NULL,
    };
    char err[DLOCK__ERRMSG_MAX] = "";

    (void)state;
    assert_int_equal(dlock__uri_check_params(u, allowed, err, sizeof err),
                     DLOCK_EINVAL);
    assert_contains(err, "\"nope\"");
    assert_contains(err, "parameter_00, parameter_01");
    assert_contains(err, "...; every scheme takes lease");
    assert_true(strlen(err) < sizeof err - 1);
    dlock__uri_free(u);
}

static void check_params__masks_password(void **state)
{
    struct dlock_uri *u = parse_ok("redis://bob:" PW "@h?" PW "=1");
    char err[DLOCK__ERRMSG_MAX] = "";

    (void)state;
    assert_int_equal(dlock__uri_check_params(u, NULL, err, sizeof err),
                     DLOCK_EINVAL);
    assert_no_piece(err, PW);
    assert_contains(err, "\"***\"");
    dlock__uri_free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uri__single_host),
        cmocka_unit_test(uri__host_without_port),
        cmocka_unit_test(uri__port_bounds),
        cmocka_unit_test(uri__multi_host),
        cmocka_unit_test(uri__ipv6_with_port),
        cmocka_unit_test(uri__ipv6_without_port),
        cmocka_unit_test(uri__ipv6_with_ipv4_tail),
        cmocka_unit_test(uri__mixed_host_list),
        cmocka_unit_test(uri__host_percent_decoded),
        cmocka_unit_test(uri__userinfo_percent_encoded),
        cmocka_unit_test(uri__userinfo_user_only),
        cmocka_unit_test(uri__userinfo_empty_parts),
        cmocka_unit_test(uri__no_userinfo),
        cmocka_unit_test(uri__empty_authority_with_path),
        cmocka_unit_test(uri__empty_authority_alone),
        cmocka_unit_test(uri__path_decoding),
        cmocka_unit_test(uri__query_decoding),
        cmocka_unit_test(uri__empty_query),
        cmocka_unit_test(uri__common_params_consumed),
        cmocka_unit_test(uri__common_params_defaulted),
        cmocka_unit_test(uri__common_params_edges),
        cmocka_unit_test(uri__namespace_length),
        cmocka_unit_test(uri__alias_scheme_kept),
        cmocka_unit_test(uri__scheme_lower_cased),
        cmocka_unit_test(uri__reads_only_len_bytes),
        cmocka_unit_test(uri__longest_accepted),
        cmocka_unit_test(uri__many_hosts_and_params),
        cmocka_unit_test(uri__free_null),
        cmocka_unit_test(uri__null_arguments),
        cmocka_unit_test(uri__malformed_table),
        cmocka_unit_test(uri__too_long),
        cmocka_unit_test(uri__long_values_truncated_in_messages),
        cmocka_unit_test(uri__quotes_escaped_in_messages),
        cmocka_unit_test(uri__host_name_length),
        cmocka_unit_test(redact__errors_never_show_password),
        cmocka_unit_test(redact__errors_still_explain),
        cmocka_unit_test(redact__redacted_hides_password),
        cmocka_unit_test(redact__redacted_parses_again),
        cmocka_unit_test(redact__readers_mask_password),
        cmocka_unit_test(duration__good_table),
        cmocka_unit_test(duration__bad_table),
        cmocka_unit_test(duration__null_arguments),
        cmocka_unit_test(param__lookup),
        cmocka_unit_test(reader__duration),
        cmocka_unit_test(reader__uint_range),
        cmocka_unit_test(reader__bool_values),
        cmocka_unit_test(reader__choice_lists_choices),
        cmocka_unit_test(reader__null_arguments),
        cmocka_unit_test(check_params__allowed_pass),
        cmocka_unit_test(check_params__unknown_named),
        cmocka_unit_test(check_params__none_allowed),
        cmocka_unit_test(check_params__long_list_cut),
        cmocka_unit_test(check_params__masks_password),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
