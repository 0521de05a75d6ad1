/*
 * gpt_impl.h: what the model's files share; internal to the core (not
 * installed, not part of the contract in gpt.h).
 *
 *   - The named parameters: xsa_gpt_tensors holds one named pointer per
 *     tensor (llm.c's ParameterTensors), xsa_gpt_layer those of one block.
 *     A model has one for its weights (xsa_gpt_weights) and fills another
 *     for the gradients in its backward.
 *   - The parameter layout (gpt_params.c): which tensors, in checkpoint
 *     order, their names, shapes and initialisation, written once.
 *   - The transformer block (block.c): the one layer sequence that
 *     training, evaluation and probing (gpt.c) and decoding (kv_cache.c)
 *     run, each with its own buffers and attention variant.
 *
 * Dimension letters as in nn.h: N rows (= B*T), C d_model, NH heads.
 * Not here: the model object and its step (gpt.c), checkpoints
 * (gpt_checkpoint.c), the key/value cache (kv_cache.c).
 */
#ifndef XSA_GPT_IMPL_H
#define XSA_GPT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gpt.h"

/* ---- named parameters -------------------------------------------------- */

/* The tensors of block l, named after their GPT-2 checkpoint names
 * h.{l}.<name>; weights are input-major ([in, out], GPT-2's Conv1D). */
typedef struct xsa_gpt_layer {
    float *ln1w, *ln1b; /* ln_1.weight, ln_1.bias [C] */
    float *qkvw, *qkvb; /* attn.c_attn.weight [C,3C], .bias [3C] */
    float *apw, *apb;   /* attn.c_proj.weight [C,C], .bias [C] */
    float *ln2w, *ln2b; /* ln_2.weight, ln_2.bias [C] */
    float *fcw, *fcb;   /* mlp.c_fc.weight [C,4C], .bias [4C] */
    float *fpw, *fpb;   /* mlp.c_proj.weight [4C,C], .bias [C] */
} xsa_gpt_layer;

typedef struct xsa_gpt_tensors {
    float *wte, *wpe;   /* wte.weight [V,C], wpe.weight [seq_len,C] */
    xsa_gpt_layer *h;   /* [n_layer] */
    float *lnfw, *lnfb; /* ln_f.weight, ln_f.bias [C] */
} xsa_gpt_tensors;

/* The model's weights by name (pointers into its parameter block; valid
 * for the model's life). The one accessor of the layout for the core. */
const xsa_gpt_tensors *xsa_gpt_weights(const xsa_gpt *m);

/* ---- the parameter layout (gpt_params.c) ----------------------------------
 * Tensor i of a model, 0 <= i < xsa_gpt_layout_count(n_layer), in
 * checkpoint order: wte, wpe, then per block the 12 tensors of
 * xsa_gpt_layer in field order, then ln_f.weight, ln_f.bias. */
typedef struct xsa_gpt_tensor_info {
    char name[48];    /* "h.1.attn.c_attn.weight" */
    int ndim;         /* 1 or 2 */
    int64_t shape[2];
    double std;       /* > 0: initialised N(0, std), drawn in layout order */
    float fill;       /* otherwise every element is this (1 or 0) */
} xsa_gpt_tensor_info;

int xsa_gpt_layout_count(int n_layer);
void xsa_gpt_layout_info(const xsa_gpt_config *c, int i, xsa_gpt_tensor_info *out);
/* Scalars of every tensor, in double (checked against limits before any
 * size arithmetic in size_t). */
double xsa_gpt_layout_numel(const xsa_gpt_config *c);
/* Names tensor i: points the field of t that tensor i is at data (t->h
 * must hold n_layer layers). */
void xsa_gpt_layout_point(xsa_gpt_tensors *t, int n_layer, int i, float *data);

/* Its parameter tensors in layout order (what xsa_gpt_param(m, i) gives). */
xsa_tensor **xsa_gpt_params(const xsa_gpt *m);

/* A model with its blocks allocated and zero parameters (the constructor
 * and the checkpoint loader fill them). NULL with an error. */
xsa_gpt *xsa_gpt_alloc(const xsa_gpt_config *c);

/* ---- the transformer block (block.c) ------------------------------------
 *   ln1 = ln_1(x); qkv = c_attn(ln1); z = attention(qkv)   (the variant's)
 *   res2 = c_proj(z) + x; ln2 = ln_2(res2)
 *   fch = c_fc(ln2); fchg = gelu(fch); res3 = mlp.c_proj(fchg) + res2
 * The buffers of one block over N rows. A caller that keeps nothing may
 * alias them: ln2 = ln1 (with its mean and rstd), fchg = fch, res3 = x
 * (x is last read by the first residual). y and att are the attention's
 * (see xsa_gpt_attend_full; a variant may leave them unused). */
typedef struct xsa_gpt_acts {
    float *ln1, *ln1m, *ln1r; /* [N,C], [N], [N] */
    float *qkv;               /* [N,3C] */
    float *y, *att;           /* the attention's: pre-projection output, weights */
    float *z;                 /* [N,C] the attention's output */
    float *res2;              /* [N,C] */
    float *ln2, *ln2m, *ln2r; /* [N,C], [N], [N] */
    float *fch, *fchg;        /* [N,4C] c_fc's output, its gelu */
    float *res3;              /* [N,C] the block's output */
} xsa_gpt_acts;

/* The attention of a block, and the kernel of its linear layers. */
typedef struct xsa_gpt_variant {
    /* nn.h's xsa_nn_linear_forward, or a kernel with its contract */
    void (*linear)(float *out, const float *inp, const float *w, const float *b, int N, int C,
                   int OC);
    /* writes a->z (and whatever it keeps) from a->qkv, for block `layer`:
     * 0, or -1 with an error (an external attention's, gpt.h) */
    int (*attend)(void *ctx, int layer, const xsa_gpt_acts *a);
    void *ctx;
} xsa_gpt_variant;

/* Full causal attention over [B,T] (xsa_nn_attention_forward): keeps y and
 * att; probe, when non-NULL, receives block l's statistics at
 * probe + l * NH * XSA_NN_PROBE_N. ctx of xsa_gpt_attend_full. With ext
 * (gpt.h) the external attention writes z instead (attention_ext.c);
 * saved, when non-NULL, receives what each block's backward needs
 * (saved[layer]). */
typedef struct xsa_gpt_full_attention {
    int B, T, C, NH;
    const struct xsa_attention_variant *var; /* attention.h */
    float lambda;                            /* the variant's, when it takes one */
    double *probe;
    const xsa_gpt_ext_attention *ext;
    void **saved;
} xsa_gpt_full_attention;
int xsa_gpt_attend_full(void *ctx, int layer, const xsa_gpt_acts *a);

/* ---- the external attention (attention_ext.c) --------------------------- */
/* xsa_gpt_attend_full's part for fa->ext: z from the function (and the
 * probe's statistics: those of Y from SA's kernel, cos(z, v) from z) */
int xsa_gpt_attend_ext(const xsa_gpt_full_attention *fa, int layer, const xsa_gpt_acts *a);
/* Block `layer`'s dqkv += from dz through the function's graph (saved,
 * consumed) */
int xsa_gpt_attend_ext_backward(const xsa_gpt_full_attention *fa, void *saved, const float *dz,
                                float *dqkv);

/* Block `layer` of the sequence above on x [N,C]; with attention_only it
 * stops after the attention (a probe needs no more of the last block). */
int xsa_gpt_block_forward(const xsa_gpt_layer *w, const float *x, const xsa_gpt_acts *a, int N,
                          int C, int layer, const xsa_gpt_variant *v, int attention_only);

/* The backward of one block with the full attention, from the activations
 * a->... its forward saved (fchg unused: gelu(fch) is recomputed into
 * dfch; ln1 and ln2 unread: they are recomputed into dfchg from x and res2
 * with the saved means and rstds, so every layer's forward may share one
 * buffer for them). dres [N,C]: in, d(loss)/d(res3); out, d(loss)/d(x). g: the
 * block's gradients (added to). Scratch: dA [N,C], dqkv [N,3C], dfch and
 * dfchg [N,4C], ascratch (xsa_nn_attention_scratch_floats). */
typedef struct xsa_gpt_block_scratch {
    float *dA, *dqkv, *dfch, *dfchg, *ascratch;
} xsa_gpt_block_scratch;
/* at->saved[layer] (external attention only) is consumed. 0, or -1 with
 * an error (an external attention's backward) */
int xsa_gpt_block_backward(const xsa_gpt_layer *w, const xsa_gpt_layer *g, const float *x,
                           const xsa_gpt_acts *a, float *dres, const xsa_gpt_block_scratch *s,
                           const xsa_gpt_full_attention *at, int layer);

#endif
