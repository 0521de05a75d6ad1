/*
 * lmhead_packed.c: the lm_head of a few rows, for decoding (generate_impl.h):
 * logits[B,V] = x[B,C] wte[V,C]^T for small B. A GEMM library packs all of
 * wte (25.7 MB at the study's size) on every call, which costs more than
 * the product when B is small; instead wte is packed once per cache, 16
 * vocabulary rows interleaved ([V/16][C][16]), so a 16-wide vector of logits
 * accumulates x[b][c] * wt[tile][c][:] over c with no horizontal sums and
 * each weight is read once per step whatever B. The tiles are split over
 * the engine's threads.
 *
 * Non-goals: many rows (nn.h's lm_head), the loss and its gradient.
 */
#include <pthread.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "generate_impl.h"
#include "pool.h"
#include "system.h"

#define LM_TILE XSA_LMHEAD_TILE
#define LM_BROWS 8
typedef float v16 __attribute__((vector_size(64)));

size_t xsa_lmhead_packed_floats(int V, int C)
{
    return ((size_t)V + LM_TILE - 1) / LM_TILE * (size_t)C * LM_TILE;
}

void xsa_lmhead_packed_update(float *wt, const float *wte, int V, int C)
{
    size_t tiles = ((size_t)V + LM_TILE - 1) / LM_TILE;
    for (size_t t = 0; t < tiles; t++)
        for (int c = 0; c < C; c++)
            for (int j = 0; j < LM_TILE; j++) {
                size_t v = t * LM_TILE + j;
                wt[(t * C + c) * LM_TILE + j] = v < (size_t)V ? wte[v * C + c] : 0.0f;
            }
}

float *xsa_lmhead_packed_new(const float *wte, int V, int C)
{
    /* pooled: every generate call makes a cache, and a fresh 26 MB buffer
     * each time cost more in page faults than its 64 decoding steps */
    float *wt = xsa_pool_get(XSA_POOL_DECODE, xsa_lmhead_packed_floats(V, C));
    if (wt) xsa_lmhead_packed_update(wt, wte, V, C);
    return wt;
}

void xsa_lmhead_packed_free(float *wt) { xsa_pool_put(wt); }

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

void xsa_lmhead_packed_forward(float *logits, const float *x, const float *wt, int B, int C, int V)
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
