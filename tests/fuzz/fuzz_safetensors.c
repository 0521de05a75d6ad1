/*
 * fuzz_safetensors.c: libFuzzer harness for the safetensors reader
 * (xsa_st_load in core/safetensors.c) on arbitrary file contents.
 *
 * Why: checkpoints come from disk and from other tools; the loader promises
 * to validate the header length, the JSON header, dtypes, shapes and
 * offsets and to report "PATH: problem" rather than crash. The reader takes
 * a path only, so the bytes go into a memfd opened as /proc/self/fd/N
 * (no disk I/O, a regular file to fstat). A file that loads must have
 * consistent tensors (contiguous, numel matching its shape, found by name)
 * and must save and load again (into /dev/shm, or $TMPDIR) to the same
 * names, metadata and bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../core/xsa.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int mfd = -1;
static char mpath[64];
static char save_path[512];

#define REQUIRE(cond, what)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz_safetensors: %s failed: %s (%s)\n", (what), #cond, \
                    xsa_last_error());                                        \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mfd = memfd_create("fuzz_safetensors", 0);
    if (mfd < 0) {
        perror("memfd_create");
        exit(2);
    }
    snprintf(mpath, sizeof mpath, "/proc/self/fd/%d", mfd);
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(save_path, sizeof save_path, "%s/fuzz_safetensors.%ld.safetensors",
             dir ? dir : "/tmp", (long)getpid());
    return 0;
}

static size_t nbytes(const xsa_tensor *t)
{
    return (size_t)xsa_tensor_numel(t) * xsa_dtype_size(t->dtype);
}

static const void *bytes_of(const xsa_tensor *t)
{
    return (const char *)t->storage->data + t->offset * (int64_t)xsa_dtype_size(t->dtype);
}

static void check_loaded(const xsa_st_file *f)
{
    REQUIRE(f->n >= 0 && f->n_meta >= 0, "counts");
    for (int i = 0; i < f->n; i++) {
        const xsa_tensor *t = f->tensors[i];
        REQUIRE(t && f->names[i], "tensor and name");
        REQUIRE(t->dtype == XSA_FLOAT32 || t->dtype == XSA_INT32, "dtype");
        REQUIRE(xsa_tensor_is_contiguous(t), "contiguous");
        REQUIRE(xsa_st_get(f, f->names[i]) == t, "get by name (names unique)");
    }
    for (int i = 0; i < f->n_meta; i++)
        REQUIRE(xsa_st_meta(f, f->meta_keys[i]) == f->meta_values[i], "metadata by key");
}

static void check_resave(const xsa_st_file *f)
{
    int rc = xsa_st_save(save_path, f->n, (const char *const *)f->names, f->tensors, f->n_meta,
                         (const char *const *)f->meta_keys, (const char *const *)f->meta_values);
    REQUIRE(rc == 0, "save of a loaded file");
    xsa_st_file *g = xsa_st_load(save_path);
    unlink(save_path);
    REQUIRE(g != NULL, "load of the saved file");
    REQUIRE(g->n == f->n && g->n_meta == f->n_meta, "same counts");
    for (int i = 0; i < f->n; i++) {
        const xsa_tensor *a = f->tensors[i], *b = xsa_st_get(g, f->names[i]);
        REQUIRE(b && b->dtype == a->dtype && b->ndim == a->ndim, "same tensor");
        REQUIRE(memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0,
                "same shape");
        REQUIRE(memcmp(bytes_of(a), bytes_of(b), nbytes(a)) == 0, "same bytes");
    }
    for (int i = 0; i < f->n_meta; i++) {
        const char *v = xsa_st_meta(g, f->meta_keys[i]);
        REQUIRE(v && strcmp(v, f->meta_values[i]) == 0, "same metadata");
    }
    xsa_st_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ftruncate(mfd, 0) != 0 || (size && pwrite(mfd, data, size, 0) != (ssize_t)size)) {
        perror("memfd write");
        abort();
    }
    xsa_clear_error();
    /* the metadata alone: whenever the whole file loads, the same metadata */
    xsa_st_file *meta = xsa_st_load_meta(mpath);
    REQUIRE(meta || strncmp(xsa_last_error(), mpath, strlen(mpath)) == 0, "a metadata error names the file");
    xsa_clear_error();
    xsa_st_file *f = xsa_st_load(mpath);
    if (f) {
        REQUIRE(meta && meta->n == 0 && meta->n_meta == f->n_meta, "the metadata alone: as loaded");
        for (int i = 0; i < f->n_meta; i++) {
            const char *v = xsa_st_meta(meta, f->meta_keys[i]);
            REQUIRE(v && strcmp(v, f->meta_values[i]) == 0, "the same values");
        }
    }
    xsa_st_free(meta);
    if (!f) {
        REQUIRE(strncmp(xsa_last_error(), mpath, strlen(mpath)) == 0, "error names the file");
        return 0;
    }
    check_loaded(f);
    check_resave(f);
    xsa_st_free(f);
    return 0;
}
