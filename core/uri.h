/*
 * uri.h: core's URI parser (uri.c, uri_text.c, uri_params.c). Above base.h,
 * below everything that reads a URI.
 */
#ifndef DLOCK_CORE_URI_H
#define DLOCK_CORE_URI_H

#include "base.h"

/* Defaults of the parameters core reads from every URI. */
#define DLOCK__DEFAULT_LEASE_MS 30000u
#define DLOCK__DEFAULT_TIMEOUT_MS 5000u
#define DLOCK__URI_MAX 8192 /* bytes of URI text accepted */

/*
 * Parse text[0..len) (need not be NUL-terminated; a NUL byte inside is an
 * error). On DLOCK_OK *out is a new URI to free with dlock__uri_free(). On
 * failure *out is NULL and err names the bad part and what was expected,
 * with any password shown as ***. Allocates; never reads past len.
 */
int dlock__uri_parse(struct dlock_uri **out, const char *text, size_t len,
                     char *err, size_t errlen);
void dlock__uri_free(struct dlock_uri *u);
/* Was lease= written in u (from dlock__uri_parse), or is lease_ms the
 * default? */
bool dlock__uri_lease_given(const struct dlock_uri *u);

/*
 * Reject parameters the backend does not read: allowed is the backend's
 * NULL-terminated list (NULL: none allowed). The message lists the accepted
 * names.
 */
int dlock__uri_check_params(const struct dlock_uri *u,
                            const char *const *allowed, char *err,
                            size_t errlen);

#endif /* DLOCK_CORE_URI_H */
