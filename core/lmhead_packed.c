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

#include "generate_impl.h"
#include "pool.h"
#include "simd.h"
#include "system.h"

#define LM_TILE XSA_LMHEAD_TILE
#define LM_BROWS 8

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

/* What differs between instruction sets is only how many accumulators the
 * registers hold (simd.h names the rest): a block of LM_RB rows by LM_TB
 * tiles (AVX-512: 8 x 2, 16 of its 32 registers; AVX2: 4 rows of a tile's
 * two vectors, 8 of its 16; plain C: one row), and the chains over c of
 * one row alone (4, 2, 1), whose latency a single row would wait on. */
#define LM_VECS (LM_TILE / VF_W) /* vectors in a tile's row */
/* the loops over rows, tiles, vectors and chains unrolled in full, so that
 * the accumulators are registers, not an array on the stack */
#if defined(__GNUC__) && !defined(__clang__)
#define LM_UNROLL _Pragma("GCC unroll 16")
#elif defined(__clang__)
#define LM_UNROLL _Pragma("unroll")
#else
#define LM_UNROLL
#endif
#if VF_W == 16
#define LM_RB 8
#define LM_TB 2
#define LM_CHAINS 4
#elif VF_W == 8
#define LM_RB 4
#define LM_TB 1
#define LM_CHAINS 2
#else
#define LM_RB 1
#define LM_TB 1
#define LM_CHAINS 1
#endif

/* nr rows of x (at most LM_RB) against nt adjacent tiles (at most LM_TB):
 * per row and lane one chain of multiply-adds over c, the same whatever
 * the block, so a logit does not depend on the rows beside it. Each
 * broadcast of x feeds nt * LM_VECS multiply-adds, so loads do not limit
 * them. */
XSA_ALWAYS_INLINE void lm_block(float *out, size_t ldo, const float *x, int C, const float *w, int nr, int nt)
{
    vf acc[LM_RB][LM_TB][LM_VECS];
    LM_UNROLL
    for (int r = 0; r < nr; r++)
        LM_UNROLL
        for (int t = 0; t < nt; t++)
            LM_UNROLL
            for (int v = 0; v < LM_VECS; v++) acc[r][t][v] = vf_zero();
    for (int c = 0; c < C; c++) {
        vf wv[LM_TB][LM_VECS];
        LM_UNROLL
        for (int t = 0; t < nt; t++)
            LM_UNROLL
            for (int v = 0; v < LM_VECS; v++) wv[t][v] = vf_load(w + ((size_t)t * C + c) * LM_TILE + v * VF_W);
        LM_UNROLL
        for (int r = 0; r < nr; r++) {
            vf xr = vf_set1(x[(size_t)r * C + c]);
            LM_UNROLL
            for (int t = 0; t < nt; t++)
                LM_UNROLL
                for (int v = 0; v < LM_VECS; v++) acc[r][t][v] = vf_fmadd(xr, wv[t][v], acc[r][t][v]);
        }
    }
    LM_UNROLL
    for (int r = 0; r < nr; r++)
        LM_UNROLL
        for (int t = 0; t < nt; t++)
            LM_UNROLL
            for (int v = 0; v < LM_VECS; v++) vf_store(out + r * ldo + t * LM_TILE + v * VF_W, acc[r][t][v]);
}

/* LM_BROWS rows against one tile */
static void lm_tile8(float *out, size_t ldo, const float *x, int C, const float *w)
{
    LM_UNROLL
    for (int r0 = 0; r0 < LM_BROWS; r0 += LM_RB) lm_block(out + r0 * ldo, ldo, x + (size_t)r0 * C, C, w, LM_RB, 1);
}

/* LM_BROWS rows against two adjacent tiles */
static void lm_tile8x2(float *out, size_t ldo, const float *x, int C, const float *w)
{
    LM_UNROLL
    for (int t0 = 0; t0 < 2; t0 += LM_TB)
        LM_UNROLL
        for (int r0 = 0; r0 < LM_BROWS; r0 += LM_RB)
            lm_block(out + r0 * ldo + t0 * LM_TILE, ldo, x + (size_t)r0 * C, C, w + (size_t)t0 * C * LM_TILE, LM_RB,
                     LM_TB);
}

/* one row of x against one tile: LM_CHAINS chains over c, then summed in
 * pairs ((a0 + a1) + (a2 + a3)) */
static void lm_tile1(float *out, const float *x, int C, const float *w)
{
    vf acc[LM_CHAINS][LM_VECS];
    LM_UNROLL
    for (int k = 0; k < LM_CHAINS; k++)
        LM_UNROLL
        for (int v = 0; v < LM_VECS; v++) acc[k][v] = vf_zero();
    int c = 0;
    for (; c + LM_CHAINS <= C; c += LM_CHAINS)
        LM_UNROLL
        for (int k = 0; k < LM_CHAINS; k++) {
            vf xk = vf_set1(x[c + k]);
            LM_UNROLL
            for (int v = 0; v < LM_VECS; v++)
                acc[k][v] = vf_fmadd(xk, vf_load(w + (size_t)(c + k) * LM_TILE + v * VF_W), acc[k][v]);
        }
    for (; c < C; c++) {
        vf xc = vf_set1(x[c]);
        LM_UNROLL
        for (int v = 0; v < LM_VECS; v++) acc[0][v] = vf_fmadd(xc, vf_load(w + (size_t)c * LM_TILE + v * VF_W), acc[0][v]);
    }
    LM_UNROLL
    for (int step = 1; step < LM_CHAINS; step *= 2)
        LM_UNROLL
        for (int k = 0; k + step < LM_CHAINS; k += 2 * step)
            LM_UNROLL
            for (int v = 0; v < LM_VECS; v++) acc[k][v] = vf_add(acc[k][v], acc[k + step][v]);
    LM_UNROLL
    for (int v = 0; v < LM_VECS; v++) vf_store(out + v * VF_W, acc[0][v]);
}

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
