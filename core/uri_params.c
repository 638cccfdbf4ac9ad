/*
 * uri_params.c: after the parse (uri.c): freeing a URI, checking that a
 * backend reads every parameter given, and the typed parameter readers of
 * backend.h (dlock_uri_param, _duration, _uint, _bool, _choice), whose
 * messages name the parameter and what was expected.
 *
 * Divisions: freeing and checking parameters; the typed readers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uri_text.h"

/* ------------------------------------------------------------------------ */
/* Freeing and checking parameters                                          */
/* ------------------------------------------------------------------------ */

void dlock__uri_free(struct dlock_uri *u)
{
    /* The struct heads the one block that holds everything. */
    free(u);
}

/* Append text to buf (of size cap, holding *n bytes), cutting with "...". */
static void uri_append(char *buf, size_t cap, size_t *n, const char *text)
{
    size_t tlen = strlen(text);

    if (*n + 1 >= cap)
        return;
    if (*n + tlen + 1 > cap) {
        tlen = cap - *n - 1;
        memcpy(buf + *n, text, tlen);
        *n += tlen;
        if (cap >= 4)
            memcpy(buf + cap - 4, "...", 3);
    } else {
        memcpy(buf + *n, text, tlen);
        *n += tlen;
    }
    buf[*n] = '\0';
}

int dlock__uri_check_params(const struct dlock_uri *u,
                            const char *const *allowed, char *err,
                            size_t errlen)
{
    struct uri_mask m = {NULL, NULL, NULL, 0};

    if (u == NULL)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "query: no URI to check (u is NULL)");
    if (u->password != NULL) {
        m.secret = u->password;
        m.secret_len = strlen(u->password);
    }
    for (size_t i = 0; i < u->nparams; i++) {
        const char *key = u->params[i].key;
        char q[URI_QUOTE_BUF], list[256];
        size_t n = 0, k;
        int ok = 0;

        for (k = 0; allowed != NULL && allowed[k] != NULL && !ok; k++)
            ok = strcmp(allowed[k], key) == 0;
        if (ok)
            continue;
        list[0] = '\0';
        for (k = 0; allowed != NULL && allowed[k] != NULL; k++) {
            if (k > 0)
                uri_append(list, sizeof list, &n, ", ");
            uri_append(list, sizeof list, &n, allowed[k]);
        }
        if (k == 0)
            uri_append(list, sizeof list, &n, "none of its own");
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "query: unknown parameter %s (%s takes %s; every "
                        "scheme takes " URI_COMMON_LIST ")",
                        dlock__uri_quote(q, key, strlen(key), &m),
                        u->scheme != NULL ? u->scheme : "this scheme", list);
    }
    return DLOCK_OK;
}

/* ------------------------------------------------------------------------ */
/* Typed parameter readers (backend.h)                                      */
/* ------------------------------------------------------------------------ */

const char *dlock_uri_param(const struct dlock_uri *u, const char *key)
{
    if (u == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < u->nparams; i++)
        if (strcmp(u->params[i].key, key) == 0)
            return u->params[i].value;
    return NULL;
}

/*
 * The common start of every reader: check the arguments and find the value.
 * Returns DLOCK_OK with *value NULL when the parameter is absent, and fills
 * q with the quoted value otherwise (the password masked). name gets the
 * key as messages show it, escaped like a value but without quotes.
 */
static int uri_reader(const struct dlock_uri *u, const char *key,
                      const void *out, const char **value,
                      char q[URI_QUOTE_BUF], char name[URI_QUOTE_BUF],
                      char *err, size_t errlen)
{
    struct uri_mask m = {NULL, NULL, NULL, 0};

    *value = NULL;
    if (u != NULL && u->password != NULL) {
        m.secret = u->password;
        m.secret_len = strlen(u->password);
    }
    if (key != NULL)
        dlock__uri_escape(name, key, strlen(key), &m, 0);
    else
        strcpy(name, "parameter");
    if (u == NULL || key == NULL || out == NULL)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: reader called with a NULL %s", name,
                        u == NULL ? "URI" : key == NULL ? "key" : "out");
    *value = dlock_uri_param(u, key);
    if (*value != NULL)
        dlock__uri_quote(q, *value, strlen(*value), &m);
    return DLOCK_OK;
}

int dlock_uri_duration(const struct dlock_uri *u, const char *key,
                       uint32_t dflt, uint32_t *out, char *err, size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    enum uri_dur_result r;
    uint32_t ms;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    r = dlock__uri_duration(v, strlen(v), &ms);
    if (r != URI_DUR_OK)
        return dlock__uri_duration_error(err, errlen, name, q, r);
    *out = ms;
    return DLOCK_OK;
}

int dlock_uri_uint(const struct dlock_uri *u, const char *key, uint32_t dflt,
                   uint32_t min, uint32_t max, uint32_t *out, char *err,
                   size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    uint64_t n = 0;
    size_t i;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (min > max)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: the backend asked for the empty range %lu to "
                        "%lu",
                        name, (unsigned long)min, (unsigned long)max);
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (i = 0; dlock__uri_is_digit((unsigned char)v[i]); i++)
        if (n <= UINT32_MAX)
            n = n * 10 + (uint64_t)(v[i] - '0');
    if (i == 0 || v[i] != '\0')
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is not a whole number (expected %lu to %lu)",
                        name, q, (unsigned long)min, (unsigned long)max);
    if (n < min || n > max)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is out of range (expected %lu to %lu)", name,
                        q, (unsigned long)min, (unsigned long)max);
    *out = (uint32_t)n;
    return DLOCK_OK;
}

int dlock_uri_bool(const struct dlock_uri *u, const char *key, int dflt,
                   int *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (size_t i = 0; i < 4; i++) {
        if (dlock__uri_same_nocase(v, yes[i])) {
            *out = 1;
            return DLOCK_OK;
        }
        if (dlock__uri_same_nocase(v, no[i])) {
            *out = 0;
            return DLOCK_OK;
        }
    }
    return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a boolean (expected 1, 0, true, false, "
                    "yes, no, on or off)",
                    name, q);
}

int dlock_uri_choice(const struct dlock_uri *u, const char *key,
                     const char *const *choices, int dflt, int *out,
                     char *err, size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF], list[256];
    const char *v;
    size_t n = 0, k;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (choices == NULL || choices[0] == NULL)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: the backend gave no choices", name);
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (k = 0; choices[k] != NULL; k++) {
        if (dlock__uri_same_nocase(v, choices[k])) {
            *out = (int)k;
            return DLOCK_OK;
        }
    }
    list[0] = '\0';
    for (k = 0; choices[k] != NULL; k++) {
        if (k > 0)
            uri_append(list, sizeof list, &n,
                       choices[k + 1] == NULL ? " or " : ", ");
        uri_append(list, sizeof list, &n, choices[k]);
    }
    return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a choice (expected %s)", name, q,
                    list);
}


/* ------------------------------------------------------------------------ */
/* For backends that wrap another (backend.h)                               */
/* ------------------------------------------------------------------------ */

int dlock_uri_parse(struct dlock_uri **out, const char *text, char *err,
                    size_t errlen)
{
    size_t len;

    if (out == NULL || text == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "uri: NULL argument");
    *out = NULL;
    len = strnlen(text, DLOCK__URI_MAX + 1);
    if (len > DLOCK__URI_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "uri: longer than %d bytes", DLOCK__URI_MAX);
    return dlock__uri_parse(out, text, len, err, errlen);
}

void dlock_uri_free(struct dlock_uri *u)
{
    dlock__uri_free(u);
}
