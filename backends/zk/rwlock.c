/*
 * rwlock.c: mode rwlock, Apache Curator's InterProcessReadWriteLock.
 * dlock's shared and exclusive locks and Curator's read and write locks on
 * the same path share one queue: readers of both share, writers of either
 * exclude everyone.
 *
 * The mode is the recipe of recipe.c under Curator's read/write node
 * names, "_c_<uuid>-__WRIT__<seq>" and "_c_<uuid>-__READ__<seq>". Mixing
 * InterProcessMutex and InterProcessReadWriteLock on one path is not
 * supported by Curator itself: pick the mode that matches the Java side.
 */
#include "zk.h"

const struct zk_mode dlock__zk_rwlock = {
    .base = {.name = "rwlock",
             .summary = "Curator InterProcessReadWriteLock node names "
                        "(__WRIT__, __READ__)",
             .caps = ZK_CAPS, .kinds = ZK_KINDS,
             .acquire = dlock__zk_acquire, ZK_MODE_COMMON},
    .node_exclusive = "__WRIT__",
    .node_shared = "__READ__",
};
