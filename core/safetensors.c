/*
 * safetensors.c: load and save the safetensors format (see safetensors.h)
 * for float32 and int32 tensors, with the JSON header handled by cJSON.
 *
 * Loading trusts nothing in the file: every field of the header is checked
 * before any tensor bytes are read, and each problem is reported as
 * "PATH: problem" through xsa_error. Each tensor gets its own storage (read
 * straight from the file into it), so keeping one tensor of a big file does
 * not keep the rest alive.
 *
 * Tensor bytes are little-endian in the format and are copied as they are,
 * so this file only works on little-endian hosts (checked at compile time).
 *
 * Non-goals: dtypes other than F32/I32 (reported by name), memory mapping,
 * requiring the data section to have no gaps (the reference implementation
 * refuses gaps; we accept them, since they cannot make us misread a tensor).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckd.h"
#include "fileio.h"
#include "safetensors.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c copies little-endian tensor bytes as they are");
#endif

/* The reference implementation refuses headers over 100 MB; so do we. */
#define MAX_HEADER ((uint64_t)100000000)
/* Integers in the header must be exact in a double (cJSON parses numbers as
 * doubles). */
#define MAX_EXACT ((double)((int64_t)1 << 53))

/* Tensor names and keys can be anything; keep messages short. */
#define NAMEFMT "'%.200s'"

typedef struct entry {
    const char *name;   /* points into the cJSON tree */
    xsa_dtype dtype;
    int ndim;
    int64_t shape[XSA_MAX_DIMS];
    int64_t begin, end; /* bytes, relative to the data section */
} entry;

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void xsa_st_free(xsa_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        if (f->names) free(f->names[i]);
        if (f->tensors) xsa_tensor_free(f->tensors[i]);
    }
    for (int i = 0; i < f->n_meta; i++) {
        if (f->meta_keys) free(f->meta_keys[i]);
        if (f->meta_values) free(f->meta_values[i]);
    }
    free(f->names);
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f);
}

xsa_tensor *xsa_st_get(const xsa_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) return f->tensors[i];
    return NULL;
}

const char *xsa_st_meta(const xsa_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

/* ---- loading ---------------------------------------------------------- */

/* A JSON number that is a non-negative integer exactly representable;
 * -1 otherwise. */
static int64_t json_uint(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT) || d != (double)(int64_t)d) return -1;
    return (int64_t)d;
}

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "invalid";
}

/* e's shape from one header entry, and its element count into *numel;
 * -1 with xsa_error on any problem. */
static int parse_shape(const char *path, const cJSON *item, entry *e, int64_t *numel_out)
{
    const char *nm = item->string;
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    if (!sh) return xsa_error("%s: tensor " NAMEFMT " has no shape", path, nm);
    if (!cJSON_IsArray(sh))
        return xsa_error("%s: tensor " NAMEFMT " has a shape that is %s, not an array", path,
                         nm, json_kind(sh));
    int nd = cJSON_GetArraySize(sh);
    if (nd > XSA_MAX_DIMS)
        return xsa_error("%s: tensor " NAMEFMT " has %d dimensions (xsa allows at most %d)",
                         path, nm, nd, XSA_MAX_DIMS);
    e->ndim = nd;
    int64_t numel = 1;
    int k = 0, too_big = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh)
    {
        int64_t v = json_uint(d);
        if (v < 0) {
            if (cJSON_IsNumber(d))
                return xsa_error("%s: tensor " NAMEFMT " has shape dimension %d = %.17g, not a "
                                 "non-negative integer", path, nm, k, d->valuedouble);
            return xsa_error("%s: tensor " NAMEFMT " has shape dimension %d that is %s, not a "
                             "non-negative integer", path, nm, k, json_kind(d));
        }
        e->shape[k++] = v;
        /* sticky: a later 0 must not hide a dimension xsa cannot hold */
        if (v > XSA_MAX_NUMEL || xsa_ckd_mul_i64(numel, v, &numel) || numel > XSA_MAX_NUMEL)
            too_big = 1;
    }
    char shp[160];
    if (too_big)
        return xsa_error("%s: tensor " NAMEFMT " has shape %s, over xsa's limit of %" PRId64
                         " elements", path, nm, xsa_shape_str(nd, e->shape, shp, sizeof shp),
                         (int64_t)XSA_MAX_NUMEL);
    *numel_out = numel;
    return 0;
}

/* Fills e from one header entry; -1 with xsa_error on any problem. */
static int parse_entry(const char *path, const cJSON *item, int64_t data_len, entry *e)
{
    const char *nm = item->string;
    e->name = nm;
    if (!cJSON_IsObject(item))
        return xsa_error("%s: tensor " NAMEFMT " entry is %s, not an object", path, nm,
                         json_kind(item));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    if (!dt) return xsa_error("%s: tensor " NAMEFMT " has no dtype", path, nm);
    if (!cJSON_IsString(dt))
        return xsa_error("%s: tensor " NAMEFMT " has a dtype that is %s, not a string", path,
                         nm, json_kind(dt));
    if (strcmp(dt->valuestring, "F32") == 0) {
        e->dtype = XSA_FLOAT32;
    } else if (strcmp(dt->valuestring, "I32") == 0) {
        e->dtype = XSA_INT32;
    } else {
        return xsa_error("%s: tensor " NAMEFMT " has dtype %.40s, which xsa does not support "
                         "(only F32 and I32)", path, nm, dt->valuestring);
    }

    int64_t numel = 0;
    if (parse_shape(path, item, e, &numel) != 0) return -1;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!off) return xsa_error("%s: tensor " NAMEFMT " has no data_offsets", path, nm);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return xsa_error("%s: tensor " NAMEFMT " has data_offsets that are not an array of "
                         "two integers", path, nm);
    int64_t b = json_uint(cJSON_GetArrayItem(off, 0));
    int64_t en = json_uint(cJSON_GetArrayItem(off, 1));
    if (b < 0 || en < 0)
        return xsa_error("%s: tensor " NAMEFMT " has data_offsets that are not two "
                         "non-negative integers", path, nm);
    if (b > en)
        return xsa_error("%s: tensor " NAMEFMT " has data_offsets [%" PRId64 ",%" PRId64
                         "] that end before they begin", path, nm, b, en);
    if (en > data_len)
        return xsa_error("%s: tensor " NAMEFMT " has data_offsets [%" PRId64 ",%" PRId64
                         "] outside the data section of %" PRId64 " bytes", path, nm, b, en,
                         data_len);
    int64_t want = numel * (int64_t)xsa_dtype_size(e->dtype);
    char shp[160];
    if (en - b != want)
        return xsa_error("%s: tensor " NAMEFMT " has shape %s (%" PRId64 " bytes as %s) but "
                         "data_offsets [%" PRId64 ",%" PRId64 "] span %" PRId64 " bytes",
                         path, nm, xsa_shape_str(e->ndim, e->shape, shp, sizeof shp), want,
                         dt->valuestring, b, en, en - b);
    e->begin = b;
    e->end = en;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Copies __metadata__ into f; -1 with xsa_error. */
static int parse_meta(const char *path, const cJSON *meta, xsa_st_file *f)
{
    if (!cJSON_IsObject(meta))
        return xsa_error("%s: __metadata__ is %s, not an object of strings", path,
                         json_kind(meta));
    int n = cJSON_GetArraySize(meta);
    if (n == 0) return 0;
    f->meta_keys = calloc((size_t)n, sizeof *f->meta_keys);
    f->meta_values = calloc((size_t)n, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return xsa_error("%s: out of memory", path);
    const cJSON *m;
    cJSON_ArrayForEach(m, meta)
    {
        if (!cJSON_IsString(m))
            return xsa_error("%s: __metadata__ value " NAMEFMT " is %s, not a string", path,
                             m->string, json_kind(m));
        for (int i = 0; i < f->n_meta; i++)
            if (strcmp(f->meta_keys[i], m->string) == 0)
                return xsa_error("%s: duplicate __metadata__ key " NAMEFMT, path, m->string);
        char *k = dupstr(m->string), *v = dupstr(m->valuestring);
        if (!k || !v) {
            free(k);
            free(v);
            return xsa_error("%s: out of memory", path);
        }
        f->meta_keys[f->n_meta] = k;
        f->meta_values[f->n_meta] = v;
        f->n_meta++;
    }
    return 0;
}

/* Validates the parsed header and builds f (names and metadata, tensors
 * allocated but not yet read). */
static int parse_header(const char *path, const cJSON *root, int64_t data_len, xsa_st_file *f,
                        entry **entries_out)
{
    if (!cJSON_IsObject(root))
        return xsa_error("%s: the header is %s, not a JSON object", path, json_kind(root));
    int total = cJSON_GetArraySize(root);
    entry *es = calloc((size_t)total + 1, sizeof *es);
    if (!es) return xsa_error("%s: out of memory", path);
    *entries_out = es;
    int n = 0, seen_meta = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (seen_meta) return xsa_error("%s: duplicate __metadata__", path);
            seen_meta = 1;
            if (parse_meta(path, item, f) != 0) return -1;
            continue;
        }
        if (parse_entry(path, item, data_len, &es[n]) != 0) return -1;
        n++;
    }

    /* duplicates and overlaps, each found by sorting pointers */
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    entry **byoff = malloc(((size_t)n + 1) * sizeof *byoff);
    if (!names || !byoff) {
        free(names);
        free(byoff);
        return xsa_error("%s: out of memory", path);
    }
    for (int i = 0; i < n; i++) {
        names[i] = es[i].name;
        byoff[i] = &es[i];
    }
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    qsort(byoff, (size_t)n, sizeof *byoff, cmp_begin);
    int rc = 0;
    for (int i = 1; i < n && rc == 0; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = xsa_error("%s: duplicate tensor name " NAMEFMT, path, names[i]);
    /* Empty tensors own no bytes, so they cannot overlap anything. */
    const entry *prev = NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        const entry *cur = byoff[i];
        if (cur->begin == cur->end) continue;
        if (prev && cur->begin < prev->end)
            rc = xsa_error("%s: tensors " NAMEFMT " and " NAMEFMT " overlap (data_offsets [%"
                           PRId64 ",%" PRId64 "] and [%" PRId64 ",%" PRId64 "])", path,
                           prev->name, cur->name, prev->begin, prev->end, cur->begin, cur->end);
        if (!prev || cur->end > prev->end) prev = cur;
    }
    free(names);
    free(byoff);
    if (rc != 0) return -1;

    f->names = calloc((size_t)n + 1, sizeof *f->names);
    f->tensors = calloc((size_t)n + 1, sizeof *f->tensors);
    if (!f->names || !f->tensors) return xsa_error("%s: out of memory", path);
    for (int i = 0; i < n; i++) {
        f->names[i] = dupstr(es[i].name);
        f->tensors[i] = xsa_tensor_new(es[i].dtype, es[i].ndim, es[i].shape);
        f->n = i + 1;
        if (!f->names[i] || !f->tensors[i]) {
            char shp[160];
            return xsa_error("%s: cannot allocate tensor " NAMEFMT " of shape %s", path,
                             es[i].name, xsa_shape_str(es[i].ndim, es[i].shape, shp, sizeof shp));
        }
    }
    return n;
}

/* Reads exactly n bytes at file offset pos; -1 with xsa_error. */
static int read_at(const char *path, FILE *fp, int64_t pos, void *dst, size_t n,
                   const char *what)
{
    if (n == 0) return 0;
    if (fseeko(fp, (off_t)pos, SEEK_SET) != 0)
        return xsa_error("%s: cannot seek to %s: %s", path, what, strerror(errno));
    size_t got = fread(dst, 1, n, fp);
    if (got != n) {
        if (ferror(fp))
            return xsa_error("%s: read error in %s: %s", path, what, strerror(errno));
        return xsa_error("%s: file ends inside %s (truncated?)", path, what);
    }
    return 0;
}

/* The header's length from the file's first 8 bytes (little-endian),
 * checked against the file's size. */
static int read_header_len(const char *path, FILE *fp, int64_t fsize, uint64_t *hlen_out)
{
    if (fsize < 8)
        return xsa_error("%s: file is %" PRId64 " bytes, shorter than the 8-byte header length "
                         "(not a safetensors file?)", path, fsize);
    unsigned char lenb[8];
    if (read_at(path, fp, 0, lenb, 8, "the header length") != 0) return -1;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenb[i];
    if (hlen > MAX_HEADER)
        return xsa_error("%s: header length %" PRIu64 " is absurd (over %" PRIu64 " bytes; not a "
                         "safetensors file?)", path, hlen, MAX_HEADER);
    if ((int64_t)hlen > fsize - 8)
        return xsa_error("%s: header length %" PRIu64 " is larger than the %" PRId64 " bytes after "
                         "the length field (truncated?)", path, hlen, fsize - 8);
    *hlen_out = hlen;
    return 0;
}

/* Each of the n entries' bytes straight into its tensor of f. */
static int read_tensors(const char *path, FILE *fp, int64_t data_start, const entry *es, int n,
                        xsa_st_file *f)
{
    for (int i = 0; i < n; i++) {
        char what[256];
        snprintf(what, sizeof what, "tensor '%.200s'", es[i].name);
        void *dst = (char *)f->tensors[i]->storage->data +
                    f->tensors[i]->offset * (int64_t)xsa_dtype_size(es[i].dtype);
        if (read_at(path, fp, data_start + es[i].begin, dst, (size_t)(es[i].end - es[i].begin),
                    what) != 0)
            return -1;
    }
    return 0;
}

/* Opens path for reading (a regular file); *fsize gets its size. NULL
 * with an error. */
static FILE *open_file(const char *path, int64_t *fsize)
{
    if (!path || !*path) {
        xsa_error("safetensors load: empty path");
        return NULL;
    }
    int fd = xsa_open_regular(path);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "rb");
    struct stat st;
    if (!fp || fstat(fd, &st) != 0) {
        xsa_error("%s: cannot open: %s", path, strerror(errno));
        if (fp) fclose(fp);
        else close(fd);
        return NULL;
    }
    *fsize = (int64_t)st.st_size;
    return fp;
}

/* The parsed JSON header of fp (fsize bytes); *data_start gets where the
 * data section starts. NULL with an error. */
static cJSON *read_header(const char *path, FILE *fp, int64_t fsize, int64_t *data_start)
{
    uint64_t hlen = 0;
    if (read_header_len(path, fp, fsize, &hlen) != 0) return NULL;
    char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        xsa_error("%s: out of memory for a %" PRIu64 "-byte header", path, hlen);
        return NULL;
    }
    cJSON *root = NULL;
    if (read_at(path, fp, 8, hdr, (size_t)hlen, "the header") == 0) {
        hdr[hlen] = '\0';
        const char *end = NULL;
        /* length hlen+1 so cJSON's "nothing after the value" test sees the NUL */
        root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen + 1, &end, 1);
        if (!root) {
            size_t pos = end ? (size_t)(end - hdr) : 0;
            xsa_error("%s: invalid JSON in the header at byte %zu of %" PRIu64 " (near \"%.20s\")",
                      path, pos, hlen, pos < hlen ? hdr + pos : "");
        }
    }
    free(hdr);
    *data_start = 8 + (int64_t)hlen;
    return root;
}

xsa_st_file *xsa_st_load(const char *path)
{
    int64_t fsize, data_start;
    FILE *fp = open_file(path, &fsize);
    if (!fp) return NULL;
    xsa_st_file *f = calloc(1, sizeof *f);
    cJSON *root = NULL;
    entry *es = NULL;
    if (!f) {
        xsa_error("%s: out of memory", path);
        goto fail;
    }
    root = read_header(path, fp, fsize, &data_start);
    if (!root) goto fail;
    int n = parse_header(path, root, fsize - data_start, f, &es);
    if (n < 0) goto fail;
    if (read_tensors(path, fp, data_start, es, n, f) != 0) goto fail;
    cJSON_Delete(root);
    free(es);
    fclose(fp);
    return f;
fail:
    cJSON_Delete(root);
    free(es);
    fclose(fp);
    xsa_st_free(f);
    return NULL;
}

xsa_st_file *xsa_st_load_meta(const char *path)
{
    int64_t fsize, data_start;
    FILE *fp = open_file(path, &fsize);
    if (!fp) return NULL;
    cJSON *root = read_header(path, fp, fsize, &data_start);
    fclose(fp);
    xsa_st_file *f = root ? calloc(1, sizeof *f) : NULL;
    if (root && !f) xsa_error("%s: out of memory", path);
    int seen = 0, rc = f ? 0 : -1;
    const cJSON *item, *obj = f ? root : NULL;
    if (obj && !cJSON_IsObject(obj)) {
        rc = xsa_error("%s: the header is %s, not a JSON object", path, json_kind(obj));
        obj = NULL;
    }
    cJSON_ArrayForEach(item, obj)
    {
        if (rc != 0 || strcmp(item->string, "__metadata__") != 0) continue;
        rc = seen++ ? xsa_error("%s: duplicate __metadata__", path) : parse_meta(path, item, f);
    }
    cJSON_Delete(root);
    if (rc != 0) {
        xsa_st_free(f);
        return NULL;
    }
    return f;
}

/* ---- saving ----------------------------------------------------------- */

static cJSON *raw_int(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateRaw(buf);
}

/* Adds item to obj under key. cJSON leaves a rejected item with the
 * caller, so it is deleted here; a NULL item (failed allocation) fails. */
static int add(cJSON *obj, const char *key, cJSON *item)
{
    if (!item) return -1;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

static int add_to_array(cJSON *arr, cJSON *item)
{
    if (!item) return -1;
    if (!cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* Checks names and metadata keys; -1 with xsa_error. */
static int check_names(const char *path, int n, const char *const *names,
                       xsa_tensor *const *tensors, int n_meta, const char *const *meta_keys,
                       const char *const *meta_values)
{
    for (int i = 0; i < n; i++) {
        if (!names[i]) return xsa_error("%s: tensor %d has no name", path, i);
        if (!tensors[i]) return xsa_error("%s: tensor " NAMEFMT " is NULL", path, names[i]);
        if (strcmp(names[i], "__metadata__") == 0)
            return xsa_error("%s: '__metadata__' cannot be a tensor name", path);
        if (tensors[i]->dtype != XSA_FLOAT32 && tensors[i]->dtype != XSA_INT32)
            return xsa_error("%s: tensor " NAMEFMT " has an unknown dtype %d", path, names[i],
                             (int)tensors[i]->dtype);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta_keys[i] || !meta_values[i])
            return xsa_error("%s: metadata entry %d has a NULL key or value", path, i);
    }
    int rc = 0;
    int big = n > n_meta ? n : n_meta;
    const char **sorted = malloc(((size_t)big + 1) * sizeof *sorted);
    if (!sorted) return xsa_error("%s: out of memory", path);
    if (n > 0) {
        memcpy(sorted, names, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_name);
    }
    for (int i = 1; i < n && rc == 0; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            rc = xsa_error("%s: duplicate tensor name " NAMEFMT " (names must be unique)", path,
                           sorted[i]);
    if (rc == 0 && n_meta > 0) {
        memcpy(sorted, meta_keys, (size_t)n_meta * sizeof *sorted);
        qsort(sorted, (size_t)n_meta, sizeof *sorted, cmp_name);
        for (int i = 1; i < n_meta && rc == 0; i++)
            if (strcmp(sorted[i - 1], sorted[i]) == 0)
                rc = xsa_error("%s: duplicate metadata key " NAMEFMT, path, sorted[i]);
    }
    free(sorted);
    return rc;
}

/* The header JSON, padded with spaces so the data section starts at a
 * multiple of 8 bytes from the file start (as the reference writer does).
 * malloc'd; *len excludes the NUL. NULL with xsa_error. */
static char *build_header(const char *path, int n, const char *const *names,
                          xsa_tensor *const *tensors, int n_meta, const char *const *meta_keys,
                          const char *const *meta_values, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    if (ok && n_meta > 0) {
        cJSON *meta = cJSON_CreateObject();
        ok = add(root, "__metadata__", meta) == 0;
        for (int i = 0; ok && i < n_meta; i++)
            ok = add(meta, meta_keys[i], cJSON_CreateString(meta_values[i])) == 0;
    }
    int64_t pos = 0;
    for (int i = 0; ok && i < n; i++) {
        const xsa_tensor *t = tensors[i];
        cJSON *e = cJSON_CreateObject();
        ok = add(root, names[i], e) == 0;
        ok = ok && add(e, "dtype", cJSON_CreateString(t->dtype == XSA_FLOAT32 ? "F32" : "I32")) == 0;
        cJSON *shape = cJSON_CreateArray();
        ok = ok && add(e, "shape", shape) == 0;
        for (int d = 0; ok && d < t->ndim; d++) ok = add_to_array(shape, raw_int(t->shape[d])) == 0;
        int64_t nb = xsa_tensor_numel(t) * (int64_t)xsa_dtype_size(t->dtype);
        cJSON *off = cJSON_CreateArray();
        ok = ok && add(e, "data_offsets", off) == 0;
        ok = ok && add_to_array(off, raw_int(pos)) == 0;
        ok = ok && add_to_array(off, raw_int(pos + nb)) == 0;
        pos += nb;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) {
        xsa_error("%s: out of memory building the header", path);
        return NULL;
    }
    size_t jl = strlen(json);
    size_t padded = (jl + 7) / 8 * 8;
    char *out = realloc(json, padded + 1);
    if (!out) {
        free(json);
        xsa_error("%s: out of memory building the header", path);
        return NULL;
    }
    memset(out + jl, ' ', padded - jl);
    out[padded] = '\0';
    *len = padded;
    return out;
}

int xsa_st_save(const char *path, int n, const char *const *names, xsa_tensor *const *tensors,
                int n_meta, const char *const *meta_keys, const char *const *meta_values)
{
    if (!path || !*path) return xsa_error("safetensors save: empty path");
    if (n < 0 || n_meta < 0)
        return xsa_error("%s: negative tensor (%d) or metadata (%d) count", path, n, n_meta);
    if ((n > 0 && (!names || !tensors)) || (n_meta > 0 && (!meta_keys || !meta_values)))
        return xsa_error("%s: NULL name, tensor or metadata array", path);
    if (check_names(path, n, names, tensors, n_meta, meta_keys, meta_values) != 0) return -1;
    size_t hlen = 0;
    char *hdr = build_header(path, n, names, tensors, n_meta, meta_keys, meta_values, &hlen);
    if (!hdr) return -1;

    xsa_atomic_file af;
    if (xsa_atomic_open(&af, path) != 0) {
        free(hdr);
        return -1;
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(lenb, 1, 8, af.fp) == 8 && fwrite(hdr, 1, hlen, af.fp) == hlen;
    free(hdr);
    for (int i = 0; ok && i < n; i++) {
        /* contiguous() returns t itself when it already is; a copy of a view
         * otherwise, so strided views come out in row-major order */
        xsa_tensor *c = xsa_tensor_contiguous(tensors[i]);
        if (!c) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", xsa_last_error());
            xsa_atomic_abort(&af);
            return xsa_error("%s: tensor " NAMEFMT ": %s", path, names[i], msg);
        }
        size_t nb = (size_t)xsa_tensor_numel(c) * xsa_dtype_size(c->dtype);
        const char *src = (const char *)c->storage->data +
                          (size_t)c->offset * xsa_dtype_size(c->dtype);
        ok = nb == 0 || fwrite(src, 1, nb, af.fp) == nb;
        xsa_tensor_free(c);
    }
    if (!ok) {
        int e = errno;
        xsa_atomic_abort(&af);
        return xsa_error("%s: write failed: %s (the file was left unchanged)", path, strerror(e));
    }
    return xsa_atomic_commit(&af);
}
