/*
 * attention.h: attention as one unit of the core. Every variant is causal
 * softmax attention, Y = softmax(q k^T / sqrt(HS) + mask) v per head (one
 * softmax row loop, vec.h's attention_row, for training, evaluation,
 * probing and cached decoding; the blocked kernel past
 * XSA_NN_ATTN_FULL_MAX positions), followed by what makes the variant: Z
 * from each row's Y and that token's own value. A variant is one file that
 * defines an xsa_attention_variant and one line in XSA_ATTENTION_VARIANTS
 * below; the model (gpt.h), its checkpoints and the Lua binding (the list
 * of names it checks) take it from the table. Private to the core.
 *
 * The forward is one row's, so the cached decoding step (kv_cache.c) is
 * the same function as the training forward and decoding keeps the
 * forward's bits.
 *
 * Non-goals: variants that change the softmax itself (masking, other
 * scores): those need a kernel of their own beside nn.c's.
 */
#ifndef XSA_ATTENTION_H
#define XSA_ATTENTION_H

#include <stddef.h>

typedef struct xsa_attention_variant {
    const char *name;  /* the name configs, checkpoints and Lua use */
    int takes_lambda;  /* 1: lambda is this variant's parameter */
    /* z[HS] from the row's y[HS] and its own value v[HS] (z may be y);
     * NULL: Z = Y (the kernels then write Y straight into z) */
    void (*forward)(float *z, const float *y, const float *v, int HS, float lambda);
    /* rows [r0, r1) of N = B*T: dy[N,C] = dL/dY from dz[N,C] = dL/dZ, and
     * the value columns of dqkv[N,3C] += the part of dL/dV that goes
     * through Z; y [N,C] and qkv [N,3C] as the forward saw them. NULL:
     * dY = dZ. Each row's arithmetic must not depend on [r0, r1) (the
     * kernels split rows over threads). */
    void (*backward)(float *dy, float *dqkv, const float *dz, const float *y, const float *qkv,
                     size_t r0, size_t r1, int C, int NH, float lambda);
} xsa_attention_variant;

/* The table, in the order of gpt.h's xsa_attention values: one X(name)
 * per variant, defined as xsa_attention_<name> in its own file. */
#define XSA_ATTENTION_VARIANTS(X) X(sa) X(xsa) X(vsub)

/* the two the study compares, SA and XSA (attention.c) */
extern const xsa_attention_variant xsa_attention_sa, xsa_attention_xsa;

/* variant i of the table, NULL outside [0, xsa_attention_count()) */
const xsa_attention_variant *xsa_attention_get(int i);
int xsa_attention_count(void);

/* XSA's row functions (nn.c), for its table entry */
void xsa_nn_xsa_project_backward(float *dy, float *dqkv, const float *dz, const float *y,
                                 const float *qkv, size_t r0, size_t r1, int C, int NH,
                                 float lambda);

#endif
