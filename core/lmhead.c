/*
 * lmhead.c: the tied lm_head and its loss, the kernels of nn.h after the last
 * layer norm: the plain products, softmax cross-entropy over the vocabulary
 * (forward and backward over an [N,V] logits array), the cross-entropy
 * backward fused with the lm_head's, and the fused, chunked lm_head +
 * cross-entropy that never holds [N,V] (the training step's and the
 * evaluation's loss). The softmax over the vocabulary is the engine's one
 * hot loop outside the matrix products (N*V exponentials per step), so it
 * is vectorised (simd.h) and split over POSIX threads so that no bit
 * depends on the thread count.
 *
 * Non-goals: untied output layers, label smoothing, ignored targets,
 * logits in other dtypes (bf16 products only, through matmul_bf16.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gemm.h"
#include "matmul_bf16.h"
#include "nn.h"
#include "simd.h"
#include "vec.h"
#include "system.h"

#define CE_MAX_THREADS XSA_SPLIT_MAX /* the threads of xsa_run_split (system.h) */

/* ---- tied lm_head ------------------------------------------------------- */

void xsa_nn_lmhead_forward(float *logits, const float *inp, const float *wte,
                           int N, int C, int V)
{
    xsa_sgemm(0, 1, N, V, C, 1.0f, inp, C, wte, C, 0.0f, logits, V);
}

void xsa_nn_lmhead_backward(float *dinp, float *dwte, const float *dlogits,
                            const float *inp, const float *wte, int N, int C, int V)
{
    if (dinp)
        xsa_sgemm(0, 0, N, C, V, 1.0f, dlogits, V, wte, C, 1.0f, dinp, C);
    if (dwte)
        xsa_sgemm(1, 0, V, C, N, 1.0f, dlogits, V, inp, C, 1.0f, dwte, C);
}


/* ---- cross-entropy over [N,V] logits -------------------------------------- */

/* One row: returns log(sum exp(l - max)) + max, and writes the unnormalised
 * exponentials to pr (may alias l) when non-NULL; *ssum gets their sum.
 * The vector paths sum VF_W lanes in float, then the lanes in double; the
 * scalar loop (the tail, or the whole row in plain C) adds each libm expf
 * in double. */
static double row_lse(const float *l, float *pr, int V, double *ssum)
{
    float mx = -INFINITY;
    int i = 0;
    if (XSA_SIMD) {
        vf vm = vf_set1(-INFINITY);
        for (; i + VF_W <= V; i += VF_W) vm = vf_max(vm, vf_load(l + i));
        mx = vf_hmax(vm);
    }
    for (; i < V; i++)
        if (l[i] > mx) mx = l[i];
    double sum = 0.0;
    i = 0;
    if (XSA_SIMD) {
        vf vmx = vf_set1(mx), acc = vf_zero();
        for (; i + VF_W <= V; i += VF_W) {
            vf e = vf_exp(vf_sub(vf_load(l + i), vmx));
            if (pr) vf_store(pr + i, e);
            acc = vf_add(acc, e);
        }
        float lanes[VF_W];
        vf_store(lanes, acc);
        for (int k = 0; k < VF_W; k++) sum += lanes[k];
    }
    for (; i < V; i++) {
        float e = expf(l[i] - mx);
        if (pr) pr[i] = e;
        sum += e;
    }
    *ssum = sum;
    return log(sum) + mx;
}

#define CE_LOSS_ROWS 64 /* the forward: rows per partial sum of the losses */

typedef struct {
    int backward; /* 0: losses and softmax (ce_forward_rows); 1: dlogits */
    int r0, r1, V, N;
    const float *logits;
    float *probs, *pscale, *losses, *dlogits;
    const float *cprobs, *cpscale;
    const int32_t *targets;
    float dloss;
    double total;
    double *btot; /* forward: per CE_LOSS_ROWS rows, their sum (with threads) */
} ce_job;

static void ce_forward_rows(ce_job *j)
{
    size_t V = (size_t)j->V;
    /* summed per CE_LOSS_ROWS rows, then those sums in order: the same
     * whatever the threads (each takes whole blocks of rows) */
    double total = 0.0;
    for (int b0 = j->r0; b0 < j->r1; b0 += CE_LOSS_ROWS) {
        int b1 = j->r1 - b0 < CE_LOSS_ROWS ? j->r1 : b0 + CE_LOSS_ROWS;
        double bt = 0.0;
        for (int n = b0; n < b1; n++) {
            const float *l = j->logits + n * V;
            float lt = l[j->targets[n]]; /* read before pr may overwrite it */
            double sum;
            double lse = row_lse(l, j->probs ? j->probs + n * V : NULL, j->V, &sum);
            double loss = lse - lt;
            if (j->pscale) j->pscale[n] = (float)(1.0 / sum);
            if (j->losses) j->losses[n] = (float)loss;
            bt += loss;
        }
        if (j->btot) j->btot[b0 / CE_LOSS_ROWS] = bt;
        total += bt;
    }
    j->total = total;
}

/* dlogits = probs * (pscale g), then - g at the target: one multiply per
 * element, so every width gives the same bits */
static void ce_backward_rows(ce_job *j)
{
    size_t V = (size_t)j->V;
    float g = j->dloss / (float)j->N;
    for (int n = j->r0; n < j->r1; n++) {
        const float *p = j->cprobs + n * V;
        float *d = j->dlogits + n * V;
        vf vs = vf_set1(j->cpscale[n] * g);
        size_t i = 0;
        for (; i + VF_W <= V; i += VF_W) vf_store(d + i, vf_mul(vf_load(p + i), vs));
        if (i < V) {
            vmask k = vf_mask((int)(V - i));
            vf_store_mask(d + i, k, vf_mul(vf_load_mask(k, p + i), vs));
        }
        d[j->targets[n]] -= g;
    }
}

static void *ce_thread(void *arg)
{
    ce_job *j = arg;
    if (j->backward)
        ce_backward_rows(j);
    else
        ce_forward_rows(j);
    return NULL;
}

/* Splits rows [0,N) over up to nthreads threads (the caller's thread takes
 * the first share). Rows are independent except in the forward's sum, which
 * goes by fixed blocks of rows (whole blocks per thread, the blocks' sums
 * added in order), so no result depends on the threads. */
static double ce_run(ce_job *proto, int nthreads)
{
    int N = proto->N;
    if (nthreads > CE_MAX_THREADS) nthreads = CE_MAX_THREADS;
    if ((size_t)N * proto->V < ((size_t)1 << 20) || nthreads > N) nthreads = 1;
    if (!proto->backward && !proto->btot) nthreads = 1;
    if (nthreads < 1) nthreads = 1;
    ce_job jobs[CE_MAX_THREADS];
    for (int k = 0; k < nthreads; k++) {
        jobs[k] = *proto;
        jobs[k].r0 = (int)((long)N * k / nthreads);
        jobs[k].r1 = (int)((long)N * (k + 1) / nthreads);
        if (!proto->backward) { /* whole blocks of the loss's sum per thread */
            int rb = CE_LOSS_ROWS;
            jobs[k].r0 = k == 0 ? 0 : (jobs[k].r0 + rb - 1) / rb * rb;
            jobs[k].r1 = k == nthreads - 1 ? N : (jobs[k].r1 + rb - 1) / rb * rb;
            if (jobs[k].r1 > N) jobs[k].r1 = N;
            if (jobs[k].r0 > jobs[k].r1) jobs[k].r0 = jobs[k].r1;
        }
        jobs[k].total = 0.0;
    }
    xsa_run_split(jobs, sizeof jobs[0], nthreads, ce_thread);
    if (nthreads == 1) return jobs[0].total; /* the blocks' sums, in order */
    double total = 0.0;
    if (!proto->backward)
        for (int b = 0; b < (N + CE_LOSS_ROWS - 1) / CE_LOSS_ROWS; b++) total += proto->btot[b];
    return total;
}

double xsa_nn_crossentropy_forward(float *probs, float *pscale, float *losses,
                                   const float *logits, const int32_t *targets,
                                   int N, int V, int nthreads)
{
    ce_job j = {.N = N, .V = V, .logits = logits, .probs = probs, .pscale = pscale,
                .losses = losses, .targets = targets};
    /* the blocks' sums for threads (without them: one thread, same sum) */
    j.btot = nthreads > 1 ? malloc(((size_t)N / CE_LOSS_ROWS + 1) * sizeof(double)) : NULL;
    double total = ce_run(&j, nthreads);
    free(j.btot);
    return total / N;
}

void xsa_nn_crossentropy_backward(float *dlogits, const float *probs,
                                  const float *pscale, const int32_t *targets,
                                  float dloss, int N, int V, int nthreads)
{
    ce_job j = {.backward = 1, .N = N, .V = V, .cprobs = probs, .dlogits = dlogits,
                .cpscale = pscale, .targets = targets, .dloss = dloss};
    ce_run(&j, nthreads);
}

/* ---- fused cross-entropy + lm_head backward ------------------------------ */

void xsa_nn_lmhead_ce_backward(float *dinp, float *dwte, float *scratch,
                               const float *probs, const float *pscale,
                               const int32_t *targets, const float *inp,
                               const float *wte, float dloss, int N, int C, int V)
{
    float g = dloss / (float)N;
    float *t1 = scratch, *t2 = scratch + (size_t)N * C;
    if (dinp) {
        xsa_sgemm(0, 0, N, C, V, 1.0f, probs, V, wte, C, 0.0f, t1, C);
        for (int n = 0; n < N; n++) {
            float s = pscale[n] * g;
            const float *r = t1 + (size_t)n * C, *w = wte + (size_t)targets[n] * C;
            float *d = dinp + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += s * r[c] - g * w[c];
        }
    }
    if (dwte) {
        for (int n = 0; n < N; n++) {
            float s = pscale[n] * g;
            const float *x = inp + (size_t)n * C;
            float *r = t2 + (size_t)n * C;
            for (int c = 0; c < C; c++) r[c] = x[c] * s;
        }
        xsa_sgemm(1, 0, V, C, N, 1.0f, probs, V, t2, C, 1.0f, dwte, C);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C;
            float *d = dwte + (size_t)targets[n] * C;
            for (int c = 0; c < C; c++) d[c] -= g * x[c];
        }
    }
}


/* ---- fused and chunked: lm_head + cross-entropy (+ gradient) ------------- */

/* The blocking's rule, in numbers (xsa_nn_lmhead_describe prints it): per
 * chunk, about LM_F32_BUDGET bytes of float32 exponentials (bf16:
 * LM_BF16_BUDGET of bf16 ones), and blocks of about LM_BLOCK_BYTES of
 * float32 logits. float32 went from 40 to 80 MB (192 to 384 rows of
 * GPT-2's vocabulary) on 2026-12-02: half the passes over wte and dwte
 * (25.7 MB each, beyond the L3 together), and the training step in 0.94
 * of the time at 16 x 64 and 8 x 256 on the Zen 5 machine, quiet,
 * bench_blocking; blocks of 1.5 MB (in L2 there) measured no faster than
 * 4 MB, and bf16's 512 x 4 MB no slower than either, so both stayed. */
#define LM_F32_BUDGET (80L << 20)
#define LM_BF16_BUDGET (104L << 20)
#define LM_BLOCK_BYTES (4L << 20)

/* The overrides: -1 unread, 0 the rule, > 0 rows; from the environment
 * (read once) or from xsa_nn_lmhead_set_blocking, which wins. */
static int ovr_rows = -1, ovr_vblock = -1, ovr_set;

static int env_once(int *cache, const char *name)
{
    if (*cache < 0) {
        const char *e = getenv(name);
        int v = e ? atoi(e) : 0;
        *cache = v > 0 ? v : 0;
    }
    return *cache;
}

int xsa_nn_lmhead_rows(int N, int V, int bf16)
{
    int r = env_once(&ovr_rows, "XSA_LMHEAD_ROWS");
    if (r == 0) {
        long want = (bf16 ? LM_BF16_BUDGET : LM_F32_BUDGET) / ((long)(V > 0 ? V : 1) * (long)sizeof(float));
        r = want < 64 ? 64 : want > 1024 ? 1024 : (int)want;
        r = r / 64 * 64; /* whole 16-column blocks, and chunks that divide 64 x 2^k rows */
    }
    return r < N ? r : N;
}

int xsa_nn_lmhead_vblock(int R, int V)
{
    long vb = env_once(&ovr_vblock, "XSA_LMHEAD_VBLOCK");
    if (vb == 0) {
        vb = LM_BLOCK_BYTES / ((long)(R > 0 ? R : 1) * (long)sizeof(float));
        vb = vb < 64 ? 64 : vb / 64 * 64;
    }
    return vb < V ? (int)vb : V;
}

int xsa_nn_lmhead_set_blocking(int rows, int vblock)
{
    if (rows < 0 || vblock < 0)
        return xsa_error("lm_head blocking: rows %d and vblock %d must be >= 0 (0: the rule)", rows, vblock);
    ovr_rows = rows;
    ovr_vblock = vblock;
    ovr_set = 1;
    return 0;
}

const char *xsa_nn_lmhead_describe(void)
{
    static char buf[160];
    int rows = env_once(&ovr_rows, "XSA_LMHEAD_ROWS"), vb = env_once(&ovr_vblock, "XSA_LMHEAD_VBLOCK");
    const char *by_r = ovr_set ? "set" : "XSA_LMHEAD_ROWS", *by_b = ovr_set ? "set" : "XSA_LMHEAD_VBLOCK";
    char r[64], b[64];
    if (rows) snprintf(r, sizeof r, "chunks of %d rows (%s)", rows, by_r);
    else snprintf(r, sizeof r, "chunks of %ld MB (bf16 %ld)", LM_F32_BUDGET >> 20, LM_BF16_BUDGET >> 20);
    if (vb) snprintf(b, sizeof b, "blocks of %d rows (%s)", vb, by_b);
    else snprintf(b, sizeof b, "blocks of %ld MB", LM_BLOCK_BYTES >> 20);
    snprintf(buf, sizeof buf, "%s, %s", r, b);
    return buf;
}

/* The scratch, carved in one place for the size and the use. Each
 * block's product for dinp [nblk,R,C] (summed in block order once the
 * threads are done, so that the sum does not depend on which thread ran
 * which block). float32: the exponentials in place of the logits, [V,R]
 * (without a gradient each thread uses one block of it), and per thread
 * the rows scaled by a block's factors [R,C]. bf16: the exponentials as
 * bf16 [V,R], and per thread its own block of logits and rows. */
typedef struct {
    float *lb, *xs;  /* [VB,R] logits of one block; [R,C] (forward: dinp's product, transposed) */
    uint16_t *xs16;  /* [R,C] */
} ce_own;

#define CE_MAX_OWN (CE_MAX_THREADS - 1) /* bf16 slot 0 stays oneDNN's threaded one */

typedef struct {
    float *et;       /* float32: [V,R] */
    float *dtb;      /* [nblk,R,C] each block's e_b^T wte_b (bf16: transposed, [C,n] in each) */
    float *xs[CE_MAX_THREADS]; /* float32: per thread [R,C] rows scaled by a block's factors */
    int nf32;        /* float32: threads (xs) */
    float *bmax, *fac, *lt; /* [nblk,R] maxima and factors; [R] target logits */
    double *bsum;    /* [nblk,R] */
    uint16_t *et16, *x16; /* bf16: the exponentials [V,R]; the rows */
    ce_own own[CE_MAX_OWN];
    int nown;
    size_t floats;
} ce_scratch;

static int ce_own_threads(int nthreads, int nblk)
{
    int t = nthreads < 1 ? 1 : nthreads > CE_MAX_OWN ? CE_MAX_OWN : nthreads;
    return t < nblk ? t : nblk;
}

static int ce_f32_threads(int nthreads, int nblk)
{
    int t = nthreads < 1 ? 1 : nthreads > CE_MAX_THREADS ? CE_MAX_THREADS : nthreads;
    return t < nblk ? t : nblk;
}

static ce_scratch ce_layout(float *s, int R, int C, int V, int bf16, int nthreads)
{
    int VB = xsa_nn_lmhead_vblock(R, V), nblk = (V + VB - 1) / VB;
    size_t RC = (size_t)R * C, off = 0;
    ce_scratch p;
    memset(&p, 0, sizeof p);
#define CE_TAKE(ptr, type, nfl)                                   \
    do {                                                          \
        ptr = s ? (type *)(void *)(s + off) : NULL;               \
        off += (nfl);                                             \
    } while (0)
    CE_TAKE(p.dtb, float, (size_t)nblk * RC);
    if (!bf16) {
        CE_TAKE(p.et, float, (size_t)V * R);
        p.nf32 = ce_f32_threads(nthreads, nblk);
        for (int k = 0; k < p.nf32; k++) CE_TAKE(p.xs[k], float, RC);
    }
    CE_TAKE(p.bmax, float, (size_t)nblk * R);
    CE_TAKE(p.fac, float, (size_t)nblk * R);
    CE_TAKE(p.lt, float, (size_t)R);
    off += off & 1; /* doubles on 8 bytes (the scratch itself is malloc'ed) */
    CE_TAKE(p.bsum, double, 2 * (size_t)nblk * R);
    if (bf16) {
        CE_TAKE(p.et16, uint16_t, ((size_t)V * R + 1) / 2);
        CE_TAKE(p.x16, uint16_t, (RC + 1) / 2);
        p.nown = ce_own_threads(nthreads, nblk);
        for (int k = 0; k < p.nown; k++) {
            CE_TAKE(p.own[k].lb, float, (size_t)VB * R);
            CE_TAKE(p.own[k].xs, float, RC);
            CE_TAKE(p.own[k].xs16, uint16_t, (RC + 1) / 2);
            off += off & 1;
        }
    }
#undef CE_TAKE
    p.floats = off;
    return p;
}

size_t xsa_nn_lmhead_ce_scratch_floats(int N, int C, int V, int rows, int bf16, int nthreads)
{
    return ce_layout(NULL, rows < N ? rows : N, C, V, bf16, nthreads).floats;
}

/* ---- one block's softmax statistics ---------------------------------------
 * Columns 0..n of one block of the transposed logits, lb[V][n] (rows
 * v0..v0+V of the vocabulary; the chunk's n rows of the batch are its
 * columns), just computed and still in cache. Per column: the block's
 * maximum m and sum of exp(l - m), and the target's logit when the target
 * falls in the block; with grad also the exponentials exp(l - m), in place
 * or as bf16 into e16. The caller joins the blocks' (m, sum) into the
 * log-sum-exp; each block's exponentials then need one factor per column,
 * exp(m - lse). */
typedef struct {
    float *lb;        /* [V][n] the block's logits; with grad and no e16, its exponentials */
    uint16_t *e16;    /* [V][n] the exponentials as bf16 (when non-NULL) */
    int grad, v0, V, n;
    const int32_t *targets;
    float *bmax, *lt; /* per column: the block's maximum; the target's logit */
    double *bsum;     /* per column: the block's sum of exp(l - max) */
} ce_blk;

#define CE_COL_BLOCKS 8 /* vectors of columns processed together */
#define CE_SUM_ROWS 64  /* vector paths: rows summed in float before the double sum */
#define CE_SCALAR_COLS 128 /* plain C: columns per pass down the rows */

/* Columns c0..c1 (nb <= CE_COL_BLOCKS vectors), VF_W lanes per vector:
 * each pass goes down the rows of the block once for all of them (a few
 * thousand rows of 128 columns at most: in L2). Per column the exponentials
 * are summed in float over CE_SUM_ROWS rows, those sums in double. Inlined
 * twice: with nb a constant for full groups, so that the maxima and sums
 * stay in registers (with nb a variable they lived on the stack, a store
 * and a reload per row and vector: measured, the max pass was 40% of the
 * function's samples), and with nb variable and masks for the last group.
 * Both do the same operations in the same order: the same bits. */
#if defined(__GNUC__)
#define CE_UNROLL _Pragma("GCC unroll 8")
#else
#define CE_UNROLL
#endif
XSA_ALWAYS_INLINE void block_vec_body(const ce_blk *j, int c0, int c1, int nb, int full)
{
    int n = j->n, V = j->V;
    vmask km[CE_COL_BLOCKS];
    vf mx[CE_COL_BLOCKS], acc[CE_COL_BLOCKS];
    double st[CE_COL_BLOCKS * VF_W] = {0};
    for (int b = 0; b < nb; b++) {
        km[b] = vf_mask(c1 - (c0 + VF_W * b));
        mx[b] = vf_set1(-INFINITY);
    }
    for (int v = 0; v < V; v++) {
        const float *row = j->lb + (size_t)v * n + c0;
        CE_UNROLL
        for (int b = 0; b < nb; b++)
            mx[b] = vf_max(mx[b], full ? vf_load(row + VF_W * b) : vf_load_mask(km[b], row + VF_W * b));
    }
    for (int va = 0; va < V; va += CE_SUM_ROWS) {
        int vz = V - va < CE_SUM_ROWS ? V : va + CE_SUM_ROWS;
        CE_UNROLL
        for (int b = 0; b < nb; b++) acc[b] = vf_zero();
        for (int v = va; v < vz; v++) {
            float *row = j->lb + (size_t)v * n + c0;
            CE_UNROLL
            for (int b = 0; b < nb; b++) {
                vf l = full ? vf_load(row + VF_W * b) : vf_load_mask(km[b], row + VF_W * b);
                vf e = vf_exp(vf_sub(l, mx[b]));
                if (j->grad) {
                    if (j->e16 && full)
                        vf_store_bf16_normal(j->e16 + (size_t)v * n + c0 + VF_W * b, e);
                    else if (j->e16)
                        vf_store_bf16_mask(j->e16 + (size_t)v * n + c0 + VF_W * b, km[b], e);
                    else if (full)
                        vf_store(row + VF_W * b, e);
                    else
                        vf_store_mask(row + VF_W * b, km[b], e);
                }
                acc[b] = vf_add(acc[b], e);
            }
        }
        for (int b = 0; b < nb; b++) {
            float lanes[VF_W];
            vf_store(lanes, acc[b]);
            for (int i = 0; i < VF_W; i++) st[VF_W * b + i] += lanes[i];
        }
    }
    for (int b = 0; b < nb; b++) {
        float mt[VF_W];
        vf_store(mt, mx[b]);
        for (int i = 0; i < VF_W && c0 + VF_W * b + i < c1; i++) {
            j->bmax[c0 + VF_W * b + i] = mt[i];
            j->bsum[c0 + VF_W * b + i] = st[VF_W * b + i];
        }
    }
}

static void block_vec(const ce_blk *j, int c0, int c1)
{
    if (c1 - c0 == CE_COL_BLOCKS * VF_W)
        block_vec_body(j, c0, c1, CE_COL_BLOCKS, 1);
    else
        block_vec_body(j, c0, c1, (c1 - c0 + VF_W - 1) / VF_W, 0);
}

/* The plain C path (and bf16 exponentials where XSA_SIMD_BF16 is 0):
 * libm's expf, each exponential added in double. */
static void block_scalar(const ce_blk *j, int c0, int c1)
{
    int n = j->n, V = j->V;
    float *mxs = j->bmax + c0;
    double *sums = j->bsum + c0;
    for (int i = 0; i < c1 - c0; i++) {
        mxs[i] = -INFINITY;
        sums[i] = 0.0;
    }
    for (int v = 0; v < V; v++) {
        const float *row = j->lb + (size_t)v * n + c0;
        for (int i = 0; i < c1 - c0; i++)
            if (row[i] > mxs[i]) mxs[i] = row[i];
    }
    for (int v = 0; v < V; v++) {
        float *row = j->lb + (size_t)v * n + c0;
        for (int i = 0; i < c1 - c0; i++) {
            float e = expf(row[i] - mxs[i]);
            if (j->grad) {
                if (j->e16)
                    j->e16[(size_t)v * n + c0 + i] = sf_to_bf16(e);
                else
                    row[i] = e;
            }
            sums[i] += e;
        }
    }
}

static void ce_block(const ce_blk *j)
{
    int n = j->n, c0 = 0, step = CE_COL_BLOCKS * VF_W;
    for (int c = 0; c < n; c++) {
        int t = j->targets[c];
        if (t >= j->v0 && t < j->v0 + j->V) j->lt[c] = j->lb[(size_t)(t - j->v0) * n + c];
    }
    if (XSA_SIMD && (!j->e16 || XSA_SIMD_BF16))
        for (; c0 < n; c0 += step) block_vec(j, c0, n - c0 < step ? n : c0 + step);
    for (; c0 < n; c0 += CE_SCALAR_COLS) block_scalar(j, c0, n - c0 < CE_SCALAR_COLS ? n : c0 + CE_SCALAR_COLS);
}

/* ---- a pass over the vocabulary's blocks ----------------------------------
 * Thread k takes blocks k, k + T, ...: each block's products run on that
 * thread alone (float32: one xsa_sgemm each, which runs on its caller's
 * thread, gemm.h; bf16: the thread's own oneDNN slot), its softmax
 * statistics right after its product, and the threads meet once per pass.
 * bf16 needs this: oneDNN parallelises each product over its OpenMP
 * threads, which meet at a barrier when it ends, so dozens of block-sized
 * products per chunk would wait on every thread dozens of times, and on a
 * loaded machine each wait can last a scheduler time slice (measured: a step 3x slower
 * than with whole-vocabulary products). Every block does the same
 * arithmetic whatever thread runs it, and each block's product for dinp is
 * kept ([nblk,R,C]) and summed in block order after the pass, so no bit
 * depends on the thread count. */
typedef struct {
    const xsa_nn_bf16 *bf;   /* NULL: float32 products */
    int k, nth, phase;       /* blocks k, k + nth, ...; 0 forward, 1 backward */
    int n, C, V, VB, nblk, R, grad, acc;
    const float *x, *wte;
    const int32_t *targets;
    const uint16_t *x16;
    ce_scratch *p;
    float *dwte, *dinp;      /* dinp: the chunk's rows */
    float g;                 /* 1/N */
    atomic_int *next;        /* non-NULL (a tail): blocks taken in turn by whichever thread is free */
    const struct tail_rows *tr; /* a tail's: what each block does once its products are done */
    atomic_int *busy;        /* a tail's other threads: counted down when one is done */
    int no_blocks, no_rows;  /* backward: dinp's rows alone (the blocks left to a tail); the blocks alone */
    int rc;
    char err[256];
} lm_job;

/* out[i] (+)= f[i] * t[i] over rows i < n of C columns: = when first */
static void scale_rows(float *out, const float *f, const float *t, int n, int C, int first)
{
    for (int i = 0; i < n; i++) {
        float sc = f[i], *oi = out + (size_t)i * C;
        const float *ti = t + (size_t)i * C;
        if (first)
            row_scale(oi, sc, ti, C);
        else
            row_add_scaled(oi, sc, ti, C, 0);
    }
}

/* dt[n,C] = tt^T for tt[C,n], in tiles of 16 x 16, so that neither side
 * strides through the cache */
static void transpose_into(float *dt, const float *tt, int n, int C)
{
    for (int i0 = 0; i0 < n; i0 += 16)
        for (int c0 = 0; c0 < C; c0 += 16)
            for (int i = i0; i < n && i < i0 + 16; i++)
                for (int c = c0; c < C && c < c0 + 16; c++) dt[(size_t)i * C + c] = tt[(size_t)c * n + i];
}

/* Forward: the block's logits, transposed (lb[v][i] = wte[v] . x[i]:
 * OpenBLAS then packs wte as the cheap operand), then its softmax
 * statistics while it is in cache. float32 keeps the exponentials in place
 * for the gradient; without one, thread k reuses its slot k of them (k <
 * nblk, and slot nblk - 1 only when each thread has one block: its own).
 * bf16 computes into the thread's own block and keeps bf16 exponentials.
 * With a gradient, dinp's product dt_b = e_b^T wte_b too, while the
 * exponentials are still in cache: it needs no factor (each block's is
 * applied in the join), and the backward pass then reads them once, for
 * dwte, instead of twice (measured: the float32 lm_head in 0.97 of its
 * time at 2048 rows). bf16 computes it transposed, wte_b^T e_b, [C,n]:
 * oneDNN then reads the smaller operand transposed (measured: the bf16
 * lm_head in 0.91-0.95 of its time at 2048 rows, 0.95-0.98 at 1024), and
 * dinp_rows sums the blocks' columns before one transpose. */
static int block_forward(lm_job *j, int b, int v0, int nv)
{
    ce_scratch *p = j->p;
    int n = j->n, C = j->C;
    ce_blk cb = {.grad = j->grad, .v0 = v0, .V = nv, .n = n, .targets = j->targets,
                 .bmax = p->bmax + (size_t)b * j->R, .bsum = p->bsum + (size_t)b * j->R,
                 .lt = p->lt};
    if (j->bf) {
        cb.lb = p->own[j->k].lb;
        if (xsa_bf16_gemm_on(j->bf->mm, j->k + 1, 1, 0, 1, nv, n, C, j->bf->wte + (size_t)v0 * C, C,
                             j->x16, C, 0, cb.lb, n) != 0)
            return -1;
        cb.e16 = j->grad ? p->et16 + (size_t)v0 * n : NULL;
    } else {
        cb.lb = p->et + (size_t)(j->grad ? v0 : j->k * j->VB) * n;
        xsa_sgemm(0, 1, nv, n, C, 1.0f, j->wte + (size_t)v0 * C, C, j->x, C, 0.0f, cb.lb, n);
    }
    ce_block(&cb);
    if (!j->grad) return 0;
    float *dt = p->dtb + (size_t)b * j->R * C;
    if (j->bf)
        return xsa_bf16_gemm_on(j->bf->mm, j->k + 1, 1, 1, 0, C, n, nv, j->bf->wte + (size_t)v0 * C, C,
                                cb.e16, n, 0, dt, n);
    xsa_sgemm(1, 0, n, C, nv, 1.0f, cb.lb, n, j->wte + (size_t)v0 * C, C, 0.0f, dt, C);
    return 0;
}

/* Backward: dwte_b (+)= e_b (fac_b x). */
static int block_backward(lm_job *j, int b, int v0, int nv)
{
    ce_scratch *p = j->p;
    ce_own *o = j->bf ? &p->own[j->k] : NULL;
    int n = j->n, C = j->C;
    const float *f = p->fac + (size_t)b * j->R;
    float *xs = j->bf ? o->xs : p->xs[j->k];
    for (int i = 0; i < n; i++) row_scale(xs + (size_t)i * C, f[i], j->x + (size_t)i * C, C);
    float *dw = j->dwte + (size_t)v0 * C;
    if (j->bf) {
        xsa_bf16_from_f32(o->xs16, xs, (size_t)n * C);
        return xsa_bf16_gemm_on(j->bf->mm, j->k + 1, 1, 0, 0, nv, C, n, p->et16 + (size_t)v0 * n, n,
                                o->xs16, C, j->acc, dw, C);
    }
    xsa_sgemm(0, 0, nv, C, n, 1.0f, p->et + (size_t)v0 * n, n, xs, C, j->acc ? 1.0f : 0.0f, dw,
              C);
    return 0;
}

/* dinp's rows i0..i1 of the chunk: the sum over the blocks, in block
 * order, of fac_b e_b^T wte_b, less the target's row of wte. bf16's
 * products are [C,n]: the sum runs along their columns into thread k's
 * rows buffer, [C,i1-i0], and is transposed into dinp once: the same
 * products added in the same order as after a transpose per block, which
 * took 40% of lm_pass's own samples. */
static void dinp_rows(const lm_job *j, int i0, int i1)
{
    const ce_scratch *p = j->p;
    int C = j->C, m = i1 - i0;
    float *d = j->dinp + (size_t)i0 * C;
    if (j->bf) {
        float *dt = p->own[j->k].xs;
        for (int b = 0; b < j->nblk; b++) {
            const float *f = p->fac + (size_t)b * j->R + i0, *tt = p->dtb + (size_t)b * j->R * C + i0;
            for (int c = 0; c < C; c++) row_mul(dt + (size_t)c * m, f, tt + (size_t)c * j->n, m, b > 0);
        }
        transpose_into(d, dt, m, C);
    } else {
        for (int b = 0; b < j->nblk; b++)
            scale_rows(d, p->fac + (size_t)b * j->R + i0, p->dtb + ((size_t)b * j->R + i0) * C, m, C,
                       b == 0);
    }
    for (int i = i0; i < i1; i++)
        row_add_scaled(j->dinp + (size_t)i * C, j->g, j->wte + (size_t)j->targets[i] * C, C, 1);
}

/* dst[v] += scale dw[v] for row v of C columns, each element one fused
 * multiply-add (what OpenBLAS's saxpy kernels do with FMA; for scale 1,
 * every training step's, any kernel gives these bits): vec.h's axpy where
 * its multiply-add is fused (the vector ISAs), fmaf in plain C */
static void axpy_row(float *dst, const float *dw, float scale, int v, int C)
{
    float *d = dst + (size_t)v * C;
    const float *w = dw + (size_t)v * C;
    if (XSA_SIMD) {
        axpy(d, scale, w, C);
        return;
    }
    for (int c = 0; c < C; c++) d[c] = fmaf(scale, w[c], d[c]);
}

/* A tail's block b, rows v0..v0+nv of dwte, once its products are done:
 * the targets' rows less g x_i for the rows i whose target falls in it, in
 * i order (as xsa_nn_lmhead_ce subtracts them), then, with dst, every row
 * added to dst, while they are in cache. */
typedef struct tail_rows {
    const float *inp;        /* all N rows */
    const int32_t *targets;  /* all N */
    const int *order, *first; /* block b's rows i: order[first[b]..first[b+1]), in i order */
    float *dst, scale;
} tail_rows;

static void tail_block_done(const lm_job *j, int b, int v0, int nv)
{
    const tail_rows *r = j->tr;
    int C = j->C;
    float g = j->g, *dwte = j->dwte;
    for (int q = r->first[b]; q < r->first[b + 1]; q++) {
        int i = r->order[q];
        row_add_scaled(dwte + (size_t)r->targets[i] * C, g, r->inp + (size_t)i * C, C, 1);
    }
    if (r->dst)
        for (int v = v0; v < v0 + nv; v++) axpy_row(r->dst, dwte, r->scale, v, C);
}

/* The block after b (b < 0: the first) for job j: its own share, k, k +
 * nth, ..., or with a tail's counter the next one nobody has taken. */
static int next_block(lm_job *j, int b)
{
    if (j->next) return atomic_fetch_add(j->next, 1);
    return b < 0 ? j->k : b + j->nth;
}

/* A thread's blocks; in the backward pass then its slice of dinp's rows
 * (the rows are independent: any split gives the same bits). */
static void *lm_pass(void *arg)
{
    lm_job *j = arg;
    j->rc = 0;
    for (int b = j->no_blocks ? j->nblk : next_block(j, -1); b < j->nblk; b = next_block(j, b)) {
        int v0 = b * j->VB, nv = j->V - v0 < j->VB ? j->V - v0 : j->VB;
        if ((j->phase == 0 ? block_forward(j, b, v0, nv) : block_backward(j, b, v0, nv)) != 0) {
            j->rc = -1;
            snprintf(j->err, sizeof j->err, "%s", xsa_last_error());
            return NULL;
        }
        if (j->tr) tail_block_done(j, b, v0, nv);
    }
    if (j->phase == 1 && !j->no_rows)
        dinp_rows(j, (int)((long)j->n * j->k / j->nth), (int)((long)j->n * (j->k + 1) / j->nth));
    if (j->busy) atomic_fetch_sub(j->busy, 1);
    return NULL;
}

/* One pass (forward or backward) of a chunk over all blocks, split over the
 * scratch's threads. 0, or -1 with an error (bf16 products only). */
static int lm_run(const lm_job *proto)
{
    int T = proto->bf ? proto->p->nown : proto->p->nf32;
    lm_job jobs[CE_MAX_THREADS];
    for (int k = 0; k < T; k++) {
        jobs[k] = *proto;
        jobs[k].k = k;
        jobs[k].nth = T;
    }
    xsa_run_split(jobs, sizeof jobs[0], T, lm_pass);
    for (int k = 0; k < T; k++)
        if (jobs[k].rc != 0) return xsa_error("%s", jobs[k].err);
    return 0;
}

/* ---- the last chunk's dwte products, left for later ------------------------
 * The backward pass of the last chunk writes dwte alone, which nothing
 * before the lm_head needs, so the caller may run it beside the blocks'
 * backward (gpt.c): the other threads start on its blocks, and the
 * caller's thread takes what is left when it is done. Blocks are taken in
 * turn from one counter; each block's product is the same whichever
 * thread runs it (lm_pass), so the bits are those of xsa_nn_lmhead_ce. */
struct xsa_nn_lmhead_tail {
    int pending, running, nth;
    lm_job job;          /* the last chunk's backward pass: its blocks alone */
    ce_scratch p;        /* job.p: the layout of the caller's scratch */
    xsa_nn_bf16 bf;      /* job.bf (bf16) */
    tail_rows rows;      /* job.tr */
    int *order, *first;  /* [N], [nblk + 1] */
    int ocap, fcap;
    atomic_int next, busy;
    int started[CE_MAX_THREADS];
    pthread_t tid[CE_MAX_THREADS];
    lm_job jobs[CE_MAX_THREADS];
};

static int tail_sort_room(xsa_nn_lmhead_tail *t, int N, int nblk)
{
    if (N > t->ocap) {
        int *o = realloc(t->order, sizeof(int) * (size_t)N);
        if (!o) return xsa_error("lm_head: out of memory");
        t->order = o;
        t->ocap = N;
    }
    if (nblk + 1 > t->fcap) {
        int *f = realloc(t->first, sizeof(int) * ((size_t)nblk + 1));
        if (!f) return xsa_error("lm_head: out of memory");
        t->first = f;
        t->fcap = nblk + 1;
    }
    return 0;
}

/* The rows by their target's block of VB rows of the vocabulary (a stable
 * counting sort: in i order within a block) */
static void tail_sort(xsa_nn_lmhead_tail *t, const float *inp, const int32_t *targets, int N, int VB,
                      int nblk)
{
    int *first = t->first;
    memset(first, 0, sizeof(int) * ((size_t)nblk + 1));
    for (int i = 0; i < N; i++) first[targets[i] / VB + 1]++;
    for (int b = 0; b < nblk; b++) first[b + 1] += first[b];
    for (int i = 0; i < N; i++) t->order[first[targets[i] / VB]++] = i;
    for (int b = nblk; b > 0; b--) first[b] = first[b - 1]; /* back to each block's start */
    first[0] = 0;
    t->rows = (tail_rows){.inp = inp, .targets = targets, .order = t->order, .first = first};
}

xsa_nn_lmhead_tail *xsa_nn_lmhead_tail_new(void)
{
    xsa_nn_lmhead_tail *t = calloc(1, sizeof *t);
    if (!t) xsa_error("lm_head: out of memory");
    return t;
}

int xsa_nn_lmhead_tail_pending(const xsa_nn_lmhead_tail *t)
{
    return t && t->pending;
}

void xsa_nn_lmhead_tail_start(xsa_nn_lmhead_tail *t, float *dst, float scale)
{
    if (!t || !t->pending || t->running) return;
    t->rows.dst = dst;
    t->rows.scale = scale;
    t->job.tr = &t->rows;
    int T = t->job.bf ? t->p.nown : t->p.nf32;
    atomic_store(&t->next, 0);
    t->nth = T;
    for (int k = 0; k < T; k++) {
        t->jobs[k] = t->job;
        t->jobs[k].k = k;
        t->jobs[k].nth = T;
        t->jobs[k].next = &t->next;
        t->jobs[k].rc = 0;
        t->jobs[k].busy = k > 0 ? &t->busy : NULL;
    }
    /* the threads that cannot start leave their share to the counter */
    atomic_store(&t->busy, T - 1);
    for (int k = 1; k < T; k++)
        if (!(t->started[k] = pthread_create(&t->tid[k], NULL, lm_pass, &t->jobs[k]) == 0))
            atomic_fetch_sub(&t->busy, 1);
    xsa_threads_lend(&t->busy);
    t->running = 1;
}

/* Joins the other threads; 0, or -1 with the first job's error (set as
 * the last error only when report: a drop keeps the caller's). */
static int tail_join(xsa_nn_lmhead_tail *t, int report)
{
    int rc = 0;
    for (int k = 1; k < t->nth; k++)
        if (t->started[k]) pthread_join(t->tid[k], NULL);
    for (int k = 0; k < t->nth; k++)
        if (rc == 0 && t->jobs[k].rc != 0) rc = report ? xsa_error("%s", t->jobs[k].err) : -1;
    xsa_threads_lend(NULL);
    t->running = 0;
    t->pending = 0;
    return rc;
}

int xsa_nn_lmhead_tail_finish(xsa_nn_lmhead_tail *t)
{
    if (!t || !t->pending) return 0;
    xsa_nn_lmhead_tail_start(t, NULL, 0.0f);
    lm_pass(&t->jobs[0]);
    return tail_join(t, 1);
}

void xsa_nn_lmhead_tail_drop(xsa_nn_lmhead_tail *t)
{
    if (!t) return;
    if (t->running) {
        t->next = t->job.nblk; /* no more blocks for the other threads */
        (void)tail_join(t, 0);
    }
    t->pending = 0;
}

void xsa_nn_lmhead_tail_free(xsa_nn_lmhead_tail *t)
{
    xsa_nn_lmhead_tail_drop(t);
    if (t) {
        free(t->order);
        free(t->first);
    }
    free(t);
}

int xsa_nn_lmhead_ce_defer(double *loss, float *dinp, float *dwte, float *losses, float *scratch,
                           const float *inp, const float *wte, const int32_t *targets, int N,
                           int C, int V, int rows, int nthreads, const xsa_nn_bf16 *bf,
                           xsa_nn_lmhead_tail *tail)
{
    int grad = dinp && dwte;
    if (tail) xsa_nn_lmhead_tail_drop(tail);
    int R = rows < N ? rows : N;
    int VB = xsa_nn_lmhead_vblock(R, V), nblk = (V + VB - 1) / VB;
    ce_scratch p = ce_layout(scratch, R, C, V, bf != NULL, nthreads);
    if (tail && grad && tail_sort_room(tail, N, nblk) != 0) return -1;
    float g = 1.0f / (float)N;
    double total = 0.0;
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        const float *x = inp + (size_t)r0 * C;
        lm_job j = {.bf = bf, .n = n, .C = C, .V = V, .VB = VB, .nblk = nblk, .R = R,
                    .grad = grad, .acc = r0 > 0, .x = x, .wte = wte, .targets = targets + r0,
                    .p = &p, .dwte = dwte};
        if (bf) {
            xsa_bf16_from_f32(p.x16, x, (size_t)n * C);
            j.x16 = p.x16;
        }
        if (lm_run(&j) != 0) return -1;
        /* join the blocks: lse = M + log sum_b s_b e^(m_b - M); block b's
         * probabilities are its exponentials times e^(m_b - lse) */
        for (int i = 0; i < n; i++) {
            double M = -INFINITY, S = 0.0;
            for (int b = 0; b < nblk; b++)
                if (p.bmax[(size_t)b * R + i] > M) M = p.bmax[(size_t)b * R + i];
            for (int b = 0; b < nblk; b++)
                S += p.bsum[(size_t)b * R + i] * exp(p.bmax[(size_t)b * R + i] - M);
            double lse = log(S) + M, l = lse - p.lt[i];
            if (losses) losses[r0 + i] = (float)l;
            total += l;
            if (grad)
                for (int b = 0; b < nblk; b++)
                    p.fac[(size_t)b * R + i] = (float)(g * exp(p.bmax[(size_t)b * R + i] - lse));
        }
        if (!grad) continue;
        /* per block: dwte_b (+)= e_b (fac x); then dinp's rows (the last
         * chunk's blocks left to the tail, if any) */
        j.phase = 1;
        j.dinp = dinp + (size_t)r0 * C;
        j.g = g;
        j.no_blocks = tail && r0 + n >= N;
        if (lm_run(&j) != 0) return -1;
        if (j.no_blocks) {
            tail->p = p;
            tail->job = j;
            tail->job.p = &tail->p;
            if (bf) {
                tail->bf = *bf;
                tail->job.bf = &tail->bf;
            }
            tail->job.no_blocks = 0;
            tail->job.no_rows = 1;
            tail_sort(tail, inp, targets, N, VB, nblk);
        }
    }
    if (grad && tail) {
        tail->pending = 1;
        *loss = total / N;
        return 0;
    }
    if (grad)
        for (int i = 0; i < N; i++) row_add_scaled(dwte + (size_t)targets[i] * C, g, inp + (size_t)i * C, C, 1);
    *loss = total / N;
    return 0;
}

int xsa_nn_lmhead_ce(double *loss, float *dinp, float *dwte, float *losses, float *scratch,
                     const float *inp, const float *wte, const int32_t *targets, int N, int C,
                     int V, int rows, int nthreads, const xsa_nn_bf16 *bf)
{
    return xsa_nn_lmhead_ce_defer(loss, dinp, dwte, losses, scratch, inp, wte, targets, N, C, V,
                                  rows, nthreads, bf, NULL);
}
