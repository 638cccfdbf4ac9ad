/*
 * registry.c: finding a backend by URI scheme, and its mode by name.
 * Backends registered at run time (out-of-tree ones, and the test suite's
 * fault shim, and the modules loaded so far) are tried first, then the
 * built-in table meson generated from the enabled options, then the module
 * that serves the scheme is loaded (module.c) and registered. Also the process-wide, reference-counted
 * initialisation of every backend's client library, the default URI, and
 * the calls that need a backend's tables but no connection (the modes of a
 * URI, the bench floor).
 *
 * Divisions: finding and checking tables; modes; global set-up; URIs
 * without a connection.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "module.h"
#include "registry.h"

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

static int add_locked(const struct dlock_backend *b);

/* Call with registry_mutex held: the backend of scheme, loading the module
 * that serves it the first time. On failure err says why (NULL *out with
 * DLOCK_OK: no backend or module knows the scheme). */
static int find_load_locked(const char *scheme,
                            const struct dlock_backend **out, char *err,
                            size_t errlen)
{
    const struct dlock__module *m;
    const struct dlock_backend *b;
    int rc;

    if ((*out = find_locked(scheme)) != NULL ||
        (m = dlock__module_for(scheme)) == NULL)
        return DLOCK_OK;
    if ((rc = dlock__module_load(m, &b, err, errlen)) != DLOCK_OK ||
        (rc = dlock__backend_check(b, err, errlen)) != DLOCK_OK)
        return rc;
    if (!serves(b, scheme))
        return dlock_errorf(err, errlen, DLOCK_ENOBACKEND,
                            "the %s module serves %s://, not %s://", m->name,
                            b->scheme, scheme);
    if ((rc = add_locked(b)) != DLOCK_OK)
        return dlock_errorf(err, errlen, rc,
                            "the %s module: cannot register %s:// (%s)",
                            m->name, b->scheme, dlock_strerror(rc));
    *out = b;
    return DLOCK_OK;
}

int dlock__backend_get(const char *scheme, const struct dlock_backend **out,
                       char *err, size_t errlen)
{
    char list[256];
    int rc;

    pthread_mutex_lock(&registry_mutex);
    rc = find_load_locked(scheme, out, err, errlen);
    pthread_mutex_unlock(&registry_mutex);
    if (rc != DLOCK_OK || *out != NULL)
        return rc;
    dlock__schemes_text(list, sizeof list);
    return dlock_errorf(err, errlen, DLOCK_ENOBACKEND,
                        "no backend for scheme '%.40s' in this build "
                        "(built: %s)",
                        scheme, list);
}

const struct dlock_backend *dlock_backend_find(const char *scheme)
{
    const struct dlock_backend *b = NULL;

    if (scheme == NULL)
        return NULL;
    pthread_mutex_lock(&registry_mutex);
    find_load_locked(scheme, &b, NULL, 0);
    pthread_mutex_unlock(&registry_mutex);
    return b;
}

int dlock__backend_check(const struct dlock_backend *b, char *err,
                         size_t errlen)
{
    if (b == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "backend: NULL table");
    if (b->version == 1)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend: a version 1 table (dlock 0.1); "
                            "rebuild it against this backend.h (version %u: "
                            "modes are objects)",
                            DLOCK_BACKEND_VERSION);
    if (b->version < 2 || b->version > DLOCK_BACKEND_VERSION)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend: version %u, expected 2 to %u",
                            b->version, DLOCK_BACKEND_VERSION);
    if (b->scheme == NULL || b->scheme[0] == '\0')
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "backend: no scheme");
    if (b->open == NULL || b->close == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend %s: open and close are required",
                            b->scheme);
    if ((b->ctx_open == NULL) != (b->ctx_close == NULL))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend %s: ctx_open and ctx_close go together",
                            b->scheme);
    if (b->modes == NULL || b->modes[0] == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "backend %s: no modes", b->scheme);
    for (size_t i = 0; b->modes[i] != NULL; i++) {
        const struct dlock_mode *m = b->modes[i];
        if (m->name == NULL || m->name[0] == '\0')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s: mode %zu has no name",
                                b->scheme, i);
        if (m->acquire == NULL || m->renew == NULL || m->release == NULL)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: acquire, renew and "
                                "release are required",
                                b->scheme, m->name);
        if (!(m->kinds & DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE)))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: every mode serves "
                                "exclusive requests",
                                b->scheme, m->name);
        if (((m->caps & DLOCK_CAP_PERMITS) != 0) !=
            ((m->kinds & DLOCK_KIND_BIT(DLOCK_KIND_PERMIT)) != 0))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: DLOCK_CAP_PERMITS "
                                "goes with permit requests in kinds",
                                b->scheme, m->name);
        /* A version 2 mode ends at data: it has no downgrade slot. */
        if (((m->caps & DLOCK_CAP_DOWNGRADE) != 0) !=
            (b->version >= 3 && m->downgrade != NULL &&
             (m->kinds & DLOCK_KIND_BIT(DLOCK_KIND_SHARED))))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: DLOCK_CAP_DOWNGRADE "
                                "goes with a downgrade() method and shared "
                                "requests",
                                b->scheme, m->name);
        if (((m->caps & DLOCK_CAP_LATCH) != 0) !=
            (dlock__mode_latch(b, m) != NULL))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: DLOCK_CAP_LATCH goes "
                                "with a latch table (version 4)",
                                b->scheme, m->name);
        if (dlock__mode_latch(b, m) != NULL &&
            (m->latch->set == NULL || m->latch->down == NULL ||
             m->latch->count == NULL))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "backend %s, mode %s: a latch table needs "
                                "set, down and count",
                                b->scheme, m->name);
    }
    return DLOCK_OK;
}

const struct dlock_latch_ops *dlock__mode_latch(const struct dlock_backend *b,
                                                const struct dlock_mode *m)
{
    /* A version 2 or 3 mode ends before the latch slot. */
    return b->version >= 4 ? m->latch : NULL;
}

/* Call with registry_mutex held: b is checked. A backend added after
 * dlock_global_init() is initialised now, so every backend in use has
 * been. */
static int add_locked(const struct dlock_backend *b)
{
    int rc = DLOCK_OK;

    if (nregistered == REGISTRY_MAX || find_locked(b->scheme) != NULL)
        return DLOCK_EINVAL;
    for (const char *const *a = b->aliases; a != NULL && *a != NULL; a++)
        if (find_locked(*a) != NULL)
            return DLOCK_EINVAL;
    if (global_refs > 0 && b->global_init != NULL)
        rc = b->global_init();
    if (rc == DLOCK_OK)
        registered[nregistered++] = b;
    return rc;
}

int dlock_backend_register(const struct dlock_backend *b)
{
    int rc = dlock__backend_check(b, NULL, 0);

    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&registry_mutex);
    rc = add_locked(b);
    pthread_mutex_unlock(&registry_mutex);
    return rc;
}

size_t dlock_backend_schemes(const char **out, size_t cap)
{
    size_t n = 0;

    pthread_mutex_lock(&registry_mutex);
    /* Every module that can be loaded is, so the list is what works. */
    for (const struct dlock__module *m = dlock__modules; m->name != NULL; m++) {
        const struct dlock_backend *b;
        find_load_locked(m->schemes[0], &b, NULL, 0);
    }
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

/* ---- modes ------------------------------------------------------------------ */

int dlock__mode_pick(const struct dlock_backend *b, const struct dlock_uri *u,
                     const struct dlock_mode **out, char *err, size_t errlen)
{
    char names[256];
    size_t n = 0;
    int rc;

    *out = NULL;
    if (b->pick_mode != NULL &&
        (rc = b->pick_mode(u, out, err, errlen)) != DLOCK_OK)
        return rc;
    if (*out != NULL)
        return DLOCK_OK;
    if (u->mode == NULL) {
        *out = b->modes[0];
        return DLOCK_OK;
    }
    names[0] = '\0';
    for (size_t i = 0; b->modes[i] != NULL; i++) {
        int w;
        if (strcasecmp(b->modes[i]->name, u->mode) == 0) {
            *out = b->modes[i];
            return DLOCK_OK;
        }
        w = snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
                     b->modes[i]->name);
        if (w > 0 && (size_t)w < sizeof names - n)
            n += (size_t)w;
    }
    return dlock_errorf(err, errlen, DLOCK_EINVAL,
                        "mode: '%.40s' is not a mode of %s (expected one of: "
                        "%s)",
                        u->mode, b->scheme, names);
}

/* ---- global set-up ----------------------------------------------------------- */

/* The i-th backend known: registered ones (modules among them), then the
 * built-in ones; NULL past the end. Call with registry_mutex held. */
static const struct dlock_backend *nth_locked(size_t i)
{
    if (i < nregistered)
        return registered[i];
    return dlock__builtin[i - nregistered];
}

int dlock_global_init(void)
{
    const struct dlock_backend *b;
    int rc = DLOCK_OK;
    size_t i;

    pthread_mutex_lock(&registry_mutex);
    if (global_refs++ == 0) {
        for (i = 0; (b = nth_locked(i)) != NULL; i++)
            if (b->global_init != NULL && (rc = b->global_init()) != DLOCK_OK)
                break;
        if (rc != DLOCK_OK) {
            while (i-- > 0)
                if (nth_locked(i)->global_cleanup != NULL)
                    nth_locked(i)->global_cleanup();
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
        const struct dlock_backend *b;
        for (size_t i = 0; (b = nth_locked(i)) != NULL; i++)
            if (b->global_cleanup != NULL)
                b->global_cleanup();
    }
    pthread_mutex_unlock(&registry_mutex);
}

/* ---- URIs without a connection ------------------------------------------------- */

/* $XDG_RUNTIME_DIR/dlock, else /tmp/dlock-<uid>, made 0700 and checked to
 * be ours, so another user cannot pre-create it and read or block locks. */
static int default_dir(char *out, size_t cap, char *err, size_t errlen)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;

    if (run != NULL && run[0] == '/')
        n = snprintf(out, cap, "%s/dlock", run);
    else
        n = snprintf(out, cap, "/tmp/dlock-%lu", (unsigned long)getuid());
    if (n < 0 || (size_t)n >= cap)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "default directory: path too long");
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return dlock_errorf(err, errlen, DLOCK_ERROR,
                            "default directory %s: %s", out, strerror(errno));
    if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != getuid() || (st.st_mode & 0077) != 0)
        return dlock_errorf(err, errlen, DLOCK_ERROR,
                            "default directory %s: not a private directory "
                            "owned by this user",
                            out);
    return DLOCK_OK;
}

int dlock__resolve_uri(const char *uri, char *buf, size_t cap, char *err,
                       size_t errlen)
{
    char dir[512];
    const char *def = dlock__default_uri;
    int rc;

    if (uri != NULL && uri[0] != '\0')
        return snprintf(buf, cap, "%s", uri) < (int)cap
                   ? DLOCK_OK
                   : dlock_errorf(err, errlen, DLOCK_EINVAL,
                                  "uri: longer than %d bytes",
                                  DLOCK__URI_MAX);
    uri = getenv("DLOCK_URI");
    if (uri != NULL && uri[0] != '\0')
        return snprintf(buf, cap, "%s", uri) < (int)cap
                   ? DLOCK_OK
                   : dlock_errorf(err, errlen, DLOCK_EINVAL,
                                  "DLOCK_URI: longer than %d bytes",
                                  DLOCK__URI_MAX);
    if (strcmp(def, "file://") != 0) {
        snprintf(buf, cap, "%s", def);
        return DLOCK_OK;
    }
    if ((rc = default_dir(dir, sizeof dir, err, errlen)) != DLOCK_OK)
        return rc;
    snprintf(buf, cap, "file://%s", dir);
    return DLOCK_OK;
}

/*
 * [B-LEASE-1] Where the lock is a server session (ZooKeeper's), the
 * backend reads session_timeout= and the lease cannot be longer than it
 * allows: a URI that sets session_timeout= and no lease= gets that lease,
 * rather than the default and a refusal. A bad value is left to the
 * backend, which names it.
 */
static void lease_follows_session(struct dlock_uri *u)
{
    char ignored[DLOCK__ERRMSG_MAX];
    uint32_t ms;

    if (!dlock__uri_lease_given(u) &&
        dlock_uri_param(u, "session_timeout") != NULL &&
        dlock_uri_duration(u, "session_timeout", u->lease_ms, &ms, ignored,
                           sizeof ignored) == DLOCK_OK &&
        ms > 0)
        u->lease_ms = ms;
}

int dlock__uri_lookup(const char *uri, struct dlock_uri **u,
                      const struct dlock_backend **b,
                      const struct dlock_mode **m, char *err, size_t errlen)
{
    char text[DLOCK__URI_MAX + 1];
    int rc;

    *u = NULL;
    rc = dlock__resolve_uri(uri, text, sizeof text, err, errlen);
    if (rc == DLOCK_OK)
        rc = dlock__uri_parse(u, text, strlen(text), err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__backend_get((*u)->scheme, b, err, errlen);
    if (rc == DLOCK_OK && (rc = dlock__uri_check_params(*u, (*b)->params, err,
                                                        errlen)) == DLOCK_OK) {
        lease_follows_session(*u);
        rc = dlock__mode_pick(*b, *u, m, err, errlen);
    }
    if (rc != DLOCK_OK) {
        dlock__uri_free(*u);
        *u = NULL;
    }
    return rc;
}

int dlock_backend_modes(const char *uri, dlock_mode_info *out, size_t cap,
                        size_t *n, char *err, size_t errlen)
{
    const struct dlock_backend *b;
    const struct dlock_mode *chosen;
    struct dlock_uri *u;
    char raw[DLOCK__ERRMSG_MAX] = "";
    size_t i;
    int rc;

    if (n == NULL || (out == NULL && cap > 0))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "modes: n and out are required");
    *n = 0;
    for (i = 0; i < cap; i++)
        if (out[i].version == 0 || out[i].version > DLOCK_MODE_INFO_VERSION)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "modes: out[%zu].version %u not in 1..%d "
                                "(initialise with DLOCK_MODE_INFO_INIT)",
                                i, out[i].version, DLOCK_MODE_INFO_VERSION);
    rc = dlock__uri_lookup(uri, &u, &b, &chosen, raw, sizeof raw);
    if (rc != DLOCK_OK) {
        dlock__redact(err, errlen, raw, NULL);
        return rc;
    }
    for (i = 0; b->modes[i] != NULL; i++) {
        if (i < cap) {
            out[i].scheme = b->scheme;
            out[i].mode = b->modes[i]->name;
            out[i].summary = b->modes[i]->summary != NULL
                                 ? b->modes[i]->summary
                                 : "";
            out[i].caps = b->modes[i]->caps;
            out[i].chosen = b->modes[i] == chosen;
            out[i].backend_summary = b->summary != NULL ? b->summary : "";
        }
    }
    *n = i;
    dlock__uri_free(u);
    return DLOCK_OK;
}

/* The bench's methods of a mode: the slot, NULL before version 5 (6 for
 * server_cpu). */
enum bench_slot { BENCH_FLOOR, BENCH_FENCE, BENCH_FORGET, BENCH_FLOOR_WAIT,
                  BENCH_SERVER_CPU };

/* What floor_wait takes besides the name. */
struct bench_wait {
    uint32_t wait_ms;
    int (*go_on)(void *arg, int held);
    void *arg;
};

/* One frame for every bench method: check the arguments, find the mode,
 * refuse a slot it lacks, call it between global init and shutdown, and
 * hide the URI's password in the message. w: floor_wait's, else NULL. */
static int bench_call(enum bench_slot which, const char *uri,
                      const char *const *names, uint32_t n, uint64_t *ns_out,
                      const struct bench_wait *w, char *err, size_t errlen)
{
    static const char *const what[] = {"floor", "fence", "forget",
                                       "floor_wait", "server_cpu"};
    const struct dlock_backend *b;
    const struct dlock_mode *m;
    struct dlock_uri *u = NULL;
    char raw[DLOCK__ERRMSG_MAX] = "";
    bool have;
    int rc;

    const char *name = names != NULL && n > 0 ? names[0] : NULL;

    if (which == BENCH_FLOOR_WAIT &&
        (name == NULL || name[0] == '\0' || w->go_on == NULL ||
         w->wait_ms == 0))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "floor_wait: name, go_on and wait_ms > 0 are "
                            "required");
    if (which == BENCH_SERVER_CPU && ns_out == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "server_cpu: ns_out is required");
    if (which != BENCH_SERVER_CPU && (name == NULL || name[0] == '\0' ||
        ((which == BENCH_FLOOR || which == BENCH_FENCE) && ns_out == NULL)))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "%s: name%s required", what[which],
                            which != BENCH_FORGET ? ", n and ns_out are"
                                                  : "s and n are");
    for (uint32_t i = 1; which == BENCH_FORGET && i < n; i++)
        if (names[i] == NULL || names[i][0] == '\0')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "forget: names[%u] is empty", i);
    rc = dlock__uri_lookup(uri, &u, &b, &m, raw, sizeof raw);
    if (rc == DLOCK_OK) {
        /* A version 2 to 4 mode ends before fence_floor, forget and
         * floor_wait. */
        have = which == BENCH_FLOOR    ? m->floor != NULL
               : b->version < 5        ? false
               : which == BENCH_FENCE  ? m->fence_floor != NULL
               : which == BENCH_FORGET ? m->forget != NULL
               : which == BENCH_FLOOR_WAIT ? m->floor_wait != NULL
               : b->version < 6        ? false
                                       : m->server_cpu != NULL;
        if (!have)
            rc = dlock_errorf(raw, sizeof raw, DLOCK_EUNSUPPORTED,
                              "%s: %s mode %s has %s", what[which],
                              b->scheme, m->name,
                              which == BENCH_FLOOR ? "no raw floor"
                              : which == BENCH_FENCE
                                  ? "no fence apart from its lock"
                              : which == BENCH_FORGET
                                  ? "no way to forget a name"
                              : which == BENCH_FLOOR_WAIT
                                  ? "no waiting request"
                                  : "no count of its server's CPU");
    }
    if (rc == DLOCK_OK && (rc = dlock_global_init()) == DLOCK_OK) {
        if (which == BENCH_FLOOR)
            rc = m->floor(u, name, n, ns_out, raw, sizeof raw);
        else if (which == BENCH_FENCE)
            rc = m->fence_floor(m, u, name, n, ns_out, raw, sizeof raw);
        else if (which == BENCH_FORGET)
            rc = m->forget(m, u, names, n, raw, sizeof raw);
        else if (which == BENCH_SERVER_CPU)
            rc = m->server_cpu(m, u, ns_out, raw, sizeof raw);
        else
            rc = m->floor_wait(m, u, name, w->wait_ms, w->go_on, w->arg, raw,
                               sizeof raw);
        dlock_global_shutdown();
    }
    if (rc != DLOCK_OK)
        dlock__redact(err, errlen, raw, u != NULL ? u->password : NULL);
    dlock__uri_free(u);
    return rc;
}

int dlock_bench_floor(const char *uri, const char *name, uint32_t n,
                      uint64_t *ns_out, char *err, size_t errlen)
{
    return bench_call(BENCH_FLOOR, uri, &name, n, ns_out, NULL, err, errlen);
}

int dlock_bench_fence(const char *uri, const char *name, uint32_t n,
                      uint64_t *ns_out, char *err, size_t errlen)
{
    return bench_call(BENCH_FENCE, uri, &name, n, ns_out, NULL, err, errlen);
}

int dlock_bench_floor_wait(const char *uri, const char *name,
                           uint32_t wait_ms, int (*go_on)(void *arg, int held),
                           void *arg, char *err, size_t errlen)
{
    const struct bench_wait w = {wait_ms, go_on, arg};

    return bench_call(BENCH_FLOOR_WAIT, uri, &name, 1, NULL, &w, err, errlen);
}

int dlock_bench_forget(const char *uri, const char *const *names, size_t n,
                       char *err, size_t errlen)
{
    if (n > UINT32_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "forget: at most %u names at once", UINT32_MAX);
    return bench_call(BENCH_FORGET, uri, names, (uint32_t)n, NULL, NULL, err,
                      errlen);
}

int dlock_bench_server_cpu(const char *uri, uint64_t *ns_out, char *err,
                           size_t errlen)
{
    return bench_call(BENCH_SERVER_CPU, uri, NULL, 0, ns_out, NULL, err,
                      errlen);
}
