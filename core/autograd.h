/*
 * autograd.h: reverse-mode differentiation over tensor ops.
 *
 * A tensor with requires_grad set is a leaf; every op applied through the
 * xsa_ag_* functions records a node (t->grad_fn) when grad mode is on and an
 * input requires grad. xsa_ag_backward(loss) walks the graph in reverse
 * topological order and ADDS into the ->grad of the leaves (gradients
 * accumulate until zeroed, as in PyTorch).
 *
 * The contract other parts of the core rely on (the GPT model's loss,
 * xsa_ag_gpt_loss below, attaches the model's hand-written backward this way):
 *
 *   xsa_ag_attach_custom(out, "gpt_loss", n, inputs, fn, ctx, ctx_free)
 *
 * makes `out` a non-leaf whose backward calls fn(ctx, grad_out, grad_inputs):
 * grad_inputs[i] is a zero-filled tensor shaped like inputs[i] (NULL when
 * inputs[i] does not need a gradient) that fn fills; the engine then
 * propagates each into inputs[i]. With n == 0, fn is responsible for
 * accumulating into whatever gradients it owns (e.g. a parameter block whose
 * tensors' ->grad views it). ctx_free(ctx) runs when the node is released:
 * when `out` is freed, or when a backward without retain_graph frees the
 * graph; on failure attach_custom calls ctx_free(ctx) itself. It attaches
 * even under no_grad: callers check xsa_ag_is_enabled() to skip the work.
 *
 * Example (d/dw of sum(tanh(x w)) for a leaf w):
 *   xsa_tensor *w = xsa_tensor_randn(NULL, 2, (int64_t[]){3, 2}, 0.0, 1.0);
 *   xsa_ag_set_requires_grad(w, 1);
 *   xsa_tensor *y = xsa_ag_matmul(x, w);              // records MatmulBackward
 *   xsa_tensor *h = xsa_ag_unary(XSA_TANH, y);
 *   xsa_tensor *l = xsa_ag_reduce(XSA_SUM, h, XSA_ALL_DIMS, 0);
 *   if (xsa_ag_backward(l, NULL, 0) != 0) puts(xsa_last_error());
 *   ... w->grad holds dl/dw; xsa_ag_zero_grad(w) before the next pass ...
 *   xsa_tensor_free(l); xsa_tensor_free(h); xsa_tensor_free(y); xsa_tensor_free(w);
 *
 * In-place ops are not recorded: use xsa_ag_check_inplace before them. A
 * tensor a node's backward reads (an op's saved input or result: the x of
 * x * w, the result of exp or softmax, the input of a fused op) may still be
 * written through a view, detach(), under no_grad or by an optimizer step;
 * each such write bumps the storage's version counter (tensor.h), and
 * xsa_ag_backward then fails with "backward: one of the variables needed for
 * gradient computation has been modified by an inplace operation: input 1
 * [3] of MulBackward is at version 1; expected version 0 ..." instead of
 * returning a wrong gradient, as PyTorch. Writes to tensors the backward
 * does not read (the inputs of add, the input of exp) are fine. Custom
 * nodes (xsa_ag_attach_custom) are not checked: their context is theirs.
 */
#ifndef XSA_AUTOGRAD_H
#define XSA_AUTOGRAD_H

#include "tensor.h"

#define XSA_AG_MAX_INPUTS 8

typedef int (*xsa_ag_custom_fn)(void *ctx, const xsa_tensor *grad_out,
                                xsa_tensor **grad_inputs);

/* Grad mode is on by default; no_grad regions switch it off (nestable).
 * Returns the previous mode. */
int xsa_ag_set_enabled(int enabled);
int xsa_ag_is_enabled(void);

/* Marks t as a leaf that needs a gradient (t->grad allocated lazily, or
 * preset by the owner to a view of a gradient block). */
int xsa_ag_set_requires_grad(xsa_tensor *t, int requires_grad);

int xsa_ag_attach_custom(xsa_tensor *out, const char *name, int n_inputs,
                         xsa_tensor *const *inputs, xsa_ag_custom_fn fn,
                         void *ctx, void (*ctx_free)(void *));

/* Backpropagates from `out`; grad_out NULL means ones (out must then have
 * one element). Frees the graph behind `out` unless retain_graph. */
int xsa_ag_backward(xsa_tensor *out, const xsa_tensor *grad_out, int retain_graph);

/* Drops one reference to a node (NULL is fine). autograd.c installs it as
 * tensor.h's xsa_tensor_grad_fn_release hook when it makes its first node, so
 * a freed tensor frees the graph behind it. Release is iterative (no deep
 * recursion on long graphs). */
void xsa_ag_node_release(struct xsa_ag_node *n);

/* ---- queries ---------------------------------------------------------- */
/* 1 when t is a leaf with requires_grad set or the output of a recorded op. */
int xsa_ag_requires_grad(const xsa_tensor *t);
/* "MulBackward", "gpt_loss", ... for a non-leaf; NULL for a leaf. */
const char *xsa_ag_grad_fn_name(const xsa_tensor *t);
/* A new tensor sharing t's storage, outside any graph (no gradient). */
xsa_tensor *xsa_ag_detach(xsa_tensor *t);
/* Zero-fills t->grad in place when present (keeps a preset view). */
int xsa_ag_zero_grad(xsa_tensor *t);
/* The guard in-place ops call: -1 with "OP: in-place operation on a tensor
 * that requires grad" when grad mode is on and t requires grad (a leaf or
 * part of a graph), as PyTorch refuses it. Under no_grad (optimizers,
 * initialisation) in-place updates of leaves are fine. */
int xsa_ag_check_inplace(const xsa_tensor *t, const char *op);

/* ---- differentiable ops ------------------------------------------------
 * Same arguments, results and errors as the tensor.h function of the same
 * name. When grad mode is on and an input requires grad, the result records
 * a node (result->grad_fn) whose backward reduces broadcast gradients back
 * to each input's shape. Otherwise they are exactly the tensor op.
 * Not differentiable (the result never records a node): the comparisons
 * EQ NE LT LE GT GE, ARGMAX / ARGMIN, int32 results and `cond` of where.
 * Ties of MAXIMUM / MINIMUM split the gradient in halves; ties of the MAX /
 * MIN reductions share it evenly (PyTorch's rule for the full reduction). */
xsa_tensor *xsa_ag_binary(xsa_binop op, xsa_tensor *a, xsa_tensor *b);
xsa_tensor *xsa_ag_binary_scalar(xsa_binop op, xsa_tensor *a, double s, int reversed);
xsa_tensor *xsa_ag_unary(xsa_unop op, xsa_tensor *a);
xsa_tensor *xsa_ag_reduce(xsa_redop op, xsa_tensor *a, int dim, int keepdim);
xsa_tensor *xsa_ag_softmax(xsa_tensor *a, int dim);
xsa_tensor *xsa_ag_log_softmax(xsa_tensor *a, int dim);
xsa_tensor *xsa_ag_matmul(xsa_tensor *a, xsa_tensor *b);
xsa_tensor *xsa_ag_where(xsa_tensor *cond, xsa_tensor *a, xsa_tensor *b);
xsa_tensor *xsa_ag_clamp(xsa_tensor *a, double lo, double hi);
xsa_tensor *xsa_ag_clone(xsa_tensor *t);
/* views: the result shares storage with the input; its gradient flows back */
xsa_tensor *xsa_ag_view(xsa_tensor *t, int ndim, const int64_t *shape);
xsa_tensor *xsa_ag_reshape(xsa_tensor *t, int ndim, const int64_t *shape);
xsa_tensor *xsa_ag_transpose(xsa_tensor *t, int d0, int d1);
xsa_tensor *xsa_ag_permute(xsa_tensor *t, const int *perm);
xsa_tensor *xsa_ag_narrow(xsa_tensor *t, int dim, int64_t start, int64_t len);
xsa_tensor *xsa_ag_select(xsa_tensor *t, int dim, int64_t index);
xsa_tensor *xsa_ag_unsqueeze(xsa_tensor *t, int dim);
xsa_tensor *xsa_ag_squeeze(xsa_tensor *t, int dim);
xsa_tensor *xsa_ag_expand(xsa_tensor *t, int ndim, const int64_t *shape);
/* cat: n tensors of one dtype and equal sizes except along dim, joined along
 * dim into a new tensor (any n >= 1; the gradient of each is its slice) */
xsa_tensor *xsa_ag_cat(int n, xsa_tensor *const *ts, int dim);
/* returns t itself (retained) when already contiguous, as tensor.h does */
xsa_tensor *xsa_ag_contiguous(xsa_tensor *t);

/* ---- fused nn ops (nn.h kernels; hand-written backward) ------------------
 * Dimension letters as in nn.h. Inputs may be strided (copied contiguous);
 * everything is validated here (the kernels trust their inputs).
 *   embedding: idx int32 [T] or [B,T], wte [V,C], wpe NULL or [>=T,C]
 *              -> idx's shape + [C] = wte[idx] (+ wpe[t]); no gradient to idx
 *   linear:    x [...,C], w [C,OC] (GPT-2 Conv1D, input-major), b NULL or [OC]
 *              -> [...,OC] = x w + b
 *   layernorm: x [...,C], w [C], b [C] over the last dim, eps 1e-5
 *   gelu:      exact erf GELU (nn.h), any shape
 *   attention: causal multi-head self attention of q, k, v [B,T,C], or of a
 *              packed qkv [B,T,3C] passed as q with k = v = NULL; n_head
 *              divides C; lambda 0 is SA, 1 full XSA (nn.h states the formula).
 *              -> [B,T,C]. probe: NULL or n_head * XSA_NN_PROBE_N doubles
 *              (nn.h); att_out: NULL or receives the attention weights
 *              [B,NH,T,T] (no gradient).
 *   cross_entropy: logits [...,V] float32, targets int32 [...] in [0,V)
 *              -> 0-d mean loss (natural log) */
xsa_tensor *xsa_ag_embedding(xsa_tensor *idx, xsa_tensor *wte, xsa_tensor *wpe);
xsa_tensor *xsa_ag_linear(xsa_tensor *x, xsa_tensor *w, xsa_tensor *b);
xsa_tensor *xsa_ag_layernorm(xsa_tensor *x, xsa_tensor *w, xsa_tensor *b);
xsa_tensor *xsa_ag_gelu(xsa_tensor *x);
xsa_tensor *xsa_ag_attention(xsa_tensor *q, xsa_tensor *k, xsa_tensor *v, int n_head,
                             double lambda, double *probe, xsa_tensor **att_out);
xsa_tensor *xsa_ag_cross_entropy(xsa_tensor *logits, xsa_tensor *targets);

/* ---- the GPT model's loss (gpt.h) ----------------------------------------
 * The mean cross-entropy of model m on inputs and targets (int32 [B,T] of
 * one shape, token ids) as a 0-d float32 tensor. With grad mode on the
 * model keeps its activations (xsa_gpt_forward) and the result records a
 * node "GptLossBackward" that holds the model: its backward adds
 * d(grad_out * loss)/d(param) into every parameter's ->grad
 * (xsa_gpt_backward; each ->grad must be a contiguous float32 tensor of the
 * parameter's shape) and fails if the model has run another forward since.
 * With grad mode off the loss is evaluated without keeping anything
 * (xsa_gpt_eval_loss; the same value bit for bit) and records no node.
 *   xsa_tensor *l = xsa_ag_gpt_loss(m, x, y);
 *   xsa_gpt_zero_grad(m);
 *   if (!l || xsa_ag_backward(l, NULL, 0) != 0) puts(xsa_last_error());
 *   ... xsa_adamw_step(opt) ...; xsa_tensor_free(l); */
struct xsa_gpt;
xsa_tensor *xsa_ag_gpt_loss(struct xsa_gpt *m, xsa_tensor *inputs, xsa_tensor *targets);

#endif
