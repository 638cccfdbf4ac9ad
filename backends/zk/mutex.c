/*
 * mutex.c: mode mutex (the default), Apache Curator's InterProcessMutex.
 * dlock's exclusive locks and Curator's mutexes on the same path share
 * one queue and exclude each other.
 *
 * The mode is the recipe of recipe.c under Curator's mutex node name,
 * "_c_<uuid>-lock-<seq>". A dlock reader (the shared kind) names its node
 * "_c_<uuid>-__READ__lock-<seq>": Curator's mutex sorts it by its number
 * and waits for it like any contender, and dlock sees a reader, which
 * holds together with the readers before the first writer. Curator has no
 * shared mutex to match; for Curator's read/write lock use mode=rwlock.
 *
 * Permits (DLOCK_KIND_PERMIT) take a lease of Curator's
 * InterProcessSemaphoreV2 on the same path (semaphore.c, which also says
 * why this mode serves them and mode rwlock does not).
 */
#include "zk.h"

const struct zk_mode dlock__zk_mutex = {
    .base = {.name = "mutex",
             .summary = "Curator InterProcessMutex node names (lock-, "
                        "readers __READ__lock-); permits: "
                        "InterProcessSemaphoreV2",
             .caps = ZK_CAPS | DLOCK_CAP_PERMITS,
             .kinds = ZK_KINDS | DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
             .acquire = dlock__zk_sem_acquire, ZK_MODE_COMMON},
    .node_exclusive = "lock-",
    .node_shared = "__READ__lock-",
};
