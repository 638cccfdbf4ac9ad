/*
 * keys.c: what the server is told of a lock name. Lock names are up to
 * 64 KiB of UTF-8; what the server stores is SHA-256(namespace || name) as
 * a BINARY(32) primary key: fixed width, and no collation can fold two
 * names together (utf8mb4's default collations equate 'a' with 'A' and
 * many emoji with each other). The name itself is kept, cut to 255 bytes,
 * in a column for people. GET_LOCK takes namespace || name as it is when
 * that has at most 64 characters (MySQL's limit; MariaDB has none) and
 * does not start with "dlock:", else "dlock:" and 58 hex digits of the
 * key, so other programs can share short names. The namespace is a plain
 * prefix: put a separator in it (namespace=app/). Names only ever travel
 * as bound parameters of prepared statements (conn.c).
 *
 * Divisions: keys; the name column; GET_LOCK names.
 */
#include <string.h>

#include "my.h"

/* The name column keeps this many bytes of the name, for people. */
#define MY_NAME_COL_MAX 255
#define MY_ULOCK_PREFIX "dlock:"

/* ---- keys ---------------------------------------------------------------- */

void dlock__my_key(const struct dlock__my_ctx *x, const char *name,
                   size_t len, uint8_t key[MY_KEY_LEN])
{
    const void *parts[2] = {x->ns, name};
    size_t lens[2] = {x->ns_len, len};

    dlock_sha256v(key, parts, lens, 2);
}

/* ---- the name column ----------------------------------------------------- */

/* At most 255 bytes, cut between characters. */
size_t dlock__my_display_len(const char *name, size_t len)
{
    if (len <= MY_NAME_COL_MAX)
        return len;
    len = MY_NAME_COL_MAX;
    while (len > 0 && ((unsigned char)name[len] & 0xc0) == 0x80)
        len--;
    return len;
}

/* ---- GET_LOCK names ------------------------------------------------------ */

static size_t my_chars(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

/*
 * namespace || name as it is when that has at most 64 characters and does
 * not start with "dlock:", else "dlock:" and the first 58 hex digits (232
 * bits) of the key. The two forms never meet, so no raw name can alias a
 * hashed one.
 */
size_t dlock__my_ulock_name(const struct dlock__my_ctx *x, const char *name,
                            size_t len, const uint8_t key[MY_KEY_LEN],
                            char out[MY_ULOCK_BUF])
{
    static const char hex[] = "0123456789abcdef";
    const size_t plen = sizeof MY_ULOCK_PREFIX - 1;
    size_t n = 0;

    if (my_chars(x->ns, x->ns_len) + my_chars(name, len) <= MY_ULOCK_CHARS) {
        memcpy(out, x->ns, x->ns_len);
        memcpy(out + x->ns_len, name, len);
        n = x->ns_len + len;
        if (n < plen || memcmp(out, MY_ULOCK_PREFIX, plen) != 0) {
            out[n] = '\0';
            return n;
        }
    }
    memcpy(out, MY_ULOCK_PREFIX, plen);
    for (n = plen; n < MY_ULOCK_CHARS; n++) {
        size_t i = (n - plen) / 2;
        out[n] = hex[(n - plen) % 2 == 0 ? key[i] >> 4 : key[i] & 15];
    }
    out[n] = '\0';
    return n;
}
