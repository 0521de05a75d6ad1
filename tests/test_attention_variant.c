/*
 * test_attention_variant.c: attention as one unit (core/attention.h). The
 * variant "vsub" (core/attention_vsub.c: one file, and one line in the
 * table) runs through the whole model like a built-in: the names list and
 * the refusal of unknown names; the model's gradient by finite differences
 * on the full kernel and on the blocked one (T past
 * XSA_NN_ATTN_FULL_MAX); training lowers the loss; cached decoding gives
 * the full forward's logits to the bit (one row function for both);
 * a checkpoint round trip keeps the variant and its lambda. Also: XSA with
 * lambda 0 is SA bit for bit (the variant's projection with lambda 0 adds
 * nothing), so no float stands in for the variant.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/nn.h"
#include "../core/xsa.h"
#include "check.h"

enum { V = 23, B = 2 };

static xsa_gpt *tiny(const char *att, double lambda, int T)
{
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.vocab = V, c.n_layer = 2, c.d_model = 8, c.n_head = 2, c.seq_len = T, c.seed = 5;
    c.lambda = lambda;
    if (xsa_gpt_attention_parse(att, &c.attention) != 0) return NULL;
    return xsa_gpt_new(&c);
}

static void tokens(int32_t *x, int32_t *y, int T)
{
    for (int i = 0; i < B * T; i++) x[i] = (int32_t)((i * 7 + 3) % V), y[i] = (int32_t)((i * 5 + 1) % V);
}

static void test_names(void)
{
    const char *const *n = xsa_gpt_attention_names();
    CHECK(n[0] && !strcmp(n[0], "sa") && n[1] && !strcmp(n[1], "xsa") && n[2] && !strcmp(n[2], "vsub") && !n[3],
          "the names list: sa, xsa, vsub");
    xsa_attention a;
    CHECK(xsa_gpt_attention_parse("vsub", &a) == 0 && !strcmp(xsa_gpt_attention_name(a), "vsub"),
          "vsub parses and names itself");
    CHECK(xsa_gpt_attention_takes_lambda(a) && !xsa_gpt_attention_takes_lambda(XSA_ATTN_SA),
          "vsub takes lambda, SA does not");
    CHECK(xsa_gpt_attention_parse("XSA", &a) != 0 &&
              strstr(xsa_last_error(), "\"sa\", \"xsa\" or \"vsub\" (got \"XSA\")") != NULL,
          "an unknown name is refused with the list: %s", xsa_last_error());
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.attention = (xsa_attention)3;
    CHECK(xsa_gpt_config_validate(&c) != 0, "a variant past the table is refused");
}

/* Richardson-extrapolated central differences of the loss at 40 parameters */
static void test_fd(int T)
{
    xsa_gpt *m = tiny("vsub", 0.7, T);
    int32_t *x = malloc(sizeof(int32_t) * B * T), *y = malloc(sizeof(int32_t) * B * T);
    tokens(x, y, T);
    float loss;
    xsa_gpt_zero_grad(m);
    CHECK(xsa_gpt_forward(m, x, y, B, T, &loss) == 0 && xsa_gpt_backward(m, 1.0f) == 0, "vsub step");
    float le;
    CHECK(xsa_gpt_eval_loss(m, x, y, B, T, &le) == 0 && le == loss,
          "vsub T=%d: the evaluation's loss is the training forward's to the bit (%.9g, %.9g)", T, le, loss);
    float *p = xsa_gpt_params_data(m), *g = xsa_gpt_grads_data(m);
    size_t n = xsa_gpt_num_params(m);
    double worst = 0, gmax = 0, h = 1e-2;
    for (int k = 0; k < 40; k++) {
        size_t i = (size_t)k * 7919 % n;
        float keep = p[i];
        double d[2];
        for (int r = 0; r < 2; r++) {
            double hh = r ? h / 2 : h;
            float lp, lm;
            p[i] = (float)(keep + hh);
            double up = (double)p[i] - keep;
            xsa_gpt_eval_loss(m, x, y, B, T, &lp);
            p[i] = (float)(keep - hh);
            double dn = keep - (double)p[i];
            xsa_gpt_eval_loss(m, x, y, B, T, &lm);
            d[r] = ((double)lp - lm) / (up + dn);
        }
        p[i] = keep;
        double num = (4 * d[1] - d[0]) / 3;
        worst = fmax(worst, fabs(num - g[i]));
        gmax = fmax(gmax, fabs(g[i]));
    }
    printf("  vsub T=%d: max |fd - grad| %.3g (max |grad| %.3g)\n", T, worst, gmax);
    /* the forward's float rounding over the step (test_nn.c's tolerance) */
    CHECK(worst <= 2e-3 * fmax(1.0, gmax) && gmax > 0, "vsub T=%d: gradient off by %g", T, worst);
    xsa_gpt *sa = tiny("sa", 1.0, T);
    float lsa;
    xsa_gpt_eval_loss(sa, x, y, B, T, &lsa);
    CHECK(lsa != loss, "vsub's loss is not SA's (%g)", loss);
    xsa_gpt_free(sa);
    xsa_gpt_free(m);
    free(x); free(y);
}

/* XSA with lambda 0 against SA: every loss and gradient bit */
static void test_xsa0(int T)
{
    xsa_gpt *a = tiny("sa", 1.0, T), *b = tiny("xsa", 0.0, T);
    int32_t *x = malloc(sizeof(int32_t) * B * T), *y = malloc(sizeof(int32_t) * B * T);
    tokens(x, y, T);
    float la, lb;
    xsa_gpt_zero_grad(a), xsa_gpt_zero_grad(b);
    xsa_gpt_forward(a, x, y, B, T, &la), xsa_gpt_backward(a, 1.0f);
    xsa_gpt_forward(b, x, y, B, T, &lb), xsa_gpt_backward(b, 1.0f);
    CHECK(la == lb && !memcmp(xsa_gpt_grads_data(a), xsa_gpt_grads_data(b), xsa_gpt_num_params(a) * sizeof(float)),
          "XSA lambda 0 is SA to the bit at T=%d", T);
    xsa_gpt_free(a), xsa_gpt_free(b);
    free(x); free(y);
}

static void test_train_decode_save(void)
{
    enum { T = 40 };
    xsa_gpt *m = tiny("vsub", 0.5, T);
    int32_t x[B * T], y[B * T];
    tokens(x, y, T);
    float first = 0, loss = 0;
    for (int s = 0; s < 20; s++) { /* plain SGD through the model's own gradient */
        xsa_gpt_zero_grad(m);
        xsa_gpt_forward(m, x, y, B, T, &loss);
        xsa_gpt_backward(m, 1.0f);
        if (s == 0) first = loss;
        float *p = xsa_gpt_params_data(m), *g = xsa_gpt_grads_data(m);
        for (size_t i = 0; i < xsa_gpt_num_params(m); i++) p[i] -= 0.5f * g[i];
    }
    CHECK(loss < first - 0.5f, "vsub trains: loss %g after 20 steps from %g", loss, first);
    /* cached decoding: the same row function; a prefill of more than 64
     * rows also runs the forward's matrix products (test_generate.c), so
     * the logits are the full forward's to the bit */
    float *full = malloc(sizeof(float) * B * T * V), *dec = malloc(sizeof(float) * B * T * V);
    xsa_gpt_forward(m, x, NULL, B, T, NULL);
    memcpy(full, xsa_gpt_logits(m), sizeof(float) * B * T * V);
    xsa_kv_cache *c = xsa_kv_cache_new(m, B);
    CHECK(c && xsa_kv_cache_append(c, x, T, NULL, dec, 1) == 0 && !memcmp(dec, full, sizeof(float) * B * T * V),
          "vsub: a %d-row prefill gives the forward's logits to the bit", B * T);
    xsa_kv_cache_free(c);
    char path[] = "/tmp/xsa_test_variant_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    xsa_gpt *back = fd >= 0 && xsa_gpt_save(m, path, NULL) == 0 ? xsa_gpt_load(path, NULL) : NULL;
    float l1, l2;
    CHECK(back && !strcmp(xsa_gpt_attention_name(xsa_gpt_get_config(back)->attention), "vsub") &&
              xsa_gpt_get_config(back)->lambda == 0.5 && xsa_gpt_eval_loss(m, x, y, B, T, &l1) == 0 &&
              xsa_gpt_eval_loss(back, x, y, B, T, &l2) == 0 && l1 == l2,
          "vsub: a checkpoint keeps the variant, its lambda and the loss: %s", xsa_last_error());
    if (fd >= 0) unlink(path);
    xsa_gpt_free(back);
    xsa_gpt_free(m);
    free(full); free(dec);
}

int main(void)
{
    test_names();
    test_fd(9);
    test_fd(XSA_NN_ATTN_FULL_MAX + 3);
    test_xsa0(9);
    test_xsa0(XSA_NN_ATTN_FULL_MAX + 3);
    test_train_decode_save();
    return check_done("test_attention_variant");
}
