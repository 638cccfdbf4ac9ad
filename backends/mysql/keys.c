/*
 * keys.c: what the server is told of a lock name. Lock names are up to
 * 64 KiB of UTF-8; what the server stores is SHA-256(namespace || name) as
 * a BINARY(32) primary key: fixed width, and no collation can fold two
 * names together (utf8mb4's default collations equate 'a' with 'A' and
 * many emoji with each other). The name itself is kept, cut to 255 bytes,
 * in a column for people. GET_LOCK takes namespace || name as it is when
 * that has at most 64 characters (MySQL's limit) and 192 bytes (MariaDB's)
 * and does not start with "dlock:", else "dlock:" and 58 hex digits of the
 * key, so other programs can share short names. The namespace is a plain
 * prefix: put a separator in it (namespace=app/). Names only ever travel
 * as bound parameters of prepared statements (conn.c).
 *
 * A semaphore's permit slots (get_lock.c) have GET_LOCK names of their
 * own, all starting with the "dlock:" that no raw lock name can start
 * with, so no lock name and no other semaphore's slot can alias one.
 *
 * Divisions: keys (of locks and of insert's permit slots); the name
 * column; GET_LOCK names; permit slot names.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

/* The name column keeps this many bytes of the name, for people. */
/* A permit slot's name keeps namespace || name readable up to this many
 * characters: "dlock:" + a slot of 4 digits at most + "#" leave 53. */
#define MY_SLOT_NAME_CHARS (MY_ULOCK_CHARS - 6 - 4 - 1)
_Static_assert(DLOCK_PERMITS_MAX <= 10000, "slot numbers have 4 digits");
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

/*
 * Mode insert's permit slot i of a name: SHA-256("\xff" "dlock-permit",
 * i as two bytes big-endian, namespace || name). A lock's key hashes
 * namespace || name alone, which starts with 0xff only if the namespace
 * does (a name is UTF-8, where 0xff never occurs), so a slot's row and a
 * lock's row never share a key.
 */
void dlock__my_slot_key(const struct dlock__my_ctx *x, const char *name,
                        size_t len, unsigned slot, uint8_t key[MY_KEY_LEN])
{
    static const char tag[] = "\xff" "dlock-permit";
    const uint8_t be[2] = {(uint8_t)(slot >> 8), (uint8_t)slot};
    const void *parts[4] = {tag, be, x->ns, name};
    size_t lens[4] = {sizeof tag - 1, 2, x->ns_len, len};

    dlock_sha256v(key, parts, lens, 4);
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
 * namespace || name as it is when that has at most 64 characters (MySQL's
 * limit) and 192 bytes (MariaDB's: 1059 "Identifier name is too long" past
 * it, measured) and does not start with "dlock:", else "dlock:" and the first 58 hex digits (232
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

    if (my_chars(x->ns, x->ns_len) + my_chars(name, len) <= MY_ULOCK_CHARS &&
        x->ns_len + len <= MY_ULOCK_BYTES) {
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

/* ---- permit slot names --------------------------------------------------- */

/* Where a permit request starts trying slots: anywhere, so contenders
 * spread over the slots instead of all trying slot 0 first. */
unsigned dlock__my_first_slot(const struct dlock_request *req)
{
    uint64_t z = dlock_now_ns() ^ req->serial;

    z += 0x9e3779b97f4a7c15u; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (unsigned)((z ^ (z >> 31)) % req->permits);
}

/*
 * Slot i of the semaphore namespace || name is
 *     "dlock:" i "#" namespace || name      when that has <= 53 characters
 *                                           and <= 181 bytes,
 *     "dlock:" i "!" 53 hex digits of the key   otherwise,
 * i in decimal without leading zeros, so at most 64 characters. After
 * "dlock:" a run of digits ends in '#' or '!' here, and never does in
 * keys.c's hashed lock name (hex digits to the end), so the three forms
 * never meet; within a form the first '#' or '!' ends the slot number, so
 * (name, slot) pairs never meet either.
 */
size_t dlock__my_slot_name(const struct dlock__my_ctx *x, const char *name,
                           size_t len, const uint8_t key[MY_KEY_LEN],
                           unsigned slot, char out[MY_ULOCK_BUF])
{
    static const char hex[] = "0123456789abcdef";
    size_t n;

    n = (size_t)snprintf(out, MY_ULOCK_BUF, MY_ULOCK_PREFIX "%u", slot);
    if (my_chars(x->ns, x->ns_len) + my_chars(name, len) <=
            MY_SLOT_NAME_CHARS &&
        x->ns_len + len <= MY_ULOCK_BYTES - (MY_ULOCK_CHARS -
                                             MY_SLOT_NAME_CHARS)) {
        out[n++] = '#';
        memcpy(out + n, x->ns, x->ns_len);
        memcpy(out + n + x->ns_len, name, len);
        n += x->ns_len + len;
    } else {
        out[n++] = '!';
        for (size_t i = 0; i < MY_SLOT_NAME_CHARS; i++)
            out[n++] = hex[i % 2 == 0 ? key[i / 2] >> 4 : key[i / 2] & 15];
    }
    out[n] = '\0';
    return n;
}
