/*
 * attention_ext.c: a block's attention when it is an external function
 * (gpt.h's xsa_gpt_ext_attention: the Lua binding's `attention = f`). The
 * model runs the rest of the block around it; this file calls the function
 * over the block's qkv, keeps what its backward needs, and gives the probe
 * the same statistics a built-in variant has: those of Y (self-attention
 * weights, cos(y, v)) from SA's kernel, which is the Y the function sees,
 * and cos(z, v) from the function's z.
 *
 * Non-goals: the function itself (the binding's), the cached decoding
 * step's call (kv_cache.c).
 */
#include "attention_impl.h"
#include "gpt_impl.h"
#include "nn.h"

int xsa_gpt_attend_ext(const xsa_gpt_full_attention *fa, int layer, const xsa_gpt_acts *a)
{
    int B = fa->B, T = fa->T, C = fa->C, NH = fa->NH;
    double *probe = fa->probe ? fa->probe + (size_t)layer * NH * XSA_NN_PROBE_N : NULL;
    if (probe) /* Y's statistics; z = Y here, its cosines replaced below */
        xsa_nn_attention_forward_v(&xsa_attention_sa, 0.0f, a->z, a->y, a->att, a->qkv, B, T, C, NH,
                                   probe);
    xsa_gpt_ext_call c = {layer, B, T, C, NH, 0, fa->saved != NULL, a->qkv, a->z, NULL};
    if (fa->ext->forward(fa->ext->ud, &c) != 0) return -1;
    if (fa->saved) fa->saved[layer] = c.saved;
    if (probe) xsa_nn_probe_post(probe, a->z, a->qkv, B, T, C, NH);
    return 0;
}

int xsa_gpt_attend_ext_backward(const xsa_gpt_full_attention *fa, void *saved, const float *dz,
                                float *dqkv)
{
    if (!saved)
        return xsa_error("gpt backward: the attention function's graph is missing (its forward "
                         "kept nothing)");
    int rc = fa->ext->backward(fa->ext->ud, saved, dz, dqkv);
    fa->ext->drop(fa->ext->ud, saved);
    return rc;
}
