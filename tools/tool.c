/*
 * tool.c: the helpers every subcommand shares (tool.h): exit codes for
 * dlock's errors, error messages, option values. Linked into `dlock` and
 * into its helper programs (dlock-pitfalls), so both speak alike.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

int tool_exit_for(int rc)
{
    switch ((dlock_error_code)rc) {
    case DLOCK_OK:
        return 0;
    case DLOCK_EBUSY:
    case DLOCK_ETIMEDOUT:
    case DLOCK_EDEADLK:
        return EXIT_CONFLICT;
    case DLOCK_EINVAL:
    case DLOCK_ENOBACKEND:
    case DLOCK_EUNSUPPORTED:
        return EXIT_USAGE;
    case DLOCK_ECONNECT:
    case DLOCK_EREPLICAS:
        return EXIT_UNAVAILABLE;
    case DLOCK_EAUTH:
        return EXIT_NOPERM;
    case DLOCK_ENOENT:
        return EXIT_NOINPUT;
    case DLOCK_EACCES:
        return EXIT_CANTCREAT;
    case DLOCK_ELOST:
    case DLOCK_ENOTOWNER:
        return EXIT_LOST;
    case DLOCK_ERROR:
    case DLOCK_ENOTHELD:
    case DLOCK_ENOMEM:
    case DLOCK_ECLOSED:
    case DLOCK_ECANCELED:
        return EXIT_SOFTWARE;
    }
    return EXIT_SOFTWARE;
}

void tool_err(const char *sub, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "dlock%s%s: ", sub ? " " : "", sub ? sub : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

bool tool_duration(const char *sub, const char *opt, const char *text,
                   uint32_t *out)
{
    if (text == NULL) {
        tool_err(sub, "%s: needs a value (e.g. 250ms, 5s, 2m)", opt);
        return false;
    }
    if (dlock_parse_duration(text, out) != DLOCK_OK) {
        tool_err(sub,
                 "%s: '%s' is not a duration (expected a number with ms, "
                 "s, m or h, e.g. 250ms, 5s, 2m; or 0)",
                 opt, text);
        return false;
    }
    return true;
}

bool tool_uint(const char *sub, const char *opt, const char *text,
               unsigned long min, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long v;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        tool_err(sub, "%s: expected a whole number from %lu to %lu", opt,
                 min, max);
        return false;
    }
    v = strtoul(text, &end, 10);
    if (*end != '\0' || v < min || v > max) {
        tool_err(sub, "%s: '%s' is not a whole number from %lu to %lu", opt,
                 text, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool tool_uri(const char *sub, const char **uri, const char *text)
{
    if (text[0] == '\0') {
        tool_err(sub, "--uri: empty (expected a URI such as file:///dir or "
                      "redis://host; leave --uri out for the default)");
        return false;
    }
    if (*uri != NULL) {
        /* Not quoted: a URI may carry a password. */
        tool_err(sub, "--uri given twice: give one");
        return false;
    }
    *uri = text;
    return true;
}

/* argv[*i] is "OPT VALUE" or "OPT=VALUE": 1 and *value; 0 if it is not
 * opt; -1 (printed) if the value is missing. */
static int opt_value(const char *sub, const char *opt, int argc, char **argv,
                     int *i, const char **value)
{
    size_t n = strlen(opt);

    if (strncmp(argv[*i], opt, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 == argc) {
        tool_err(sub, "%s: needs a value", opt);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int tool_uri_arg(const char *sub, int argc, char **argv, int *i,
                 const char **uri)
{
    const char *v;
    int r = opt_value(sub, "--uri", argc, argv, i, &v);

    return r <= 0 ? r : tool_uri(sub, uri, v) ? 1 : -1;
}

int tool_pwfile_arg(const char *sub, int argc, char **argv, int *i,
                    const char **file)
{
    const char *v;
    int r = opt_value(sub, "--password-file", argc, argv, i, &v);

    if (r <= 0)
        return r;
    if (v[0] == '\0' || *file != NULL) {
        tool_err(sub, "--password-file: %s", v[0] ? "given twice" : "empty");
        return -1;
    }
    *file = v;
    return 1;
}

bool tool_uri_spans(const char *uri, struct tool_uri_spans *s)
{
    const char *p = uri != NULL ? strstr(uri, "://") : NULL;
    const char *c;

    if (p == NULL)
        return false;
    s->auth = (size_t)(p + 3 - uri);
    s->end = s->auth + strcspn(uri + s->auth, "/?#");
    s->at = s->colon = SIZE_MAX;
    for (size_t i = s->auth; i < s->end; i++)
        if (uri[i] == '@')
            s->at = i;
    if (s->at != SIZE_MAX &&
        (c = memchr(uri + s->auth, ':', s->at - s->auth)) != NULL)
        s->colon = (size_t)(c - uri);
    return true;
}

bool tool_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}
