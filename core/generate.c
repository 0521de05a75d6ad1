/*
 * generate.c: the key/value cache, sampling and the generation loop of
 * generate.h. The cache runs the GPT's blocks over the kernels of nn.h on
 * the new tokens only; the model is read through gpt.h's public accessors
 * (its parameters in checkpoint order), so nothing here depends on gpt.c's
 * internals.
 *
 * Non-goals: see generate.h.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "generate.h"
#include "nn.h"
#include "vec.h"
#include "system.h"

/* Tensors per block in checkpoint order (gpt.h). */
enum { LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB, NPL };
static const char *const layer_names[NPL] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};

struct xsa_kv_cache {
    xsa_gpt *m;
    int B, cap, len;
    int *start;             /* [B] first real slot of each row */
    float *k, *v;           /* [L,B,NH,cap,HS] */
    size_t rows_cap;        /* rows (B*T) the scratch holds */
    float *scratch;
    float *x, *ln, *mean, *rstd, *qkv, *z, *tmp, *fch, *att;
    float *wt;              /* wte packed for the lm_head: [ceil(V/16)][C][16] */
};

/* ---- the lm_head of a few rows ------------------------------------------
 * logits[B,V] = x[B,C] wte[V,C]^T for small B. A GEMM library packs all of
 * wte (25.7 MB at the study's size) on every call, which costs more than
 * the product when B is small; instead wte is packed once per cache, 16
 * vocabulary rows interleaved ([V/16][C][16]), so a 16-wide vector of logits
 * accumulates x[b][c] * wt[tile][c][:] over c with no horizontal sums and
 * each weight is read once per step whatever B. The tiles are split over
 * the engine's threads. */

#define LM_TILE 16
#define LM_BROWS 8
typedef float v16 __attribute__((vector_size(64)));

enum { LM_MAX_B = 64 };

static float *pack_wte(const float *wte, int V, int C)
{
    size_t tiles = ((size_t)V + LM_TILE - 1) / LM_TILE;
    float *wt = aligned_alloc(64, tiles * C * LM_TILE * sizeof(float));
    if (!wt) return NULL;
    for (size_t t = 0; t < tiles; t++)
        for (int c = 0; c < C; c++)
            for (int j = 0; j < LM_TILE; j++) {
                size_t v = t * LM_TILE + j;
                wt[(t * C + c) * LM_TILE + j] = v < (size_t)V ? wte[v * C + c] : 0.0f;
            }
    return wt;
}

typedef struct {
    float *logits;
    const float *x, *wt;
    int B, C, V;
    size_t t0, t1; /* tiles */
} lm_job;

#if defined(__AVX512F__)
/* 8 rows of x against one tile: 8 accumulators, one load of the tile per c */
static void lm_tile8(float *out, size_t ldo, const float *x, int C, const float *w)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float *x0 = x, *x1 = x + C, *x2 = x + 2 * C, *x3 = x + 3 * C, *x4 = x + 4 * C, *x5 = x + 5 * C,
                *x6 = x + 6 * C, *x7 = x + 7 * C;
    for (int c = 0; c < C; c++) {
        __m512 wc = _mm512_load_ps(w + (size_t)c * LM_TILE);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(x0[c]), wc, a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(x1[c]), wc, a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(x2[c]), wc, a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(x3[c]), wc, a3);
        a4 = _mm512_fmadd_ps(_mm512_set1_ps(x4[c]), wc, a4);
        a5 = _mm512_fmadd_ps(_mm512_set1_ps(x5[c]), wc, a5);
        a6 = _mm512_fmadd_ps(_mm512_set1_ps(x6[c]), wc, a6);
        a7 = _mm512_fmadd_ps(_mm512_set1_ps(x7[c]), wc, a7);
    }
    _mm512_storeu_ps(out, a0);
    _mm512_storeu_ps(out + ldo, a1);
    _mm512_storeu_ps(out + 2 * ldo, a2);
    _mm512_storeu_ps(out + 3 * ldo, a3);
    _mm512_storeu_ps(out + 4 * ldo, a4);
    _mm512_storeu_ps(out + 5 * ldo, a5);
    _mm512_storeu_ps(out + 6 * ldo, a6);
    _mm512_storeu_ps(out + 7 * ldo, a7);
}

/* 8 rows of x against two adjacent tiles: each broadcast of x feeds two
 * FMAs (16 accumulators), so loads do not limit the FMAs */
static void lm_tile8x2(float *out, size_t ldo, const float *x, int C, const float *w)
{
    __m512 a[8], b[8];
    for (int r = 0; r < 8; r++) a[r] = b[r] = _mm512_setzero_ps();
    const float *w2 = w + (size_t)C * LM_TILE;
    for (int c = 0; c < C; c++) {
        __m512 wa = _mm512_load_ps(w + (size_t)c * LM_TILE), wb = _mm512_load_ps(w2 + (size_t)c * LM_TILE);
#define ROW(r)                                                                                     \
    do {                                                                                           \
        __m512 xr = _mm512_set1_ps(x[(size_t)(r) * C + c]);                                        \
        a[r] = _mm512_fmadd_ps(xr, wa, a[r]);                                                      \
        b[r] = _mm512_fmadd_ps(xr, wb, b[r]);                                                      \
    } while (0)
        ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5); ROW(6); ROW(7);
#undef ROW
    }
    for (int r = 0; r < 8; r++) {
        _mm512_storeu_ps(out + r * ldo, a[r]);
        _mm512_storeu_ps(out + r * ldo + LM_TILE, b[r]);
    }
}

/* one row of x against one tile: 4 chains over c (latency), then summed */
static void lm_tile1(float *out, const float *x, int C, const float *w)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int c = 0;
    for (; c + 4 <= C; c += 4) {
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[c]), _mm512_load_ps(w + (size_t)c * LM_TILE), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(x[c + 1]), _mm512_load_ps(w + (size_t)(c + 1) * LM_TILE), a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(x[c + 2]), _mm512_load_ps(w + (size_t)(c + 2) * LM_TILE), a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(x[c + 3]), _mm512_load_ps(w + (size_t)(c + 3) * LM_TILE), a3);
    }
    for (; c < C; c++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[c]), _mm512_load_ps(w + (size_t)c * LM_TILE), a0);
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#elif defined(__AVX2__) && defined(__FMA__)
/* A tile is two 8-lane vectors. 4 rows at a time: 8 accumulators and the
 * tile's two vectors fit the 16 registers; per row and lane the same
 * chain of FMAs over c as the 16-lane lm_tile8. */
static void lm_tile4(float *out, size_t ldo, const float *x, int C, const float *w)
{
    __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
    const float *x0 = x, *x1 = x + C, *x2 = x + 2 * C, *x3 = x + 3 * C;
    for (int c = 0; c < C; c++) {
        __m256 wa = _mm256_load_ps(w + (size_t)c * LM_TILE), wb = _mm256_load_ps(w + (size_t)c * LM_TILE + 8);
        __m256 xr = _mm256_set1_ps(x0[c]);
        a0 = _mm256_fmadd_ps(xr, wa, a0);
        b0 = _mm256_fmadd_ps(xr, wb, b0);
        xr = _mm256_set1_ps(x1[c]);
        a1 = _mm256_fmadd_ps(xr, wa, a1);
        b1 = _mm256_fmadd_ps(xr, wb, b1);
        xr = _mm256_set1_ps(x2[c]);
        a2 = _mm256_fmadd_ps(xr, wa, a2);
        b2 = _mm256_fmadd_ps(xr, wb, b2);
        xr = _mm256_set1_ps(x3[c]);
        a3 = _mm256_fmadd_ps(xr, wa, a3);
        b3 = _mm256_fmadd_ps(xr, wb, b3);
    }
    _mm256_storeu_ps(out, a0);
    _mm256_storeu_ps(out + 8, b0);
    _mm256_storeu_ps(out + ldo, a1);
    _mm256_storeu_ps(out + ldo + 8, b1);
    _mm256_storeu_ps(out + 2 * ldo, a2);
    _mm256_storeu_ps(out + 2 * ldo + 8, b2);
    _mm256_storeu_ps(out + 3 * ldo, a3);
    _mm256_storeu_ps(out + 3 * ldo + 8, b3);
}

static void lm_tile8(float *out, size_t ldo, const float *x, int C, const float *w)
{
    lm_tile4(out, ldo, x, C, w);
    lm_tile4(out + 4 * ldo, ldo, x + 4 * (size_t)C, C, w);
}


/* one row: 2 chains over c per half (latency), then summed */
static void lm_tile1(float *out, const float *x, int C, const float *w)
{
    __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
    int c = 0;
    for (; c + 2 <= C; c += 2) {
        const float *w0 = w + (size_t)c * LM_TILE, *w1 = w0 + LM_TILE;
        __m256 x0 = _mm256_set1_ps(x[c]), x1 = _mm256_set1_ps(x[c + 1]);
        a0 = _mm256_fmadd_ps(x0, _mm256_load_ps(w0), a0);
        b0 = _mm256_fmadd_ps(x0, _mm256_load_ps(w0 + 8), b0);
        a1 = _mm256_fmadd_ps(x1, _mm256_load_ps(w1), a1);
        b1 = _mm256_fmadd_ps(x1, _mm256_load_ps(w1 + 8), b1);
    }
    for (; c < C; c++) {
        __m256 xc = _mm256_set1_ps(x[c]);
        a0 = _mm256_fmadd_ps(xc, _mm256_load_ps(w + (size_t)c * LM_TILE), a0);
        b0 = _mm256_fmadd_ps(xc, _mm256_load_ps(w + (size_t)c * LM_TILE + 8), b0);
    }
    _mm256_storeu_ps(out, _mm256_add_ps(a0, a1));
    _mm256_storeu_ps(out + 8, _mm256_add_ps(b0, b1));
}
#else
static void lm_tile1(float *out, const float *x, int C, const float *w)
{
    v16 acc = (v16){0};
    for (int c = 0; c < C; c++) acc += x[c] * ((const v16 *)w)[c];
    memcpy(out, &acc, sizeof acc);
}

static void lm_tile8(float *out, size_t ldo, const float *x, int C, const float *w)
{
    for (int r = 0; r < LM_BROWS; r++) lm_tile1(out + r * ldo, x + (size_t)r * C, C, w);
}

#endif

#if !defined(__AVX512F__)
/* two tiles: without AVX-512's 32 registers, one after the other */
static void lm_tile8x2(float *out, size_t ldo, const float *x, int C, const float *w)
{
    lm_tile8(out, ldo, x, C, w);
    lm_tile8(out + LM_TILE, ldo, x, C, w + (size_t)C * LM_TILE);
}
#endif

static void *lm_run(void *p)
{
    const lm_job *j = p;
    int C = j->C, V = j->V;
    float tail[LM_BROWS * LM_TILE];
    for (size_t t = j->t0; t < j->t1; t++) {
        const float *w = j->wt + t * C * LM_TILE;
        size_t v0 = t * LM_TILE;
        int nv = V - (int)v0 < LM_TILE ? V - (int)v0 : LM_TILE;
        if (t + 1 < j->t1 && (size_t)V >= v0 + 2 * LM_TILE && j->B % LM_BROWS == 0) {
            /* two full tiles at once */
            for (int b0 = 0; b0 < j->B; b0 += LM_BROWS)
                lm_tile8x2(j->logits + (size_t)b0 * V + v0, (size_t)V, j->x + (size_t)b0 * C, C, w);
            t++;
            continue;
        }
        for (int b0 = 0; b0 < j->B; b0 += LM_BROWS) {
            int nb = j->B - b0 < LM_BROWS ? j->B - b0 : LM_BROWS;
            const float *x = j->x + (size_t)b0 * C;
            float *o = j->logits + (size_t)b0 * V + v0;
            if (nv == LM_TILE) {
                if (nb == LM_BROWS) lm_tile8(o, (size_t)V, x, C, w);
                else for (int r = 0; r < nb; r++) lm_tile1(o + (size_t)r * V, x + (size_t)r * C, C, w);
            } else { /* the last, partial tile */
                for (int r = 0; r < nb; r++) {
                    lm_tile1(tail, x + (size_t)r * C, C, w);
                    memcpy(o + (size_t)r * V, tail, (size_t)nv * sizeof(float));
                }
            }
        }
    }
    return NULL;
}

static void lmhead_packed(float *logits, const float *x, const float *wt, int B, int C, int V)
{
    size_t tiles = ((size_t)V + LM_TILE - 1) / LM_TILE;
    int nt = xsa_threads();
    if (nt < 1) nt = 1;
    if (nt > 16) nt = 16;
    if ((size_t)nt > tiles) nt = (int)tiles;
    lm_job jobs[16];
    pthread_t th[16];
    int started[16] = {0};
    for (int i = 0; i < nt; i++)
        jobs[i] = (lm_job){logits, x, wt, B, C, V, tiles * i / nt, tiles * (i + 1) / nt};
    for (int i = 1; i < nt; i++) started[i] = pthread_create(&th[i], NULL, lm_run, &jobs[i]) == 0;
    lm_run(&jobs[0]);
    for (int i = 1; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else lm_run(&jobs[i]); /* no thread: do it here */
    }
}

/* ---- the attention loops: dot and axpy of vec.h, as nn.c (same order of sums) ---- */

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

static const float *W(const xsa_gpt *m, int idx) { return xsa_tensor_f32(xsa_gpt_param(m, idx)); }
static const float *LW(const xsa_gpt *m, int l, int k) { return W(m, 2 + l * NPL + k); }

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
    /* the parameters must be the ones this file indexes */
    for (int l = 0; l < cfg->n_layer; l++)
        for (int k = 0; k < NPL; k++) {
            const char *name = xsa_gpt_param_name(m, 2 + l * NPL + k);
            char want[96];
            snprintf(want, sizeof want, "h.%d.%s", l, layer_names[k]);
            if (!name || strcmp(name, want) != 0) {
                xsa_error("kv_cache: unexpected parameter layout (%s where %s was expected)",
                          name ? name : "(none)", want);
                return NULL;
            }
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
    if (B <= LM_MAX_B) {
        c->wt = pack_wte(xsa_tensor_f32(xsa_gpt_param(m, 0)), cfg->vocab, cfg->d_model);
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
    free(c->wt);
    free(c);
}

/* Forgets the positions (the generation loop's window slide: the weights
 * have not changed). */
static void cache_clear(xsa_kv_cache *c)
{
    c->len = 0;
    memset(c->start, 0, (size_t)c->B * sizeof *c->start);
}

void xsa_kv_cache_reset(xsa_kv_cache *c)
{
    cache_clear(c);
    if (c->wt) { /* the weights may have been trained since: pack them again */
        const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
        const float *wte = xsa_tensor_f32(xsa_gpt_param(c->m, 0));
        int V = cfg->vocab, C = cfg->d_model;
        for (size_t v = 0; v < (size_t)V; v++)
            for (int k = 0; k < C; k++) c->wt[(v / LM_TILE * C + k) * LM_TILE + v % LM_TILE] = wte[v * C + k];
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
    size_t wt = c->wt ? ((size_t)cfg->vocab + LM_TILE - 1) / LM_TILE * LM_TILE * C * sizeof(float) : 0;
    return 2 * (size_t)cfg->n_layer * c->B * c->cap * C * sizeof(float) +
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

/* Attention of the T new tokens of every row against the cache (whose
 * slots len..len+T-1 already hold their keys and values). */
static void cached_attention(xsa_kv_cache *c, int l, int T, int C, int NH, float lambda)
{
    int HS = C / NH, C3 = 3 * C, cap = c->cap;
    float scale = 1.0f / sqrtf((float)HS);
    float *a = c->att;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < NH; h++) {
            size_t head = (((size_t)l * c->B + b) * NH + h) * cap;
            const float *K = c->k + head * HS, *Vv = c->v + head * HS;
            int s0 = c->start[b];
            for (int t = 0; t < T; t++) {
                int slot = c->len + t;
                float *zo = c->z + ((size_t)b * T + t) * C + h * HS;
                if (slot < s0) { /* a pad slot: nothing to attend to, never read */
                    memset(zo, 0, (size_t)HS * sizeof(float));
                    continue;
                }
                const float *q = c->qkv + ((size_t)b * T + t) * C3 + h * HS;
                float mx = -INFINITY;
                for (int s = s0; s <= slot; s++) {
                    float sc = dot(q, K + (size_t)s * HS, HS) * scale;
                    a[s] = sc;
                    if (sc > mx) mx = sc;
                }
                float sum = 0.0f;
                for (int s = s0; s <= slot; s++) {
                    a[s] = expf(a[s] - mx);
                    sum += a[s];
                }
                float inv = 1.0f / sum;
                for (int s = s0; s <= slot; s++) a[s] *= inv;
                float *yo = lambda != 0.0f ? c->tmp + ((size_t)b * T + t) * C + h * HS : zo;
                for (int i = 0; i < HS; i++) yo[i] = 0.0f;
                for (int s = s0; s <= slot; s++) axpy(yo, a[s], Vv + (size_t)s * HS, HS);
                if (lambda != 0.0f) {
                    /* Z = Y - lambda (Y.Vn) Vn with this token's own value */
                    const float *v = Vv + (size_t)slot * HS;
                    float nv = sqrtf(dot(v, v, HS));
                    float r = 1.0f / (nv > 1e-12f ? nv : 1e-12f);
                    float sv = dot(yo, v, HS) * r;
                    float f = lambda * sv * r;
                    for (int i = 0; i < HS; i++) zo[i] = yo[i] - f * v[i];
                }
            }
        }
}

int xsa_kv_cache_append(xsa_kv_cache *c, const int32_t *ids, int T, const int *lens,
                        float *logits, int all)
{
    const xsa_gpt_config *cfg = xsa_gpt_get_config(c->m);
    int B = c->B, C = cfg->d_model, NH = cfg->n_head, V = cfg->vocab, L = cfg->n_layer;
    int HS = C / NH, cap = c->cap;
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
    size_t N = (size_t)B * T;
    if (ensure_scratch(c, N, (size_t)C) != 0) return -1;
    if (c->len == 0)
        for (int b = 0; b < B; b++) c->start[b] = lens ? T - lens[b] : 0;
    float lambda = cfg->attention == XSA_ATTN_XSA ? (float)cfg->lambda : 0.0f;
    const float *wte = W(c->m, 0), *wpe = W(c->m, 1);

    /* embedding: positions count from each row's first real token */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int pos = c->len + t - c->start[b];
            if (pos < 0) pos = 0; /* pad slot */
            float *o = c->x + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)ids[(size_t)b * T + t] * C, *pe = wpe + (size_t)pos * C;
            for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
        }
    for (int l = 0; l < L; l++) {
        xsa_nn_layernorm_forward(c->ln, c->mean, c->rstd, c->x, LW(c->m, l, LN1W),
                                 LW(c->m, l, LN1B), (int)N, C);
        linear_rows(c->qkv, c->ln, LW(c->m, l, QKVW), LW(c->m, l, QKVB), (int)N, C, 3 * C);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                size_t head = (((size_t)l * B + b) * NH + h) * cap;
                for (int t = 0; t < T; t++) {
                    const float *src = c->qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                    size_t dst = (head + (size_t)(c->len + t)) * HS;
                    memcpy(c->k + dst, src + C, (size_t)HS * sizeof(float));
                    memcpy(c->v + dst, src + 2 * C, (size_t)HS * sizeof(float));
                }
            }
        cached_attention(c, l, T, C, NH, lambda);
        /* x = c_proj(z) + x, then x = mlp(ln_2(x)) + x, as gpt.c adds them */
        linear_rows(c->tmp, c->z, LW(c->m, l, APW), LW(c->m, l, APB), (int)N, C, C);
        xsa_nn_residual_forward(c->x, c->tmp, c->x, N * C);
        xsa_nn_layernorm_forward(c->ln, c->mean, c->rstd, c->x, LW(c->m, l, LN2W),
                                 LW(c->m, l, LN2B), (int)N, C);
        linear_rows(c->fch, c->ln, LW(c->m, l, FCW), LW(c->m, l, FCB), (int)N, C, 4 * C);
        xsa_nn_gelu_forward(c->fch, c->fch, N * 4 * C);
        linear_rows(c->tmp, c->fch, LW(c->m, l, FPW), LW(c->m, l, FPB), (int)N, 4 * C, C);
        xsa_nn_residual_forward(c->x, c->tmp, c->x, N * C);
    }
    c->len += T;
    if (!logits) return 0;
    int lf = 2 + L * NPL;
    const float *lnw = W(c->m, lf), *lnb = W(c->m, lf + 1);
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
        lmhead_packed(logits, c->ln, c->wt, B, C, V);
    else
        xsa_nn_lmhead_forward(logits, c->ln, wte, B, C, V);
    return 0;
}

/* ---- sampling ----------------------------------------------------------- */

/* candidates of the nucleus, sorted by probability descending, then id */
typedef struct { float p; int32_t i; } cand_t;

void xsa_sampling_default(xsa_sampling *s)
{
    s->temperature = 1.0;
    s->top_k = 0;
    s->top_p = 1.0;
}

int xsa_sampling_validate(const xsa_sampling *s)
{
    if (!isfinite(s->temperature) || s->temperature < 0.0)
        return xsa_error("sampling: temperature must be a finite number >= 0 (got %g)", s->temperature);
    if (s->top_k < 0) return xsa_error("sampling: top_k must be >= 0 (got %d)", s->top_k);
    if (!(s->top_p > 0.0 && s->top_p <= 1.0))
        return xsa_error("sampling: top_p must be in (0, 1] (got %g)", s->top_p);
    return 0;
}

int32_t xsa_argmax(const float *x, int n)
{
    int best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv || (bv != bv && x[i] == x[i])) {
            bv = x[i];
            best = i;
        }
    return best;
}

size_t xsa_sample_work_bytes(int V)
{
    return (size_t)V * (sizeof(float) + sizeof(cand_t)) + 4096 * (sizeof(double) + sizeof(int));
}

/* The k-th largest (1-based) of x[n] (x is reordered). */
static float kth_largest(float *x, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float a = x[lo], b = x[(lo + hi) / 2], cc = x[hi];
        float pivot = (a > b) ? ((b > cc) ? b : (a > cc ? cc : a)) : ((a > cc) ? a : (b > cc ? cc : b));
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot) i++;
            while (x[j] < pivot) j--;
            if (i <= j) {
                float t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return x[want];
    }
    return x[want];
}

static int by_prob(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Bucket of a positive float: its top 12 bits (order-preserving). */
static int bucket_of(float p)
{
    uint32_t u;
    memcpy(&u, &p, sizeof u);
    return (int)(u >> 20) & 4095;
}

/* Whether temperature t samples at all: 0, and a t so small that 1/t is
 * not a float, are the greedy limit (argmax). */
static int greedy(double t) { return t <= 0.0 || !isfinite((float)(1.0 / t)); }

/* The extremes of logits (see generate.h): -1 with an error for a NaN or
 * when no logit is above -inf; else 1 when some logit is +inf (they share
 * the draw evenly: the limit of large logits), 0 otherwise. */
static int check_logits(const float *logits, int V)
{
    int any = 0, inf = 0;
    for (int i = 0; i < V; i++) {
        float l = logits[i];
        if (l != l) return xsa_error("sampling: logit %d is NaN", i);
        any |= l > -INFINITY;
        inf |= l == INFINITY;
    }
    if (!any) return xsa_error("sampling: every logit is -inf: no token can be drawn");
    return inf;
}

int xsa_sample_probs(float *probs, const float *logits, int V, const xsa_sampling *s, void *work)
{
    int inf = check_logits(logits, V);
    if (inf < 0) return -1;
    if (greedy(s->temperature)) {
        memset(probs, 0, (size_t)V * sizeof(float));
        probs[xsa_argmax(logits, V)] = 1.0f;
        return 1;
    }
    if (inf) {
        int n = 0;
        for (int i = 0; i < V; i++) n += logits[i] == INFINITY;
        for (int i = 0; i < V; i++) probs[i] = logits[i] == INFINITY ? 1.0f / (float)n : 0.0f;
        return n;
    }
    double *bsum = work; /* 8-byte aligned first */
    cand_t *cand = (cand_t *)(bsum + 4096);
    float *vals = (float *)(cand + V);
    int *bcount = (int *)(vals + V);
    /* softmax(l / T), unnormalised: exp((l - max) / T) */
    float mx = logits[xsa_argmax(logits, V)];
    float invt = (float)(1.0 / s->temperature);
    for (int i = 0; i < V; i++) {
        float e = expf((logits[i] - mx) * invt);
        probs[i] = e == e ? e : 0.0f;
    }
    if (s->top_k > 0 && s->top_k < V) {
        memcpy(vals, probs, (size_t)V * sizeof(float));
        float tau = kth_largest(vals, V, s->top_k);
        int above = 0;
        for (int i = 0; i < V; i++) above += probs[i] > tau;
        int ties = s->top_k - above; /* equal to tau: the lowest ids */
        for (int i = 0; i < V; i++) {
            if (probs[i] > tau) continue;
            if (probs[i] == tau && ties > 0) {
                ties--;
                continue;
            }
            probs[i] = 0.0f;
        }
    }
    if (s->top_p < 1.0) {
        /* the nucleus: buckets of probabilities from the top until the sum
         * reaches top_p, then a sort of the one bucket that crosses */
        double total = 0.0;
        memset(bsum, 0, 4096 * sizeof(double));
        memset(bcount, 0, 4096 * sizeof(int));
        for (int i = 0; i < V; i++)
            if (probs[i] > 0.0f) {
                int bk = bucket_of(probs[i]);
                bsum[bk] += probs[i];
                bcount[bk]++;
                total += probs[i];
            }
        double target = s->top_p * total, cum = 0.0;
        int cross = 0;
        for (int bk = 4095; bk >= 0; bk--) {
            if (cum + bsum[bk] >= target) {
                cross = bk;
                break;
            }
            cum += bsum[bk];
        }
        int n = 0;
        for (int i = 0; i < V; i++)
            if (probs[i] > 0.0f && bucket_of(probs[i]) == cross) {
                cand[n].p = probs[i];
                cand[n++].i = i;
            }
        qsort(cand, (size_t)n, sizeof *cand, by_prob);
        int keep = n;
        for (int j = 0; j < n; j++) {
            cum += cand[j].p;
            if (cum >= target) {
                keep = j + 1;
                break;
            }
        }
        for (int j = keep; j < n; j++) probs[cand[j].i] = 0.0f;
        for (int i = 0; i < V; i++)
            if (probs[i] > 0.0f && bucket_of(probs[i]) < cross) probs[i] = 0.0f;
    }
    double total = 0.0;
    int kept = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f) {
            total += probs[i];
            kept++;
        }
    float inv = (float)(1.0 / total);
    for (int i = 0; i < V; i++) probs[i] *= inv;
    return kept;
}

int32_t xsa_sample(const float *logits, int V, const xsa_sampling *s, xsa_rng *g, void *work)
{
    if (greedy(s->temperature)) return check_logits(logits, V) < 0 ? -1 : xsa_argmax(logits, V);
    float *probs = (float *)((char *)work + xsa_sample_work_bytes(V));
    if (xsa_sample_probs(probs, logits, V, s, work) < 0) return -1;
    double u = xsa_rng_uniform(g), cum = 0.0;
    int32_t last = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f) {
            cum += probs[i];
            last = i;
            if (cum > u) return i;
        }
    return last; /* u beyond the rounded total */
}

/* ---- the generation loop ------------------------------------------------ */

void xsa_generate_opts_default(xsa_generate_opts *o)
{
    o->max_new_tokens = 100;
    xsa_sampling_default(&o->sampling);
    o->seed = 0;
    o->eot = -1;
    o->use_cache = 1;
}

typedef struct {
    int B, S, V, maxn;
    int32_t **hist;   /* each row: prompt (cropped) then what it generated */
    int *hlen;
    int32_t *ids;     /* [B,S] a padded window */
    int *lens;
    float *logits;    /* [B,V] */
    void *work;
    xsa_rng *rng;
    int *active;
} gen_state;

static void gen_free(gen_state *g)
{
    if (g->hist)
        for (int b = 0; b < g->B; b++) free(g->hist[b]);
    free(g->hist);
    free(g->hlen);
    free(g->ids);
    free(g->lens);
    free(g->logits);
    free(g->work);
    free(g->rng);
    free(g->active);
}

/* Left-pads each row's last min(hlen, S) tokens into g->ids [B,T]; returns T. */
static int pack_window(gen_state *g)
{
    int T = 1;
    for (int b = 0; b < g->B; b++) {
        g->lens[b] = g->hlen[b] < g->S ? g->hlen[b] : g->S;
        if (g->lens[b] > T) T = g->lens[b];
    }
    for (int b = 0; b < g->B; b++) {
        int32_t *row = g->ids + (size_t)b * T;
        int pad = T - g->lens[b];
        for (int t = 0; t < pad; t++) row[t] = 0;
        memcpy(row + pad, g->hist[b] + g->hlen[b] - g->lens[b], (size_t)g->lens[b] * sizeof(int32_t));
    }
    return T;
}

/* The reference path: one full forward per row over its window. */
static int full_forward_logits(xsa_gpt *m, gen_state *g)
{
    for (int b = 0; b < g->B; b++) {
        if (!g->active[b]) continue;
        int T = g->hlen[b] < g->S ? g->hlen[b] : g->S;
        if (xsa_gpt_forward(m, g->hist[b] + g->hlen[b] - T, NULL, 1, T, NULL) != 0) return -1;
        memcpy(g->logits + (size_t)b * g->V, xsa_gpt_logits(m) + (size_t)(T - 1) * g->V,
               (size_t)g->V * sizeof(float));
    }
    return 0;
}

int xsa_gpt_generate(xsa_gpt *m, int B, const int32_t *const *prompts, const int *lens,
                     const xsa_generate_opts *o, int32_t *out, int *nout)
{
    const xsa_gpt_config *cfg = xsa_gpt_get_config(m);
    if (B < 1) return xsa_error("generate: no prompts");
    if (o->max_new_tokens < 0)
        return xsa_error("generate: max_new_tokens must be >= 0 (got %d)", o->max_new_tokens);
    if (xsa_sampling_validate(&o->sampling) != 0) return -1;
    for (int b = 0; b < B; b++) {
        nout[b] = 0;
        if (!prompts[b] || lens[b] < 1)
            return xsa_error("generate: prompt %d is empty (give at least one token)", b + 1);
        for (int t = 0; t < lens[b]; t++)
            if (prompts[b][t] < 0 || prompts[b][t] >= cfg->vocab)
                return xsa_error("generate: prompt %d has token %d, outside [0, %d)", b + 1,
                                 (int)prompts[b][t], cfg->vocab);
    }
    if (o->max_new_tokens == 0) return 0;
    gen_state g = {.B = B, .S = cfg->seq_len, .V = cfg->vocab, .maxn = o->max_new_tokens};
    int rc = -1;
    xsa_kv_cache *cache = NULL;
    g.hist = calloc((size_t)B, sizeof *g.hist);
    g.hlen = calloc((size_t)B, sizeof *g.hlen);
    g.ids = malloc((size_t)B * g.S * sizeof *g.ids);
    g.lens = malloc((size_t)B * sizeof *g.lens);
    g.logits = malloc((size_t)B * g.V * sizeof *g.logits);
    g.work = malloc(xsa_sample_work_bytes(g.V) + (size_t)g.V * sizeof(float));
    g.rng = malloc((size_t)B * sizeof *g.rng);
    g.active = malloc((size_t)B * sizeof *g.active);
    if (!g.hist || !g.hlen || !g.ids || !g.lens || !g.logits || !g.work || !g.rng || !g.active)
        goto oom;
    for (int b = 0; b < B; b++) {
        int keep = lens[b] < g.S ? lens[b] : g.S;
        g.hist[b] = malloc(((size_t)keep + g.maxn) * sizeof(int32_t));
        if (!g.hist[b]) goto oom;
        memcpy(g.hist[b], prompts[b] + lens[b] - keep, (size_t)keep * sizeof(int32_t));
        g.hlen[b] = keep;
        g.active[b] = 1;
        xsa_rng_seed(&g.rng[b], o->seed + (uint64_t)b);
    }
    if (o->use_cache) {
        cache = xsa_kv_cache_new(m, B);
        if (!cache) goto done;
        int T = pack_window(&g);
        if (xsa_kv_cache_append(cache, g.ids, T, g.lens, g.logits, 0) != 0) goto done;
    } else if (full_forward_logits(m, &g) != 0) {
        goto done;
    }
    for (int step = 0;; step++) {
        int any = 0;
        for (int b = 0; b < B; b++) {
            if (!g.active[b]) continue;
            int32_t id = xsa_sample(g.logits + (size_t)b * g.V, g.V, &o->sampling, &g.rng[b], g.work);
            if (id < 0) {
                char why[256]; /* xsa_error writes the buffer last_error reads */
                snprintf(why, sizeof why, "%s", xsa_last_error() + strlen("sampling: "));
                xsa_error("generate: row %d, new token %d: the model's %s", b + 1, nout[b] + 1, why);
                goto done;
            }
            if (id == o->eot) {
                g.active[b] = 0;
                continue;
            }
            out[(size_t)b * g.maxn + nout[b]++] = id;
            g.hist[b][g.hlen[b]++] = id;
            any = 1;
        }
        if (!any || step + 1 == g.maxn) break;
        if (!o->use_cache) {
            if (full_forward_logits(m, &g) != 0) goto done;
        } else if (xsa_kv_cache_len(cache) < g.S) {
            /* one new token per row; finished rows repeat their last one
             * (their logits are no longer read) */
            for (int b = 0; b < B; b++) g.ids[b] = g.hist[b][g.hlen[b] - 1];
            if (xsa_kv_cache_append(cache, g.ids, 1, NULL, g.logits, 0) != 0) goto done;
        } else {
            /* the window is full: recompute over the last seq_len tokens */
            cache_clear(cache);
            int T = pack_window(&g);
            if (xsa_kv_cache_append(cache, g.ids, T, g.lens, g.logits, 0) != 0) goto done;
        }
    }
    rc = 0;
    goto done;
oom:
    xsa_error("generate: out of memory");
done:
    xsa_kv_cache_free(cache);
    gen_free(&g);
    return rc;
}
