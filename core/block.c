/*
 * block.c: the transformer block of gpt_impl.h, written once, and its
 * backward. Training, evaluation and probing (gpt.c) run it with the full
 * causal attention (xsa_gpt_attend_full) over their own buffers; decoding
 * (kv_cache.c) runs it with the cached attention over a few new rows. Each
 * caller gets the same kernels in the same order, so the numbers of one
 * path are the numbers of another wherever their kernels agree.
 *
 * Non-goals: the embedding, ln_f and the lm_head (they differ per caller:
 * positions, chunked loss, packed weights), buffer management.
 */
#include <string.h>

#include "attention_impl.h"
#include "gpt_impl.h"
#include "nn.h"

int xsa_gpt_attend_full(void *ctx, int layer, const xsa_gpt_acts *a)
{
    const xsa_gpt_full_attention *f = ctx;
    if (f->ext) return xsa_gpt_attend_ext(f, layer, a);
    double *probe = f->probe ? f->probe + (size_t)layer * f->NH * XSA_NN_PROBE_N : NULL;
    xsa_nn_attention_forward_v(f->var, f->lambda, a->z, a->y, a->att, a->qkv, f->B, f->T, f->C, f->NH,
                               probe);
    return 0;
}

int xsa_gpt_block_forward(const xsa_gpt_layer *w, const float *x, const xsa_gpt_acts *a, int N,
                          int C, int layer, const xsa_gpt_variant *v, int attention_only)
{
    size_t NC = (size_t)N * C;
    xsa_nn_layernorm_forward(a->ln1, a->ln1m, a->ln1r, x, w->ln1w, w->ln1b, N, C);
    v->linear(a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
    if (v->attend(v->ctx, layer, a) != 0) return -1;
    if (attention_only) return 0;
    /* res2 = c_proj(z) + x: the projection first, the residual added to it
     * (every caller adds in this order, so their sums are the same) */
    v->linear(a->res2, a->z, w->apw, w->apb, N, C, C);
    xsa_nn_residual_forward(a->res2, a->res2, x, NC);
    xsa_nn_layernorm_forward(a->ln2, a->ln2m, a->ln2r, a->res2, w->ln2w, w->ln2b, N, C);
    v->linear(a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    xsa_nn_gelu_forward(a->fchg, a->fch, NC * 4);
    v->linear(a->res3, a->fchg, w->fpw, w->fpb, N, 4 * C, C);
    xsa_nn_residual_forward(a->res3, a->res3, a->res2, NC);
    return 0;
}

/* The bias gradient of c_attn, dqkv[N,3C] -> db[3C], without its key
 * third: adding a constant to every key shifts a row of scores by q.b, which
 * the softmax ignores, so d/d(key bias) is exactly zero. Summing float dqkv
 * would give rounding noise instead, and AdamW's first step (m/sqrt(v), about
 * sign(g)) turns noise into full-size updates of lr. */
static void qkv_bias_backward(float *db, const float *dqkv, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dqkv + (size_t)n * 3 * C;
        for (int c = 0; c < C; c++) db[c] += d[c];
        for (int c = 2 * C; c < 3 * C; c++) db[c] += d[c];
    }
}

int xsa_gpt_block_backward(const xsa_gpt_layer *w, const xsa_gpt_layer *g, const float *x,
                           const xsa_gpt_acts *a, float *dres, const xsa_gpt_block_scratch *s,
                           const xsa_gpt_full_attention *at, int layer)
{
    int C = at->C, N = at->B * at->T;
    size_t NC = (size_t)N * C;
    float *dA = s->dA, *dqkv = s->dqkv, *dfch = s->dfch, *dfchg = s->dfchg;
    /* res3 = res2 + mlp(ln_2(res2)): dres flows to res2 unchanged */
    xsa_nn_gelu_forward(dfch, a->fch, NC * 4); /* gelu(fch) again, in dfch's space */
    memset(dfchg, 0, NC * 4 * sizeof(float));
    xsa_nn_linear_backward(dfchg, g->fpw, g->fpb, dres, dfch, w->fpw, N, 4 * C, C);
    memset(dfch, 0, NC * 4 * sizeof(float));
    xsa_nn_gelu_backward(dfch, a->fch, dfchg, NC * 4);
    /* ln_2(res2) again, in dfchg's space (free from here): the forward's
     * buffer for it is shared by every layer; the same kernel on the same
     * input gives the forward's bits (its mean and rstd rewritten alike) */
    float *ln = dfchg;
    xsa_nn_layernorm_forward(ln, a->ln2m, a->ln2r, a->res2, w->ln2w, w->ln2b, N, C);
    memset(dA, 0, NC * sizeof(float));
    xsa_nn_linear_backward(dA, g->fcw, g->fcb, dfch, ln, w->fcw, N, C, 4 * C);
    xsa_nn_layernorm_backward(dres, g->ln2w, g->ln2b, dA, a->res2, w->ln2w, a->ln2m, a->ln2r, N, C);
    /* res2 = x + c_proj(attn(c_attn(ln_1(x)))) */
    memset(dA, 0, NC * sizeof(float));
    xsa_nn_linear_backward(dA, g->apw, g->apb, dres, a->z, w->apw, N, C, C);
    memset(dqkv, 0, NC * 3 * sizeof(float));
    if (at->ext) {
        void *sv = at->saved[layer];
        at->saved[layer] = NULL;
        if (xsa_gpt_attend_ext_backward(at, sv, dA, dqkv) != 0) return -1;
    } else {
        xsa_nn_attention_backward_v(at->var, at->lambda, dqkv, s->ascratch, dA, a->qkv, a->att, a->y,
                                    at->B, at->T, C, at->NH);
    }
    xsa_nn_layernorm_forward(ln, a->ln1m, a->ln1r, x, w->ln1w, w->ln1b, N, C); /* ln_1(x) again */
    memset(dA, 0, NC * sizeof(float));
    xsa_nn_linear_backward(dA, g->qkvw, NULL, dqkv, ln, w->qkvw, N, C, 3 * C);
    qkv_bias_backward(g->qkvb, dqkv, N, C);
    xsa_nn_layernorm_backward(dres, g->ln1w, g->ln1b, dA, x, w->ln1w, a->ln1m, a->ln1r, N, C);
    return 0;
}
