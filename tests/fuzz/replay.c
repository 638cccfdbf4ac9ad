/*
 * replay.c: run a libFuzzer target over saved inputs, without libFuzzer.
 *
 * Usage: replay PATH...; each PATH is a file or a directory whose regular
 * files (not those of its subdirectories) are inputs. Each input is read
 * into a buffer of exactly its size, so AddressSanitizer catches a read past
 * its end, and given to LLVMFuzzerTestOneInput(). A crash or failed check
 * in the target ends the run; otherwise it prints how many inputs ran and
 * exits 0, or 1 when none ran or a path could not be read.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run one file; returns 1 if it ran, 0 if it could not be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *buf;
    size_t size;

    if (f == NULL || fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        if (f != NULL)
            fclose(f);
        return 0;
    }
    size = (size_t)st.st_size;
    /* malloc(0) may return NULL; one spare byte is never handed over. */
    buf = malloc(size > 0 ? size : 1);
    if (buf == NULL || (size > 0 && fread(buf, 1, size, f) != size)) {
        fprintf(stderr, "replay: %s: cannot read %zu bytes\n", path, size);
        free(buf);
        fclose(f);
        return 0;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    return 1;
}

/* Run every regular file of a directory; counts into *ran, *failed. */
static void replay_dir(const char *dir, size_t *ran, size_t *failed)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        (*failed)++;
        return;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(n);
        struct stat st;

        if (path == NULL) {
            (*failed)++;
            break;
        }
        snprintf(path, n, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path))
                (*ran)++;
            else
                (*failed)++;
        }
        free(path);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    size_t ran = 0, failed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            failed++;
        } else if (S_ISDIR(st.st_mode)) {
            replay_dir(argv[i], &ran, &failed);
        } else if (replay_file(argv[i])) {
            ran++;
        } else {
            failed++;
        }
    }
    printf("replay: %zu inputs ran, %zu could not be read\n", ran, failed);
    return ran > 0 && failed == 0 ? 0 : 1;
}
