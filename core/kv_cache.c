/*
 * kv_cache.c: the key/value cache of generate.h. Appending tokens runs the
 * model's one transformer block (block.c) on the new rows only, with the
 * cached attention below as its attention variant and a few-row linear
 * kernel; the model's weights are read by name (gpt_impl.h). The logits of
 * the last position come from the packed lm_head (lmhead_packed.c).
 *
 * Non-goals: see generate.h; sampling (sample.c) and the generation loop
 * (generate.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "generate_impl.h"
#include "gpt_impl.h"
#include "nn.h"
#include "vec.h"

struct xsa_kv_cache {
    xsa_gpt *m;
    int B, cap, len;
    int *start;             /* [B] first real slot of each row */
    float *k, *v;           /* [L,B,NH,cap,HS] */
    size_t rows_cap;        /* rows (B*T) the scratch holds */
    float *scratch;
    float *x, *ln, *mean, *rstd, *qkv, *z, *tmp, *fch, *att;
    float *wt;              /* wte packed for the lm_head (lmhead_packed.c) */
    /* a model with an external attention (gpt.h): every row's qkv so far,
     * [L,B,cap,3C], valid when hist_ok, and the [B,len+T,3C] the function
     * is called on */
    float *hist, *packed;
    int hist_ok;
};

/* The linear layers of a decoding step: out[N,OC] = in[N,C] w[C,OC] + b.
 * A step has a few rows (one per sequence), where OpenBLAS's threads cost
 * more than the product and then spin while the lm_head below runs on the
 * same cores; a prefill (many rows) goes to OpenBLAS. */
enum { SMALL_ROWS = 64 };
static void linear_rows(float *out, const float *in, const float *w, const float *b, int N, int C, int OC)
{
    if (N > SMALL_ROWS) {
        xsa_nn_linear_forward(out, in, w, b, N, C, OC);
        return;
    }
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OC;
        if (b) memcpy(o, b, (size_t)OC * sizeof(float));
        else memset(o, 0, (size_t)OC * sizeof(float));
    }
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++) axpy(out + (size_t)n * OC, in[(size_t)n * C + c], w + (size_t)c * OC, OC);
}

/* ---- the cache ---------------------------------------------------------- */

xsa_kv_cache *xsa_kv_cache_new(xsa_gpt *m, int B)
{
    if (!m) {
        xsa_error("kv_cache: no model");
        return NULL;
    }
    const xsa_gpt_config *cfg = xsa_gpt_get_config(m);
    if (B < 1 || B > (1 << 20)) {
        xsa_error("kv_cache: batch size %d must be in [1, %d]", B, 1 << 20);
        return NULL;
    }
    double kv = 2.0 * cfg->n_layer * (double)B * cfg->seq_len * cfg->d_model;
    if (kv * sizeof(float) > 64e9) {
        xsa_error("kv_cache: %d rows of %d positions need %.1f GB of keys and values", B,
                  cfg->seq_len, kv * sizeof(float) / 1e9);
        return NULL;
    }
    xsa_kv_cache *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->B = B;
    c->cap = cfg->seq_len;
    size_t half = (size_t)cfg->n_layer * B * cfg->seq_len * cfg->d_model;
    c->start = calloc((size_t)B, sizeof *c->start);
    c->k = malloc(2 * half * sizeof(float));
    if (!c->start || !c->k) {
        free(c->start);
        free(c->k);
        free(c);
        goto oom;
    }
    c->v = c->k + half;
    if (B <= XSA_LMHEAD_PACKED_MAX_ROWS) {
        c->wt = xsa_lmhead_packed_new(xsa_gpt_weights(m)->wte, cfg->vocab, cfg->d_model);
        if (!c->wt) {
            free(c->start);
            free(c->k);
            free(c);
            goto oom;
        }
    }
    xsa_gpt_retain(m);
    c->m = m;
    return c;
oom:
    xsa_error("kv_cache: out of memory");
    return NULL;
}

void xsa_kv_cache_free(xsa_kv_cache *c)
{
    if (!c) return;
    xsa_gpt_free(c->m);
    free(c->start);
    free(c->k);
    free(c->scratch);
    free(c->hist);
    xsa_lmhead_packed_free(c->wt);
    free(c);
}

void xsa_kv_cache_rewind(xsa_kv_cache *c)
{
    c->len = 0;
    memset(c->start, 0, (size_t)c->B * sizeof *c->start);
}

void xsa_kv_cache_reset(xsa_kv_cache *c)
{
    xsa_kv_cache_rewind(c);
    if (c->wt) { /* the weights may have been trained since: pack them again */
        const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
        xsa_lmhead_packed_update(c->wt, xsa_gpt_weights(c->m)->wte, cfg->vocab, cfg->d_model);
    }
}

int xsa_kv_cache_len(const xsa_kv_cache *c) { return c->len; }
int xsa_kv_cache_batch(const xsa_kv_cache *c) { return c->B; }
int xsa_kv_cache_capacity(const xsa_kv_cache *c) { return c->cap; }
xsa_gpt *xsa_kv_cache_model(const xsa_kv_cache *c) { return c->m; }

size_t xsa_kv_cache_bytes(const xsa_kv_cache *c)
{
    const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
    size_t C = (size_t)cfg->d_model;
    size_t wt = c->wt ? xsa_lmhead_packed_floats(cfg->vocab, cfg->d_model) * sizeof(float) : 0;
    size_t hist = c->hist ? ((size_t)cfg->n_layer + 1) * c->B * c->cap * 3 * C * sizeof(float) : 0;
    return 2 * (size_t)cfg->n_layer * c->B * c->cap * C * sizeof(float) + hist +
           c->rows_cap * (C * 10 + 2) * sizeof(float) + (size_t)c->cap * sizeof(float) + wt;
}

/* Scratch for N rows: x, ln, tmp, z [N,C]; qkv [N,3C]; fch [N,4C];
 * mean, rstd [N]; att [cap]. */
static int ensure_scratch(xsa_kv_cache *c, size_t N, size_t C)
{
    if (N <= c->rows_cap) return 0;
    size_t total = N * C * 4 + N * 3 * C + N * 4 * C + 2 * N + (size_t)c->cap;
    float *s = malloc(total * sizeof(float));
    if (!s) return xsa_error("kv_cache: out of memory for %zu rows of scratch", N);
    free(c->scratch);
    c->scratch = s;
    c->rows_cap = N;
    c->x = s; s += N * C;
    c->ln = s; s += N * C;
    c->tmp = s; s += N * C;
    c->z = s; s += N * C;
    c->qkv = s; s += N * 3 * C;
    c->fch = s; s += N * 4 * C;
    c->mean = s; s += N;
    c->rstd = s; s += N;
    c->att = s;
    return 0;
}

/* The cached attention, the block's attention variant when decoding: the
 * keys and values of the T new tokens of every row go into the cache's
 * slots len..len+T-1 of block `layer`, then each new token attends to its
 * row's slots start..its own (the same sums in the same order as the full
 * attention of nn.c: vec.h's attention_row), then the variant's row
 * forward (attention.h). a->y holds Y when the variant has one. Past
 * XSA_NN_ATTN_FULL_MAX positions the full forward runs the blocked kernel
 * instead (nn.h), whose sums are ordered by blocks: there decoding agrees
 * with it to rounding, not to the bit. */
typedef struct {
    xsa_kv_cache *c;
    int T, C, NH;
    const xsa_attention_variant *var; /* the model's (attention.h) */
    float lambda;
    const xsa_gpt_ext_attention *ext; /* or the model's external attention */
} cached_attention;

static void store_kv(xsa_kv_cache *c, int l, int T, int C, int NH, const float *qkv)
{
    int HS = C / NH;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < NH; h++) {
            size_t head = (((size_t)l * c->B + b) * NH + h) * c->cap;
            for (int t = 0; t < T; t++) {
                const float *src = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                size_t dst = (head + (size_t)(c->len + t)) * HS;
                memcpy(c->k + dst, src + C, (size_t)HS * sizeof(float));
                memcpy(c->v + dst, src + 2 * C, (size_t)HS * sizeof(float));
            }
        }
}

/* The external attention's step: the new rows' qkv join the history, and
 * the function runs over the whole prefix [B,len+T] (it may mix
 * positions), of which the new rows of Z are kept (gpt.h: it must be
 * causal). */
static int attend_ext(const cached_attention *ca, int l, const xsa_gpt_acts *acts)
{
    xsa_kv_cache *c = ca->c;
    int T = ca->T, C3 = 3 * ca->C, S = c->len + T;
    size_t row = (size_t)C3 * sizeof(float);
    for (int b = 0; b < c->B; b++) {
        float *h = c->hist + ((size_t)l * c->B + b) * c->cap * C3;
        memcpy(h + (size_t)c->len * C3, acts->qkv + (size_t)b * T * C3, (size_t)T * row);
        memcpy(c->packed + (size_t)b * S * C3, h, (size_t)S * row);
    }
    xsa_gpt_ext_call e = {l, c->B, S, ca->C, ca->NH, c->len, 0, c->packed, acts->z, NULL};
    return ca->ext->forward(ca->ext->ud, &e);
}

static int attend_cached(void *ctx, int l, const xsa_gpt_acts *acts)
{
    const cached_attention *ca = ctx;
    xsa_kv_cache *c = ca->c;
    if (ca->ext) return attend_ext(ca, l, acts);
    int T = ca->T, C = ca->C, NH = ca->NH, HS = C / NH, C3 = 3 * C, cap = c->cap;
    float scale = 1.0f / sqrtf((float)HS);
    float *a = acts->att;
    store_kv(c, l, T, C, NH, acts->qkv);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < NH; h++) {
            size_t head = (((size_t)l * c->B + b) * NH + h) * cap;
            const float *K = c->k + head * HS, *Vv = c->v + head * HS;
            int s0 = c->start[b];
            for (int t = 0; t < T; t++) {
                int slot = c->len + t;
                float *zo = acts->z + ((size_t)b * T + t) * C + h * HS;
                if (slot < s0) { /* a pad slot: nothing to attend to, never read */
                    memset(zo, 0, (size_t)HS * sizeof(float));
                    continue;
                }
                const float *q = acts->qkv + ((size_t)b * T + t) * C3 + h * HS;
                float *yo = ca->var->forward ? acts->y + ((size_t)b * T + t) * C + h * HS : zo;
                attention_row(a + s0, yo, q, K + (size_t)s0 * HS, (size_t)HS, Vv + (size_t)s0 * HS,
                              (size_t)HS, slot - s0 + 1, HS, scale);
                if (ca->var->forward) /* with this token's own value */
                    ca->var->forward(zo, yo, Vv + (size_t)slot * HS, HS, ca->lambda);
            }
        }
    return 0;
}

/* The history an external attention needs (attend_ext), or an error when
 * it cannot be had: rows of different lengths (the function would see the
 * pad slots, which the built-in attention masks out), or rows decoded
 * before the model got the function. */
static int prepare_ext(xsa_kv_cache *c, int T, const int *lens, int C)
{
    for (int b = 0; lens && b < c->B; b++)
        if (lens[b] != T)
            return xsa_error("kv_cache append: rows of different lengths (row %d has %d of %d) are "
                             "left-padded, and an attention function would see the pad: append "
                             "rows of one length", b + 1, lens[b], T);
    if (c->len > 0 && !c->hist_ok)
        return xsa_error("kv_cache append: the model's attention changed after this cache began: "
                         "reset it");
    if (c->hist) return 0;
    const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
    c->hist = malloc(((size_t)cfg->n_layer + 1) * c->B * c->cap * 3 * (size_t)C * sizeof(float));
    if (!c->hist) return xsa_error("kv_cache: out of memory for the attention function's history");
    c->packed = c->hist + (size_t)cfg->n_layer * c->B * c->cap * 3 * C;
    return 0;
}

int xsa_kv_cache_append(xsa_kv_cache *c, const int32_t *ids, int T, const int *lens,
                        float *logits, int all)
{
    const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
    int B = c->B, C = cfg->d_model, NH = cfg->n_head, V = cfg->vocab, L = cfg->n_layer;
    int cap = c->cap;
    if (!ids) return xsa_error("kv_cache append: no ids");
    if (T < 1) return xsa_error("kv_cache append: %d new tokens (at least 1 expected)", T);
    if (T > cap - c->len)
        return xsa_error("kv_cache append: %d new tokens after %d exceed the model's seq_len %d "
                         "(reset the cache, or keep the last tokens)", T, c->len, cap);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return xsa_error("kv_cache append: token %d at [%d,%d] is outside [0, %d)", (int)ids[i],
                             (int)(i / (size_t)T), (int)(i % (size_t)T), V);
    if (lens) {
        if (c->len != 0)
            return xsa_error("kv_cache append: row lengths are only accepted on an empty cache");
        for (int b = 0; b < B; b++)
            if (lens[b] < 1 || lens[b] > T)
                return xsa_error("kv_cache append: row %d has length %d, outside [1, %d]", b,
                                 lens[b], T);
    }
    const xsa_gpt_ext_attention *ext = xsa_gpt_ext(c->m);
    if (ext && prepare_ext(c, T, lens, C) != 0) return -1;
    size_t N = (size_t)B * T;
    if (ensure_scratch(c, N, (size_t)C) != 0) return -1;
    if (c->len == 0)
        for (int b = 0; b < B; b++) c->start[b] = lens ? T - lens[b] : 0;
    const xsa_gpt_tensors *w = xsa_gpt_weights(c->m);
    const float *wte = w->wte, *wpe = w->wpe;

    /* embedding: positions count from each row's first real token */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int pos = c->len + t - c->start[b];
            if (pos < 0) pos = 0; /* pad slot */
            float *o = c->x + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)ids[(size_t)b * T + t] * C, *pe = wpe + (size_t)pos * C;
            for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
        }
    /* the block over the new rows, in place in x; ln, mean and rstd serve
     * both LayerNorms, tmp holds Y and then res2, fch its own gelu */
    xsa_gpt_acts a = {.ln1 = c->ln, .ln1m = c->mean, .ln1r = c->rstd, .qkv = c->qkv,
                      .y = c->tmp, .att = c->att, .z = c->z, .res2 = c->tmp, .ln2 = c->ln,
                      .ln2m = c->mean, .ln2r = c->rstd, .fch = c->fch, .fchg = c->fch,
                      .res3 = c->x};
    cached_attention ca = {c, T, C, NH, xsa_attention_get((int)cfg->attention), (float)cfg->lambda,
                           ext};
    xsa_gpt_variant v = {linear_rows, attend_cached, &ca};
    for (int l = 0; l < L; l++)
        if (xsa_gpt_block_forward(&w->h[l], c->x, &a, (int)N, C, l, &v, 0) != 0) return -1;
    c->len += T;
    c->hist_ok = ext != NULL;
    if (!logits) return 0;
    const float *lnw = w->lnfw, *lnb = w->lnfb;
    if (all) {
        xsa_nn_layernorm_forward(c->ln, c->mean, c->rstd, c->x, lnw, lnb, (int)N, C);
        xsa_nn_lmhead_forward(logits, c->ln, wte, (int)N, C, V);
        return 0;
    }
    /* the last new position of each row */
    for (int b = 0; b < B; b++)
        memcpy(c->tmp + (size_t)b * C, c->x + ((size_t)b * T + T - 1) * C, (size_t)C * sizeof(float));
    xsa_nn_layernorm_forward(c->ln, c->mean, c->rstd, c->tmp, lnw, lnb, B, C);
    if (c->wt) /* one pass over the packed wte, whatever B */
        xsa_lmhead_packed_forward(logits, c->ln, c->wt, B, C, V);
    else
        xsa_nn_lmhead_forward(logits, c->ln, wte, B, C, V);
    return 0;
}
