/*
 * autograd_gpt.c: the GPT model's loss as a graph op (xsa_ag_gpt_loss of
 * autograd.h). The model runs its own fused forward (gpt.h); the result
 * carries a custom node whose backward is the model's hand-written
 * backward, adding into the parameters' ->grad. A C program gets
 * loss-then-backward through the graph as the Lua binding does, and the
 * engine never calls out of the core for it.
 *
 * Non-goals: the model's kernels (gpt.c, block.c); gradients for the token
 * tensors (they are ids, not values).
 */
#include <stdlib.h>

#include "autograd.h"
#include "gpt.h"

typedef struct {
    xsa_gpt *m;        /* retained */
    unsigned long gen; /* the model's forward this loss came from */
} loss_ctx;

static void loss_ctx_free(void *p)
{
    loss_ctx *c = p;
    if (c->m) xsa_gpt_free(c->m);
    free(c);
}

/* The model's backward writes every parameter's gradient through ->grad as
 * a dense float array of the parameter's shape; the tensors' owner (a
 * script, say) can have set a .grad to NULL or to any tensor since. */
static int check_grads(const xsa_gpt *m)
{
    for (int i = 0; i < xsa_gpt_num_tensors(m); i++) {
        const xsa_tensor *p = xsa_gpt_param(m, i), *g = p->grad;
        if (!g)
            return xsa_error("gpt loss backward: parameter %s has no .grad (it was set to nil)",
                             xsa_gpt_param_name(m, i));
        if (g->dtype != XSA_FLOAT32 || !xsa_tensor_same_shape(p, g) || !xsa_tensor_is_contiguous(g)) {
            char a[64], b[64];
            return xsa_error("gpt loss backward: the .grad of parameter %s must be a contiguous float32 "
                             "tensor of shape %s (got %s %s)", xsa_gpt_param_name(m, i),
                             xsa_shape_str(p->ndim, p->shape, a, sizeof a), xsa_dtype_name(g->dtype),
                             xsa_shape_str(g->ndim, g->shape, b, sizeof b));
        }
    }
    return 0;
}

static int loss_backward(void *p, const xsa_tensor *grad_out, xsa_tensor **gin)
{
    (void)gin;
    loss_ctx *c = p;
    if (xsa_gpt_generation(c->m) != c->gen)
        return xsa_error("gpt loss backward: the model ran another forward since this loss was "
                         "computed; call backward before the next forward");
    float g = 1.0f;
    if (grad_out) {
        if (grad_out->dtype != XSA_FLOAT32 || xsa_tensor_numel(grad_out) != 1)
            return xsa_error("gpt loss backward: the gradient of the loss must be one float32 value");
        g = xsa_tensor_f32(grad_out)[0];
    }
    if (check_grads(c->m) != 0) return -1;
    return xsa_gpt_backward(c->m, g);
}

static int check_tokens(const char *what, const xsa_tensor *t)
{
    char buf[64];
    if (!t) return xsa_error("gpt loss: no %s", what);
    if (t->dtype != XSA_INT32 || t->ndim != 2)
        return xsa_error("gpt loss: %s must be an int32 [B,T] tensor (got %s %s)", what,
                         xsa_dtype_name(t->dtype), xsa_shape_str(t->ndim, t->shape, buf, sizeof buf));
    if (t->shape[0] > 1 << 24 || t->shape[1] > 1 << 24)
        return xsa_error("gpt loss: %s is too large", what);
    return 0;
}

xsa_tensor *xsa_ag_gpt_loss(xsa_gpt *m, xsa_tensor *inputs, xsa_tensor *targets)
{
    if (!m) {
        xsa_error("gpt loss: no model");
        return NULL;
    }
    if (check_tokens("inputs", inputs) != 0 || check_tokens("targets", targets) != 0) return NULL;
    if (!xsa_tensor_same_shape(inputs, targets)) {
        char a[64], b[64];
        xsa_error("gpt loss: inputs %s and targets %s differ in shape",
                  xsa_shape_str(2, inputs->shape, a, sizeof a),
                  xsa_shape_str(2, targets->shape, b, sizeof b));
        return NULL;
    }
    int B = (int)inputs->shape[0], T = (int)inputs->shape[1];
    int grad = xsa_ag_is_enabled();
    /* everything that can fail for want of memory before the forward */
    loss_ctx *c = grad ? calloc(1, sizeof *c) : NULL;
    xsa_tensor *out = xsa_tensor_new(XSA_FLOAT32, 0, NULL);
    xsa_tensor *in = xsa_tensor_contiguous(inputs), *tg = xsa_tensor_contiguous(targets);
    float loss;
    int rc = -1;
    if ((grad && !c) || !out || !in || !tg) xsa_error("gpt loss: out of memory");
    else if (grad) rc = xsa_gpt_forward(m, xsa_tensor_i32(in), xsa_tensor_i32(tg), B, T, &loss);
    else rc = xsa_gpt_eval_loss(m, xsa_tensor_i32(in), xsa_tensor_i32(tg), B, T, &loss);
    xsa_tensor_free(in);
    xsa_tensor_free(tg);
    if (rc != 0) {
        free(c);
        xsa_tensor_free(out);
        return NULL;
    }
    xsa_tensor_f32(out)[0] = loss;
    if (grad) {
        xsa_gpt_retain(m);
        c->m = m;
        c->gen = xsa_gpt_generation(m);
        /* attach_custom frees c through loss_ctx_free on failure */
        if (xsa_ag_attach_custom(out, "GptLossBackward", 0, NULL, loss_backward, c,
                                 loss_ctx_free) != 0) {
            xsa_tensor_free(out);
            return NULL;
        }
    }
    return out;
}
