/*
 * module.c: finding and loading a server backend's module (module.h).
 * Calls only base.h's error helper and the dynamic loader; registry.c
 * decides when to load and registers the table it gets back.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "module.h"

/* A Debian package per module, named after the library's. */
#define PACKAGE_PREFIX "libdlock0-"

typedef const struct dlock_backend *(*entry_fn)(void);

const struct dlock__module *dlock__module_for(const char *scheme)
{
    for (const struct dlock__module *m = dlock__modules; m->name != NULL; m++)
        for (size_t i = 0; m->schemes[i] != NULL; i++)
            if (strcasecmp(m->schemes[i], scheme) == 0)
                return m;
    return NULL;
}

/* dlopen() and dlsym() of one path; on failure why holds the reason. */
static int open_one(const char *path, const struct dlock_backend **out,
                    char *why, size_t cap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    entry_fn entry;
    const char *e;

    if (h == NULL) {
        e = dlerror();
        snprintf(why, cap, "%s", e != NULL ? e : path);
        return -1;
    }
    /* POSIX's way to turn dlsym's object pointer into a function. */
    *(void **)&entry = dlsym(h, "dlock_module_backend");
    if (entry == NULL || (*out = entry()) == NULL) {
        snprintf(why, cap, "%s: not a dlock module (no dlock_module_backend)",
                 path);
        dlclose(h);
        return -1;
    }
    return 0;
}

/* The path of file in the directory this library was loaded from. */
static int beside_library(const char *file, char *out, size_t cap)
{
    Dl_info info;
    const char *slash;
    int n;

    if (dladdr((void *)dlock__module_for, &info) == 0 ||
        info.dli_fname == NULL ||
        (slash = strrchr(info.dli_fname, '/')) == NULL)
        return -1;
    n = snprintf(out, cap, "%.*s/%s", (int)(slash - info.dli_fname),
                 info.dli_fname, file);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int dlock__module_load(const struct dlock__module *m,
                       const struct dlock_backend **out, char *err,
                       size_t errlen)
{
    const char *dir = secure_getenv("DLOCK_MODULE_DIR");
    char file[64], path[1024], why[512];
    int n;

    *out = NULL;
    snprintf(file, sizeof file, "dlock-%s.so", m->name);
    if (dir != NULL && dir[0] == '\0')
        dir = NULL;
    n = snprintf(path, sizeof path, "%s/%s",
                 dir != NULL ? dir : dlock__module_dir, file);
    if (n < 0 || (size_t)n >= sizeof path)
        return dlock_errorf(err, errlen, DLOCK_ENOBACKEND,
                            "%s module: directory %s too long", m->name,
                            dir != NULL ? "DLOCK_MODULE_DIR" : "path");
    if (open_one(path, out, why, sizeof why) == 0)
        return DLOCK_OK;
    /* Not installed: an uninstalled build has its modules beside the
     * library itself (found by address, not by run path: a sanitizer's
     * dlopen() interceptor hides the caller's run path). */
    if (dir == NULL && access(path, F_OK) != 0 && errno == ENOENT &&
        beside_library(file, path, sizeof path) == 0) {
        char why2[512];
        if (open_one(path, out, why2, sizeof why2) == 0)
            return DLOCK_OK;
    }
    return dlock_errorf(err, errlen, DLOCK_ENOBACKEND,
                        "%s:// needs the %s module, which cannot be loaded "
                        "(%s); install the package %s%s, or set "
                        "DLOCK_MODULE_DIR to the directory that has %s",
                        m->schemes[0], m->name, why, PACKAGE_PREFIX, m->name,
                        file);
}
