/*
 * autograd_versions.h: test_autograd's version-counter cases, included once by
 * test_autograd.c (which keeps it under the 1,000-line rule); it uses that
 * file's back_sum and the CHECK macros of check.h.
 */
#ifndef XSA_TESTS_AUTOGRAD_VERSIONS_H
#define XSA_TESTS_AUTOGRAD_VERSIONS_H

/* ---- version counters ---------------------------------------------------
 * In-place writes bump the storage's version (shared by views); a backward
 * that would read a value written after its op refuses, naming the op. */

static xsa_tensor *vec3(float a, float b, float c, int grad)
{
    int64_t s3[1] = {3};
    xsa_tensor *t = xsa_tensor_new(XSA_FLOAT32, 1, s3);
    float *p = xsa_tensor_f32(t);
    p[0] = a, p[1] = b, p[2] = c;
    if (grad) rg(t);
    return t;
}

#define MODIFIED "one of the variables needed for gradient computation has been modified by an inplace operation"

/* sum(y) backward must fail naming op (and what) */
static void expect_modified(xsa_tensor *y, const char *op, const char *what, const char *name)
{
    xsa_clear_error();
    CHECK(y && !back_sum(y) && strstr(xsa_last_error(), MODIFIED) && strstr(xsa_last_error(), op) &&
              strstr(xsa_last_error(), what),
          "%s: expected '%s' naming %s / %s, got '%s'", name, MODIFIED, op, what, xsa_last_error());
}

/* which writes bump the counter, shared by views */
static void versions_counter(void)
{
    xsa_tensor *t = vec3(1, 2, 3, 0), *v = xsa_tensor_narrow(t, 0, 1, 2), *d = xsa_ag_detach(t);
    uint64_t v0 = xsa_tensor_version(t);
    int64_t i1[1] = {1};
    xsa_tensor_set(v, i1, 5);
    xsa_tensor_fill_(d, 1);
    xsa_tensor_copy_(v, v);
    xsa_tensor_binary_scalar_(XSA_ADD, t, 1);
    xsa_tensor_binary_(XSA_MUL, v, v);
    xsa_tensor_unary_(XSA_EXP, d);
    CHECK(xsa_tensor_version(t) == v0 + 6 && xsa_tensor_version(v) == xsa_tensor_version(t) &&
              xsa_tensor_version(d) == xsa_tensor_version(t),
          "set, fill_, copy_, binary_, binary_scalar_, unary_ each bump the shared counter (%llu)",
          (unsigned long long)(xsa_tensor_version(t) - v0));
    xsa_tensor *c = xsa_tensor_clone(t);
    uint64_t cv = xsa_tensor_version(c);
    xsa_tensor *r = xsa_tensor_binary(XSA_ADD, t, c);
    CHECK(xsa_tensor_version(c) == cv, "reading does not bump");
    xsa_tensor_free(r);
    xsa_tensor_free(c);
    xsa_tensor_free(d);
    xsa_tensor_free(v);
    xsa_tensor_free(t);
}

/* a saved input modified in place: y = x * w reads x for dw */
static void versions_saved_input(xsa_tensor *w, xsa_tensor *x)
{
    xsa_tensor *y = xsa_ag_binary(XSA_MUL, x, w);
    xsa_tensor_binary_scalar_(XSA_ADD, x, 1);
    expect_modified(y, "MulBackward", "input 1 [3]", "x * w, x += 1");
    xsa_tensor_free(y);
    /* through a view of it, and through detach() */
    y = xsa_ag_binary(XSA_MUL, x, w);
    xsa_tensor *xv = xsa_tensor_select(x, 0, 2);
    xsa_tensor_fill_(xv, 0);
    xsa_tensor_free(xv);
    expect_modified(y, "MulBackward", "input 1", "a view of the saved input");
    xsa_tensor_free(y);
    y = xsa_ag_binary(XSA_MUL, w, w);
    xsa_tensor *wd = xsa_ag_detach(w);
    xsa_tensor_binary_scalar_(XSA_MUL, wd, 2);
    xsa_tensor_free(wd);
    expect_modified(y, "MulBackward", "input", "w * w, w:detach() *= 2");
    xsa_tensor_free(y);
    /* under no_grad a leaf may be updated, but not under a pending backward */
    y = xsa_ag_unary(XSA_LOG, w);
    int prev = xsa_ag_set_enabled(0);
    xsa_tensor_binary_scalar_(XSA_ADD, w, 1);
    xsa_ag_set_enabled(prev);
    expect_modified(y, "LogBackward", "input 1", "log(w), then w += 1 under no_grad");
    xsa_tensor_free(y);
}

/* a saved output: exp and softmax read their result */
static void versions_saved_output(xsa_tensor *w)
{
    xsa_tensor *y = xsa_ag_unary(XSA_EXP, w);
    xsa_tensor *yd = xsa_ag_detach(y);
    xsa_tensor_binary_scalar_(XSA_MUL, yd, 2);
    xsa_tensor_free(yd);
    expect_modified(y, "ExpBackward", "the output [3]", "exp(w), output *= 2");
    xsa_tensor_free(y);
    y = xsa_ag_softmax(w, 0);
    int prev = xsa_ag_set_enabled(0);
    xsa_tensor_fill_(y, 0.5);
    xsa_ag_set_enabled(prev);
    expect_modified(y, "SoftmaxBackward", "the output", "softmax output filled under no_grad");
    xsa_tensor_free(y);
}

/* fused ops save contiguous inputs (often the input itself) */
static void versions_fused(void)
{
    int64_t x23[2] = {2, 3}, w32[2] = {3, 2};
    xsa_tensor *lx = xsa_tensor_ones(XSA_FLOAT32, 2, x23), *lw = xsa_tensor_ones(XSA_FLOAT32, 2, w32);
    rg(lw);
    xsa_tensor *y = xsa_ag_linear(lx, lw, NULL);
    xsa_tensor_fill_(lx, 2);
    expect_modified(y, "LinearBackward", "input 1 [2,3]", "linear input modified");
    xsa_tensor_free(y);
    xsa_tensor_free(lx);
    xsa_tensor_free(lw);
    xsa_tensor *gx = xsa_tensor_ones(XSA_FLOAT32, 2, x23);
    rg(gx);
    y = xsa_ag_gelu(gx);
    int prev = xsa_ag_set_enabled(0);
    xsa_tensor_binary_scalar_(XSA_SUB, gx, 3);
    xsa_ag_set_enabled(prev);
    expect_modified(y, "GeluBackward", "input 1", "gelu input modified");
    xsa_tensor_free(y);
    free_all(1, &gx);
}

/* an optimizer step between forward and backward */
static void versions_optimizer(void)
{
    xsa_tensor *ow = vec3(1, 2, 3, 1);
    xsa_adamw *opt = xsa_adamw_new(1, &ow, 0.1, 0.9, 0.999, 1e-8, 0.0);
    xsa_tensor *y = xsa_ag_binary(XSA_MUL, ow, ow);
    CHECK(back_sum(y), "first backward: %s", xsa_last_error());
    xsa_tensor_free(y);
    y = xsa_ag_binary(XSA_MUL, ow, ow);
    CHECK(xsa_adamw_step(opt) == 0, "step");
    expect_modified(y, "MulBackward", "input", "an AdamW step before the backward");
    xsa_tensor_free(y);
    xsa_adamw_free(opt);
    free_all(1, &ow);
}

/* retain_graph: a write between two backwards stops the second */
static void versions_retain_graph(xsa_tensor *w, xsa_tensor *x)
{
    xsa_ag_zero_grad(w);
    xsa_tensor *y = xsa_ag_binary(XSA_MUL, x, w);
    xsa_tensor *s = xsa_ag_reduce(XSA_SUM, y, XSA_ALL_DIMS, 0);
    CHECK(xsa_ag_backward(s, NULL, 1) == 0, "retained backward");
    xsa_tensor_binary_scalar_(XSA_ADD, x, 1);
    CHECK(xsa_ag_backward(s, NULL, 0) != 0 && strstr(xsa_last_error(), MODIFIED),
          "second backward after a write: %s", xsa_last_error());
    xsa_tensor_free(s);
    xsa_tensor_free(y);
}

/* writes the backward does not read are fine, and the gradient is right */
static void versions_unsaved_writes(xsa_tensor *w, xsa_tensor *x)
{
    xsa_ag_zero_grad(w);
    xsa_tensor *a = vec3(1, 1, 1, 0);
    xsa_tensor *y = xsa_ag_binary(XSA_ADD, a, w); /* add reads no values */
    xsa_tensor *e = xsa_ag_unary(XSA_EXP, w);     /* exp reads only its result */
    xsa_tensor *z = xsa_ag_binary(XSA_ADD, y, e);
    xsa_tensor_binary_scalar_(XSA_ADD, a, 5);
    int prev = xsa_ag_set_enabled(0);
    xsa_tensor_binary_scalar_(XSA_ADD, w, 1);   /* exp's input, not saved */
    xsa_ag_set_enabled(prev);
    float *wv = xsa_tensor_f32(w);
    double want[3] = {1 + exp(wv[0] - 1), 1 + exp(wv[1] - 1), 1 + exp(wv[2] - 1)};
    CHECK(back_sum(z), "unsaved writes: backward runs: %s", xsa_last_error());
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(xsa_tensor_f32(w->grad)[i], want[i], 1e-5, "d/dw (a + w + exp(w)) from the forward's values");
    xsa_tensor_free(z);
    xsa_tensor_free(e);
    xsa_tensor_free(y);
    free_all(1, &a);
    /* nothing modified: the usual gradient */
    xsa_ag_zero_grad(w);
    y = xsa_ag_binary(XSA_MUL, x, w);
    CHECK(back_sum(y), "x * w backward: %s", xsa_last_error());
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(xsa_tensor_f32(w->grad)[i], xsa_tensor_f32(x)[i], 1e-6, "d/dw (x * w) = x");
    xsa_tensor_free(y);
}

static void test_versions(void)
{
    versions_counter();
    xsa_tensor *w = vec3(1, 2, 3, 1), *x = vec3(4, 5, 6, 0);
    versions_saved_input(w, x);
    versions_saved_output(w);
    versions_fused();
    versions_optimizer();
    versions_retain_graph(w, x);
    versions_unsaved_writes(w, x);
    free_all(2, (xsa_tensor *[]){x, w});
}

#endif
