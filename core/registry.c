/*
 * registry.c: finding a backend by URI scheme. Backends registered at run
 * time (out-of-tree ones, and the test suite's fault shim) are tried first,
 * then the built-in table meson generated from the enabled options. Also the
 * process-wide, reference-counted initialisation of every backend's client
 * library.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define REGISTRY_MAX 32

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static const struct dlock_backend *registered[REGISTRY_MAX];
static size_t nregistered;
static unsigned global_refs;

const char *dlock_version(void)
{
    return dlock__version;
}

static int serves(const struct dlock_backend *b, const char *scheme)
{
    if (strcasecmp(b->scheme, scheme) == 0)
        return 1;
    for (const char *const *a = b->aliases; a != NULL && *a != NULL; a++)
        if (strcasecmp(*a, scheme) == 0)
            return 1;
    return 0;
}

/* Call with registry_mutex held. */
static const struct dlock_backend *find_locked(const char *scheme)
{
    for (size_t i = 0; i < nregistered; i++)
        if (serves(registered[i], scheme))
            return registered[i];
    for (size_t i = 0; dlock__builtin[i] != NULL; i++)
        if (serves(dlock__builtin[i], scheme))
            return dlock__builtin[i];
    return NULL;
}

const struct dlock_backend *dlock_backend_find(const char *scheme)
{
    const struct dlock_backend *b;

    if (scheme == NULL)
        return NULL;
    pthread_mutex_lock(&registry_mutex);
    b = find_locked(scheme);
    pthread_mutex_unlock(&registry_mutex);
    return b;
}

int dlock__backend_check(const struct dlock_backend *b, char *err,
                         size_t errlen)
{
    if (b == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "backend: NULL table");
    if (b->version == 0 || b->version > DLOCK_BACKEND_VERSION)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend: version %u not in 1..%u", b->version,
                            DLOCK_BACKEND_VERSION);
    if (b->scheme == NULL || b->scheme[0] == '\0')
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "backend: no scheme");
    if (b->open == NULL || b->close == NULL || b->acquire == NULL ||
        b->renew == NULL || b->release == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend %s: open, close, acquire, renew and "
                            "release are required",
                            b->scheme);
    if ((b->ctx_open == NULL) != (b->ctx_close == NULL))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend %s: ctx_open and ctx_close go together",
                            b->scheme);
    return DLOCK_OK;
}

int dlock_backend_register(const struct dlock_backend *b)
{
    int rc = dlock__backend_check(b, NULL, 0);

    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&registry_mutex);
    if (nregistered == REGISTRY_MAX || find_locked(b->scheme) != NULL) {
        rc = DLOCK_EINVAL;
    } else {
        for (const char *const *a = b->aliases; a != NULL && *a != NULL; a++)
            if (find_locked(*a) != NULL)
                rc = DLOCK_EINVAL;
    }
    if (rc == DLOCK_OK) {
        /* A backend registered after dlock_global_init() is initialised
         * now, so every backend in use has been. */
        if (global_refs > 0 && b->global_init != NULL)
            rc = b->global_init();
        if (rc == DLOCK_OK)
            registered[nregistered++] = b;
    }
    pthread_mutex_unlock(&registry_mutex);
    return rc;
}

size_t dlock_backend_schemes(const char **out, size_t cap)
{
    size_t n = 0;

    pthread_mutex_lock(&registry_mutex);
    for (size_t i = 0; i < nregistered; i++, n++)
        if (out != NULL && n < cap)
            out[n] = registered[i]->scheme;
    for (size_t i = 0; dlock__builtin[i] != NULL; i++, n++)
        if (out != NULL && n < cap)
            out[n] = dlock__builtin[i]->scheme;
    pthread_mutex_unlock(&registry_mutex);
    return n;
}

void dlock__schemes_text(char *out, size_t cap)
{
    const char *names[REGISTRY_MAX + 16];
    size_t n = dlock_backend_schemes(names, sizeof names / sizeof names[0]);
    size_t len = 0;

    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < sizeof names / sizeof names[0]; i++) {
        int w = snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
                         names[i]);
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
    }
}

int dlock_global_init(void)
{
    int rc = DLOCK_OK;
    size_t i;

    pthread_mutex_lock(&registry_mutex);
    if (global_refs++ == 0) {
        for (i = 0; dlock__builtin[i] != NULL; i++) {
            const struct dlock_backend *b = dlock__builtin[i];
            if (b->global_init != NULL && (rc = b->global_init()) != DLOCK_OK)
                break;
        }
        if (rc != DLOCK_OK) {
            while (i-- > 0)
                if (dlock__builtin[i]->global_cleanup != NULL)
                    dlock__builtin[i]->global_cleanup();
            global_refs = 0;
        }
    }
    pthread_mutex_unlock(&registry_mutex);
    return rc;
}

void dlock_global_shutdown(void)
{
    pthread_mutex_lock(&registry_mutex);
    if (global_refs > 0 && --global_refs == 0) {
        for (size_t i = 0; i < nregistered; i++)
            if (registered[i]->global_cleanup != NULL)
                registered[i]->global_cleanup();
        for (size_t i = 0; dlock__builtin[i] != NULL; i++)
            if (dlock__builtin[i]->global_cleanup != NULL)
                dlock__builtin[i]->global_cleanup();
    }
    pthread_mutex_unlock(&registry_mutex);
}
