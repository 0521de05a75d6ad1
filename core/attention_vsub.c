/*
 * attention_vsub.c: the attention variant "vsub", Z = Y - lambda V: each
 * token's own value subtracted whole instead of XSA's projection onto it
 * (the unnormalised ablation of XSA: with lambda 1 it removes V, not only
 * Y's component along V). Also the proof that a variant is one file plus
 * one line of attention.h (tests/test_attention_variant.c trains,
 * evaluates, decodes and checkpoints it through the model).
 */
#include "attention.h"

static void vsub_forward(float *z, const float *y, const float *v, int HS, float lambda)
{
    for (int i = 0; i < HS; i++) z[i] = y[i] - lambda * v[i];
}

/* dY = dZ; dV -= lambda dZ */
static void vsub_backward(float *dy, float *dqkv, const float *dz, const float *y, const float *qkv,
                          size_t r0, size_t r1, int C, int NH, float lambda)
{
    (void)y, (void)qkv, (void)NH;
    for (size_t r = r0; r < r1; r++)
        for (int c = 0; c < C; c++) {
            dy[r * C + c] = dz[r * C + c];
            dqkv[r * 3 * C + 2 * C + c] -= lambda * dz[r * C + c];
        }
}

const xsa_attention_variant xsa_attention_vsub = {"vsub", 1, vsub_forward, vsub_backward};
