/*
 * secret.c: a password for the URI that never appears on the command line.
 * `--password-file FILE` (or $DLOCK_PASSWORD) is read here and put into the
 * URI given to dlock_client_open(), percent-encoded, in this process's
 * memory only: /proc/PID/cmdline shows the URI without it. The library's
 * own routes work too and need nothing of dlock: libpq's PGPASSWORD and
 * ~/.pgpass, MariaDB's MYSQL_PWD.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

#define PASSWORD_MAX 4096

/* Read FILE's first line: a regular file of ours that nobody else may
 * read, as ssh and libpq ask of theirs. */
static bool read_password_file(const char *sub, const char *path, char *out,
                               size_t cap)
{
    struct stat st;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0) {
        tool_err(sub, "--password-file: %s: %s", path, strerror(errno));
        return false;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        tool_err(sub, "--password-file: %s: not a regular file", path);
        close(fd);
        return false;
    }
    if (st.st_mode & 077) {
        tool_err(sub, "--password-file: %s: readable by others (mode %04o); "
                 "chmod 600 it", path, (unsigned)(st.st_mode & 07777));
        close(fd);
        return false;
    }
    n = read(fd, out, cap - 1);
    close(fd);
    if (n < 0 || (size_t)n == cap - 1) {
        tool_err(sub, "--password-file: %s: %s", path,
                 n < 0 ? strerror(errno) : "longer than 4095 bytes");
        return false;
    }
    out[n] = '\0';
    out[strcspn(out, "\r\n")] = '\0'; /* the first line */
    return true;
}

/* Append text percent-encoded (all but RFC 3986's unreserved) to out. */
static void pct_append(char *out, size_t *len, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL) {
            out[(*len)++] = (char)*p;
        } else {
            out[(*len)++] = '%';
            out[(*len)++] = hex[*p >> 4];
            out[(*len)++] = hex[*p & 15];
        }
    }
    out[*len] = '\0';
}

bool tool_password(const char *sub, const char *file, const char **uri,
                   char **owned)
{
    char pw[PASSWORD_MAX];
    const char *env = getenv("DLOCK_PASSWORD");
    struct tool_uri_spans sp;
    const char *u;
    size_t len = 0;
    char *out;

    *owned = NULL;
    if (file == NULL && env == NULL)
        return true;
    if (file != NULL) {
        if (!read_password_file(sub, file, pw, sizeof pw))
            return false;
    } else if (strlen(env) >= sizeof pw) {
        tool_err(sub, "DLOCK_PASSWORD: longer than 4095 bytes");
        return false;
    } else {
        strcpy(pw, env);
    }
    /* Not for what this process starts (dlock exec's COMMAND). */
    unsetenv("DLOCK_PASSWORD");
    if (pw[0] == '\0') {
        tool_err(sub, "%s: the password is empty",
                 file ? "--password-file" : "DLOCK_PASSWORD");
        return false;
    }
    u = *uri != NULL ? *uri : getenv("DLOCK_URI");
    if (u == NULL || !tool_uri_spans(u, &sp) || strncmp(u, "file:", 5) == 0) {
        tool_err(sub, "%s: the URI (--uri or $DLOCK_URI) names no server "
                 "to give a password to", file ? "--password-file"
                                               : "DLOCK_PASSWORD");
        return false;
    }
    if (sp.colon != SIZE_MAX) {
        tool_err(sub, "%s: the URI has a password already; give it in one "
                 "place", file ? "--password-file" : "DLOCK_PASSWORD");
        return false;
    }
    out = malloc(strlen(u) + 3 * strlen(pw) + 3);
    if (out == NULL) {
        tool_err(sub, "out of memory");
        return false;
    }
    /* scheme://[user]:PASSWORD@rest */
    len = sp.at != SIZE_MAX ? sp.at : sp.auth;
    memcpy(out, u, len);
    out[len++] = ':';
    out[len] = '\0';
    pct_append(out, &len, pw);
    if (sp.at == SIZE_MAX)
        out[len++] = '@';
    strcpy(out + len, u + (sp.at != SIZE_MAX ? sp.at : sp.auth));
    explicit_bzero(pw, sizeof pw);
    *uri = *owned = out;
    return true;
}
