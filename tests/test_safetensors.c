/*
 * test_safetensors.c: atomic file I/O (fileio.c) and safetensors load/save
 * (safetensors.c): bit-exact round trips (views, int32, scalars, empty
 * tensors, metadata), every corruption the loader must report (files are
 * crafted byte by byte in a temporary folder), failing writes that must
 * leave the old file and no temporary behind, and the golden files written
 * in Python by tests/reference/export_golden.py (loaded, then re-saved
 * byte-identically).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/xsa.h"
#include "check.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int has(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

/* Number of entries in the temp folder whose name contains ".tmp." */
static int stray_temps(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* round trip with NUL bytes, then overwrite, then an empty file */
static void fileio_roundtrip(void)
{
    const char bin[] = {'a', 0, 'b', '\n', (char)0xff};
    CHECK(xsa_atomic_write(tmp("f.bin"), bin, sizeof bin) == 0, "write: %s", xsa_last_error());
    size_t n = 0;
    char *got = xsa_read_file(tmp("f.bin"), &n);
    CHECK(got && n == sizeof bin && memcmp(got, bin, n) == 0, "read back");
    CHECK(got && got[n] == '\0', "NUL-terminated");
    free(got);
    CHECK(xsa_atomic_write(tmp("f.bin"), "xy", 2) == 0, "overwrite");
    got = xsa_read_file(tmp("f.bin"), &n);
    CHECK(got && n == 2 && memcmp(got, "xy", 2) == 0, "overwritten content");
    free(got);
    CHECK(xsa_atomic_write(tmp("empty"), "", 0) == 0, "empty write");
    got = xsa_read_file(tmp("empty"), &n);
    CHECK(got && n == 0 && got[0] == '\0', "empty read");
    free(got);
}

/* a bigger file (data, big bytes), to cross the read loop's buffer growth */
static void fileio_big(const char *data, size_t big)
{
    CHECK(xsa_atomic_write(tmp("big"), data, big) == 0, "big write");
    char *got = xsa_read_file(tmp("big"), NULL);
    CHECK(got && memcmp(got, data, big) == 0, "big read");
    free(got);
}

/* missing file / folder */
static void fileio_missing(void)
{
    size_t n = 0;
    char *got = xsa_read_file(tmp("nope"), &n);
    CHECK(!got && has(xsa_last_error(), "nope") &&
              has(xsa_last_error(), "No such file or directory"),
          "missing file: %s", xsa_last_error());
    got = xsa_read_file(dir, &n);
    CHECK(!got && has(xsa_last_error(), "Is a directory"), "dir: %s", xsa_last_error());
    CHECK(xsa_atomic_write(tmp("no/such/folder/x"), "a", 1) == -1 &&
              has(xsa_last_error(), "no/such/folder/x") &&
              has(xsa_last_error(), "No such file or directory"),
          "missing folder: %s", xsa_last_error());
    CHECK(xsa_atomic_write("", "a", 1) == -1, "empty path");
}

/* a failed commit and an abort leave the old file (f.bin: "xy") and no temp */
static void fileio_failed_commit(void)
{
    size_t n = 0;
    char *got;
    /* a write that fails after the open: the stream's descriptor is pulled
     * away, so the flush fails; the old file must survive, no temp left */
    xsa_atomic_file af;
    CHECK(xsa_atomic_open(&af, tmp("f.bin")) == 0, "open");
    fputs("new content that must never appear", af.fp);
    close(fileno(af.fp));
    CHECK(xsa_atomic_commit(&af) == -1 && has(xsa_last_error(), "left unchanged"),
          "commit fails: %s", xsa_last_error());
    CHECK(af.fp == NULL && af.path == NULL && af.tmp_path == NULL, "af released");
    got = xsa_read_file(tmp("f.bin"), &n);
    CHECK(got && n == 2 && memcmp(got, "xy", 2) == 0, "old content intact after failure");
    free(got);
    CHECK(stray_temps() == 0, "no temp after failed commit");

    /* abort leaves the old file */
    CHECK(xsa_atomic_open(&af, tmp("f.bin")) == 0, "open 2");
    fputs("zzz", af.fp);
    xsa_atomic_abort(&af);
    got = xsa_read_file(tmp("f.bin"), &n);
    CHECK(got && n == 2 && memcmp(got, "xy", 2) == 0, "old content intact after abort");
    free(got);
    CHECK(stray_temps() == 0, "no temp after abort");
}

/* a full disk, simulated by a file size limit: the write fails (EFBIG)
 * part-way, the old file stays */
static void fileio_full_disk(const char *data, size_t big)
{
    size_t n = 0;
    char *got;
    struct rlimit old;
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = old;
        lim.rlim_cur = 65536;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            int rc = xsa_atomic_write(tmp("f.bin"), data, big);
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", xsa_last_error());
            setrlimit(RLIMIT_FSIZE, &old);
            CHECK(rc == -1 && has(msg, "too large"), "EFBIG write: %s", msg);
            got = xsa_read_file(tmp("f.bin"), &n);
            CHECK(got && n == 2 && memcmp(got, "xy", 2) == 0, "old content intact (EFBIG)");
            free(got);
            CHECK(stray_temps() == 0, "no temp after EFBIG");
        }
        signal(SIGXFSZ, prev);
    }
}

static void test_fileio(void)
{
    fileio_roundtrip();
    size_t big = 300000;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (char)(i * 7 + 3);
    fileio_big(data, big);
    fileio_missing();
    fileio_failed_commit();
    fileio_full_disk(data, big);
    free(data);
}

/* ---- crafted files ---------------------------------------------------- */

static void write_raw(const char *path, uint64_t hlen, const char *hdr, size_t hdr_bytes,
                      size_t data_bytes)
{
    FILE *fp = fopen(path, "wb");
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(lb, 1, 8, fp);
    fwrite(hdr, 1, hdr_bytes, fp);
    for (size_t i = 0; i < data_bytes; i++) fputc((int)(i & 0xff), fp);
    fclose(fp);
}

static void write_st(const char *path, const char *hdr, size_t data_bytes)
{
    write_raw(path, strlen(hdr), hdr, strlen(hdr), data_bytes);
}

static void expect_fail(const char *path, const char *needle)
{
    xsa_clear_error();
    xsa_st_file *f = xsa_st_load(path);
    CHECK(f == NULL, "%s: loaded, expected failure with '%s'", path, needle);
    xsa_st_free(f);
    CHECK(has(xsa_last_error(), needle) && has(xsa_last_error(), path),
          "expected '%s' in '%s'", needle, xsa_last_error());
}

/* headers xsa_st_load refuses: the header, the data section's bytes, the message's words */
static const struct {
    const char *hdr;
    size_t data;
    const char *msg;
} corrupt_cases[] = {
    {"{\"a\":", 0, "invalid JSON in the header at byte"},
    {"", 0, "invalid JSON"},
    {"{\"a\":{}} x", 0, "invalid JSON"},
    {"[1,2]", 0, "the header is an array, not a JSON object"},
    {"{\"a\":3}", 0, "tensor 'a' entry is a number, not an object"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a' has no dtype"},
    {"{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a' has a dtype that is a number, not a string"},
    {"{\"x\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
     "tensor 'x' has dtype BF16, which xsa does not support"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a' has no shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 4,
     "tensor 'a' has a shape that is a number, not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
     "shape dimension 0 = -1, not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,4]}}", 4,
     "shape dimension 1 = 2.5, not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
     "shape dimension 0 that is a string"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     "has 9 dimensions"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1000000000,1000000000],\"data_offsets\":[0,4]}}",
     4, "over xsa's limit"},
    /* a dimension xsa cannot hold is refused even when a later 0 empties the tensor */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}",
     4, "over xsa's limit"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,9007199254740992,2],\"data_offsets\":[0,0]}}",
     4, "over xsa's limit"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a' has no data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
     "data_offsets that are not an array of two integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 8,
     "data_offsets that are not an array of two integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
     "not two non-negative integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8,
     "that end before they begin"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
     "has shape [2] (8 bytes as F32) but data_offsets [0,4] span 4 bytes"},
    {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8,
     "has shape [2,2] (16 bytes as I32)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
     "data_offsets [0,8] outside the data section of 4 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
     "tensors 'a' and 'b' overlap (data_offsets [0,8] and [4,12])"},
    {"{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16,
     "overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
     "duplicate tensor name 'a'"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value 'k' is a number, not a string"},
    {"{\"__metadata__\":[\"k\"]}", 0, "__metadata__ is an array, not an object"},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate __metadata__ key 'k'"},
};

/* no file, a folder, a header length too short, absurd or past the end (p: the scratch file) */
static void corrupt_lengths(const char *p)
{
    expect_fail(tmp("missing.safetensors"), ": No such file or directory");
    expect_fail(dir, "Is a directory");

    FILE *fp = fopen(p, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    expect_fail(p, "shorter than the 8-byte header length");

    write_raw(p, (uint64_t)1 << 40, "{}", 2, 0);
    expect_fail(p, "is absurd");
    write_raw(p, ~(uint64_t)0, "{}", 2, 0);
    expect_fail(p, "is absurd");
    write_raw(p, 1000, "{}", 2, 50);
    expect_fail(p, "header length 1000 is larger than the 52 bytes");
}

/* accepted: trailing spaces (the writer's padding), gaps, empty tensors,
 * metadata only, a scalar */
static void corrupt_lenient(const char *p)
{
    write_st(p,
             "{\"__metadata__\":{\"k\":\"v\"},"
             "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]},"
             "\"e\":{\"dtype\":\"I32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
             "\"v\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}      ",
             16);
    xsa_st_file *f = xsa_st_load(p);
    CHECK(f != NULL, "lenient file: %s", xsa_last_error());
    if (f) {
        CHECK(f->n == 3 && strcmp(f->names[0], "s") == 0 && strcmp(f->names[2], "v") == 0,
              "names in file order");
        xsa_tensor *s = xsa_st_get(f, "s"), *e = xsa_st_get(f, "e"), *v = xsa_st_get(f, "v");
        CHECK(s && s->ndim == 0 && xsa_tensor_numel(s) == 1, "scalar");
        CHECK(e && e->ndim == 2 && e->shape[0] == 0 && e->shape[1] == 5 &&
                  xsa_tensor_numel(e) == 0, "empty");
        CHECK(v && v->dtype == XSA_INT32 && xsa_tensor_i32(v)[0] == 0x03020100 &&
                  xsa_tensor_i32(v)[1] == 0x07060504, "little-endian int32 bytes");
        uint32_t bits;
        if (s) memcpy(&bits, xsa_tensor_f32(s), 4);
        CHECK(s && bits == 0x0f0e0d0c, "scalar bytes");
        CHECK(xsa_st_meta(f, "k") && strcmp(xsa_st_meta(f, "k"), "v") == 0, "meta");
        CHECK(xsa_st_meta(f, "nope") == NULL && xsa_st_get(f, "nope") == NULL, "absent");
        xsa_st_free(f);
    }
}

static void test_corrupt(void)
{
    const char *p = tmp("bad.safetensors");
    corrupt_lengths(p);
    for (size_t i = 0; i < sizeof corrupt_cases / sizeof corrupt_cases[0]; i++) {
        write_st(p, corrupt_cases[i].hdr, corrupt_cases[i].data);
        expect_fail(p, corrupt_cases[i].msg);
    }
    corrupt_lenient(p);
    /* a good file truncated inside its data */
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 10);
    expect_fail(p, "outside the data section of 10 bytes");
}

/* ---- round trips -------------------------------------------------------- */

static int same_bits(const xsa_tensor *a, const xsa_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    int64_t idx[XSA_MAX_DIMS] = {0};
    int64_t n = xsa_tensor_numel(a);
    size_t es = xsa_dtype_size(a->dtype);
    for (int64_t k = 0; k < n; k++) {
        int64_t oa = a->offset, ob = b->offset;
        for (int d = 0; d < a->ndim; d++) {
            oa += idx[d] * a->stride[d];
            ob += idx[d] * b->stride[d];
        }
        if (memcmp((char *)a->storage->data + oa * es, (char *)b->storage->data + ob * es, es))
            return 0;
        for (int d = a->ndim - 1; d >= 0; d--) {
            if (++idx[d] < a->shape[d]) break;
            idx[d] = 0;
        }
    }
    return 1;
}

/* the saved file's layout: header length, alignment, size, metadata first */
static void rt_layout(const char *p)
{
    size_t n = 0;
    char *raw = xsa_read_file(p, &n);
    uint64_t hlen = 0;
    for (int i = 7; raw && i >= 0; i--) hlen = (hlen << 8) | (unsigned char)raw[i];
    CHECK(raw && (8 + hlen) % 8 == 0, "data section aligned to 8 (header %llu)",
          (unsigned long long)hlen);
    int64_t data = (12 + 12 + 6 + 5 + 1 + 0) * 4;
    CHECK(raw && (int64_t)n == 8 + (int64_t)hlen + data, "file size %zu", n);
    CHECK(raw && raw[8] == '{' && memcmp(raw + 8, "{\"__metadata__\"", 15) == 0,
          "metadata first");
    free(raw);
}

/* load what was saved: names, contiguity, bits, metadata; save it again:
 * the same bytes */
static void rt_load(const char *p, const char *const *names, xsa_tensor *const *ts,
                    const char *const *mk, const char *const *mv)
{
    xsa_st_file *f = xsa_st_load(p);
    CHECK(f != NULL, "load: %s", xsa_last_error());
    if (f) {
        CHECK(f->n == 6, "6 tensors");
        for (int i = 0; i < 6 && i < f->n; i++) {
            CHECK(strcmp(f->names[i], names[i]) == 0, "name %d", i);
            CHECK(xsa_tensor_is_contiguous(f->tensors[i]), "loaded contiguous %d", i);
            CHECK(same_bits(f->tensors[i], ts[i]), "bit-exact %s", names[i]);
        }
        CHECK(f->n_meta == 3, "meta count");
        for (int i = 0; i < 3; i++)
            CHECK(xsa_st_meta(f, mk[i]) && strcmp(xsa_st_meta(f, mk[i]), mv[i]) == 0,
                  "meta %s", mk[i]);
        /* save what was loaded: the same bytes again */
        const char *p2 = tmp("rt2.safetensors");
        CHECK(xsa_st_save(p2, f->n, (const char *const *)f->names, f->tensors, f->n_meta,
                          (const char *const *)f->meta_keys,
                          (const char *const *)f->meta_values) == 0,
              "resave: %s", xsa_last_error());
        size_t n1, n2;
        char *b1 = xsa_read_file(p, &n1), *b2 = xsa_read_file(p2, &n2);
        CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "resave identical");
        free(b1);
        free(b2);
        xsa_st_free(f);
    }
}

/* errors on save leave the old file intact (a, iv: two of the saved tensors) */
static void rt_save_errors(const char *p, const char **names, xsa_tensor **ts, xsa_tensor *a,
                           xsa_tensor *iv)
{
    size_t before_n;
    char *before = xsa_read_file(p, &before_n);
    const char *dup[2] = {"x", "x"};
    xsa_tensor *two[2] = {a, iv};
    CHECK(xsa_st_save(p, 2, dup, two, 0, NULL, NULL) == -1 &&
              has(xsa_last_error(), "duplicate tensor name 'x'"),
          "duplicate: %s", xsa_last_error());
    const char *mdname[1] = {"__metadata__"};
    CHECK(xsa_st_save(p, 1, mdname, two, 0, NULL, NULL) == -1 &&
              has(xsa_last_error(), "'__metadata__' cannot be a tensor name"),
          "reserved name: %s", xsa_last_error());
    const char *dk[2] = {"k", "k"}, *dv[2] = {"1", "2"};
    CHECK(xsa_st_save(p, 0, NULL, NULL, 2, dk, dv) == -1 &&
              has(xsa_last_error(), "duplicate metadata key 'k'"),
          "dup meta: %s", xsa_last_error());
    xsa_tensor *nul[1] = {NULL};
    CHECK(xsa_st_save(p, 1, names, nul, 0, NULL, NULL) == -1 && has(xsa_last_error(), "NULL"),
          "null tensor: %s", xsa_last_error());
    CHECK(xsa_st_save(tmp("missing/dir/x.safetensors"), 1, names, ts, 0, NULL, NULL) == -1 &&
              has(xsa_last_error(), "No such file or directory"),
          "missing dir: %s", xsa_last_error());
    size_t after_n;
    char *after = xsa_read_file(p, &after_n);
    CHECK(before && after && before_n == after_n && memcmp(before, after, after_n) == 0,
          "file intact after failed saves");
    free(before);
    free(after);
    CHECK(stray_temps() == 0, "no temps after failed saves");
}

static void test_roundtrip(void)
{
    int64_t s34[2] = {3, 4};
    xsa_rng g;
    xsa_rng_seed(&g, 7);
    xsa_tensor *a = xsa_tensor_randn(&g, 2, s34, 0.0, 1.0);
    /* awkward float bit patterns: NaN payload, -0, inf, denormal */
    uint32_t odd[4] = {0x7fc01234u, 0x80000000u, 0x7f800000u, 0x00000001u};
    memcpy(xsa_tensor_f32(a), odd, sizeof odd);
    xsa_tensor *at = xsa_tensor_transpose(a, 0, 1);                /* [4,3] strided */
    xsa_tensor *an = xsa_tensor_narrow(a, 1, 1, 2);                /* [3,2] offset */
    int64_t s5[1] = {5};
    xsa_tensor *iv = xsa_tensor_new(XSA_INT32, 1, s5);
    int32_t ivals[5] = {INT32_MIN, -1, 0, 1, INT32_MAX};
    memcpy(xsa_tensor_i32(iv), ivals, sizeof ivals);
    xsa_tensor *sc = xsa_tensor_full(XSA_FLOAT32, 0, NULL, 0.1);
    int64_t s03[2] = {0, 3};
    xsa_tensor *em = xsa_tensor_new(XSA_FLOAT32, 2, s03);
    CHECK(a && at && an && iv && sc && em, "setup: %s", xsa_last_error());
    if (!(a && at && an && iv && sc && em)) return;
    CHECK(!xsa_tensor_is_contiguous(at) && !xsa_tensor_is_contiguous(an), "views strided");

    const char *names[6] = {"w", "w.T", "w.narrow", "ids", "scalar", "empty"};
    xsa_tensor *ts[6] = {a, at, an, iv, sc, em};
    const char *mk[3] = {"vocab", "attention", "note"};
    const char *mv[3] = {"64", "xsa", "utf-8 \xc3\xa9 \"quoted\" \\ back"};
    const char *p = tmp("rt.safetensors");
    CHECK(xsa_st_save(p, 6, names, ts, 3, mk, mv) == 0, "save: %s", xsa_last_error());
    CHECK(stray_temps() == 0, "no temp after save");

    rt_layout(p);
    rt_load(p, names, ts, mk, mv);
    rt_save_errors(p, names, ts, a, iv);

    /* an empty file (no tensors, no metadata) round-trips */
    CHECK(xsa_st_save(tmp("none.safetensors"), 0, NULL, NULL, 0, NULL, NULL) == 0, "empty save");
    xsa_st_file *f = xsa_st_load(tmp("none.safetensors"));
    CHECK(f && f->n == 0 && f->n_meta == 0, "empty load: %s", xsa_last_error());
    xsa_st_free(f);

    xsa_tensor_free(em);
    xsa_tensor_free(sc);
    xsa_tensor_free(iv);
    xsa_tensor_free(an);
    xsa_tensor_free(at);
    xsa_tensor_free(a);
}

/* xsa_st_load_meta: the metadata alone, checked as a full load checks it
 * (a loader reads it first to choose how to load the rest) */
static void test_meta_only(void)
{
    const char *p = tmp("meta.safetensors");
    static const struct { const char *hdr; size_t data; const char *msg; } bad[] = {
        {"{\"a\":", 0, "invalid JSON in the header at byte"},
        {"[1,2]", 0, "the header is an array, not a JSON object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value 'k' is a number, not a string"},
        {"{\"__metadata__\":[\"k\"]}", 0, "__metadata__ is an array, not an object"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate __metadata__ key 'k'"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_st(p, bad[i].hdr, bad[i].data);
        xsa_clear_error();
        xsa_st_file *f = xsa_st_load_meta(p);
        CHECK(f == NULL && has(xsa_last_error(), bad[i].msg) && has(xsa_last_error(), p),
              "meta only: expected '%s' in '%s'", bad[i].msg, xsa_last_error());
        xsa_st_free(f);
    }
    write_raw(p, (uint64_t)1 << 40, "{}", 2, 0);
    xsa_st_file *f = xsa_st_load_meta(p);
    CHECK(f == NULL && has(xsa_last_error(), "is absurd"), "meta only: %s", xsa_last_error());
    CHECK(xsa_st_load_meta(tmp("missing.safetensors")) == NULL && has(xsa_last_error(), "No such file"),
          "meta only, no file: %s", xsa_last_error());
    /* no tensor is read: the metadata of a good file, n = 0 */
    int64_t sh[1] = {3};
    xsa_tensor *t = xsa_tensor_new(XSA_FLOAT32, 1, sh);
    const char *names[1] = {"w"}, *keys[2] = {"attention", "attention.code"}, *vals[2] = {"function", "0123"};
    CHECK(t && xsa_st_save(p, 1, names, &t, 2, keys, vals) == 0, "save: %s", xsa_last_error());
    f = xsa_st_load_meta(p);
    CHECK(f && f->n == 0 && f->n_meta == 2 && strcmp(xsa_st_meta(f, "attention.code"), "0123") == 0,
          "meta only: %s", f ? "wrong metadata" : xsa_last_error());
    xsa_st_free(f);
    xsa_tensor_free(t);
}

/* ---- golden files --------------------------------------------------------- */

static const char *golden_dir(void)
{
    static char buf[512];
    const char *env = getenv("XSA_GOLDEN");
    if (env && *env) return env;
    const char *root = getenv("XSA_ROOT");
    snprintf(buf, sizeof buf, "%.400s/tests/fixtures/golden", root && *root ? root : ".");
    return buf;
}

/* one golden case's sizes */
typedef struct {
    const char *name;
    int vocab, C, layers, B, T;
} golden_case;

/* the model file (g: the golden folder): shapes, metadata, finite values,
 * and a re-save byte-identical to the Python generator's; 0 when it does not load */
static int golden_model(const golden_case *gc, const char *g)
{
    char p[1024], q[1024];
    snprintf(p, sizeof p, "%s/%s/model.safetensors", g, gc->name);
    xsa_st_file *f = xsa_st_load(p);
    CHECK(f != NULL, "golden %s: %s", p, xsa_last_error());
    if (!f) return 0;
    int C = gc->C;
    xsa_tensor *wte = xsa_st_get(f, "wte.weight");
    CHECK(wte && wte->ndim == 2 && wte->shape[0] == gc->vocab && wte->shape[1] == C,
          "%s wte shape", gc->name);
    xsa_tensor *qkv = xsa_st_get(f, "h.0.attn.c_attn.weight");
    CHECK(qkv && qkv->ndim == 2 && qkv->shape[0] == C && qkv->shape[1] == 3 * C,
          "%s c_attn shape", gc->name);
    char key[64];
    snprintf(key, sizeof key, "h.%d.mlp.c_proj.weight", gc->layers - 1);
    xsa_tensor *mp = xsa_st_get(f, key);
    CHECK(mp && mp->shape[0] == 4 * C && mp->shape[1] == C, "%s %s", gc->name, key);
    char v[16];
    snprintf(v, sizeof v, "%d", gc->vocab);
    CHECK(xsa_st_meta(f, "vocab") && strcmp(xsa_st_meta(f, "vocab"), v) == 0, "%s vocab meta",
          gc->name);
    CHECK(xsa_st_meta(f, "attention") && strcmp(xsa_st_meta(f, "attention"), "sa") == 0,
          "%s attention meta", gc->name);
    /* finite values everywhere */
    int finite = 1;
    for (int i = 0; i < f->n; i++) {
        const float *x = xsa_tensor_f32(f->tensors[i]);
        for (int64_t k = 0; k < xsa_tensor_numel(f->tensors[i]); k++)
            if (!isfinite(x[k])) finite = 0;
    }
    CHECK(finite, "%s finite", gc->name);

    /* re-saved in file order with the same metadata: byte-identical to
     * what the Python generator wrote (same JSON layout and padding) */
    snprintf(q, sizeof q, "%s/golden_%s.safetensors", dir, gc->name);
    CHECK(xsa_st_save(q, f->n, (const char *const *)f->names, f->tensors, f->n_meta,
                      (const char *const *)f->meta_keys,
                      (const char *const *)f->meta_values) == 0,
          "resave golden: %s", xsa_last_error());
    size_t n1, n2;
    char *b1 = xsa_read_file(p, &n1), *b2 = xsa_read_file(q, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
          "%s: re-saved file is byte-identical to the reference one (%zu vs %zu bytes)",
          gc->name, n1, n2);
    free(b1);
    free(b2);
    xsa_st_free(f);
    return 1;
}

/* the batch file: int32 inputs and targets of [B,T], ids in range */
static void golden_batch(const golden_case *gc, const char *g)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/batch.safetensors", g, gc->name);
    xsa_st_file *f = xsa_st_load(p);
    CHECK(f != NULL, "golden %s: %s", p, xsa_last_error());
    if (f) {
        xsa_tensor *in = xsa_st_get(f, "inputs"), *tg = xsa_st_get(f, "targets");
        CHECK(in && in->dtype == XSA_INT32 && in->ndim == 2 && in->shape[0] == gc->B &&
                  in->shape[1] == gc->T, "%s inputs", gc->name);
        CHECK(tg && tg->dtype == XSA_INT32 && tg->shape[1] == gc->T, "%s targets",
              gc->name);
        int inrange = 1;
        for (int64_t k = 0; in && k < xsa_tensor_numel(in); k++)
            if (xsa_tensor_i32(in)[k] < 0 || xsa_tensor_i32(in)[k] >= gc->vocab) inrange = 0;
        CHECK(inrange, "%s token ids in range", gc->name);
        xsa_st_free(f);
    }
}

/* the expected values of each variant: loss, logits, a gradient */
static void golden_expected(const golden_case *gc, const char *g)
{
    char p[1024];
    static const char *ex[3] = {"expected_SA", "expected_XSA_l1", "expected_XSA_l0.5"};
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s/%s.safetensors", g, gc->name, ex[k]);
        xsa_st_file *f = xsa_st_load(p);
        CHECK(f != NULL, "golden %s: %s", p, xsa_last_error());
        if (!f) continue;
        xsa_tensor *loss = xsa_st_get(f, "loss"), *lg = xsa_st_get(f, "logits");
        CHECK(loss && xsa_tensor_numel(loss) == 1 && isfinite(xsa_tensor_f32(loss)[0]) &&
                  xsa_tensor_f32(loss)[0] > 0, "%s %s loss", gc->name, ex[k]);
        CHECK(lg && lg->ndim == 3 && lg->shape[0] == gc->B && lg->shape[1] == gc->T &&
                  lg->shape[2] == gc->vocab, "%s %s logits", gc->name, ex[k]);
        CHECK(xsa_st_get(f, "grad.wte.weight") != NULL, "%s grad present", gc->name);
        xsa_st_free(f);
    }
}

static void test_golden(void)
{
    static const golden_case cs[] = {
        {"tiny", 64, 16, 2, 2, 8}, {"odd", 97, 24, 3, 3, 11}, {"spec_init", 50, 32, 2, 2, 16}};
    const char *g = golden_dir();
    for (int c = 0; c < 3; c++) {
        if (!golden_model(&cs[c], g)) continue;
        golden_batch(&cs[c], g);
        golden_expected(&cs[c], g);
    }
}

/* Seeded random corruption of a valid file: every load either succeeds or
 * fails with a "PATH: ..." message; never a crash (run under ASan). */
static void test_fuzz(void)
{
    const char *hdr = "{\"__metadata__\":{\"k\":\"v\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[16,28]}}";
    size_t hl = strlen(hdr);
    size_t total = 8 + hl + 28;
    unsigned char *good = malloc(total), *buf = malloc(total);
    for (int i = 0; i < 8; i++) good[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(good + 8, hdr, hl);
    for (size_t i = 8 + hl; i < total; i++) good[i] = (unsigned char)i;
    const char *p = tmp("fuzz.safetensors");
    xsa_rng g;
    xsa_rng_seed(&g, 1234);
    int ok = 0, bad = 0, msg_ok = 1;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, good, total);
        size_t len = total;
        int nmut = 1 + (int)xsa_rng_int(&g, 0, 4);
        for (int m = 0; m < nmut; m++) {
            int kind = (int)xsa_rng_int(&g, 0, 4);
            size_t at = (size_t)xsa_rng_int(&g, 0, (int64_t)len);
            if (kind == 0) buf[at] = (unsigned char)xsa_rng_int(&g, 0, 256);
            else if (kind == 1) buf[at] = (unsigned char)"{}[],:\"0123456789-.eE \\"[xsa_rng_int(&g, 0, 22)];
            else if (kind == 2) len = (size_t)xsa_rng_int(&g, 0, (int64_t)len + 1);
            else buf[(size_t)xsa_rng_int(&g, 0, 8) % len] ^= (unsigned char)(1u << xsa_rng_int(&g, 0, 8));
            if (len == 0) break;
        }
        /* plain stdio: an fsync per iteration would make this slow */
        FILE *fp = fopen(p, "wb");
        if (!fp || fwrite(buf, 1, len, fp) != len) {
            CHECK(0, "fuzz write");
            if (fp) fclose(fp);
            break;
        }
        fclose(fp);
        xsa_clear_error();
        xsa_st_file *f = xsa_st_load(p);
        if (f) {
            ok++;
            for (int i = 0; i < f->n; i++) (void)xsa_tensor_numel(f->tensors[i]);
            xsa_st_free(f);
        } else {
            bad++;
            if (!has(xsa_last_error(), p)) {
                msg_ok = 0;
                printf("fuzz: message without path: %s\n", xsa_last_error());
            }
        }
    }
    CHECK(msg_ok, "every fuzz failure names the file");
    CHECK(ok > 0 && bad > 1000, "fuzz outcomes: %d loaded, %d refused", ok, bad);
    free(good);
    free(buf);
}

static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[512];
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/xsa-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fileio();
    test_corrupt();
    test_meta_only();
    test_roundtrip();
    test_golden();
    test_fuzz();
    cleanup();
    return check_done("test_safetensors");
}
