/*
 * harness.c: the shared helpers of the conformance and fault suites.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char uri_buf[4096];
static char scratch[256];
static char tmp_dir[256];
static char extra_buf[4096 + 512];
static char name_buf[256];
static unsigned name_serial;

static void rm_rf(const char *dir)
{
    char cmd[600];
    if (dir[0] == '\0')
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "harness: could not remove %s\n", dir);
}

/* Copy src to dst replacing $NAME by getenv("NAME"). */
static void expand(char *dst, size_t cap, const char *src)
{
    size_t n = 0;

    while (*src != '\0' && n + 1 < cap) {
        if (*src == '$') {
            char var[128];
            size_t k = 0;
            src++;
            while ((*src == '_' || (*src >= 'A' && *src <= 'Z') ||
                    (*src >= '0' && *src <= '9')) &&
                   k + 1 < sizeof var)
                var[k++] = *src++;
            var[k] = '\0';
            const char *val = getenv(var);
            if (val == NULL) {
                fprintf(stderr, "harness: $%s is not set (run under "
                                "tests/servers/with-servers.sh)\n",
                        var);
                exit(2);
            }
            n += (size_t)snprintf(dst + n, cap - n, "%s", val);
            if (n >= cap)
                n = cap - 1;
        } else {
            dst[n++] = *src++;
        }
    }
    dst[n] = '\0';
}

const char *h_setup(int argc, char **argv)
{
    const char *uri = getenv("DLOCK_TEST_URI");
    char raw[4096];

    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--uri") == 0)
            uri = argv[i + 1];
    if (uri == NULL || uri[0] == '\0') {
        fprintf(stderr, "usage: %s --uri URI\n", argv[0]);
        exit(2);
    }
    snprintf(scratch, sizeof scratch, "/tmp/dlock-test-XXXXXX");
    if (mkdtemp(scratch) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    if (strstr(uri, "@TMPDIR@") != NULL) {
        snprintf(tmp_dir, sizeof tmp_dir, "%s/locks", scratch);
        /* file:// makes lock files, not their directory. */
        if (mkdir(tmp_dir, 0700) != 0) {
            perror("mkdir");
            exit(2);
        }
        const char *at = strstr(uri, "@TMPDIR@");
        snprintf(raw, sizeof raw, "%.*s%s%s", (int)(at - uri), uri, tmp_dir,
                 at + 8);
    } else {
        snprintf(raw, sizeof raw, "%s", uri);
    }
    expand(uri_buf, sizeof uri_buf, raw);
    /* Tests hand the URI to children and to `dlock`. */
    setenv("DLOCK_URI", uri_buf, 1);
    return uri_buf;
}

void h_cleanup(void)
{
    rm_rf(scratch);
}

const char *h_scratch(void)
{
    return scratch;
}

const char *h_uri_with(const char *params)
{
    snprintf(extra_buf, sizeof extra_buf, "%s%c%s", uri_buf,
             strchr(uri_buf, '?') != NULL ? '&' : '?', params);
    return extra_buf;
}

const char *h_name(const char *prefix)
{
    snprintf(name_buf, sizeof name_buf, "%s-%ld-%u", prefix, (long)getpid(),
             ++name_serial);
    return name_buf;
}

dlock_client *h_client(const char *uri)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, uri, NULL);

    if (rc != DLOCK_OK) {
        fprintf(stderr, "harness: open %s: %s\n", uri,
                dlock_client_errmsg(c));
        dlock_client_close(c);
        return NULL;
    }
    return c;
}

dlock_lock *h_lock(dlock_client *c, const char *name, uint32_t lease_ms,
                   uint32_t flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease_ms;
    o.flags = flags;
    if (dlock_lock_new(&lk, c, name, &o) != DLOCK_OK)
        fprintf(stderr, "harness: lock_new: %s\n", dlock_client_errmsg(c));
    return lk;
}

dlock_lock *h_permit(dlock_client *c, const char *name, uint32_t lease_ms,
                     uint32_t permits)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease_ms;
    o.permits = permits;
    if (dlock_lock_new(&lk, c, name, &o) != DLOCK_OK)
        fprintf(stderr, "harness: lock_new: %s\n", dlock_client_errmsg(c));
    return lk;
}

uint32_t h_caps(dlock_client *c)
{
    dlock_info info = DLOCK_INFO_INIT;
    return dlock_client_info(c, &info) == DLOCK_OK ? info.caps : 0;
}

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(uint32_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

uint64_t h_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

pid_t h_spawn_args(const char *role, const char *const *args)
{
    const char *argv[16];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    size_t k = 0;
    pid_t pid;

    if (n <= 0)
        return -1;
    self[n] = '\0';
    argv[k++] = self;
    argv[k++] = "--uri";
    argv[k++] = uri_buf;
    argv[k++] = "--child";
    argv[k++] = role;
    for (size_t i = 0; args[i] != NULL && k < 15; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execv(self, (char *const *)argv);
        perror("exec");
        _exit(127);
    }
    return pid;
}

pid_t h_spawn(const char *role, const char *a1, const char *a2,
              const char *a3)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    pid_t pid;

    if (n <= 0)
        return -1;
    self[n] = '\0';
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execl(self, self, "--uri", uri_buf, "--child", role, a1, a2, a3,
              (char *)NULL);
        perror("exec");
        _exit(127);
    }
    return pid;
}

void h_child_dispatch(int argc, char **argv, const struct h_role *roles)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--child") != 0)
            continue;
        for (const struct h_role *r = roles; r->name != NULL; r++)
            if (strcmp(r->name, argv[i + 1]) == 0) {
                /* The parent already expanded the URI. */
                for (int k = 1; k + 1 < argc; k++)
                    if (strcmp(argv[k], "--uri") == 0)
                        snprintf(uri_buf, sizeof uri_buf, "%s", argv[k + 1]);
                setenv("DLOCK_URI", uri_buf, 1);
                exit(r->run(argv + i + 2));
            }
        fprintf(stderr, "harness: no child role '%s'\n", argv[i + 1]);
        exit(2);
    }
}

int h_wait(pid_t pid)
{
    int status;

    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

void h_gate_init(struct h_gate *g)
{
    if (pipe(g->fd) != 0) {
        perror("pipe");
        exit(2);
    }
}

void h_gate_open(struct h_gate *g)
{
    char b = 1;
    if (write(g->fd[1], &b, 1) != 1)
        perror("gate");
}

bool h_gate_wait(struct h_gate *g, uint32_t timeout_ms)
{
    struct pollfd p = {g->fd[0], POLLIN, 0};
    char b;

    if (poll(&p, 1, (int)timeout_ms) != 1)
        return false;
    return read(g->fd[0], &b, 1) == 1;
}

void h_gate_close(struct h_gate *g)
{
    close(g->fd[0]);
    close(g->fd[1]);
}

bool h_append(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    size_t n = strlen(text);
    bool ok = fd >= 0 && write(fd, text, n) == (ssize_t)n;

    if (fd >= 0)
        close(fd);
    return ok;
}

/* ---- network faults and descriptors -------------------------------------- */

uint16_t h_uri_port(const char *u)
{
    const char *a = strstr(u, "://"), *end, *colon;
    unsigned long port;

    if (a == NULL)
        return 0;
    a += 3;
    end = a + strcspn(a, "/?");
    if (memchr(a, ',', (size_t)(end - a)) != NULL)
        return 0; /* several hosts */
    for (const char *at = a; at < end; at++)
        if (*at == '@')
            a = at + 1;
    colon = NULL;
    for (const char *p = a; p < end; p++)
        if (*p == ':')
            colon = p;
    if (colon == NULL || (a < end && *a == '[' && colon < strchr(a, ']')))
        return 0;
    port = strtoul(colon + 1, NULL, 10);
    return port > 0 && port < 65536 ? (uint16_t)port : 0;
}

/* The socket inodes of pid's descriptors, up to cap. */
static size_t socket_inodes(pid_t pid, unsigned long *out, size_t cap)
{
    char dir[64], link[64], path[320];
    struct dirent *e;
    size_t n = 0;
    DIR *d;

    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < cap) {
        ssize_t len;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%lu]", &out[n]) == 1)
            n++;
    }
    closedir(d);
    return n;
}

int h_cut_connections(pid_t pid, uint16_t port)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    unsigned long inodes[512];
    size_t ni = socket_inodes(pid, inodes, 512);
    char cmd[4096];
    size_t used;
    int cut = 0;

    /* One `ss -K` for all of them: cut one by one (a fork and exec each),
     * the process would reconnect over a socket not cut yet, and that one
     * would end after the caller thinks the fault is over. */
    used = (size_t)snprintf(cmd, sizeof cmd,
                            "ss -K -tn '( dport = :%u and ( ", port);
    for (size_t t = 0; t < 2; t++) {
        char line[512];
        FILE *f = fopen(tables[t], "r");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof line, f) != NULL) {
            char local[64], remote[64];
            unsigned lport, rport, st;
            unsigned long inode;
            char *lc, *rc;
            if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*s %*s %lu",
                       local, remote, &st, &inode) != 4 || st != 1)
                continue;
            lc = strrchr(local, ':');
            rc = strrchr(remote, ':');
            if (lc == NULL || rc == NULL ||
                sscanf(lc + 1, "%x", &lport) != 1 ||
                sscanf(rc + 1, "%x", &rport) != 1 || rport != port)
                continue;
            for (size_t i = 0; i < ni; i++) {
                if (inodes[i] != inode || used + 48 > sizeof cmd)
                    continue;
                used += (size_t)snprintf(cmd + used, sizeof cmd - used,
                                         "%ssport = :%u", cut ? " or " : "",
                                         lport);
                cut++;
            }
        }
        fclose(f);
    }
    if (cut == 0)
        return 0;
    snprintf(cmd + used, sizeof cmd - used, " ) )' >/dev/null");
    return system(cmd) == 0 ? cut : -1;
}

int h_shutdown_connections(uint16_t port)
{
    struct dirent *e;
    int n = 0;
    DIR *d = opendir("/proc/self/fd");

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        char *endp;
        long fd = strtol(e->d_name, &endp, 10);
        uint16_t p;
        if (e->d_name[0] == '.' || *endp != '\0' || fd == dirfd(d) ||
            getpeername((int)fd, (struct sockaddr *)&sa, &len) != 0)
            continue;
        if (sa.ss_family == AF_INET)
            p = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        else if (sa.ss_family == AF_INET6)
            p = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        else
            continue;
        if (p == port && shutdown((int)fd, SHUT_RDWR) == 0)
            n++;
    }
    closedir(d);
    return n;
}

int h_foreign_fds(pid_t pid, const int *keep, size_t n, char *out,
                  size_t cap)
{
    char dir[64], link[256], path[320];
    struct dirent *e;
    size_t used = 0;
    int count = 0;
    DIR *d;

    if (cap > 0)
        out[0] = '\0';
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    if ((d = opendir(dir)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char *endp;
        long fd = strtol(e->d_name, &endp, 10);
        bool kept = fd <= 2;
        ssize_t len;
        if (e->d_name[0] == '.' || *endp != '\0')
            continue;
        for (size_t i = 0; i < n; i++)
            kept |= keep[i] == fd;
        if (kept)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue; /* closed meanwhile: the child's own, short-lived */
        link[len] = '\0';
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%ld -> %s\n",
                                     fd, link);
        count++;
    }
    closedir(d);
    return count;
}
