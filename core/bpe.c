/*
 * bpe.c: GPT-2 byte-level BPE (see bpe.h for the exact behaviour).
 *
 * Layout of the tokenizer in memory:
 *   - every token's bytes live in one pool (tok_off/tok_len per id);
 *   - `vocab` is an open-addressing table bytes -> id over the mergeable
 *     tokens (the special token is kept out, so no merge can produce it);
 *   - rank[id] is the merge priority from vocab.bpe (bytes get 0..255);
 *   - `cache` maps pieces already encoded to their ids.
 * Hot path: pre-tokenise (ASCII by table, other code points through
 * utf8proc), then one cache probe per piece.
 *
 * Non-goals: thread-safe encoding on one object, other encodings.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include <cjson/cJSON.h>

#include "bpe.h"
#include "ckd.h"
#include "error.h"
#include "fileio.h"

#define SPECIAL_TEXT "<|endoftext|>"
#define SPECIAL_LEN 13
#define CACHE_MAX_PIECE 128      /* longer pieces are merged every time */
#define CACHE_MAX_ENTRIES (1u << 18)
#define NO_RANK INT32_MAX

struct xsa_bpe {
    int n_tokens;               /* ids are 0..n_tokens-1 */
    int eot;                    /* id of <|endoftext|> or -1 */
    uint8_t *pool;              /* token bytes */
    uint32_t *tok_off;
    uint16_t *tok_len;
    int32_t *rank;              /* merge priority; NO_RANK for specials */
    int32_t byte_id[256];
    size_t max_len;             /* longest mergeable token, bytes */
    uint64_t identity;
    /* vocab: slot = (hash tag << 32) | (id + 1); 0 is empty */
    uint64_t *vocab;
    uint32_t vocab_mask;
    /* cache of encoded pieces */
    uint64_t *cslots;           /* (tag << 32) | (entry + 1) */
    uint32_t cmask;
    uint32_t centries;
    uint32_t *ce_key;           /* entry -> offset in ckeys */
    uint32_t *ce_ids;           /* entry -> offset in cids */
    uint8_t *ce_klen, *ce_nids;
    uint8_t *ckeys;
    size_t ckeys_n, ckeys_cap;
    int32_t *cids;
    size_t cids_n, cids_cap;
};

/* ---- hashing ----------------------------------------------------------- */

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
           (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

/* Byte order independent, so identities agree across machines. */
static uint64_t hbytes(const uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
    while (n >= 8) {
        h = mix(h ^ le64(p)) * 0x94d049bb133111ebull;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = mix(h ^ w ^ 0xff51afd7ed558ccdull);
    return h ^ (h >> 32);
}

uint64_t xsa_bpe_hash(const void *p, size_t n, uint64_t seed)
{
    return hbytes((const uint8_t *)p, n, seed);
}

/* ---- GPT-2's byte <-> unicode alphabet --------------------------------- */

/* byte b is written as code point byte_cp[b] in encoder.json / vocab.bpe */
static void byte_alphabet(int byte_cp[256], int cp_byte[512])
{
    int n = 0;
    for (int i = 0; i < 512; i++) cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                        (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = printable ? b : 256 + n++;
        cp_byte[byte_cp[b]] = b;
    }
}

/* Decodes a symbol of the alphabet to bytes; -1 if a code point is not in
 * it. out must hold len bytes (never more bytes than UTF-8 input). */
static long symbol_bytes(const char *s, size_t len, const int cp_byte[512], uint8_t *out)
{
    size_t i = 0, o = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                              (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0 || cp < 0 || cp >= 512 || cp_byte[cp] < 0) return -1;
        out[o++] = (uint8_t)cp_byte[cp];
        i += (size_t)k;
    }
    return (long)o;
}

/* ---- vocab table -------------------------------------------------------- */

static int vocab_find(const xsa_bpe *b, const uint8_t *p, size_t n)
{
    uint64_t h = hbytes(p, n, 0);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & b->vocab_mask;; i = (i + 1) & b->vocab_mask) {
        uint64_t s = b->vocab[i];
        if (!s) return -1;
        if ((uint32_t)(s >> 32) == tag) {
            int id = (int)(uint32_t)s - 1;
            if (b->tok_len[id] == n && memcmp(b->pool + b->tok_off[id], p, n) == 0)
                return id;
        }
    }
}

static void vocab_insert(xsa_bpe *b, int id)
{
    const uint8_t *p = b->pool + b->tok_off[id];
    uint64_t h = hbytes(p, b->tok_len[id], 0);
    uint32_t i = (uint32_t)h & b->vocab_mask;
    while (b->vocab[i]) i = (i + 1) & b->vocab_mask;
    b->vocab[i] = (h >> 32) << 32 | (uint32_t)(id + 1);
}

/* ---- loading ------------------------------------------------------------ */

void xsa_bpe_free(xsa_bpe *b)
{
    if (!b) return;
    free(b->pool);
    free(b->tok_off);
    free(b->tok_len);
    free(b->rank);
    free(b->vocab);
    free(b->cslots);
    free(b->ce_key);
    free(b->ce_ids);
    free(b->ce_klen);
    free(b->ce_nids);
    free(b->ckeys);
    free(b->cids);
    free(b);
}

static int cache_init(xsa_bpe *b)
{
    b->cmask = 2 * CACHE_MAX_ENTRIES - 1;
    b->cslots = calloc((size_t)b->cmask + 1, sizeof *b->cslots);
    b->ce_key = malloc(CACHE_MAX_ENTRIES * sizeof *b->ce_key);
    b->ce_ids = malloc(CACHE_MAX_ENTRIES * sizeof *b->ce_ids);
    b->ce_klen = malloc(CACHE_MAX_ENTRIES);
    b->ce_nids = malloc(CACHE_MAX_ENTRIES);
    return b->cslots && b->ce_key && b->ce_ids && b->ce_klen && b->ce_nids ? 0 : -1;
}

void xsa_bpe_clear_cache(xsa_bpe *b)
{
    if (!b->centries) return;
    memset(b->cslots, 0, ((size_t)b->cmask + 1) * sizeof *b->cslots);
    b->centries = 0;
    b->ckeys_n = 0;
    b->cids_n = 0;
}

static xsa_bpe *load_fail(xsa_bpe *b, cJSON *json)
{
    cJSON_Delete(json);
    xsa_bpe_free(b);
    return NULL;
}

/* encoder.json's keys into the pool, each checked against its id; the
 * tables sized for count tokens. -1 with xsa_error. */
static int read_encoder(xsa_bpe *b, const cJSON *json, int count, const int cp_byte[512])
{
    size_t pool_cap = 0;
    for (cJSON *e = json->child; e; e = e->next) pool_cap += strlen(e->string);
    b->pool = malloc(pool_cap + 1);
    b->tok_off = malloc((size_t)count * sizeof *b->tok_off);
    b->tok_len = calloc((size_t)count, sizeof *b->tok_len);
    b->rank = malloc((size_t)count * sizeof *b->rank);
    uint32_t vsize = 1;
    while (vsize < 2u * (uint32_t)count) vsize <<= 1;
    b->vocab = calloc(vsize, sizeof *b->vocab);
    b->vocab_mask = vsize - 1;
    uint8_t *seen = calloc((size_t)count, 1);
    if (!b->pool || !b->tok_off || !b->tok_len || !b->rank || !b->vocab || !seen ||
        cache_init(b) != 0) {
        free(seen);
        return xsa_error("bpe: out of memory");
    }
    size_t pool_n = 0;
    for (cJSON *e = json->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        /* range first: converting a double outside int's range is undefined */
        int id = v >= 0 && v < count ? (int)v : -1;
        if (id < 0 || v != (double)id || seen[id]) {
            xsa_error("bpe: encoder.json: entry \"%.40s\" has id %.17g (ids must be 0..%d, each once)",
                      e->string, v, count - 1);
            free(seen);
            return -1;
        }
        seen[id] = 1;
        size_t slen = strlen(e->string);
        long nb;
        if (strcmp(e->string, SPECIAL_TEXT) == 0) {
            memcpy(b->pool + pool_n, SPECIAL_TEXT, SPECIAL_LEN);
            nb = SPECIAL_LEN;
            b->eot = id;
        } else {
            nb = symbol_bytes(e->string, slen, cp_byte, b->pool + pool_n);
        }
        if (nb <= 0 || nb > 65535) {
            xsa_error("bpe: encoder.json: key \"%.40s\" is not in GPT-2's byte alphabet", e->string);
            free(seen);
            return -1;
        }
        b->tok_off[id] = (uint32_t)pool_n;
        b->tok_len[id] = (uint16_t)nb;
        b->rank[id] = NO_RANK;
        pool_n += (size_t)nb;
    }
    free(seen);
    return 0;
}

/* The mergeable tokens into the vocab table, and the 256 bytes' ids. */
static int index_vocab(xsa_bpe *b)
{
    for (int id = 0; id < b->n_tokens; id++) {
        if (id == b->eot) continue;
        if (vocab_find(b, b->pool + b->tok_off[id], b->tok_len[id]) >= 0)
            return xsa_error("bpe: encoder.json: token %d duplicates the bytes of another token",
                             id);
        vocab_insert(b, id);
    }
    for (int c = 0; c < 256; c++) {
        uint8_t by = (uint8_t)c;
        b->byte_id[c] = vocab_find(b, &by, 1);
        if (b->byte_id[c] < 0)
            return xsa_error("bpe: encoder.json has no token for byte 0x%02x", c);
        b->rank[b->byte_id[c]] = 0; /* bytes never compete in a merge */
    }
    return 0;
}

/* vocab.bpe: "#version" header, then "A B" per line; later lines rank
 * higher (merge later). tiktoken overwrites a repeated result with the
 * later rank; so do we. */
static int read_merges(xsa_bpe *b, const char *vbpe, size_t vlen, const int cp_byte[512])
{
    size_t tmp_n;
    uint8_t *tmp = xsa_ckd_mul_size(vlen, 2, &tmp_n) || xsa_ckd_add_size(tmp_n, 2, &tmp_n)
                       ? NULL : malloc(tmp_n);
    if (!tmp) return xsa_error("bpe: out of memory");
    size_t pos = 0;
    int line = 0, merges = 0;
    while (pos < vlen) {
        const char *ls = vbpe + pos;
        const char *le = memchr(ls, '\n', vlen - pos);
        size_t llen = le ? (size_t)(le - ls) : vlen - pos;
        pos += llen + 1;
        line++;
        if (llen && ls[llen - 1] == '\r') llen--;
        if (llen == 0 || (line == 1 && llen >= 8 && memcmp(ls, "#version", 8) == 0)) continue;
        const char *sp = memchr(ls, ' ', llen);
        long na = -1, nb = -1;
        if (sp) {
            na = symbol_bytes(ls, (size_t)(sp - ls), cp_byte, tmp);
            if (na > 0)
                nb = symbol_bytes(sp + 1, llen - (size_t)(sp - ls) - 1, cp_byte, tmp + na);
        }
        if (na <= 0 || nb <= 0) {
            xsa_error("bpe: vocab.bpe line %d: expected two symbols of GPT-2's byte alphabet separated by one space",
                      line);
            free(tmp);
            return -1;
        }
        int id = vocab_find(b, tmp, (size_t)(na + nb));
        if (id < 0) {
            xsa_error("bpe: vocab.bpe line %d: the merged token is not in encoder.json", line);
            free(tmp);
            return -1;
        }
        b->rank[id] = 256 + merges++;
    }
    free(tmp);
    return 0;
}

/* Every token but the special one must be a byte or a merge's result. */
static int check_ranks(xsa_bpe *b)
{
    for (int id = 0; id < b->n_tokens; id++) {
        if (id == b->eot) continue;
        if (b->rank[id] == NO_RANK)
            return xsa_error("bpe: token %d of encoder.json is neither a byte nor the result of "
                             "a merge in vocab.bpe", id);
        if (b->tok_len[id] > b->max_len) b->max_len = b->tok_len[id];
    }
    return 0;
}

xsa_bpe *xsa_bpe_load_buffers(const char *enc, size_t enc_len, const char *vbpe, size_t vlen)
{
    int byte_cp[256], cp_byte[512];
    byte_alphabet(byte_cp, cp_byte);
    xsa_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        xsa_error("bpe: out of memory");
        return NULL;
    }
    b->eot = -1;
    cJSON *json = cJSON_ParseWithLength(enc, enc_len);
    if (!json || !cJSON_IsObject(json)) {
        xsa_error("bpe: encoder.json is not a JSON object");
        return load_fail(b, json);
    }
    int count = cJSON_GetArraySize(json);
    if (count < 256 || count > (1 << 24)) {
        xsa_error("bpe: encoder.json has %d entries (need at least the 256 bytes)", count);
        return load_fail(b, json);
    }
    b->n_tokens = count;
    if (read_encoder(b, json, count, cp_byte) != 0) return load_fail(b, json);
    cJSON_Delete(json);
    if (index_vocab(b) != 0 || read_merges(b, vbpe, vlen, cp_byte) != 0 || check_ranks(b) != 0)
        return load_fail(b, NULL);
    b->identity = hbytes((const uint8_t *)enc, enc_len, 0x5851u) ^
                  mix(hbytes((const uint8_t *)vbpe, vlen, 0x5852u) + XSA_BPE_ALGO_VERSION);
    return b;
}

xsa_bpe *xsa_bpe_load(const char *encoder_json_path, const char *vocab_bpe_path)
{
    size_t en, vn;
    char *enc = xsa_read_file(encoder_json_path, &en);
    if (!enc) return NULL;
    char *voc = xsa_read_file(vocab_bpe_path, &vn);
    if (!voc) {
        free(enc);
        return NULL;
    }
    xsa_bpe *b = xsa_bpe_load_buffers(enc, en, voc, vn);
    free(enc);
    free(voc);
    if (!b) {
        /* name the files, not just "encoder.json" */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", xsa_last_error());
        xsa_error("%s (files %s, %s)", msg, encoder_json_path, vocab_bpe_path);
    }
    return b;
}

int xsa_bpe_vocab_size(const xsa_bpe *b) { return b->n_tokens; }
int xsa_bpe_eot(const xsa_bpe *b) { return b->eot; }
uint64_t xsa_bpe_identity(const xsa_bpe *b) { return b->identity; }

const char *xsa_bpe_token(const xsa_bpe *b, int32_t id, size_t *len)
{
    if (id < 0 || id >= b->n_tokens) {
        xsa_error("token: id %ld is out of range [0, %d)", (long)id, b->n_tokens);
        return NULL;
    }
    *len = b->tok_len[id];
    return (const char *)b->pool + b->tok_off[id];
}

/* ---- id lists ------------------------------------------------------------ */

void xsa_bpe_ids_free(xsa_bpe_ids *v)
{
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

static int ids_reserve(xsa_bpe_ids *v, size_t extra)
{
    size_t need, bytes;
    if (xsa_ckd_add_size(v->n, extra, &need)) return xsa_error("encode: too many ids");
    if (need <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 256;
    while (cap < need && !xsa_ckd_mul_size(cap, 2, &cap)) {}
    if (cap < need || xsa_ckd_mul_size(cap, sizeof(int32_t), &bytes))
        return xsa_error("encode: %zu ids do not fit in memory", need);
    int32_t *p = realloc(v->ids, bytes);
    if (!p) return xsa_error("encode: out of memory (%zu ids)", cap);
    v->ids = p;
    v->cap = cap;
    return 0;
}

/* ---- merging one piece ---------------------------------------------------- */

static int32_t pair_rank(const xsa_bpe *b, const uint8_t *p, size_t n)
{
    if (n > b->max_len) return NO_RANK;
    int id = vocab_find(b, p, n);
    return id < 0 ? NO_RANK : b->rank[id];
}

/* Min-heap of (rank << 32 | start): the lowest rank first, leftmost on ties. */
static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent] <= v) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = v;
}

static void sift_down(uint64_t *h, size_t m, size_t i, uint64_t v)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    if (*n) sift_down(h, *n, 0, v);
    return top;
}

/*
 * Parts are identified by their start offset s (a byte of p); nxt[s] is the
 * start of the following part (n past the last), prv[s] the previous one.
 * cur[s] is the rank of the pair (s, nxt[s]) as last computed; a heap entry
 * is current iff its part is alive and its rank equals cur[s] (a part's pair
 * only ever grows, and different byte strings have different ranks, so an
 * outdated entry never matches).
 */
static int merge_piece(const xsa_bpe *b, const uint8_t *p, size_t n, xsa_bpe_ids *out)
{
    if (n >= UINT32_MAX) return xsa_error("encode: a single %zu-byte piece is too long", n);
    uint32_t small[4 * 64];
    uint64_t hsmall[3 * 64];
    uint32_t *mem = small;
    uint64_t *heap = hsmall;
    if (n > 64) {
        mem = malloc(4 * n * sizeof *mem);
        heap = malloc(3 * n * sizeof *heap);
        if (!mem || !heap) {
            free(mem);
            free(heap);
            return xsa_error("encode: out of memory merging a %zu-byte piece", n);
        }
    }
    uint32_t *nxt = mem, *prv = mem + n, *cur = mem + 2 * n, *alive = mem + 3 * n;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)(i + 1);
        prv[i] = (uint32_t)(i - 1); /* wraps for i == 0; never read there */
        alive[i] = 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = pair_rank(b, p + i, 2);
        cur[i] = (uint32_t)r;
        if (r != NO_RANK) heap[hn++] = (uint64_t)r << 32 | i;
    }
    for (size_t i = hn / 2; i-- > 0;) sift_down(heap, hn, i, heap[i]);
    if (n) cur[n - 1] = NO_RANK;
    while (hn) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t s = (uint32_t)top, r = (uint32_t)(top >> 32);
        if (!alive[s] || cur[s] != r) continue;
        uint32_t t = nxt[s];          /* absorbed part */
        alive[t] = 0;
        nxt[s] = nxt[t];
        if (nxt[t] < n) prv[nxt[t]] = s;
        /* the pair to the right of the merged part */
        if (nxt[s] < n) {
            int32_t nr = pair_rank(b, p + s, nxt[nxt[s]] - s);
            cur[s] = (uint32_t)nr;
            if (nr != NO_RANK) heap_push(heap, &hn, (uint64_t)nr << 32 | s);
        } else {
            cur[s] = NO_RANK;
        }
        /* the pair to its left */
        if (s > 0) {
            uint32_t q = prv[s];
            int32_t nr = pair_rank(b, p + q, nxt[s] - q);
            cur[q] = (uint32_t)nr;
            if (nr != NO_RANK) heap_push(heap, &hn, (uint64_t)nr << 32 | q);
        }
    }
    int rc = 0;
    size_t parts = 0;
    for (size_t s = 0; s < n; s = nxt[s]) parts++;
    if (ids_reserve(out, parts) != 0) {
        rc = -1;
    } else {
        for (size_t s = 0; s < n; s = nxt[s])
            out->ids[out->n++] = vocab_find(b, p + s, nxt[s] - s);
    }
    if (mem != small) {
        free(mem);
        free(heap);
    }
    return rc;
}

/* ---- the piece cache ------------------------------------------------------ */

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096, bytes;
    while (c < need && !xsa_ckd_mul_size(c, 2, &c)) {}
    if (c < need || xsa_ckd_mul_size(c, elem, &bytes)) return -1;
    void *p = realloc(*buf, bytes);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

static int encode_piece(xsa_bpe *b, const uint8_t *p, size_t n, xsa_bpe_ids *out)
{
    if (n == 1) {
        if (ids_reserve(out, 1) != 0) return -1;
        out->ids[out->n++] = b->byte_id[p[0]];
        return 0;
    }
    if (n > CACHE_MAX_PIECE) {
        int id = vocab_find(b, p, n);
        if (id >= 0) {
            if (ids_reserve(out, 1) != 0) return -1;
            out->ids[out->n++] = id;
            return 0;
        }
        return merge_piece(b, p, n, out);
    }
    uint64_t h = hbytes(p, n, 0x63u);
    uint32_t tag = (uint32_t)(h >> 32);
    uint32_t i = (uint32_t)h & b->cmask;
    for (;; i = (i + 1) & b->cmask) {
        uint64_t s = b->cslots[i];
        if (!s) break;
        if ((uint32_t)(s >> 32) != tag) continue;
        uint32_t e = (uint32_t)s - 1;
        if (b->ce_klen[e] == n && memcmp(b->ckeys + b->ce_key[e], p, n) == 0) {
            size_t k = b->ce_nids[e];
            if (ids_reserve(out, k) != 0) return -1;
            memcpy(out->ids + out->n, b->cids + b->ce_ids[e], k * sizeof(int32_t));
            out->n += k;
            return 0;
        }
    }
    size_t start = out->n;
    int id = vocab_find(b, p, n);
    if (id >= 0) {
        if (ids_reserve(out, 1) != 0) return -1;
        out->ids[out->n++] = id;
    } else if (merge_piece(b, p, n, out) != 0) {
        return -1;
    }
    size_t k = out->n - start;
    if (b->centries >= CACHE_MAX_ENTRIES) {
        xsa_bpe_clear_cache(b);
        i = (uint32_t)h & b->cmask;
    }
    /* a failed cache insert only costs speed later: results are already out */
    if (grow((void **)&b->ckeys, &b->ckeys_cap, b->ckeys_n + n, 1) != 0 ||
        grow((void **)&b->cids, &b->cids_cap, b->cids_n + k, sizeof(int32_t)) != 0)
        return 0;
    while (b->cslots[i]) i = (i + 1) & b->cmask;
    uint32_t e = b->centries++;
    b->ce_key[e] = (uint32_t)b->ckeys_n;
    b->ce_ids[e] = (uint32_t)b->cids_n;
    b->ce_klen[e] = (uint8_t)n;
    b->ce_nids[e] = (uint8_t)k;
    memcpy(b->ckeys + b->ckeys_n, p, n);
    memcpy(b->cids + b->cids_n, out->ids + start, k * sizeof(int32_t));
    b->ckeys_n += n;
    b->cids_n += k;
    b->cslots[i] = (uint64_t)tag << 32 | (e + 1);
    return 0;
}

/* ---- pre-tokenisation ------------------------------------------------------ */

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

static const uint8_t ascii_class[128] = {
    ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE,
    ['\r'] = C_SPACE, [' '] = C_SPACE,
    ['0'] = C_NUMBER, ['1'] = C_NUMBER, ['2'] = C_NUMBER, ['3'] = C_NUMBER,
    ['4'] = C_NUMBER, ['5'] = C_NUMBER, ['6'] = C_NUMBER, ['7'] = C_NUMBER,
    ['8'] = C_NUMBER, ['9'] = C_NUMBER,
    ['A'] = C_LETTER, ['B'] = C_LETTER, ['C'] = C_LETTER, ['D'] = C_LETTER,
    ['E'] = C_LETTER, ['F'] = C_LETTER, ['G'] = C_LETTER, ['H'] = C_LETTER,
    ['I'] = C_LETTER, ['J'] = C_LETTER, ['K'] = C_LETTER, ['L'] = C_LETTER,
    ['M'] = C_LETTER, ['N'] = C_LETTER, ['O'] = C_LETTER, ['P'] = C_LETTER,
    ['Q'] = C_LETTER, ['R'] = C_LETTER, ['S'] = C_LETTER, ['T'] = C_LETTER,
    ['U'] = C_LETTER, ['V'] = C_LETTER, ['W'] = C_LETTER, ['X'] = C_LETTER,
    ['Y'] = C_LETTER, ['Z'] = C_LETTER,
    ['a'] = C_LETTER, ['b'] = C_LETTER, ['c'] = C_LETTER, ['d'] = C_LETTER,
    ['e'] = C_LETTER, ['f'] = C_LETTER, ['g'] = C_LETTER, ['h'] = C_LETTER,
    ['i'] = C_LETTER, ['j'] = C_LETTER, ['k'] = C_LETTER, ['l'] = C_LETTER,
    ['m'] = C_LETTER, ['n'] = C_LETTER, ['o'] = C_LETTER, ['p'] = C_LETTER,
    ['q'] = C_LETTER, ['r'] = C_LETTER, ['s'] = C_LETTER, ['t'] = C_LETTER,
    ['u'] = C_LETTER, ['v'] = C_LETTER, ['w'] = C_LETTER, ['x'] = C_LETTER,
    ['y'] = C_LETTER, ['z'] = C_LETTER,
};

/* Unicode White_Space, the set of \s in tiktoken's regex engine (Rust). */
static int is_white(int32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int cp_class(int32_t c)
{
    if (c < 128) return ascii_class[c];
    if (is_white(c)) return C_SPACE;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return C_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return C_NUMBER;
    default:
        return C_OTHER;
    }
}

/* Class of the code point at s[i] (valid UTF-8), its length in *len. */
static inline int class_at(const uint8_t *s, size_t i, size_t *len)
{
    uint8_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return ascii_class[c];
    }
    int32_t cp;
    if (c < 0xE0) {
        cp = (c & 0x1F) << 6 | (s[i + 1] & 0x3F);
        *len = 2;
    } else if (c < 0xF0) {
        cp = (c & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
        *len = 3;
    } else {
        cp = (c & 0x07) << 18 | (s[i + 1] & 0x3F) << 12 | (s[i + 2] & 0x3F) << 6 |
             (s[i + 3] & 0x3F);
        *len = 4;
    }
    return cp_class(cp);
}

/* End of the piece starting at i < n (s valid UTF-8), following the regex's
 * alternatives in order. */
static size_t next_piece(const uint8_t *s, size_t n, size_t i)
{
    size_t len;
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            uint8_t c2 = s[i + 2];
            if ((a == 'r' && c2 == 'e') || (a == 'v' && c2 == 'e') || (a == 'l' && c2 == 'l'))
                return i + 3;
        }
    }
    int cls = class_at(s, i, &len);
    size_t j = i + len;
    if (s[i] == ' ' && j < n) {
        /* " ?X+": a space joins a following run of letters, numbers or others */
        int c2 = class_at(s, j, &len);
        if (c2 != C_SPACE) {
            cls = c2;
            j += len;
        }
    }
    if (cls != C_SPACE) {
        while (j < n && class_at(s, j, &len) == cls) j += len;
        return j;
    }
    /* white space: the whole run if it ends the text; else all of it but its
     * last code point (\s+(?!\S)), which starts the next piece; a single
     * code point before non-space stands alone (\s+). */
    size_t last = i;
    while (j < n) {
        if (class_at(s, j, &len) != C_SPACE) return last > i ? last : j;
        last = j;
        j += len;
    }
    return n;
}

static int encode_ordinary(xsa_bpe *b, const uint8_t *s, size_t n, xsa_bpe_ids *out)
{
    size_t i = 0;
    while (i < n) {
        size_t j = next_piece(s, n, i);
        if (encode_piece(b, s + i, j - i, out) != 0) return -1;
        i = j;
    }
    return 0;
}

/* ---- UTF-8 repair ------------------------------------------------------------ */

/* Length of the well-formed sequence at s[i] (Unicode table 3-7), or 0 with
 * *bad set to the length of the maximal invalid subpart to replace. */
static size_t utf8_seq(const uint8_t *s, size_t n, size_t i, size_t *bad)
{
    uint8_t c = s[i];
    if (c < 0x80) return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (i + k >= n) break;
        uint8_t d = s[i + k];
        if (d < lo || d > hi) break;
        lo = 0x80;
        hi = 0xBF;
    }
    if (k > need) return need + 1;
    *bad = k;
    return 0;
}

char *xsa_utf8_repair(const char *text, size_t n, size_t *out_len, int *failed)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, bad = 0, k;
    *failed = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        k = utf8_seq(s, n, i, &bad);
        if (!k) break;
        i += k;
    }
    if (i >= n) {
        *out_len = n;
        return NULL;
    }
    /* each bad byte grows to at most 3 bytes */
    size_t cap;
    char *o = xsa_ckd_mul_size(n, 3, &cap) || xsa_ckd_add_size(cap, 1, &cap) ? NULL : malloc(cap);
    if (!o) {
        *failed = 1;
        xsa_error("encode: out of memory repairing UTF-8");
        return NULL;
    }
    memcpy(o, text, i);
    size_t on = i;
    while (i < n) {
        k = utf8_seq(s, n, i, &bad);
        if (k) {
            memcpy(o + on, s + i, k);
            on += k;
            i += k;
        } else {
            memcpy(o + on, "\xEF\xBF\xBD", 3);
            on += 3;
            i += bad;
        }
    }
    o[on] = '\0';
    *out_len = on;
    return o;
}

/* ---- public encode/decode ----------------------------------------------------- */

/* The first "<|endoftext|>" in s[0..n), or NULL (memmem is not C11). */
static const uint8_t *find_special(const uint8_t *s, size_t n)
{
    const uint8_t *end = s + n;
    while ((size_t)(end - s) >= SPECIAL_LEN) {
        const uint8_t *p = memchr(s, '<', (size_t)(end - s) - SPECIAL_LEN + 1);
        if (!p) return NULL;
        if (memcmp(p, SPECIAL_TEXT, SPECIAL_LEN) == 0) return p;
        s = p + 1;
    }
    return NULL;
}

int xsa_bpe_encode_append(xsa_bpe *b, const char *text, size_t n, int flags, xsa_bpe_ids *out)
{
    size_t len;
    int failed;
    char *fixed = xsa_utf8_repair(text, n, &len, &failed);
    if (failed) return -1;
    const uint8_t *s = (const uint8_t *)(fixed ? fixed : text);
    int rc = 0;
    if ((flags & XSA_BPE_SPECIAL) && b->eot >= 0) {
        size_t i = 0;
        while (rc == 0) {
            const uint8_t *hit = find_special(s + i, len - i);
            size_t end = hit ? (size_t)(hit - s) : len;
            rc = encode_ordinary(b, s + i, end - i, out);
            if (!hit || rc != 0) break;
            rc = ids_reserve(out, 1);
            if (rc == 0) out->ids[out->n++] = b->eot;
            i = end + SPECIAL_LEN;
        }
    } else {
        rc = encode_ordinary(b, s, len, out);
    }
    free(fixed);
    return rc;
}

int32_t *xsa_bpe_encode(xsa_bpe *b, const char *text, size_t n, int flags, size_t *n_out)
{
    xsa_bpe_ids v = {0};
    if (ids_reserve(&v, n / 3 + 16) != 0 || xsa_bpe_encode_append(b, text, n, flags, &v) != 0) {
        xsa_bpe_ids_free(&v);
        return NULL;
    }
    *n_out = v.n;
    return v.ids;
}

char *xsa_bpe_decode(const xsa_bpe *b, const int32_t *ids, size_t n, size_t *len_out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= b->n_tokens) {
            xsa_error("decode: id %ld at position %zu is out of range [0, %d)",
                      (long)ids[i], i + 1, b->n_tokens);
            return NULL;
        }
        if (xsa_ckd_add_size(total, b->tok_len[ids[i]], &total) || total == SIZE_MAX) {
            xsa_error("decode: %zu ids decode to more bytes than memory holds", n);
            return NULL;
        }
    }
    char *o = malloc(total + 1);
    if (!o) {
        xsa_error("decode: out of memory (%zu bytes)", total);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(o + k, b->pool + b->tok_off[ids[i]], b->tok_len[ids[i]]);
        k += b->tok_len[ids[i]];
    }
    o[k] = '\0';
    *len_out = k;
    return o;
}
