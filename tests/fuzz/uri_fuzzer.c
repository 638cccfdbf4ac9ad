/*
 * uri_fuzzer.c: a libFuzzer target for core/uri.c.
 *
 * Each input is given to dlock__uri_parse() as it is (not NUL-terminated,
 * so ASan catches a read past its end) and to dlock_parse_duration() as a
 * NUL-terminated copy. Beyond "no crash, no leak, no undefined behaviour",
 * it checks only what the contract in core/uri.h and backend.h
 * promises:
 *
 * - the result is DLOCK_OK or DLOCK_EINVAL, and *out is set exactly on OK;
 * - a message is one non-empty line of printable ASCII starting with a
 *   lower-case component name and ':';
 * - a parsed URI has a lower-case scheme, a non-empty host per entry, a path
 *   that is "" or starts with '/', non-empty and distinct parameter keys with
 *   the common ones removed, in-range common values, and strings without a
 *   NUL inside (the input had none, since a NUL is an error);
 * - redacted is the input when there is no password (or an empty one), and
 *   otherwise parses again to the same URI with the password "***";
 * - the readers of backend.h give DLOCK_OK or DLOCK_EINVAL on every key;
 * - a duration that parses prints back to itself as "<n>ms".
 *
 * tests/fuzz/replay.c runs this same function over the corpus without
 * libFuzzer, so every `meson test` replays the corpus.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* strnlen */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* abort() with a reason: libFuzzer reports it and keeps the input. */
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "uri_fuzzer: %s:%d: check failed: %s\n",       \
                    __FILE__, __LINE__, #cond);                            \
            abort();                                                       \
        }                                                                  \
    } while (0)

static const char *const common_keys[] = {
    "lease", "timeout", "retry_min", "retry_max", "namespace",
};

/*
 * A message from a failed call: one printable line. It starts with name and
 * ':' when name is not NULL nor "", with a component word and ':' when name
 * is NULL.
 */
static void check_message(const char *err, size_t cap, const char *name)
{
    size_t n = strnlen(err, cap), i = 0;

    CHECK(n > 0 && n < cap);
    for (size_t k = 0; k < n; k++)
        CHECK((unsigned char)err[k] >= 0x20 && (unsigned char)err[k] < 0x7f);
    if (name != NULL && name[0] == '\0')
        return;
    if (name != NULL) {
        size_t len = strlen(name);
        CHECK(strncmp(err, name, len) == 0 && err[len] == ':');
        return;
    }
    while (i < n && ((err[i] >= 'a' && err[i] <= 'z') || err[i] == '_'))
        i++;
    CHECK(i > 0 && i < n && err[i] == ':');
}

/* 1 if messages show key as it is: short, and made of [a-z0-9_]. */
static int plain_key(const char *key)
{
    size_t n = 0;

    for (; key[n] != '\0'; n++)
        if (!((key[n] >= 'a' && key[n] <= 'z') ||
              (key[n] >= '0' && key[n] <= '9') || key[n] == '_'))
            return 0;
    return n <= 40;
}

static int same_string(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

/* Every field is readable and keeps its documented shape. */
static void check_uri(const struct dlock_uri *u, size_t size)
{
    size_t n;

    CHECK(u->scheme != NULL && u->scheme[0] != '\0');
    for (const char *p = u->scheme; *p != '\0'; p++)
        CHECK(!(*p >= 'A' && *p <= 'Z'));
    if (u->user != NULL)
        CHECK(strlen(u->user) < size);
    if (u->password != NULL)
        CHECK(strlen(u->password) < size);
    CHECK(u->nhosts == 0 || u->hosts != NULL);
    for (size_t i = 0; i < u->nhosts; i++) {
        CHECK(u->hosts[i].host != NULL);
        n = strlen(u->hosts[i].host);
        CHECK(n > 0 && n < size);
        CHECK(u->hosts[i].ipv6 == 0 || u->hosts[i].ipv6 == 1);
    }
    CHECK(u->path != NULL);
    CHECK(u->path[0] == '\0' || u->path[0] == '/');
    CHECK(u->nparams == 0 || u->params != NULL);
    for (size_t i = 0; i < u->nparams; i++) {
        const struct dlock_uri_param *p = &u->params[i];

        CHECK(p->key != NULL && p->value != NULL);
        CHECK(p->key[0] != '\0' && strlen(p->key) < size);
        CHECK(strlen(p->value) < size);
        for (size_t k = 0; k < 5; k++)
            CHECK(strcmp(p->key, common_keys[k]) != 0);
        for (size_t k = 0; k < i; k++)
            CHECK(strcmp(p->key, u->params[k].key) != 0);
        CHECK(dlock_uri_param(u, p->key) == p->value);
    }
    CHECK(u->lease_ms >= 1 && u->lease_ms <= UINT32_MAX - 1);
    CHECK(u->timeout_ms >= 1 && u->timeout_ms <= UINT32_MAX - 1);
    CHECK(u->retry_min_ms <= UINT32_MAX - 1);
    CHECK(u->retry_max_ms <= UINT32_MAX - 1);
    CHECK(u->ns != NULL && strlen(u->ns) <= 256);
    CHECK(u->redacted != NULL);
}

/* The redacted text is the input, or parses to the same URI. */
static void check_redacted(const struct dlock_uri *u, const uint8_t *data,
                           size_t size)
{
    struct dlock_uri *v = NULL;
    char err[DLOCK__ERRMSG_MAX];
    size_t n = strlen(u->redacted);
    int rc;

    if (u->password == NULL || u->password[0] == '\0') {
        CHECK(n == size && memcmp(u->redacted, data, size) == 0);
        return;
    }
    CHECK(n <= size + 3);
    if (n > DLOCK__URI_MAX)
        return;
    rc = dlock__uri_parse(&v, u->redacted, n, err, sizeof err);
    CHECK(rc == DLOCK_OK);
    CHECK(same_string(v->password, "***"));
    CHECK(same_string(v->scheme, u->scheme));
    CHECK(same_string(v->user, u->user));
    CHECK(v->nhosts == u->nhosts);
    for (size_t i = 0; i < u->nhosts; i++) {
        CHECK(same_string(v->hosts[i].host, u->hosts[i].host));
        CHECK(v->hosts[i].port == u->hosts[i].port);
        CHECK(v->hosts[i].ipv6 == u->hosts[i].ipv6);
    }
    CHECK(same_string(v->path, u->path));
    CHECK(v->nparams == u->nparams);
    for (size_t i = 0; i < u->nparams; i++) {
        CHECK(same_string(v->params[i].key, u->params[i].key));
        CHECK(same_string(v->params[i].value, u->params[i].value));
    }
    CHECK(v->lease_ms == u->lease_ms && v->timeout_ms == u->timeout_ms);
    CHECK(v->retry_min_ms == u->retry_min_ms);
    CHECK(v->retry_max_ms == u->retry_max_ms);
    CHECK(same_string(v->ns, u->ns));
    CHECK(same_string(v->redacted, u->redacted));
    dlock__uri_free(v);
}

/* The readers of backend.h answer OK or EINVAL, with a proper message. */
static void check_readers(const struct dlock_uri *u)
{
    static const char *const choices[] = {"setnx", "hash", "redlock", NULL};
    char err[DLOCK__ERRMSG_MAX];
    uint32_t v32;
    int iv, rc;

    for (size_t i = 0; i < u->nparams; i++) {
        const char *key = u->params[i].key;
        const char *name = key;

        /* Messages escape an odd key and mask the password out of it. */
        if (!plain_key(key) ||
            (u->password != NULL && strstr(key, u->password) != NULL))
            name = "";

        rc = dlock_uri_duration(u, key, 7, &v32, err, sizeof err);
        CHECK(rc == DLOCK_OK || rc == DLOCK_EINVAL);
        if (rc != DLOCK_OK)
            check_message(err, sizeof err, name);
        rc = dlock_uri_uint(u, key, 7, 1, 1000, &v32, err, sizeof err);
        CHECK(rc == DLOCK_OK || rc == DLOCK_EINVAL);
        if (rc == DLOCK_OK)
            CHECK(v32 >= 1 && v32 <= 1000);
        else
            check_message(err, sizeof err, name);
        rc = dlock_uri_bool(u, key, 0, &iv, err, sizeof err);
        CHECK(rc == DLOCK_OK || rc == DLOCK_EINVAL);
        if (rc == DLOCK_OK)
            CHECK(iv == 0 || iv == 1);
        else
            check_message(err, sizeof err, name);
        rc = dlock_uri_choice(u, key, choices, 0, &iv, err, sizeof err);
        CHECK(rc == DLOCK_OK || rc == DLOCK_EINVAL);
        if (rc == DLOCK_OK)
            CHECK(iv >= 0 && iv <= 2);
        else
            check_message(err, sizeof err, name);
    }
    rc = dlock__uri_check_params(u, NULL, err, sizeof err);
    CHECK(rc == (u->nparams > 0 ? DLOCK_EINVAL : DLOCK_OK));
    if (rc != DLOCK_OK)
        check_message(err, sizeof err, "query");
}

/* dlock_parse_duration() on a NUL-terminated copy of the input. */
static void check_duration(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), back[32];
    uint32_t v = 0, w = 0;

    if (text == NULL)
        return;
    memcpy(text, data, size);
    text[size] = '\0';
    if (dlock_parse_duration(text, &v) == DLOCK_OK) {
        CHECK(v <= UINT32_MAX - 1);
        snprintf(back, sizeof back, "%lums", (unsigned long)v);
        CHECK(dlock_parse_duration(back, &w) == DLOCK_OK && w == v);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dlock_uri *u = (struct dlock_uri *)&u;
    char err[DLOCK__ERRMSG_MAX];
    int rc;

    err[0] = '\0';
    rc = dlock__uri_parse(&u, (const char *)data, size, err, sizeof err);
    CHECK(rc == DLOCK_OK || rc == DLOCK_EINVAL);
    if (rc == DLOCK_OK) {
        CHECK(u != NULL);
        check_uri(u, size);
        check_redacted(u, data, size);
        check_readers(u);
        dlock__uri_free(u);
    } else {
        CHECK(u == NULL);
        check_message(err, sizeof err, NULL);
    }
    check_duration(data, size);
    return 0;
}
