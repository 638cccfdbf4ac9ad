/*
 * retry.c: the backoff rule of core's retry loop. Full jitter (AWS
 * architecture blog, "Exponential Backoff And Jitter"): the delay is uniform
 * in [min, min(max, min * 2^attempt)], which spreads contending clients out
 * better than equal or decorrelated jitter at the same mean.
 */
#include "base.h"

uint32_t dlock__backoff_ms(uint32_t min_ms, uint32_t max_ms, unsigned attempt)
{
    uint64_t cap = min_ms;

    if (max_ms < min_ms)
        max_ms = min_ms;
    /* Doubling from at least 1 ms, stopping at max: no overflow. */
    for (unsigned i = 0; i < attempt && cap < max_ms; i++)
        cap = cap > 0 ? cap * 2 : 1;
    if (cap > max_ms)
        cap = max_ms;
    if (cap <= min_ms)
        return min_ms;
    return min_ms + (uint32_t)(dlock__rand64() % (cap - min_ms + 1));
}
