/*
 * gpt.h: the GPT model of the study (GPT-2 style decoder with SA or XSA
 * attention), its training step pieces, probe and checkpoints.
 *
 * Architecture: token + learned position embeddings; per block
 *   x = x + c_proj(attn(c_attn(ln_1(x))))      attn = causal SA or XSA(lambda)
 *   x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))
 * then ln_f and logits = x wte^T (tied). No dropout.
 *
 * Parameters live in ONE storage block and gradients in another; each
 * parameter is an xsa_tensor view (requires_grad = 1, ->grad preset to the
 * matching view of the gradient block), named as GPT-2 checkpoints name them
 * (wte.weight [V,C], wpe.weight [T,C], h.{i}.ln_1.weight, ...,
 * h.{i}.attn.c_attn.weight [C,3C] input-major, ..., ln_f.bias).
 * Memory: a steady-state step allocates nothing, and no [B*T, V] buffer
 * exists during training or evaluation: the lm_head, the log-softmax, the
 * cross-entropy and its gradient run fused over chunks of rows
 * (xsa_nn_lmhead_ce in nn.h). The activations, the lm_head's gradient
 * (computed with the loss, but for the last chunk's wte products, which
 * the backward runs on the other threads beside the blocks' own: nn.h's
 * tail) and the backward's scratch are buffers of the process-wide pool
 * (pool.h), held by a model from its forward to the end of its backward:
 * two models trained in turn share one set of them (two models' losses
 * before either backward hold two lm_head scratches).
 *
 * Example:
 *   xsa_gpt_config c; xsa_gpt_config_default(&c);
 *   c.vocab = 64; c.attention = XSA_ATTN_XSA;
 *   xsa_gpt *m = xsa_gpt_new(&c);
 *   float loss;
 *   if (xsa_gpt_forward(m, inputs, targets, B, T, &loss) != 0) puts(xsa_last_error());
 *   xsa_gpt_zero_grad(m); xsa_gpt_backward(m, 1.0f);
 *   (or the loss as a graph node: xsa_ag_gpt_loss of autograd.h)
 *   ... xsa_adamw_step(opt) over xsa_gpt_param(m, i) ...
 *   xsa_gpt_free(m);
 *
 * Non-goals: dropout, KV caches / sampling (generate.h), precisions other than
 * float32 and the bf16 lm_head.
 */
#ifndef XSA_GPT_H
#define XSA_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "nn.h"
#include "tensor.h"

/* The attention variant: an index into the core's table of variants
 * (core/attention.h), named by xsa_gpt_attention_name and parsed from its
 * name; SA and XSA have constants, the others only their names. */
typedef enum { XSA_ATTN_SA = 0, XSA_ATTN_XSA = 1 } xsa_attention;
/* Precision of the large matrix products. XSA_PREC_BF16 (opt-in): the
 * lm_head's three products run bf16 x bf16 -> float32 through oneDNN
 * (matmul_bf16.h; wte is rounded to bf16 at every forward, i.e. once per
 * step after the optimizer's update); the parameters, gradients, AdamW,
 * LayerNorm, the softmax, the loss and every accumulation stay float32.
 * Needs a build with oneDNN and a CPU with avx512_bf16: otherwise creating
 * such a model fails with an error (never a silent float32 fallback). */
typedef enum { XSA_PREC_F32 = 0, XSA_PREC_BF16 = 1 } xsa_precision;

typedef struct xsa_gpt_config {
    int vocab;              /* V, 50257 */
    int n_layer;            /* 2 */
    int d_model;            /* C, 128 */
    int n_head;             /* NH, 2 */
    int seq_len;            /* max T, 64 (rows of wpe) */
    xsa_attention attention;/* SA, XSA or another variant of the table */
    double lambda;          /* the variant's parameter (XSA's strength), used only by
                               variants that take one; any finite value */
    uint64_t seed;          /* initialisation seed */
    xsa_precision precision;/* XSA_PREC_F32 (not saved in checkpoints) */
} xsa_gpt_config;

void xsa_gpt_config_default(xsa_gpt_config *c);
/* 0, or -1 with "gpt: d_model 130 is not divisible by n_head 4" etc. */
int xsa_gpt_config_validate(const xsa_gpt_config *c);
const char *xsa_gpt_attention_name(xsa_attention a);    /* "sa", "xsa", ... */
/* a variant's name (case-sensitive) -> 0, else -1 with an error naming them all */
int xsa_gpt_attention_parse(const char *s, xsa_attention *out);
/* every variant's name, in xsa_attention order, then NULL (for bindings
 * that check a name against the list, as luaL_checkoption does) */
const char *const *xsa_gpt_attention_names(void);
/* 1 when lambda is a parameter of variant a (XSA's strength), else 0 */
int xsa_gpt_attention_takes_lambda(xsa_attention a);
const char *xsa_gpt_precision_name(xsa_precision p);      /* "f32" / "bf16" */
/* "f32"/"bf16" -> 0, else -1 with an error. */
int xsa_gpt_precision_parse(const char *s, xsa_precision *out);

typedef struct xsa_gpt xsa_gpt;
struct xsa_adamw; /* optim.h */

/* A new model initialised from c->seed: Linear weights and both embeddings
 * N(0, 0.02), attn.c_proj / mlp.c_proj weights N(0, 0.02/sqrt(2 n_layer)),
 * biases 0, LayerNorm weight 1 bias 0. Normals are drawn in parameter order
 * (wte, wpe, then per layer c_attn, attn.c_proj, c_fc, mlp.c_proj weights). */
xsa_gpt *xsa_gpt_new(const xsa_gpt_config *c);
/* Reference counted (the autograd node of a loss holds one). */
void xsa_gpt_retain(xsa_gpt *m);
void xsa_gpt_free(xsa_gpt *m);

/* Same sizes and weights, another attention / lambda (gradients zero). */
xsa_gpt *xsa_gpt_clone(const xsa_gpt *m, xsa_attention attention, double lambda);
/* Copies src's parameters into dst (sizes must match; attention may differ). */
int xsa_gpt_copy_from(xsa_gpt *dst, const xsa_gpt *src);
/* Switches the attention of an existing model (weights untouched). */
int xsa_gpt_set_attention(xsa_gpt *m, xsa_attention attention, double lambda);

/* ---- an attention computed outside the core ------------------------------
 * A model's attention may be a function the core does not know (the Lua
 * binding's `attention = f`, lua/l_attention.c): per block it gets q, k, v
 * (packed as the core's qkv [B,T,3C]) and writes Z; the core runs the rest
 * of the block, the loss and the backward around it. The model's own
 * variant (cfg.attention) is then SA, whose Y the function may read, and
 * lambda is unused. The function must be causal (row t of Z from rows <= t
 * of q, k, v): the key/value cache calls it over the whole prefix and keeps
 * the new rows, so decoding equals the full forward only then.
 *
 * forward: rows t0..T-1 of Z into z [B,T-t0,C] (heads concatenated as in
 *   qkv); t0 > 0 only when decoding. keep: this forward will be
 *   differentiated: *saved receives what backward needs (the core hands it
 *   back once, to backward or to drop). 0, or -1 with an error (the model
 *   then stays as it was before the call, its activations dropped).
 * backward: dqkv [B,T,3C] += d(loss)/d(qkv) from dz [B,T,C] = d(loss)/dZ.
 * drop: frees a saved (never NULL). retain/release: the core holds one
 *   reference per model that uses it (clones for generation share it). */
typedef struct xsa_gpt_ext_call {
    int layer, B, T, C, NH, t0, keep;
    const float *qkv;
    float *z;
    void *saved;
} xsa_gpt_ext_call;
typedef struct xsa_gpt_ext_attention {
    int (*forward)(void *ud, xsa_gpt_ext_call *c);
    int (*backward)(void *ud, void *saved, const float *dz, float *dqkv);
    void (*drop)(void *ud, void *saved);
    void (*retain)(void *ud);
    void (*release)(void *ud);
    void *ud;
} xsa_gpt_ext_attention;
/* Gives m that attention (NULL: back to its own variant, cfg.attention),
 * with cfg.attention set to SA; drops the activations, as set_attention. */
int xsa_gpt_set_ext_attention(xsa_gpt *m, const xsa_gpt_ext_attention *e);
/* The model's external attention (borrowed), or NULL. */
const xsa_gpt_ext_attention *xsa_gpt_ext(const xsa_gpt *m);
/* The name a checkpoint's metadata gives such an attention: a function
 * cannot be saved, so loading needs it again (xsa_gpt_load_ext). */
#define XSA_GPT_EXT_NAME "function"

const xsa_gpt_config *xsa_gpt_get_config(const xsa_gpt *m);
size_t xsa_gpt_num_params(const xsa_gpt *m);             /* scalars */
int xsa_gpt_num_tensors(const xsa_gpt *m);
const char *xsa_gpt_param_name(const xsa_gpt *m, int i);
xsa_tensor *xsa_gpt_param(const xsa_gpt *m, int i);       /* borrowed; ->grad set */
xsa_tensor *xsa_gpt_find_param(const xsa_gpt *m, const char *name); /* borrowed/NULL */
float *xsa_gpt_params_data(const xsa_gpt *m);             /* the whole block */
/* Bytes of the activation buffers currently held (0 before a forward). */
size_t xsa_gpt_activation_bytes(const xsa_gpt *m);
float *xsa_gpt_grads_data(const xsa_gpt *m);

/* inputs, targets: [B,T] int32 row-major (targets may be NULL: logits only).
 * Checks 1 <= T <= seq_len, B >= 1 and every id in [0, V). With targets,
 * *loss (may be NULL) gets the mean cross-entropy. */
int xsa_gpt_forward(xsa_gpt *m, const int32_t *inputs, const int32_t *targets,
                    int B, int T, float *loss);
/* The same loss (bit for bit) without saving anything for a backward: the
 * blocks run in one working set from the pool and the lm_head in chunks,
 * so an evaluation needs neither the activations nor the logits. Afterwards
 * xsa_gpt_logits and xsa_gpt_activation return NULL until the next forward. */
int xsa_gpt_eval_loss(xsa_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                      float *loss);
/* Logits [B,T,V] of the last xsa_gpt_forward (valid until the next forward).
 * A forward without targets computes them; after a forward with targets
 * they are computed on the first call (from the saved ln_f output, so
 * before the backward) into a buffer that the next forward with targets
 * frees. NULL when there is nothing to take them from (after a backward or
 * an evaluation), or (with an error) when that buffer cannot be allocated. */
const float *xsa_gpt_logits(const xsa_gpt *m);
/* Counts forwards; a loss's backward checks the model has not moved on. */
unsigned long xsa_gpt_generation(const xsa_gpt *m);
/* ADDS d(dloss * loss)/d(param) into the gradient block. Needs a preceding
 * forward with targets. 0, or -1 with an error; an error from the lm_head's
 * wte products (bf16 only) comes after the blocks' gradients were added,
 * so the gradients are then incomplete. */
int xsa_gpt_backward(xsa_gpt *m, float dloss);
void xsa_gpt_zero_grad(xsa_gpt *m);

/* Saved activations of layer l from the last xsa_gpt_forward or probe, for tests
 * (NULL after a backward, which gives them back to the pool, or an evaluation):
 * "qkv" [B,T,3C], "y" [B,T,C] (pre-projection; = z for SA), "z" [B,T,C],
 * "att" [B,NH,T,T] (NULL past XSA_NN_ATTN_FULL_MAX positions, nn.h: the
 * blocked kernel keeps no weights). NULL for an unknown name or layer. */
const float *xsa_gpt_activation(const xsa_gpt *m, int layer, const char *name);

/* Runs the blocks on one batch (no lm_head) and writes the per-head probe
 * means of every layer: out[(l*NH + h)*XSA_NN_PROBE_N + k] (see nn.h). */
int xsa_gpt_probe(xsa_gpt *m, const int32_t *inputs, int B, int T, double *out);

/* Checkpoints (safetensors, GPT-2 names, __metadata__ = the config as
 * strings under the constructor's keys). opt may be NULL; if given it must
 * be an AdamW over exactly this model's parameters, and its state is saved
 * as adamw.m.<name>, adamw.v.<name>, adamw.steps plus adamw.* metadata. */
int xsa_gpt_save(const xsa_gpt *m, const char *path, const struct xsa_adamw *opt);
/* The same with n_extra (at most 64) more metadata entries: what a binding
 * records beside the config, e.g. which Lua function an external attention
 * was (lua/l_attention.c's "attention.name", "attention.code"). A key of
 * the config's or the optimizer's is refused (a duplicate). */
int xsa_gpt_save_meta(const xsa_gpt *m, const char *path, const struct xsa_adamw *opt, int n_extra,
                      const char *const *extra_keys, const char *const *extra_values);
/* Loads and validates (names, shapes, dtypes, config). When opt_out is
 * non-NULL, *opt_out receives the saved AdamW (over the new model's
 * parameters) or NULL when the file holds none. */
xsa_gpt *xsa_gpt_load(const char *path, struct xsa_adamw **opt_out);
/* The same for a checkpoint of a model with an external attention (its
 * metadata says attention = XSA_GPT_EXT_NAME): ext is that attention
 * again. Either without the other (a function for a built-in variant's
 * checkpoint, or none for a function's) is an error naming the fix. */
xsa_gpt *xsa_gpt_load_ext(const char *path, struct xsa_adamw **opt_out,
                          const xsa_gpt_ext_attention *ext);

#endif
