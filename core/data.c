/*
 * data.c: story files as token ids, the token cache, windows and batches
 * (formats and rules in data.h).
 *
 * The cache is validated completely before use (size, magic, version,
 * source size and hash, tokenizer identity, id count against the file size,
 * a hash of the ids, every id below the vocabulary size), so a truncated,
 * corrupt or stale file is rebuilt rather than trusted.
 *
 * Non-goals: streaming sources larger than memory, several sources in one
 * cache, thread safety of one loader.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckd.h"
#include "data.h"
#include "error.h"
#include "fileio.h"
#include "xz.h"

#define MAGIC "XSATOKS"
#define HEADER 64
#define SEED_ID 0x7470u
#define SEED_SRC 0x7372u

/* ---- stories ----------------------------------------------------------------- */

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int add_story(xsa_bpe *tok, const char *s, size_t n, xsa_bpe_ids *out)
{
    while (n && is_ws(s[0])) {
        s++;
        n--;
    }
    while (n && is_ws(s[n - 1])) n--;
    if (!n) return 0;
    if (xsa_bpe_encode_append(tok, s, n, 0, out) != 0) return -1;
    int32_t eot = xsa_bpe_eot(tok);
    /* one more id through the same growth path: encode the empty string
     * cannot add it, so grow by hand */
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 256;
        int32_t *p = realloc(out->ids, cap * sizeof *p);
        if (!p) return xsa_error("tokenize stories: out of memory");
        out->ids = p;
        out->cap = cap;
    }
    out->ids[out->n++] = eot;
    return 0;
}

int32_t *xsa_data_tokenize_stories(xsa_bpe *tok, const char *text, size_t n, size_t *n_out)
{
    if (xsa_bpe_eot(tok) < 0) {
        xsa_error("tokenize stories: the tokenizer has no <|endoftext|> token");
        return NULL;
    }
    xsa_bpe_ids out = {0};
    size_t story = 0, i = 0;
    while (i < n) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t len = end - i;
        if (len && text[i + len - 1] == '\r') len--;
        if (len == 13 && memcmp(text + i, "<|endoftext|>", 13) == 0) {
            if (add_story(tok, text + story, i - story, &out) != 0) goto fail;
            story = end + 1 < n ? end + 1 : n;
        }
        i = end + 1;
    }
    if (story < n && add_story(tok, text + story, n - story, &out) != 0) goto fail;
    if (!out.ids && !(out.ids = malloc(sizeof *out.ids))) {
        xsa_error("tokenize stories: out of memory");
        return NULL;
    }
    *n_out = out.n;
    return out.ids;
fail:
    xsa_bpe_ids_free(&out);
    return NULL;
}

/* ---- the cache ------------------------------------------------------------------ */

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int32_t *xsa_data_cache_parse(const uint8_t *f, size_t len, uint64_t src_size, uint64_t src_hash,
                              uint64_t ident, int vocab, size_t *n_out, char *why, size_t why_n)
{
    int32_t *ids = NULL;
    if (len < HEADER || memcmp(f, MAGIC, 8) != 0) {
        snprintf(why, why_n, len < HEADER ? "cache truncated (no header)" : "cache corrupt (bad magic)");
    } else if (get32(f + 8) != XSA_DATA_CACHE_VERSION || get32(f + 12) != HEADER) {
        snprintf(why, why_n, "cache format version %u, need %u", get32(f + 8), XSA_DATA_CACHE_VERSION);
    } else if (get64(f + 16) != src_size || get64(f + 24) != src_hash) {
        snprintf(why, why_n, "source changed");
    } else if (get64(f + 32) != ident) {
        snprintf(why, why_n, "tokenizer changed");
    } else {
        uint64_t n = get64(f + 40);
        if (n > (len - HEADER) / 2 || HEADER + 2 * n != len) {
            snprintf(why, why_n, n > (len - HEADER) / 2 ? "cache truncated" : "cache corrupt (wrong length)");
        } else if (xsa_bpe_hash(f + HEADER, 2 * n, SEED_ID) != get64(f + 48)) {
            snprintf(why, why_n, "cache corrupt (checksum mismatch)");
        } else {
            ids = malloc((n ? n : 1) * sizeof *ids);
            if (!ids) {
                snprintf(why, why_n, "out of memory reading the cache");
            } else {
                for (uint64_t i = 0; i < n; i++) {
                    uint32_t v = (uint32_t)f[HEADER + 2 * i] | (uint32_t)f[HEADER + 2 * i + 1] << 8;
                    if (v >= (uint32_t)vocab) {
                        snprintf(why, why_n, "cache corrupt (id %u out of range)", v);
                        free(ids);
                        ids = NULL;
                        break;
                    }
                    ids[i] = (int32_t)v;
                }
                if (ids) *n_out = (size_t)n;
            }
        }
    }
    return ids;
}

/* The ids of a valid cache file, else NULL with the reason (no xsa_error:
 * an unusable cache is an ordinary event). */
static int32_t *read_cache(const char *path, uint64_t src_size, uint64_t src_hash, uint64_t ident,
                           int vocab, size_t *n_out, char *why, size_t why_n)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(why, why_n, "no cache file yet");
        return NULL;
    }
    size_t len;
    uint8_t *f = (uint8_t *)xsa_read_file(path, &len);
    if (!f) {
        snprintf(why, why_n, "cache unreadable");
        return NULL;
    }
    int32_t *ids = xsa_data_cache_parse(f, len, src_size, src_hash, ident, vocab, n_out, why, why_n);
    free(f);
    return ids;
}

/* 1 if path may be (over)written as a cache: it does not exist, is empty,
 * or starts with our magic (a stale or damaged cache of ours). Any other
 * file is somebody's data. */
static int may_replace(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return 1;
    if (!S_ISREG(sb.st_mode)) return 0;
    if (sb.st_size == 0) return 1;
    FILE *fp = fopen(path, "rb");
    if (!fp) return 1; /* unreadable: the write will report the real error */
    char head[8];
    size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    return got == sizeof head && memcmp(head, MAGIC, 8) == 0;
}

static int write_cache(const char *path, const int32_t *ids, size_t n, uint64_t src_size,
                       uint64_t src_hash, uint64_t ident, int64_t mtime)
{
    size_t bytes = HEADER + 2 * n;
    uint8_t *f = malloc(bytes);
    if (!f) return xsa_error("%s: out of memory", path);
    memset(f, 0, HEADER);
    memcpy(f, MAGIC, 8);
    f[8] = XSA_DATA_CACHE_VERSION;
    f[12] = HEADER;
    put64(f + 16, src_size);
    put64(f + 24, src_hash);
    put64(f + 32, ident);
    put64(f + 40, n);
    put64(f + 56, (uint64_t)mtime);
    for (size_t i = 0; i < n; i++) {
        f[HEADER + 2 * i] = (uint8_t)ids[i];
        f[HEADER + 2 * i + 1] = (uint8_t)(ids[i] >> 8);
    }
    put64(f + 48, xsa_bpe_hash(f + HEADER, 2 * n, SEED_ID));
    int rc = xsa_atomic_write(path, f, bytes);
    free(f);
    return rc;
}

int32_t *xsa_data_story_tokens(xsa_bpe *tok, const char *source_path, const char *cache_path,
                               size_t *n_out, xsa_data_cache_status *st)
{
    memset(st, 0, sizeof *st);
    size_t sn;
    char *src = xsa_read_text(source_path, &sn);
    if (!src) return NULL;
    struct stat sb, cb;
    int64_t mtime = stat(source_path, &sb) == 0 ? (int64_t)sb.st_mtime : 0;
    /* The cache must never replace its own source, however the two paths
     * are spelled (links, "./", another mount of the same file). */
    if (cache_path && stat(cache_path, &cb) == 0 && mtime != 0 && cb.st_dev == sb.st_dev &&
        cb.st_ino == sb.st_ino) {
        free(src);
        xsa_error("token cache %s is the source file %s itself; choose another cache path",
                  cache_path, source_path);
        return NULL;
    }
    uint64_t src_hash = xsa_bpe_hash(src, sn, SEED_SRC);
    uint64_t ident = xsa_bpe_identity(tok);
    int vocab = xsa_bpe_vocab_size(tok);
    int32_t *ids = NULL;
    if (cache_path && vocab <= 65536) {
        ids = read_cache(cache_path, sn, src_hash, ident, vocab, n_out, st->reason, sizeof st->reason);
        if (ids) {
            st->from_cache = 1;
            st->reason[0] = '\0';
            free(src);
            return ids;
        }
    } else {
        snprintf(st->reason, sizeof st->reason, cache_path ? "vocabulary too large for a uint16 cache"
                                                           : "no cache path");
    }
    size_t n;
    ids = xsa_data_tokenize_stories(tok, src, sn, &n);
    free(src);
    if (!ids) return NULL;
    if (cache_path && vocab <= 65536 && !may_replace(cache_path)) {
        snprintf(st->write_error, sizeof st->write_error,
                 "%s exists and is not a token cache; it was left unchanged", cache_path);
    } else if (cache_path && vocab <= 65536) {
        if (write_cache(cache_path, ids, n, sn, src_hash, ident, mtime) == 0)
            st->written = 1;
        else
            snprintf(st->write_error, sizeof st->write_error, "%s", xsa_last_error());
    }
    *n_out = n;
    return ids;
}

/* ---- windows and loaders ----------------------------------------------------------- */

int xsa_data_split(int64_t n_tokens, int64_t seq_len, double val_fraction, int64_t *n_windows,
                   int64_t *n_train)
{
    if (seq_len < 1) return xsa_error("data split: seq_len must be >= 1, got %lld", (long long)seq_len);
    if (n_tokens < 0) return xsa_error("data split: n_tokens must be >= 0, got %lld", (long long)n_tokens);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return xsa_error("data split: val_fraction must be in [0, 1), got %g", val_fraction);
    if (seq_len == INT64_MAX) /* seq_len + 1 tokens per window */
        return xsa_error("data split: seq_len %lld is too large", (long long)seq_len);
    int64_t nw = n_tokens / (seq_len + 1);
    /* the epsilon keeps 0.9 * 10 from landing on 8.999... */
    int64_t nt = (int64_t)((double)nw * (1.0 - val_fraction) + 1e-9);
    if (nt > nw) nt = nw;
    *n_windows = nw;
    *n_train = nt;
    return 0;
}

struct xsa_data_loader {
    xsa_tensor *tokens;
    int64_t first, nw, T, B;
    int shuffle;
    uint64_t seed;
    int64_t epoch, pos;
    int64_t *order;     /* window offsets (0-based within the loader's range) */
};

static void make_order(xsa_data_loader *l)
{
    for (int64_t k = 0; k < l->nw; k++) l->order[k] = k;
    if (!l->shuffle) return;
    xsa_rng g;
    xsa_rng_seed(&g, l->seed ^ ((uint64_t)(l->epoch + 1) * 0x9E3779B97F4A7C15ull));
    for (int64_t k = l->nw - 1; k > 0; k--) {
        int64_t j = xsa_rng_int(&g, 0, k + 1);
        int64_t t = l->order[k];
        l->order[k] = l->order[j];
        l->order[j] = t;
    }
}

xsa_data_loader *xsa_data_loader_new(xsa_tensor *tokens, int64_t first_window, int64_t n_windows,
                                     int64_t seq_len, int64_t batch, int shuffle, uint64_t seed)
{
    if (!tokens || tokens->dtype != XSA_INT32 || tokens->ndim != 1 || !xsa_tensor_is_contiguous(tokens)) {
        xsa_error("loader: tokens must be a contiguous 1-D int32 tensor");
        return NULL;
    }
    if (seq_len < 1 || batch < 1) {
        xsa_error("loader: seq_len (%lld) and batch (%lld) must be >= 1", (long long)seq_len,
                  (long long)batch);
        return NULL;
    }
    if (first_window < 0 || n_windows < 0) {
        xsa_error("loader: first window (%lld) and window count (%lld) must be >= 0",
                  (long long)first_window, (long long)n_windows);
        return NULL;
    }
    /* (first + n) * (seq_len + 1) tokens, each step checked */
    int64_t end_window, win_tokens, need;
    if (xsa_ckd_add_i64(first_window, n_windows, &end_window) ||
        xsa_ckd_add_i64(seq_len, 1, &win_tokens) ||
        xsa_ckd_mul_i64(end_window, win_tokens, &need) || need > tokens->shape[0]) {
        xsa_error("loader: %lld windows from window %lld, of %lld + 1 tokens each, exceed the "
                  "%lld tokens available", (long long)n_windows, (long long)first_window,
                  (long long)seq_len, (long long)tokens->shape[0]);
        return NULL;
    }
    /* so a batch, [min(batch, n_windows), seq_len], is smaller than the
     * token tensor and every window offset below fits */
    xsa_data_loader *l = calloc(1, sizeof *l);
    if (l) l->order = malloc((size_t)(n_windows ? n_windows : 1) * sizeof *l->order);
    if (!l || !l->order) {
        free(l);
        xsa_error("loader: out of memory");
        return NULL;
    }
    xsa_tensor_retain(tokens);
    l->tokens = tokens;
    l->first = first_window;
    l->nw = n_windows;
    l->T = seq_len;
    l->B = batch;
    l->shuffle = shuffle;
    l->seed = seed;
    make_order(l);
    return l;
}

void xsa_data_loader_free(xsa_data_loader *l)
{
    if (!l) return;
    xsa_tensor_free(l->tokens);
    free(l->order);
    free(l);
}

int64_t xsa_data_loader_num_batches(const xsa_data_loader *l)
{
    return l->shuffle ? l->nw / l->B : xsa_ceil_div_i64(l->nw, l->B);
}

int xsa_data_loader_batch(xsa_data_loader *l, int64_t i, xsa_tensor **inputs, xsa_tensor **targets)
{
    int64_t nb = xsa_data_loader_num_batches(l);
    *inputs = *targets = NULL;
    if (i < 0 || i >= nb)
        return xsa_error("loader: batch %lld out of range (%lld batches per epoch)", (long long)i + 1,
                         (long long)nb);
    int64_t b = l->nw - i * l->B < l->B ? l->nw - i * l->B : l->B;
    int64_t shape[2] = {b, l->T};
    xsa_tensor *x = xsa_tensor_new(XSA_INT32, 2, shape);
    xsa_tensor *y = x ? xsa_tensor_new(XSA_INT32, 2, shape) : NULL;
    if (!x || !y) {
        xsa_tensor_free(x);
        return -1;
    }
    const int32_t *tok = xsa_tensor_i32(l->tokens);
    int32_t *px = xsa_tensor_i32(x), *py = xsa_tensor_i32(y);
    for (int64_t r = 0; r < b; r++) {
        const int32_t *w = tok + (l->first + l->order[i * l->B + r]) * (l->T + 1);
        memcpy(px + r * l->T, w, (size_t)l->T * sizeof *w);
        memcpy(py + r * l->T, w + 1, (size_t)l->T * sizeof *w);
    }
    *inputs = x;
    *targets = y;
    return 0;
}

int xsa_data_loader_next(xsa_data_loader *l, xsa_tensor **inputs, xsa_tensor **targets)
{
    int64_t nb = xsa_data_loader_num_batches(l);
    if (nb == 0) {
        *inputs = *targets = NULL;
        return xsa_error("loader: no batches (%lld windows, batch %lld)", (long long)l->nw,
                         (long long)l->B);
    }
    if (l->pos >= nb) {
        if (l->epoch >= XSA_DATA_MAX_EPOCH) {
            *inputs = *targets = NULL;
            return xsa_error("loader: epoch %lld is the last one", (long long)l->epoch + 1);
        }
        l->epoch++;
        l->pos = 0;
        make_order(l);
    }
    int rc = xsa_data_loader_batch(l, l->pos, inputs, targets);
    if (rc == 0) l->pos++;
    return rc;
}

void xsa_data_loader_reset(xsa_data_loader *l)
{
    l->pos = 0;
    if (l->epoch != 0) {
        l->epoch = 0;
        make_order(l);
    }
}

int xsa_data_loader_seek(xsa_data_loader *l, int64_t epoch, int64_t position)
{
    int64_t nb = xsa_data_loader_num_batches(l);
    if (epoch < 0 || epoch > XSA_DATA_MAX_EPOCH || position < 0 || position > nb)
        return xsa_error("loader: cannot seek to epoch %lld, position %lld (%lld batches per epoch)",
                         (long long)epoch + 1, (long long)position, (long long)nb);
    if (epoch != l->epoch) {
        l->epoch = epoch;
        make_order(l);
    }
    l->pos = position;
    return 0;
}

int64_t xsa_data_loader_epoch(const xsa_data_loader *l) { return l->epoch; }
int64_t xsa_data_loader_position(const xsa_data_loader *l) { return l->pos; }

int64_t xsa_data_loader_window(const xsa_data_loader *l, int64_t k)
{
    return k < 0 || k >= l->nw ? -1 : l->first + l->order[k];
}
