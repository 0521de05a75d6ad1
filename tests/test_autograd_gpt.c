/*
 * test_autograd_gpt.c: the GPT model's loss as a graph op (xsa_ag_gpt_loss)
 * against finite differences (tests/gradcheck.h) and the model's own
 * backward, bit for bit; its refusals.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/xsa.h"
#include "check.h"
#include "gradcheck.h"

/* ---- the GPT model's loss as a graph op (xsa_ag_gpt_loss) -----------------
 * The parameters are the inputs; the numeric gradient evaluates the loss
 * with grad mode off (the evaluation path), the analytic one is the node's
 * backward with a random grad_out. Step and tolerances are those of the
 * fused ops the model is made of (the loosest: attention and layernorm). */

typedef struct {
    xsa_gpt *m;
    xsa_tensor *x, *y;
} gptargs;

static xsa_tensor *f_gpt_loss(xsa_tensor **in, const void *a)
{
    (void)in; /* the model reads its parameters itself */
    const gptargs *g = a;
    return xsa_ag_gpt_loss(g->m, g->x, g->y);
}

static xsa_gpt *tiny_gpt(xsa_attention att, double lambda)
{
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.vocab = 11;
    c.n_layer = 2;
    c.d_model = 8;
    c.n_head = 2;
    c.seq_len = 4;
    c.attention = att;
    c.lambda = lambda;
    c.seed = 3;
    xsa_gpt *m = xsa_gpt_new(&c);
    /* weights well away from the initialisation's 0.02, so the gradients
     * are not all tiny next to atol */
    float *p = xsa_gpt_params_data(m);
    for (size_t i = 0; i < xsa_gpt_num_params(m); i++) p[i] += (float)(xsa_rng_normal(&rng) * 0.3);
    return m;
}

static void test_gpt_loss(void)
{
    int64_t s[2] = {2, 4}, s3[2] = {2, 3};
    struct { xsa_attention a; double lambda; const char *name; } v[2] = {
        {XSA_ATTN_SA, 1.0, "gpt loss SA"}, {XSA_ATTN_XSA, 0.7, "gpt loss XSA lambda 0.7"}};
    for (int k = 0; k < 2; k++) {
        xsa_gpt *m = tiny_gpt(v[k].a, v[k].lambda);
        gptargs g = {m, xsa_tensor_randint(&rng, 0, 11, 2, s), xsa_tensor_randint(&rng, 0, 11, 2, s)};
        int n = xsa_gpt_num_tensors(m);
        xsa_tensor *ps[64];
        for (int i = 0; i < n; i++) ps[i] = xsa_gpt_param(m, i);
        gradcheck(v[k].name, n, ps, f_gpt_loss, &g, 1e-2, 2e-2, 5e-3);

        /* the node's backward is the model's own, bit for bit */
        size_t np = xsa_gpt_num_params(m);
        float *g1 = malloc(np * sizeof *g1);
        xsa_gpt_zero_grad(m);
        xsa_tensor *l = xsa_ag_gpt_loss(m, g.x, g.y);
        CHECK(l && l->ndim == 0 && xsa_ag_grad_fn_name(l) &&
              strcmp(xsa_ag_grad_fn_name(l), "GptLossBackward") == 0, "%s: a GptLossBackward node", v[k].name);
        float via_node = l ? xsa_tensor_f32(l)[0] : NAN;
        CHECK(l && xsa_ag_backward(l, NULL, 0) == 0, "%s: backward: %s", v[k].name, xsa_last_error());
        memcpy(g1, xsa_gpt_grads_data(m), np * sizeof *g1);
        xsa_tensor_free(l);
        xsa_gpt_zero_grad(m);
        float direct;
        CHECK(xsa_gpt_forward(m, xsa_tensor_i32(g.x), xsa_tensor_i32(g.y), 2, 4, &direct) == 0 &&
              xsa_gpt_backward(m, 1.0f) == 0, "%s: direct step", v[k].name);
        CHECK(via_node == direct && memcmp(g1, xsa_gpt_grads_data(m), np * sizeof *g1) == 0,
              "%s: the node gives xsa_gpt_forward's loss and xsa_gpt_backward's gradients", v[k].name);
        free(g1);

        /* no_grad: the same loss (the evaluation path), no node */
        int prev = xsa_ag_set_enabled(0);
        l = xsa_ag_gpt_loss(m, g.x, g.y);
        CHECK(l && !l->grad_fn && xsa_tensor_f32(l)[0] == direct,
              "%s: under no_grad the same loss and no node", v[k].name);
        xsa_tensor_free(l);
        xsa_ag_set_enabled(prev);

        /* a loss whose model has moved on refuses its backward */
        l = xsa_ag_gpt_loss(m, g.x, g.y);
        xsa_tensor *l2 = xsa_ag_gpt_loss(m, g.x, g.y);
        CHECK(xsa_ag_backward(l, NULL, 0) != 0 && strstr(xsa_last_error(), "ran another forward"),
              "%s: stale loss: %s", v[k].name, xsa_last_error());
        /* a parameter without a .grad is an error, not a crash */
        xsa_tensor *keep = ps[3]->grad;
        ps[3]->grad = NULL;
        CHECK(xsa_ag_backward(l2, NULL, 0) != 0 && strstr(xsa_last_error(), "has no .grad"),
              "%s: missing .grad: %s", v[k].name, xsa_last_error());
        ps[3]->grad = keep;
        xsa_tensor_free(l);
        xsa_tensor_free(l2);

        /* argument errors */
        xsa_tensor *short_y = xsa_tensor_randint(&rng, 0, 11, 2, s3);
        CHECK(!xsa_ag_gpt_loss(m, g.x, short_y) && strstr(xsa_last_error(), "differ in shape"),
              "%s: shapes: %s", v[k].name, xsa_last_error());
        xsa_tensor *fx = randn(2, s);
        CHECK(!xsa_ag_gpt_loss(m, fx, g.y) && strstr(xsa_last_error(), "int32 [B,T]"),
              "%s: float inputs: %s", v[k].name, xsa_last_error());
        xsa_tensor_free(fx);
        xsa_tensor_free(short_y);
        xsa_tensor_free(g.x);
        xsa_tensor_free(g.y);
        xsa_gpt_free(m);
    }
}

int main(void)
{
    xsa_rng_seed(&rng, 1234);
    test_gpt_loss();
    return check_done("test_autograd_gpt");
}
