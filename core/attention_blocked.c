/*
 * attention_blocked.c: causal attention above XSA_NN_ATTN_FULL_MAX
 * positions (nn.h), by blocks of BR query rows and BC keys with the online
 * softmax of flash attention. The forward keeps, per row, only the
 * log-sum-exp of its scores; the backward recomputes each block of weights
 * from it, so no [T,T] buffer exists and memory grows as O(T) per head.
 * The variant's own part (attention.h: XSA's projection and its backward)
 * runs on the same rows as in the full path. The full kernel of nn.c keeps every shorter sequence (the study's
 * records) on its old arithmetic.
 *
 * One unit is one (batch row, head): its outputs (y, out, the log-sum-exp,
 * its columns of dqkv) are its own, and the units split in two halves over
 * the two threads (xsa_run_halves), so 1 and 2 threads give the same bits.
 * Within a unit every product is a chain of multiply-adds in a fixed order
 * (mm below, on simd.h's vectors: each lane is one output element), so the
 * bits also do not depend on the vector width, except that the plain C
 * build rounds the multiply and the add apart, and the vector paths take
 * the exponential from vf_exp and their scalar tails from expf.
 *
 * Non-goals: non-causal attention, dropout, the attention weights as a
 * buffer (xsa_nn_attention_weights recomputes them for whoever asks).
 */
#include <math.h>
#include <string.h>

#include "attention_impl.h"
#include "nn.h"
#include "simd.h"
#include "system.h"
#include "vec.h"

/* Block sizes (query rows, keys). They fix the order of the online
 * softmax's rescaling, hence the bits: change them and the records made
 * on this path move (announce it). 64 x 64: with HS = 64 a block's
 * scores, its packed keys and its accumulator are 16 KB each, inside the
 * L2 of every core the engine has run on. */
#define BR 64
#define BC 64

static int imin(int a, int b) { return a < b ? a : b; }

/* ---- the products --------------------------------------------------------
 * c[m,n] = (acc ? c : 0) + a[m,k] b[k,n]: a(r,k) at a[r*ar + k*ak] (so a
 * transposed operand needs no copy), b and c row-major. Each element is one
 * chain of multiply-adds over k in increasing order, whichever tile
 * computes it, so the tiles' shapes change no bit. Tiles of R <= 6 rows by
 * 2 vectors keep their sums in registers (6 x 2 on AVX2: 12 of the 16,
 * enough chains to fill both FMA pipes); R is a constant at each call
 * (inlined), so the compiler keeps s[][] in registers and drops the rows
 * a tile does not have. The last columns go one row by one vector, masked
 * at the end. */
XSA_ALWAYS_INLINE void tile_x2(float *c, int ldc, const float *a, int ar, int ak, const float *b,
                               int ldb, int k, int acc, int R)
{
    vf s0[6], s1[6];
    for (int r = 0; r < 6; r++) {
        s0[r] = r < R && acc ? vf_load(c + (size_t)r * ldc) : vf_zero();
        s1[r] = r < R && acc ? vf_load(c + (size_t)r * ldc + VF_W) : vf_zero();
    }
    for (int kk = 0; kk < k; kk++) {
        const float *bk = b + (size_t)kk * ldb, *ak0 = a + (size_t)kk * ak;
        vf b0 = vf_load(bk), b1 = vf_load(bk + VF_W);
#define ROW(r)                                                                                      \
    if (r < R) {                                                                                    \
        vf x = vf_set1(ak0[(size_t)(r) * ar]);                                                      \
        s0[r] = vf_fmadd(x, b0, s0[r]), s1[r] = vf_fmadd(x, b1, s1[r]);                             \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    for (int r = 0; r < R; r++) {
        vf_store(c + (size_t)r * ldc, s0[r]);
        vf_store(c + (size_t)r * ldc + VF_W, s1[r]);
    }
}

/* one row by one vector, its first n <= VF_W lanes */
static void tile1(float *c, const float *a, int ak, const float *b, int ldb, int k, int n, int acc)
{
    vmask m = vf_mask(n);
    vf s = acc ? vf_load_mask(m, c) : vf_zero();
    for (int kk = 0; kk < k; kk++)
        s = vf_fmadd(vf_set1(a[(size_t)kk * ak]), vf_load_mask(m, b + (size_t)kk * ldb), s);
    vf_store_mask(c, m, s);
}

static void mm(float *c, int ldc, const float *a, int ar, int ak, const float *b, int ldb, int m,
               int n, int k, int acc)
{
    int n2 = n / (2 * VF_W) * (2 * VF_W), r = 0;
    for (; r + 6 <= m; r += 6)
        for (int j = 0; j < n2; j += 2 * VF_W)
            tile_x2(c + (size_t)r * ldc + j, ldc, a + (size_t)r * ar, ar, ak, b + j, ldb, k, acc, 6);
    for (; r + 4 <= m; r += 4)
        for (int j = 0; j < n2; j += 2 * VF_W)
            tile_x2(c + (size_t)r * ldc + j, ldc, a + (size_t)r * ar, ar, ak, b + j, ldb, k, acc, 4);
    for (; r < m; r++)
        for (int j = 0; j < n2; j += 2 * VF_W)
            tile_x2(c + (size_t)r * ldc + j, ldc, a + (size_t)r * ar, ar, ak, b + j, ldb, k, acc, 1);
    for (int i = 0; i < m; i++)
        for (int j = n2; j < n; j += VF_W)
            tile1(c + (size_t)i * ldc + j, a + (size_t)i * ar, ak, b + j, ldb, k, imin(VF_W, n - j), acc);
}

/* dst[d*n + c] = src[c*ld + d]: n rows of HS floats, transposed */
static void pack_t(float *dst, const float *src, int ld, int n, int HS)
{
    for (int c = 0; c < n; c++)
        for (int d = 0; d < HS; d++) dst[(size_t)d * n + c] = src[(size_t)c * ld + d];
}

/* ---- rows of scores ------------------------------------------------------ */

/* row[c] = exp(row[c] - m) for c < n; returns their float sum */
static float exp_row(float *row, int n, float m)
{
    int c = 0;
    float t = 0.0f;
#if XSA_SIMD
    vf vm = vf_set1(m), acc = vf_zero();
    for (; c + VF_W <= n; c += VF_W) {
        vf e = vf_exp(vf_sub(vf_load(row + c), vm));
        vf_store(row + c, e);
        acc = vf_add(acc, e);
    }
    t = vf_hsum(acc);
#endif
    for (; c < n; c++) {
        row[c] = expf(row[c] - m);
        t += row[c];
    }
    return t;
}

/* row[c] *= s for c < n; returns the largest */
static float scale_max(float *row, int n, float s)
{
    int c = 0;
    float mx = -INFINITY;
#if XSA_SIMD
    vf vs = vf_set1(s), vm = vf_set1(-INFINITY);
    for (; c + VF_W <= n; c += VF_W) {
        vf x = vf_mul(vf_load(row + c), vs);
        vf_store(row + c, x);
        vm = vf_max(x, vm);
    }
    mx = vf_hmax(vm);
#endif
    for (; c < n; c++) {
        row[c] *= s;
        if (row[c] > mx) mx = row[c];
    }
    return mx;
}

/* Keys of block c0 that query row i sees: [0, n) with n in [0, bc] */
static int seen(int i, int c0, int bc)
{
    int n = i - c0 + 1;
    return n < 0 ? 0 : n > bc ? bc : n;
}

/* ---- forward ------------------------------------------------------------ */

typedef struct {
    float *out, *y, *lse, *dqkv, *ws; /* ws: this half's working blocks */
    const float *qkv, *dy, *ysaved;
    const xsa_attention_variant *var;
    int T, C, NH, u0, u1; /* units [u0, u1): batch row u / NH, head u % NH */
    float lambda;
} blk_job;

/* The online softmax over one block of scores s[br,bc] (scaled here): the
 * running max mx and sum of each row move to the block's, acc's rows
 * (lda apart) are rescaled, s becomes the block's exponentials (0 where
 * the row does not see the key). */
static void online_block(float *s, int br, int bc, int i0, int c0, float scale, float *mx,
                         float *sum, float *acc, int lda, int HS)
{
    for (int r = 0; r < br; r++) {
        float *row = s + (size_t)r * bc;
        int n = seen(i0 + r, c0, bc);
        float m = scale_max(row, n, scale), nm = m > mx[r] ? m : mx[r];
        float t = n > 0 ? exp_row(row, n, nm) : 0.0f;
        for (int c = n; c < bc; c++) row[c] = 0.0f;
        if (n == 0) continue;
        float alpha = expf(mx[r] - nm); /* 0 on the first block: mx = -inf */
        if (alpha != 1.0f) row_scale(acc + (size_t)r * lda, alpha, acc + (size_t)r * lda, HS);
        sum[r] = sum[r] * alpha + t;
        mx[r] = nm;
    }
}

/* Unit (b, h): Y, the log-sum-exp, out. Key blocks outside, so that each
 * is packed once; the query blocks that see it inside, each with its
 * running max (kept in lse until the end), sum and Y rows. A query block
 * still meets the key blocks in increasing order, so the order of its
 * rescalings is the blocks' alone. */
static void forward_unit(const blk_job *j, int b, int h, float *ws)
{
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    const float *Q = j->qkv + (size_t)b * T * C3 + h * HS, *K = Q + C, *V = Q + 2 * C;
    float *kt = ws, *s = kt + (size_t)HS * BC, *sum = s + BR * BC;
    float *mx = j->lse + ((size_t)b * NH + h) * T, *Y = j->y + (size_t)b * T * C + h * HS;
    for (int t = 0; t < T; t++) {
        mx[t] = -INFINITY, sum[t] = 0.0f;
        memset(Y + (size_t)t * C, 0, (size_t)HS * sizeof(float));
    }
    for (int c0 = 0; c0 < T; c0 += BC) {
        int bc = imin(BC, T - c0);
        pack_t(kt, K + (size_t)c0 * C3, C3, bc, HS);
        for (int i0 = c0 / BR * BR; i0 < T; i0 += BR) {
            int br = imin(BR, T - i0);
            mm(s, bc, Q + (size_t)i0 * C3, C3, 1, kt, bc, br, bc, HS, 0);
            online_block(s, br, bc, i0, c0, scale, mx + i0, sum + i0, Y + (size_t)i0 * C, C, HS);
            mm(Y + (size_t)i0 * C, C, s, bc, 1, V + (size_t)c0 * C3, C3, br, HS, bc, 1);
        }
    }
    for (int t = 0; t < T; t++) {
        float *yo = Y + (size_t)t * C, *zo = j->out + ((size_t)b * T + t) * C + h * HS;
        row_scale(yo, 1.0f / sum[t], yo, HS);
        mx[t] = mx[t] + logf(sum[t]); /* the log-sum-exp */
        if (j->var->forward)
            j->var->forward(zo, yo, V + (size_t)t * C3, HS, j->lambda);
        else
            memcpy(zo, yo, (size_t)HS * sizeof(float));
    }
}

static void *forward_units(void *arg)
{
    const blk_job *j = arg;
    for (int u = j->u0; u < j->u1; u++) forward_unit(j, u / j->NH, u % j->NH, j->ws);
    return NULL;
}

/* floats of one half's working blocks: forward, backward */
static size_t fwd_ws(int T, int HS) { return (size_t)HS * BC + BR * BC + (size_t)T; }
static size_t bwd_ws(int T, int HS) { return 2 * (size_t)HS * BC + 2 * BR * BC + (size_t)T; }

size_t xsa_nn_attention_blocked_saved_floats(int B, int T, int C, int NH)
{
    return (size_t)B * NH * T + 2 * fwd_ws(T, C / NH);
}

size_t xsa_nn_attention_blocked_scratch_floats(int B, int T, int C, int NH)
{
    return (size_t)B * T * C + 2 * bwd_ws(T, C / NH);
}

/* The two halves of the units, each with its working blocks at ws + k*n */
static void run_units(blk_job *j, int B, float *ws, size_t n, void *(*fn)(void *))
{
    int U = B * j->NH;
    blk_job halves[2] = {*j, *j};
    halves[0].u0 = 0, halves[0].u1 = halves[1].u0 = U / 2, halves[1].u1 = U;
    halves[0].ws = ws, halves[1].ws = ws + n;
    xsa_run_halves(halves, sizeof halves[0], U >= 2, fn);
}

void xsa_nn_attention_blocked_forward(const xsa_attention_variant *v, float lambda, float *out,
                                      float *y, float *saved, const float *qkv, int B, int T, int C,
                                      int NH)
{
    blk_job j = {.out = out, .y = y, .lse = saved, .qkv = qkv, .var = v, .T = T, .C = C, .NH = NH,
                 .lambda = lambda};
    run_units(&j, B, saved + (size_t)B * NH * T, fwd_ws(T, C / NH), forward_units);
}

/* ---- backward ----------------------------------------------------------- */

/* One block pair: queries [i0, i0 + br) against keys [c0, c0 + bc) of the
 * unit whose pointers are given (Q, K, dY rows; dQ, dK, dV rows in dqkv);
 * kt, vt: the keys and values packed transposed; p, ds: [br, bc] blocks. */
typedef struct {
    const float *Q, *K, *dY, *lse, *D, *kt, *vt;
    float *dQ, *dK, *dV, *p, *ds;
    int C, HS;
    float scale;
} blk_pair;

/* dS = P (dP - D) scale over one row's n keys, in place of dP; each lane
 * the scalar expression (a subtract and two multiplies, none fused) */
static void ds_row(float *d, const float *p, int n, float D, float scale)
{
    vf vD = vf_set1(D), vs = vf_set1(scale);
    int c = 0;
    for (; c + VF_W <= n; c += VF_W)
        vf_store(d + c, vf_mul(vf_mul(vf_load(p + c), vf_sub(vf_load(d + c), vD)), vs));
    for (; c < n; c++) d[c] = p[c] * (d[c] - D) * scale;
}

static void backward_pair(const blk_pair *q, int i0, int br, int c0, int bc)
{
    int C = q->C, C3 = 3 * C, HS = q->HS;
    float *p = q->p, *ds = q->ds;
    mm(p, bc, q->Q + (size_t)i0 * C3, C3, 1, q->kt, bc, br, bc, HS, 0);
    mm(ds, bc, q->dY + (size_t)i0 * C, C, 1, q->vt, bc, br, bc, HS, 0);
    for (int r = 0; r < br; r++) {
        float *pr = p + (size_t)r * bc, *dr = ds + (size_t)r * bc;
        int n = seen(i0 + r, c0, bc);
        scale_max(pr, n, q->scale);
        exp_row(pr, n, q->lse[i0 + r]);
        ds_row(dr, pr, n, q->D[i0 + r], q->scale);
        for (int c = n; c < bc; c++) pr[c] = dr[c] = 0.0f;
    }
    /* dV += P^T dY, dK += dS^T Q, dQ += dS K */
    mm(q->dV + (size_t)c0 * C3, C3, p, 1, bc, q->dY + (size_t)i0 * C, C, bc, HS, br, 1);
    mm(q->dK + (size_t)c0 * C3, C3, ds, 1, bc, q->Q + (size_t)i0 * C3, C3, bc, HS, br, 1);
    mm(q->dQ + (size_t)i0 * C3, C3, ds, bc, 1, q->K + (size_t)c0 * C3, C3, br, HS, bc, 1);
}

static void backward_unit(const blk_job *j, int b, int h)
{
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    const float *Q = j->qkv + (size_t)b * T * C3 + h * HS;
    float *dQ = j->dqkv + (size_t)b * T * C3 + h * HS;
    const float *dY = j->dy + (size_t)b * T * C + h * HS, *Y = j->ysaved + (size_t)b * T * C + h * HS;
    float *kt = j->ws, *vt = kt + (size_t)HS * BC, *p = vt + (size_t)HS * BC, *ds = p + BR * BC;
    float *D = ds + BR * BC;
    /* D_i = sum_k P_ik dP_ik = dY_i . Y_i: Y is P V */
    for (int t = 0; t < T; t++) D[t] = dot(dY + (size_t)t * C, Y + (size_t)t * C, HS);
    blk_pair q = {Q, Q + C, dY, j->lse + ((size_t)b * NH + h) * T, D, kt, vt,
                  dQ, dQ + C, dQ + 2 * C, p, ds, C, HS, 1.0f / sqrtf((float)HS)};
    for (int c0 = 0; c0 < T; c0 += BC) {
        int bc = imin(BC, T - c0);
        pack_t(kt, Q + C + (size_t)c0 * C3, C3, bc, HS);
        pack_t(vt, Q + 2 * C + (size_t)c0 * C3, C3, bc, HS);
        for (int i0 = c0 / BR * BR; i0 < T; i0 += BR) backward_pair(&q, i0, imin(BR, T - i0), c0, bc);
    }
}

static void *backward_units(void *arg)
{
    const blk_job *j = arg;
    for (int u = j->u0; u < j->u1; u++) backward_unit(j, u / j->NH, u % j->NH);
    return NULL;
}

void xsa_nn_attention_blocked_backward(const xsa_attention_variant *v, float lambda, float *dqkv,
                                       float *scratch, const float *dout, const float *qkv,
                                       const float *saved, const float *y, int B, int T, int C,
                                       int NH)
{
    const float *dy = dout;
    if (v->backward) {
        xsa_attention_backward_split(v, lambda, scratch, dqkv, dout, y, qkv, B * T, C, NH);
        dy = scratch;
    }
    blk_job j = {.dqkv = dqkv, .lse = (float *)saved, .qkv = qkv, .dy = dy, .ysaved = y, .var = v,
                 .T = T, .C = C, .NH = NH, .lambda = lambda};
    run_units(&j, B, scratch + (size_t)B * T * C, bwd_ws(T, C / NH), backward_units);
}

/* ---- the weights, recomputed -------------------------------------------- */

/* The scaled score of query t against key t2 as the kernels compute it */
static float score(const float *q, const float *k, int HS, float scale)
{
    float s = 0.0f;
    for (int d = 0; d < HS; d++) s = sf_fmadd(q[d], k[d], s);
    return s * scale;
}

float xsa_nn_attention_blocked_weight(const float *qkv, const float *saved, int b, int h, int t,
                                      int t2, int T, int C, int NH)
{
    int HS = C / NH, C3 = 3 * C;
    const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * HS;
    return t2 > t ? 0.0f : expf(score(q, k, HS, 1.0f / sqrtf((float)HS)) - saved[((size_t)b * NH + h) * T + t]);
}

void xsa_nn_attention_weights(float *att, const float *qkv, const float *saved, int B, int T, int C,
                              int NH)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int t2 = 0; t2 < T; t2++)
                    att[(((size_t)b * NH + h) * T + t) * T + t2] =
                        xsa_nn_attention_blocked_weight(qkv, saved, b, h, t, t2, T, C, NH);
}
