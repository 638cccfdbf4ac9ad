/*
 * pitfalls_main.c: the program dlock-pitfalls, which `dlock demo pitfalls`
 * runs (from <libexecdir>/dlock/, or beside dlock in a build tree). It is
 * a program of its own because the broken recipes speak Redis and
 * ZooKeeper through hiredis and libzookeeper_mt directly, and the `dlock`
 * command, like libdlock.so, links no server's client library: those live
 * in the backend modules and here. Its hidden role __inventory-watch is
 * `dlock demo inventory`'s row on a stock in Redis (pitfalls_watch.c).
 */
#include <string.h>

#include "pitfalls.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "__inventory-watch") == 0)
        return pf_inventory_watch(argc - 1, argv + 1);
    return pf_main(argc, argv);
}
