/*
 * attention_impl.h: the attention kernels' private interface between nn.c
 * (the full kernel, the XSA projection, the dispatch by length) and
 * attention_blocked.c (the blocked kernel above XSA_NN_ATTN_FULL_MAX
 * positions). Shapes and conventions: nn.h. Private to the core.
 */
#ifndef XSA_ATTENTION_IMPL_H
#define XSA_ATTENTION_IMPL_H

#include <stddef.h>

#include "attention.h"

/* The blocked kernel. saved: per row of each (batch row, head) its
 * log-sum-exp [B,NH,T], then the forward's working blocks (the sizes of
 * xsa_nn_attention_saved_floats and _scratch_floats above the threshold).
 * The forward writes y for SA too (a copy of out): its backward reads it. */
size_t xsa_nn_attention_blocked_saved_floats(int B, int T, int C, int NH);
size_t xsa_nn_attention_blocked_scratch_floats(int B, int T, int C, int NH);
void xsa_nn_attention_blocked_forward(const xsa_attention_variant *v, float lambda, float *out,
                                      float *y, float *saved, const float *qkv, int B, int T, int C,
                                      int NH);
void xsa_nn_attention_blocked_backward(const xsa_attention_variant *v, float lambda, float *dqkv,
                                       float *scratch, const float *dout, const float *qkv,
                                       const float *saved, const float *y, int B, int T, int C,
                                       int NH);
/* a_{t,t2} of unit (b, h), recomputed from saved as the backward does */
float xsa_nn_attention_blocked_weight(const float *qkv, const float *saved, int b, int h, int t,
                                      int t2, int T, int C, int NH);

/* The probe's POST_COS and POST_COS1 of nn.h (per head, into probe) from
 * z [B,T,C] against the values of qkv: for an output computed elsewhere
 * (an external attention, attention_ext.c) */
void xsa_nn_probe_post(double *probe, const float *z, const float *qkv, int B, int T, int C, int NH);

/* nn.h's attention forward and backward for any variant of the table
 * (nn.h's own take lambda: 0 is SA, else XSA) */
void xsa_nn_attention_forward_v(const xsa_attention_variant *v, float lambda, float *out, float *y,
                                float *att, const float *qkv, int B, int T, int C, int NH,
                                double *probe);
void xsa_nn_attention_backward_v(const xsa_attention_variant *v, float lambda, float *dqkv,
                                 float *scratch, const float *dout, const float *qkv,
                                 const float *att, const float *y, int B, int T, int C, int NH);

/* The variant's backward (v->backward, not NULL) over all N = B*T rows, in
 * two halves (xsa_run_halves): dyw[N,C] = dL/dY from dz = dL/dZ, dqkv's
 * value columns += through Z (nn.c). */
void xsa_attention_backward_split(const xsa_attention_variant *v, float lambda, float *dyw,
                                  float *dqkv, const float *dz, const float *y, const float *qkv,
                                  int N, int C, int NH);

#endif
