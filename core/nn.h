/*
 * nn.h: the fused layer kernels of the GPT model, as forward/backward pairs
 * over raw contiguous float arrays (llm.c style). The GPT model (gpt.c) calls
 * them directly on its parameter/activation blocks; the autograd layer wraps
 * them as ops for Lua users.
 *
 * Dimension letters: B batch, T time, C channels (d_model), V vocabulary,
 * NH heads, HS = C/NH head size, N = B*T rows, OC output channels.
 *
 * Conventions:
 *   - Every array is contiguous row-major with the shape given in brackets.
 *   - Backward functions ADD into gradient buffers (dinp, dw, db, ...); the
 *     caller zeroes them first. Any gradient pointer may be NULL when that
 *     gradient is not wanted. Exception: the cross-entropy backward WRITES
 *     dlogits (it is the first gradient of the chain; it may alias probs).
 *   - Inputs are trusted (sizes positive, token ids in range): callers
 *     validate. These functions cannot fail except where they return int.
 *
 * Non-goals: strided inputs, other dtypes, dropout.
 *
 * Example (one linear layer, forward and backward):
 *   xsa_nn_linear_forward(out, x, w, b, N, C, OC);
 *   ... dout = dLoss/dout ...
 *   xsa_nn_linear_backward(dx, dw, db, dout, x, w, N, C, OC);  // adds
 */
#ifndef XSA_NN_H
#define XSA_NN_H

#include <stddef.h>
#include <stdint.h>

/* ---- embedding --------------------------------------------------------
 * out[B,T,C] = wte[inp[b,t], :] + wpe[t, :]
 * inp[B,T] int32 in [0,V); wte[V,C]; wpe[>=T,C] */
void xsa_nn_embedding_forward(float *out, const int32_t *inp, const float *wte,
                              const float *wpe, int B, int T, int C);
/* dwte[V,C] += scatter(dout); dwpe[T,C] += sum over b of dout[b] */
void xsa_nn_embedding_backward(float *dwte, float *dwpe, const float *dout,
                               const int32_t *inp, int B, int T, int C);

/* ---- linear (GPT-2 Conv1D: weight stored input-major) -----------------
 * out[N,OC] = inp[N,C] w[C,OC] + b[OC]   (b may be NULL) */
void xsa_nn_linear_forward(float *out, const float *inp, const float *w,
                           const float *b, int N, int C, int OC);
/* dinp[N,C] += dout w^T; dw[C,OC] += inp^T dout; db[OC] += sum_n dout */
void xsa_nn_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC);

/* ---- tied lm_head -------------------------------------------------------
 * logits[N,V] = inp[N,C] wte[V,C]^T */
void xsa_nn_lmhead_forward(float *logits, const float *inp, const float *wte,
                           int N, int C, int V);
/* dinp[N,C] += dlogits wte; dwte[V,C] += dlogits^T inp */
void xsa_nn_lmhead_backward(float *dinp, float *dwte, const float *dlogits,
                            const float *inp, const float *wte, int N, int C, int V);

/* ---- layernorm over the last dimension (eps 1e-5, biased variance) ------
 * out[N,C] = (inp - mean) * rstd * w + b; saves mean[N], rstd[N]; out
 * must not overlap inp, w or b (nn.c's row loops are restrict) */
#define XSA_NN_LN_EPS 1e-5f
void xsa_nn_layernorm_forward(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C);
/* dinp[N,C] += ..., dw[C] += ..., db[C] += ... (uses the saved mean/rstd) */
void xsa_nn_layernorm_backward(float *dinp, float *dw, float *db,
                               const float *dout, const float *inp,
                               const float *w, const float *mean,
                               const float *rstd, int N, int C);

/* ---- GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2)) --------------------------
 * (the erf form, not the tanh approximation; evaluated as x * Phi(x) with
 * Phi through erfc, to about 2e-6 relative wherever |gelu| > 1e-7)
 * out[n] for n < count; out may alias inp in the forward */
void xsa_nn_gelu_forward(float *out, const float *inp, size_t count);
/* dinp[n] += dout[n] * gelu'(inp[n]) */
void xsa_nn_gelu_backward(float *dinp, const float *inp, const float *dout,
                          size_t count);

/* ---- residual ---------------------------------------------------------
 * out = a + b (count elements; out may alias a or b) */
void xsa_nn_residual_forward(float *out, const float *a, const float *b, size_t count);
/* da += dout; db += dout */
void xsa_nn_residual_backward(float *da, float *db, const float *dout, size_t count);

/* ---- causal multi-head self attention, SA or XSA -----------------------
 * qkv[B,T,3C]: q, k, v in that order along the last dim, each [C] split into
 * NH heads of HS consecutive channels. Per (b, head):
 *   att = softmax(q k^T / sqrt(HS) + causal mask)      att[B,NH,T,T]
 *   Y   = att v                                         y[B,T,C]
 *   Vn  = v / max(||v||, 1e-12)          (per head and token)
 *   Z   = Y - lambda (Y . Vn) Vn                         out[B,T,C]
 * heads concatenated along C in out and y. att's upper triangle (t2 > t) is
 * written as 0. lambda == 0 is plain SA: the projection is skipped, y may be
 * NULL (then nothing is saved) and out = Y.
 * When lambda != 0, y must be non-NULL: the backward needs it.
 *
 * Up to XSA_NN_ATTN_FULL_MAX positions att holds the weights as above (the
 * full kernel, whose bits every record of the study has). Longer sequences
 * run a blocked kernel with an online softmax (attention_blocked.c): att
 * then holds each row's log-sum-exp [B,NH,T] and the kernel's working
 * blocks, xsa_nn_attention_saved_floats in all, and y must be non-NULL for
 * SA too (it receives a copy of out). xsa_nn_attention_weights recomputes
 * the weights from it.
 *
 * probe: NULL, or NH * XSA_NN_PROBE_N doubles receiving, for each head h,
 * probe[h*XSA_NN_PROBE_N + k] = the means over this batch of the statistics
 * below, with cos(a,b) = a.b / max(|a||b|, 1e-8):
 *   XSA_NN_PROBE_VALUE_COS  mean cos(v_i, v_j), ordered pairs i != j of all T
 *                           positions of a sequence (0 when T == 1)
 *   XSA_NN_PROBE_SELF_ATTN  mean a_ii over all positions (incl. 0)
 *   XSA_NN_PROBE_PRE_COS    mean cos(y_i, v_i), all positions
 *   XSA_NN_PROBE_POST_COS   mean cos(z_i, v_i), all positions (z = y for SA)
 *   XSA_NN_PROBE_PRE_COS1   as PRE_COS over positions 1..T-1 (0 when T == 1)
 *   XSA_NN_PROBE_POST_COS1  as POST_COS over positions 1..T-1
 */
enum {
    XSA_NN_PROBE_VALUE_COS = 0,
    XSA_NN_PROBE_SELF_ATTN,
    XSA_NN_PROBE_PRE_COS,
    XSA_NN_PROBE_POST_COS,
    XSA_NN_PROBE_PRE_COS1,
    XSA_NN_PROBE_POST_COS1,
    XSA_NN_PROBE_N
};
/* The length up to which the full kernel runs: the longest sequence of the
 * study's records (seq_len <= 256), which keep the full kernel's bits. The
 * blocked kernel would pay from 256 on: on the Zen 3, 2 threads, 2 heads of
 * 64 (tests/bench_attention.c, doc/performance.md), forward + backward
 * took 5.9 ms blocked against 18.6 ms full at 256 positions, 1.3 against
 * 1.4 ms at 128, 1.2 against 0.3 ms at 64. */
#define XSA_NN_ATTN_FULL_MAX 256
/* Floats of att at (B, T): B*NH*T*T up to XSA_NN_ATTN_FULL_MAX, else
 * B*NH*T plus the blocked forward's working blocks. */
size_t xsa_nn_attention_saved_floats(int B, int T, int C, int NH);
/* att[B,NH,T,T] = the weights, from an att saved by the blocked kernel */
void xsa_nn_attention_weights(float *att, const float *qkv, const float *saved, int B, int T, int C,
                              int NH);
void xsa_nn_attention_forward(float *out, float *y, float *att, const float *qkv,
                              int B, int T, int C, int NH, float lambda,
                              double *probe);
/* The XSA projection of one head's output, Z = Y - lambda (Y . Vn) Vn with
 * Vn = v / max(|v|, 1e-12): z[HS] from y[HS] and that token's own value
 * v[HS] (z may be y). The attention above and the key/value cache's
 * (generate.h) both project through it. */
void xsa_nn_xsa_project(float *z, const float *y, const float *v, int HS, float lambda);
/* Floats of scratch the backward needs (B*T*C + 2T; above
 * XSA_NN_ATTN_FULL_MAX, B*T*C and two halves' blocks). */
size_t xsa_nn_attention_scratch_floats(int B, int T, int C, int NH);
/* dqkv[B,T,3C] += d(loss)/d(qkv) given dout[B,T,C] = d(loss)/dZ, the saved
 * att and y (y unused, may be NULL, when lambda == 0) and the same qkv.
 * scratch: xsa_nn_attention_scratch_floats() floats, contents irrelevant. */
void xsa_nn_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, const float *y,
                               int B, int T, int C, int NH, float lambda);

/* ---- cross-entropy from logits (natural log, mean over the N rows) ------
 * logits[N,V], targets[N] in [0,V). Returns the mean loss (computed in
 * double). When probs is non-NULL the softmax is saved for the backward as
 * probs[N,V] = exp(logits - rowmax) (unnormalised; may alias logits) and
 * pscale[N] = 1 / sum of that row. losses[N] (optional) receives per-row
 * losses. Splits the rows over `nthreads` POSIX threads (<= 1: none). */
double xsa_nn_crossentropy_forward(float *probs, float *pscale, float *losses,
                                   const float *logits, const int32_t *targets,
                                   int N, int V, int nthreads);
/* dlogits[N,V] = (probs * pscale - onehot(targets)) * dloss / N  (WRITTEN,
 * not added; may alias probs). */
void xsa_nn_crossentropy_backward(float *dlogits, const float *probs,
                                  const float *pscale, const int32_t *targets,
                                  float dloss, int N, int V, int nthreads);

/* ---- fused: cross-entropy backward through the tied lm_head ------------
 * The same as xsa_nn_crossentropy_backward into a dlogits buffer followed
 * by xsa_nn_lmhead_backward, without writing dlogits: with s_n = pscale[n] *
 * dloss / N and g = dloss / N,
 *   dinp[n]    += s_n (probs wte)[n] - g wte[targets[n]]
 *   dwte       += probs^T (s * inp) - g scatter(inp rows to target rows)
 * which saves a pass over the [N,V] buffer. probs/pscale as saved by
 * xsa_nn_crossentropy_forward (probs is not modified); scratch: 2*N*C floats.
 * inp[N,C], wte[V,C], dinp[N,C], dwte[V,C] (dinp or dwte may be NULL). */
void xsa_nn_lmhead_ce_backward(float *dinp, float *dwte, float *scratch,
                               const float *probs, const float *pscale,
                               const int32_t *targets, const float *inp,
                               const float *wte, float dloss, int N, int C, int V);

/* ---- fused and chunked: tied lm_head + cross-entropy (+ its gradient) ---
 * *loss = mean over the N rows of CE(inp[n] wte^T, targets[n]) (natural log,
 * accumulated in double), without an [N,V] array: the rows go `rows` at a
 * time through a [rows,V] chunk of scratch, which the softmax and, with a
 * gradient, both backward products read while it is still in cache.
 * With dinp and dwte non-NULL the gradient of that mean loss (dloss = 1) is
 * computed in the same pass, chunk by chunk:
 *   dinp[N,C] = (softmax - onehot) wte / N              (WRITTEN)
 *   dwte[V,C] = (softmax - onehot)^T inp / N            (WRITTEN, accumulated
 *               over the chunks)
 * the caller scales them by dloss when the backward runs. losses[N]
 * (optional) receives per-row losses. scratch: xsa_nn_lmhead_ce_scratch_floats
 * floats. bf: NULL for float32 products (xsa_sgemm); else the three
 * products run bf16 x bf16 -> f32 through matmul_bf16.h with bf->wte, a bf16
 * copy of wte (the softmax, the loss and the accumulation stay float32).
 * The chunk is held transposed ([V, rows]: OpenBLAS then packs wte as the
 * cheap operand) and goes through the vocabulary a block at a time (about
 * 4 MB of float32 logits, XSA_LMHEAD_VBLOCK rows overrides): the block's
 * product, then its softmax statistics and exponentials while it is in
 * cache, so the logits never travel to memory and back; the backward
 * products run per block too, each block's exponentials scaled by its own
 * factor e^(max_block - lse). Thread k of nthreads runs blocks k, k +
 * nthreads, ... (their products, each one call on that thread, and their
 * softmax), and dinp's sum over the blocks goes in block order after them:
 * the bits do not depend on nthreads (each xsa_sgemm must run on one
 * thread, as gemm.h and system.h keep it).
 * Returns 0, or -1 with an error (bf16 products only). */
struct xsa_bf16_mm;
typedef struct xsa_nn_bf16 {
    struct xsa_bf16_mm *mm;
    const uint16_t *wte; /* [V,C] bf16 */
} xsa_nn_bf16;
int xsa_nn_lmhead_ce(double *loss, float *dinp, float *dwte, float *losses, float *scratch,
                     const float *inp, const float *wte, const int32_t *targets, int N, int C,
                     int V, int rows, int nthreads, const xsa_nn_bf16 *bf);
/* The same, with the last chunk's dwte products left for later: with a
 * gradient and tail non-NULL, on return the loss and dinp are complete
 * and dwte is not until xsa_nn_lmhead_tail_finish, which needs inp,
 * targets, dwte and the scratch unchanged till then. The caller runs
 * other work in between (the blocks' backward) after
 * xsa_nn_lmhead_tail_start: the threads beyond the caller's then start
 * on those products, and xsa_threads() on the caller's thread does not
 * count them until each has no block left to take (system.h). With dst, each row of dwte,
 * once complete, is also added to dst: dst[v] = fmaf(scale, dwte[v],
 * dst[v]) (rows that are no row's target as their block is done, on the
 * thread that did it; the targets' rows at the finish). The same bits as
 * xsa_nn_lmhead_ce. A tail is one model's: one pending chunk at a time (a
 * new loss drops the last one's). */
typedef struct xsa_nn_lmhead_tail xsa_nn_lmhead_tail;
xsa_nn_lmhead_tail *xsa_nn_lmhead_tail_new(void); /* NULL + error */
int xsa_nn_lmhead_ce_defer(double *loss, float *dinp, float *dwte, float *losses, float *scratch,
                           const float *inp, const float *wte, const int32_t *targets, int N,
                           int C, int V, int rows, int nthreads, const xsa_nn_bf16 *bf,
                           xsa_nn_lmhead_tail *tail);
/* 1 while a chunk's products are left (from a defer to its finish or drop) */
int xsa_nn_lmhead_tail_pending(const xsa_nn_lmhead_tail *t);
/* dst: NULL, or [V,C] */
void xsa_nn_lmhead_tail_start(xsa_nn_lmhead_tail *t, float *dst, float scale);
/* Runs what is left on the caller's thread (all of it, without dst, when
 * not started), joins the others, then subtracts the targets' rows: dwte
 * (and dst) complete. 0 (also when nothing is pending), or -1 with an
 * error (bf16 products only). */
int xsa_nn_lmhead_tail_finish(xsa_nn_lmhead_tail *t);
/* Abandons a pending chunk (dwte, dst stay incomplete); joins started threads. */
void xsa_nn_lmhead_tail_drop(xsa_nn_lmhead_tail *t);
void xsa_nn_lmhead_tail_free(xsa_nn_lmhead_tail *t); /* NULL: no-op */
/* Rows per chunk for N rows of a V vocabulary: 384 rows of GPT-2's (about
 * 77 MB of float32 exponentials), 512 with bf16 products (bf16 != 0; about
 * 52 MB of bf16 exponentials), a multiple of 64, at most N.
 * XSA_LMHEAD_ROWS in the environment overrides (for tuning). */
int xsa_nn_lmhead_rows(int N, int V, int bf16);
/* Rows of the vocabulary per block for chunks of R rows: about 4 MB of
 * float32 logits (in L3 while the softmax reads them right after their
 * product: 2688 rows at R = 384, 2048 at 512), a multiple of 64, at most
 * V. XSA_LMHEAD_VBLOCK overrides. */
int xsa_nn_lmhead_vblock(int R, int V);
/* The blocking as text, for a record's provenance (the blocks set the
 * order of the softmax's sums, so another blocking gives other last bits):
 * "chunks of 80 MB (bf16 104), blocks of 4 MB" (of float32
 * exponentials, bf16 ones, float32 logits), or the overriding variables'
 * values. */
const char *xsa_nn_lmhead_describe(void);
/* Overrides the blocking for the rest of the process (benchmarks: make
 * bench's bench_blocking alternates blockings in one process): rows per
 * chunk and vocabulary rows per block, 0 for the rule; it wins over the
 * environment. Not while a step runs. 0, or -1 with an error. */
int xsa_nn_lmhead_set_blocking(int rows, int vblock);
size_t xsa_nn_lmhead_ce_scratch_floats(int N, int C, int V, int rows, int bf16, int nthreads);

#endif
