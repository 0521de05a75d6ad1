/*
 * fileio.c: atomic whole-file writes and whole-file reads, shared by
 * safetensors checkpoints, token caches, JSON results and plots.
 *
 * A write goes to "PATH.tmp.<pid>" in PATH's own folder (rename is atomic
 * only within one file system), is flushed and fsync'ed, then renamed over
 * PATH; the folder is fsync'ed afterwards so the rename itself survives a
 * crash. On any error the temporary file is removed and PATH is untouched.
 *
 * Non-goals: locking between processes writing the same PATH (the last
 * rename wins, which is what caches want), Windows.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fileio.h"

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void release(xsa_atomic_file *af)
{
    free(af->path);
    free(af->tmp_path);
    af->fp = NULL;
    af->path = NULL;
    af->tmp_path = NULL;
}

int xsa_atomic_open(xsa_atomic_file *af, const char *path)
{
    af->fp = NULL;
    af->path = NULL;
    af->tmp_path = NULL;
    if (!path || !*path) return xsa_error("atomic write: empty path");
    size_t n = strlen(path) + 32;
    af->path = dupstr(path);
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        release(af);
        return xsa_error("%s: out of memory", path);
    }
    snprintf(af->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    /* A stale temporary of a crashed process with our pid is simply
     * overwritten: nobody else can own that name. */
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        xsa_error("%s: cannot create %s: %s", path, af->tmp_path, strerror(e));
        release(af);
        return -1;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        unlink(af->tmp_path);
        xsa_error("%s: cannot open a stream: %s", path, strerror(e));
        release(af);
        return -1;
    }
    return 0;
}

/* The folder holding `path` ("." when there is no slash), fsync'ed so the
 * rename is durable. Best effort: some file systems refuse fsync on a
 * directory, and the data is already safe in the file. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t len = (size_t)(slash - path);
        if (len >= sizeof dir) return;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

int xsa_atomic_commit(xsa_atomic_file *af)
{
    if (!af->fp) {
        release(af);
        return xsa_error("atomic write: commit without a successful open");
    }
    const char *what = NULL;
    int e = 0;
    errno = 0;
    if (ferror(af->fp)) {
        what = "write failed";
        e = errno;
    } else if (fflush(af->fp) != 0) {
        what = "write failed";
        e = errno;
    } else if (fsync(fileno(af->fp)) != 0) {
        what = "fsync failed";
        e = errno;
    }
    if (fclose(af->fp) != 0 && !what) {
        what = "close failed";
        e = errno;
    }
    af->fp = NULL;
    if (!what && rename(af->tmp_path, af->path) != 0) {
        what = "rename failed";
        e = errno;
    }
    if (what) {
        unlink(af->tmp_path);
        if (e)
            xsa_error("%s: %s: %s (the file was left unchanged)", af->path, what, strerror(e));
        else
            xsa_error("%s: %s (the file was left unchanged)", af->path, what);
        release(af);
        return -1;
    }
    sync_dir(af->path);
    release(af);
    return 0;
}

void xsa_atomic_abort(xsa_atomic_file *af)
{
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) unlink(af->tmp_path);
    release(af);
}

int xsa_atomic_write(const char *path, const void *data, size_t n)
{
    xsa_atomic_file af;
    if (xsa_atomic_open(&af, path) != 0) return -1;
    if (n > 0 && fwrite(data, 1, n, af.fp) != n) {
        int e = errno;
        xsa_atomic_abort(&af);
        return xsa_error("%s: write failed: %s (the file was left unchanged)", path,
                         strerror(e));
    }
    return xsa_atomic_commit(&af);
}

int xsa_open_regular(const char *path)
{
    if (!path || !*path) return xsa_error("read: empty path");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever; we refuse it below instead. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return xsa_error("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return xsa_error("%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        /* a pipe, /dev/zero or a terminal has no end to read up to */
        return xsa_error("%s: %s", path, S_ISDIR(st.st_mode) ? strerror(EISDIR)
                         : S_ISFIFO(st.st_mode) ? "is a pipe (FIFO), not a regular file"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "is a device, not a regular file"
                         : "not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

char *xsa_read_file(const char *path, size_t *n)
{
    if (n) *n = 0;
    int fd = xsa_open_regular(path);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        int e = errno;
        close(fd);
        xsa_error("%s: %s", path, strerror(e));
        return NULL;
    }
    /* The size from fstat is only a first guess: the loop also copes with a
     * file that grows while we read. */
    struct stat st;
    size_t cap = 4096;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        if ((uint64_t)st.st_size >= (uint64_t)(SIZE_MAX / 2)) {
            fclose(fp);
            xsa_error("%s: %lld bytes is too large to read into memory", path, (long long)st.st_size);
            return NULL;
        }
        cap = (size_t)st.st_size + 1;
    }
    char *buf = malloc(cap);
    size_t len = 0;
    if (!buf) {
        fclose(fp);
        xsa_error("%s: out of memory reading %zu bytes", path, cap);
        return NULL;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                fclose(fp);
                xsa_error("%s: too large to read into memory", path);
                return NULL;
            }
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(fp);
                xsa_error("%s: out of memory reading %zu bytes", path, ncap);
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, fp);
        len += got;
        if (got == 0) break;
    }
    if (ferror(fp)) {
        int e = errno;
        free(buf);
        fclose(fp);
        xsa_error("%s: read error: %s", path, strerror(e));
        return NULL;
    }
    fclose(fp);
    buf[len] = '\0';
    if (n) *n = len;
    return buf;
}

void xsa_format_double(char *buf, size_t n, double v)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

int xsa_file_crc64(const char *path, uint64_t *crc, uint64_t *size)
{
    int fd = xsa_open_regular(path);
    if (fd < 0) return -1;
    enum { PIECE = 1 << 20 };
    unsigned char *buf = malloc(PIECE);
    if (!buf) {
        close(fd);
        xsa_error("%s: out of memory", path);
        return -1;
    }
    uint64_t c = 0, total = 0;
    for (;;) {
        ssize_t got = read(fd, buf, PIECE);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            xsa_error("%s: read error: %s", path, strerror(e));
            return -1;
        }
        if (got == 0) break;
        c = lzma_crc64(buf, (size_t)got, c);
        total += (uint64_t)got;
    }
    free(buf);
    close(fd);
    *crc = c;
    *size = total;
    return 0;
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void xsa_free_names(char **names, size_t n)
{
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The sorted names of dir's entries of one kind: regular files, or folders
 * (want_dirs). Links are neither: a record folder holds what it holds. */
static char **list_entries(const char *dir, size_t max, int want_dirs, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        xsa_error("%s: cannot open folder: %s", dir, strerror(errno));
        return NULL;
    }
    size_t cap = 16, len = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!(want_dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) continue;
        if (len == max) {
            xsa_free_names(names, len);
            closedir(d);
            xsa_error("%s: more than %zu %s", dir, max, want_dirs ? "folders" : "files");
            return NULL;
        }
        if (len == cap) {
            char **grown = realloc(names, 2 * cap * sizeof *names);
            if (!grown) break;
            names = grown;
            cap *= 2;
        }
        if (!(names[len] = strdup(e->d_name))) break;
        len++;
    }
    int failed = names == NULL || e != NULL;
    closedir(d);
    if (failed) {
        xsa_free_names(names, len);
        xsa_error("%s: out of memory listing the folder", dir);
        return NULL;
    }
    qsort(names, len, sizeof *names, by_bytes);
    *n = len;
    return names;
}

char **xsa_list_files(const char *dir, size_t max, size_t *n)
{
    return list_entries(dir, max, 0, n);
}

char **xsa_list_dirs(const char *dir, size_t max, size_t *n)
{
    return list_entries(dir, max, 1, n);
}
