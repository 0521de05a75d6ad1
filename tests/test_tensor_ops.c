/*
 * test_tensor_ops.c: the tensor ops (core/tensor_ops.c, tensor_reduce.c)
 * against values computed independently here: nested loops in double for
 * broadcasting, int32 arithmetic, edge values, reductions, softmax and
 * matmul, and allclose. Storage must return to its baseline (no leaks).
 * Not here: views, storage, creation, the RNG, printing and the error
 * messages of the tensor API (test_tensor.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/nn.h"
#include "check_tensor.h" /* tensor.h, check.h and the shared helpers */

/* ---- element-wise ----------------------------------------------------- */

static double ref_op(xsa_binop op, float x, float y)
{
    switch (op) {
    case XSA_ADD: return x + y;
    case XSA_SUB: return x - y;
    case XSA_MUL: return x * y;
    case XSA_DIV: return x / y;
    case XSA_POW: return powf(x, y);
    case XSA_MAXIMUM: return x > y ? x : y;
    case XSA_MINIMUM: return x < y ? x : y;
    case XSA_EQ: return x == y;
    case XSA_NE: return x != y;
    case XSA_LT: return x < y;
    case XSA_LE: return x <= y;
    case XSA_GT: return x > y;
    case XSA_GE: return x >= y;
    }
    return NAN;
}

/* [2,3,4] op [3,1] and [3,1] op [2,3,4] for every binary op (b2: b with an
 * element of a, for the comparisons) */
static void check_binary_ops(const xsa_tensor *a, const xsa_tensor *b, const xsa_tensor *b2)
{
    const float *pa = xsa_tensor_f32(a);
    for (int op = XSA_ADD; op <= XSA_GE; op++) {
        const xsa_tensor *bb = op >= XSA_EQ ? b2 : b;
        const float *pb = xsa_tensor_f32(bb);
        xsa_tensor *r = xsa_tensor_binary((xsa_binop)op, a, bb);
        CHECK(r && r->ndim == 3 && r->shape[0] == 2 && r->shape[1] == 3 && r->shape[2] == 4 &&
                  r->dtype == XSA_FLOAT32, "op %d shape", op);
        int bad = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++) {
                    double want = ref_op((xsa_binop)op, pa[(i * 3 + j) * 4 + k], pb[j]);
                    double got = at(r, (i * 3 + j) * 4 + k);
                    if (fabs(got - want) > 1e-6 * fmax(1, fabs(want))) bad++;
                }
        CHECK(bad == 0, "broadcast op %d: %d mismatches", op, bad);
        /* reversed broadcasting: [3,1] op [2,3,4] */
        xsa_tensor *r2 = xsa_tensor_binary((xsa_binop)op, bb, a);
        bad = 0;
        for (int i = 0; i < 24; i++) {
            double want = ref_op((xsa_binop)op, pb[(i / 4) % 3], pa[i]);
            if (fabs(at(r2, i) - want) > 1e-6 * fmax(1, fabs(want))) bad++;
        }
        CHECK(bad == 0, "reversed broadcast op %d: %d mismatches", op, bad);
        xsa_tensor_free(r);
        xsa_tensor_free(r2);
    }
}

/* both operands broadcast: [4] x [2,1,1] -> [2,1,4] */
static void check_two_sided(void)
{
    xsa_tensor *v4 = seq(1, SH(4), 1, 0);
    xsa_tensor *c2 = seq(3, SH(2, 1, 1), 1, 5);
    xsa_tensor *r = xsa_tensor_binary(XSA_MUL, v4, c2);
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            if (at(r, i * 4 + k) != (double)(xsa_tensor_f32(v4)[k] * xsa_tensor_f32(c2)[i])) bad++;
    CHECK(r->ndim == 3 && r->shape[1] == 1 && bad == 0, "two-sided broadcast");
    xsa_tensor_free(r);
    xsa_tensor_free(v4);
    xsa_tensor_free(c2);
}

/* strided (non-contiguous) operands: m^T - m^T, m^T + a row of m */
static void check_strided(const xsa_tensor *m, xsa_tensor *mt)
{
    xsa_tensor *r = xsa_tensor_binary(XSA_SUB, mt, mt);
    int bad = 0;
    for (int i = 0; i < 15; i++) bad += at(r, i) != 0.0;
    CHECK(bad == 0 && r->shape[0] == 5, "strided operands");
    xsa_tensor_free(r);
    xsa_tensor *row = xsa_tensor_select(mt, 1, 2); /* [5]: row 2 of m */
    r = xsa_tensor_binary(XSA_ADD, mt, row);        /* [5,3] + [5]: 3 vs 5 */
    CHECK(r == NULL && has(xsa_last_error(), "add: shapes [5,3] and [5] do not broadcast"),
          "broadcast error message: %s", xsa_last_error());
    xsa_tensor *rowu = xsa_tensor_unsqueeze(row, 1); /* [5,1] */
    r = xsa_tensor_binary(XSA_ADD, mt, rowu);
    bad = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            bad += at2(r, i, j) != (double)(xsa_tensor_f32(m)[j * 5 + i] + xsa_tensor_f32(m)[2 * 5 + i]);
    CHECK(bad == 0, "strided broadcast values");
    xsa_tensor_free(r);
    xsa_tensor_free(row);
    xsa_tensor_free(rowu);
}

/* scalar forms */
static void check_scalar_forms(const xsa_tensor *a)
{
    const float *pa = xsa_tensor_f32(a);
    xsa_tensor *r = xsa_tensor_binary_scalar(XSA_SUB, a, 1.5, 0);
    xsa_tensor *rr = xsa_tensor_binary_scalar(XSA_SUB, a, 1.5, 1);
    xsa_tensor *rd = xsa_tensor_binary_scalar(XSA_DIV, a, 2.0, 1);
    int bad = 0;
    for (int i = 0; i < 24; i++) {
        bad += at(r, i) != (double)(pa[i] - 1.5f);
        bad += at(rr, i) != (double)(1.5f - pa[i]);
        bad += at(rd, i) != (double)(2.0f / pa[i]);
    }
    CHECK(bad == 0, "scalar and reversed scalar");
    xsa_tensor_free(r);
    xsa_tensor_free(rr);
    xsa_tensor_free(rd);
}

/* in place: a += b (broadcast), a *= 2, in-place on a strided view (mt: m^T) */
static void check_in_place(const xsa_tensor *a, xsa_tensor *b, const xsa_tensor *m, xsa_tensor *mt)
{
    const float *pa = xsa_tensor_f32(a);
    xsa_tensor *ac = xsa_tensor_clone(a);
    CHECK(xsa_tensor_binary_(XSA_ADD, ac, b) == 0, "add_");
    CHECK(xsa_tensor_binary_scalar_(XSA_MUL, ac, 2.0) == 0, "mul_ scalar");
    int bad = 0;
    for (int i = 0; i < 24; i++)
        bad += at(ac, i) != (double)((pa[i] + xsa_tensor_f32(b)[(i / 4) % 3]) * 2.0f);
    CHECK(bad == 0, "in-place values");
    CHECK_ERR(xsa_tensor_binary_(XSA_ADD, b, a) < 0, "does not broadcast to the in-place shape");
    xsa_tensor *mtc = xsa_tensor_clone(m);
    CHECK(xsa_tensor_binary_(XSA_ADD, mt, mt) == 0, "self add_ through a transpose");
    bad = 0;
    for (int i = 0; i < 15; i++) bad += at(m, i) != 2.0 * at(mtc, i);
    CHECK(bad == 0, "a += a doubles");
    /* in place with an overlapping source: q += q^T */
    xsa_tensor *q = seq(2, SH(3, 3), 1, 0), *qc = xsa_tensor_clone(q);
    xsa_tensor *qt = xsa_tensor_transpose(q, 0, 1);
    CHECK(xsa_tensor_binary_(XSA_ADD, q, qt) == 0, "q += q^T");
    bad = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) bad += at2(q, i, j) != (double)((float)at2(qc, i, j) + (float)at2(qc, j, i));
    CHECK(bad == 0, "overlapping in-place uses the old values");
    xsa_tensor *list[] = {ac, mtc, q, qc, qt};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* GELU is the model's kernel (nn.h): the same bits as xsa_nn_gelu_forward,
 * in place too (also on a strided view), and accurate in the negative
 * tail, where 0.5 x (1 + erf(x / sqrt 2)) in float cancels to 0 */
static void check_gelu(void)
{
    xsa_tensor *gx = seq(2, SH(6, 7), 9.0, -3.0); /* values in [-12, 6] */
    int64_t gn = xsa_tensor_numel(gx);
    float *ref = malloc((size_t)gn * sizeof *ref);
    xsa_nn_gelu_forward(ref, xsa_tensor_f32(gx), (size_t)gn);
    xsa_tensor *gu = xsa_tensor_unary(XSA_GELU, gx);
    CHECK(gu && memcmp(xsa_tensor_f32(gu), ref, (size_t)gn * sizeof *ref) == 0,
          "gelu = xsa_nn_gelu_forward, bit for bit");
    xsa_tensor *gt = xsa_tensor_transpose(gx, 0, 1), *gtc = xsa_tensor_clone(gt);
    xsa_tensor *gtu = xsa_tensor_unary(XSA_GELU, gtc);
    CHECK(xsa_tensor_unary_(XSA_GELU, gt) == 0 && xsa_tensor_allclose(gt, gtu, 0, 0) == 1,
          "gelu_ on a strided view = gelu of its copy: %s", xsa_last_error());
    xsa_tensor *tail = from_vals(XSA_FLOAT32, 1, SH(4), (const double[]){-6, -8, -10, -12});
    xsa_tensor *tu = xsa_tensor_unary(XSA_GELU, tail);
    int tail_bad = 0;
    for (int i = 0; i < 4; i++) {
        double v = at(tail, i), want = v * 0.5 * erfc(-v / sqrt(2.0));
        tail_bad += !(fabs(at(tu, i) - want) <= 1e-5 * fabs(want));
    }
    CHECK(tail_bad == 0, "gelu(-6 .. -12) to 1e-5 relative (%g at -10, want %g)", at(tu, 2),
          -10 * 0.5 * erfc(10 / sqrt(2.0)));
    xsa_tensor *gi = from_vals(XSA_INT32, 1, SH(3), (const double[]){-1, 0, 2});
    xsa_tensor *giu = xsa_tensor_unary(XSA_GELU, gi);
    CHECK(giu && giu->dtype == XSA_FLOAT32 && fabs(at(giu, 2) - 2 * 0.5 * erfc(-2 / sqrt(2.0))) < 1e-6,
          "gelu of int32 gives float32");
    xsa_tensor *glist[] = {gx, gu, gt, gtc, gtu, tail, tu, gi, giu};
    for (size_t i = 0; i < sizeof glist / sizeof glist[0]; i++) xsa_tensor_free(glist[i]);
    free(ref);
}

/* unary ops, GELU, tanh_ on a strided view */
static void check_unary(void)
{
    xsa_tensor *x = seq(2, SH(4, 5), 3.0, 0.0);
    const float *px = xsa_tensor_f32(x);
    int bad;
    for (int op = XSA_NEG; op <= XSA_SIGMOID; op++) {
        xsa_tensor *u = xsa_tensor_unary((xsa_unop)op, x);
        bad = 0;
        for (int i = 0; i < 20; i++) {
            double v = px[i], want = 0;
            switch ((xsa_unop)op) {
            case XSA_NEG: want = -v; break;
            case XSA_EXP: want = exp(v); break;
            case XSA_LOG: want = log(v); break;
            case XSA_SQRT: want = sqrt(v); break;
            case XSA_TANH: want = tanh(v); break;
            case XSA_RELU: want = v > 0 ? v : 0; break;
            case XSA_GELU: want = 0.5 * v * (1 + erf(v / sqrt(2.0))); break;
            case XSA_ABS: want = fabs(v); break;
            case XSA_SIGMOID: want = 1 / (1 + exp(-v)); break;
            }
            double got = at(u, i);
            if (isnan(want) ? !isnan(got) : fabs(got - want) > 2e-6 * fmax(1, fabs(want))) bad++;
        }
        CHECK(bad == 0, "unary op %d: %d mismatches", op, bad);
        xsa_tensor_free(u);
    }
    check_gelu();
    xsa_tensor *xt = xsa_tensor_transpose(x, 0, 1), *xtc = xsa_tensor_clone(xt);
    CHECK(xsa_tensor_unary_(XSA_TANH, xt) == 0, "tanh_ on a view");
    bad = 0;
    for (int i = 0; i < 20; i++) bad += fabs(at(xt, i) - tanh(at(xtc, i))) > 1e-6;
    CHECK(bad == 0, "tanh_ on a strided view");
    xsa_tensor *list[] = {x, xt, xtc};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* where, clamp */
static void check_where_clamp(const xsa_tensor *a, const xsa_tensor *b)
{
    const float *pa = xsa_tensor_f32(a);
    xsa_tensor *cond = xsa_tensor_binary_scalar(XSA_GT, a, 3.0, 0);
    xsa_tensor *w = xsa_tensor_where(cond, a, b);
    int bad = 0;
    for (int i = 0; i < 24; i++) bad += at(w, i) != (pa[i] > 3.0f ? pa[i] : xsa_tensor_f32(b)[(i / 4) % 3]);
    CHECK(w && bad == 0, "where with broadcasting");
    xsa_tensor *cl = xsa_tensor_clamp(a, 2.0, 4.0);
    bad = 0;
    for (int i = 0; i < 24; i++) bad += at(cl, i) != fmin(fmax(pa[i], 2.0f), 4.0f);
    CHECK(bad == 0, "clamp");
    xsa_tensor *nanv = xsa_tensor_full(XSA_FLOAT32, 1, SH(2), NAN);
    xsa_tensor *cn = xsa_tensor_clamp(nanv, 0, 1);
    xsa_tensor *mx = xsa_tensor_binary(XSA_MAXIMUM, nanv, a);
    CHECK(isnan(at(cn, 0)) && mx == NULL, "clamp keeps NaN; [2] vs [2,3,4] fails");
    xsa_tensor *one = xsa_tensor_ones(XSA_FLOAT32, 1, SH(2));
    xsa_tensor *mx2 = xsa_tensor_binary(XSA_MAXIMUM, nanv, one);
    CHECK(isnan(at(mx2, 1)), "maximum propagates NaN");
    xsa_tensor *list[] = {cond, w, cl, nanv, cn, one, mx2};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_broadcast(void)
{
    /* [2,3,4] op [3,1] and [4] op [2,1,1]: hand loops over the output */
    xsa_tensor *a = seq(3, SH(2, 3, 4), 2.0, 3.0); /* positive: pow is defined */
    xsa_tensor *b = seq(2, SH(3, 1), 1.5, 2.0);
    xsa_tensor *b2 = xsa_tensor_full(XSA_FLOAT32, 2, SH(3, 1), 0);
    xsa_tensor_set(b2, SH(1, 0), at(a, 1 * 4 + 2)); /* equal values for the comparisons */
    xsa_tensor *m = seq(2, SH(3, 5), 1, 0);
    xsa_tensor *mt = xsa_tensor_transpose(m, 0, 1);
    check_binary_ops(a, b, b2);
    check_two_sided();
    check_strided(m, mt);
    check_scalar_forms(a);
    check_in_place(a, b, m, mt);
    check_unary();
    check_where_clamp(a, b);
    xsa_tensor *list[] = {a, b, b2, m, mt};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_edges(void)
{
    /* 0-d op 0-d stays 0-d */
    xsa_tensor *x = xsa_tensor_full(XSA_FLOAT32, 0, NULL, 3), *y = xsa_tensor_full(XSA_FLOAT32, 0, NULL, 4);
    xsa_tensor *z = xsa_tensor_binary(XSA_POW, x, y);
    CHECK(z && z->ndim == 0 && at(z, 0) == 81.0, "0-d pow");
    /* clamp with lo > hi gives hi (PyTorch); one-sided with infinities */
    xsa_tensor *v = from_vals(XSA_FLOAT32, 1, SH(3), (double[]){-5, 0.5, 5});
    xsa_tensor *c1 = xsa_tensor_clamp(v, 2, 1), *c2 = xsa_tensor_clamp(v, 0, INFINITY);
    CHECK(at(c1, 0) == 1 && at(c1, 2) == 1 && at(c2, 0) == 0 && at(c2, 2) == 5, "clamp edges");
    /* var of one element is NaN; mean over nothing NaN; argmax picks the first NaN */
    xsa_tensor *one = xsa_tensor_ones(XSA_FLOAT32, 2, SH(1, 3));
    xsa_tensor *v1 = xsa_tensor_reduce(XSA_VAR, one, 0, 0);
    CHECK(isnan(at(v1, 0)) && v1->shape[0] == 3, "var of one sample is NaN");
    xsa_tensor *e = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(0));
    xsa_tensor *me = xsa_tensor_reduce(XSA_MEAN, e, XSA_ALL_DIMS, 0);
    CHECK(isnan(at(me, 0)), "mean of nothing is NaN");
    xsa_tensor *nn = from_vals(XSA_FLOAT32, 1, SH(4), (double[]){1, NAN, 9, NAN});
    xsa_tensor *am = xsa_tensor_reduce(XSA_ARGMAX, nn, 0, 0), *ami = xsa_tensor_reduce(XSA_ARGMIN, nn, 0, 0);
    CHECK(at(am, 0) == 1 && at(ami, 0) == 1, "arg ops pick the first NaN");
    /* squeeze all, unsqueeze at front, permute of 0-d */
    xsa_tensor *w = xsa_tensor_zeros(XSA_FLOAT32, 4, SH(1, 3, 1, 2));
    xsa_tensor *sq = xsa_tensor_squeeze(w, XSA_ALL_DIMS);
    CHECK(sq->ndim == 2 && sq->shape[0] == 3 && sq->shape[1] == 2, "squeeze all");
    xsa_tensor *u = xsa_tensor_unsqueeze(sq, 0);
    CHECK(u->ndim == 3 && u->shape[0] == 1 && xsa_tensor_is_contiguous(u), "unsqueeze front");
    xsa_tensor *full8 = xsa_tensor_zeros(XSA_FLOAT32, 8, SH(1, 1, 1, 1, 1, 1, 1, 2));
    CHECK_ERR(xsa_tensor_unsqueeze(full8, 0) == NULL, "maximum of 8 dims");
    /* in-place on a narrowed (non-contiguous) view only touches the view */
    xsa_tensor *m = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(3, 4));
    xsa_tensor *mid = xsa_tensor_narrow(m, 1, 1, 2);
    CHECK(xsa_tensor_fill_(mid, 7) == 0 && xsa_tensor_binary_scalar_(XSA_ADD, mid, 1) == 0, "ops on a narrow");
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += at(m, i) != ((i % 4 == 1 || i % 4 == 2) ? 8.0 : 0.0);
    CHECK(bad == 0, "in-place ops stay inside the view");
    /* a 1-element tensor views as 0-d */
    xsa_tensor *s1 = xsa_tensor_ones(XSA_FLOAT32, 1, SH(1));
    xsa_tensor *s0 = xsa_tensor_view(s1, 0, NULL);
    CHECK(s0 && s0->ndim == 0 && at(s0, 0) == 1.0, "view to 0-d");
    xsa_tensor *list[] = {x, y, z, v, c1, c2, one, v1, e, me, nn, am, ami, w, sq, u, full8, m, mid, s1, s0};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_int32(void)
{
    xsa_tensor *a = xsa_tensor_arange(XSA_INT32, -3, 3, 1); /* -3..2 */
    xsa_tensor *b = xsa_tensor_full(XSA_INT32, 0, NULL, 2);
    xsa_tensor *s = xsa_tensor_binary(XSA_ADD, a, b);
    CHECK(s->dtype == XSA_INT32 && at(s, 0) == -1 && at(s, 5) == 4, "int32 add stays int32");
    xsa_tensor *d = xsa_tensor_binary(XSA_DIV, a, b);
    CHECK(d->dtype == XSA_FLOAT32 && at(d, 0) == -1.5, "int32 div gives float32");
    xsa_tensor *p = xsa_tensor_binary(XSA_POW, a, b);
    CHECK(p->dtype == XSA_FLOAT32 && at(p, 0) == 9.0, "int32 pow gives float32");
    xsa_tensor *c = xsa_tensor_binary(XSA_LT, a, b);
    CHECK(c->dtype == XSA_FLOAT32 && at(c, 4) == 1.0 && at(c, 5) == 0.0, "int32 compare gives float 0/1");
    xsa_tensor *big = xsa_tensor_full(XSA_INT32, 1, SH(2), 16777217.0);
    xsa_tensor *big2 = xsa_tensor_full(XSA_INT32, 1, SH(2), 16777216.0);
    xsa_tensor *ne = xsa_tensor_binary(XSA_NE, big, big2);
    CHECK(at(ne, 0) == 1.0, "int32 comparison is exact beyond 2^24");
    xsa_tensor *mx = xsa_tensor_full(XSA_INT32, 0, NULL, 2147483647.0);
    xsa_tensor *wr = xsa_tensor_binary_scalar(XSA_ADD, mx, 1, 0);
    CHECK(wr->dtype == XSA_INT32 && at(wr, 0) == -2147483648.0, "int32 add wraps");
    xsa_tensor *fl = xsa_tensor_binary_scalar(XSA_ADD, a, 0.5, 0);
    CHECK(fl->dtype == XSA_FLOAT32 && at(fl, 0) == -2.5, "int32 + 0.5 gives float32");
    xsa_tensor *ones = xsa_tensor_ones(XSA_FLOAT32, 1, SH(6));
    xsa_tensor *mix = xsa_tensor_binary(XSA_MUL, a, ones);
    CHECK(mix->dtype == XSA_FLOAT32 && at(mix, 1) == -2.0, "int32 * float32 gives float32");
    CHECK(xsa_tensor_binary_scalar_(XSA_MUL, a, 3) == 0 && at(a, 0) == -9 && a->dtype == XSA_INT32,
          "int32 in-place mul");
    CHECK_ERR(xsa_tensor_binary_scalar_(XSA_ADD, a, 0.5) < 0, "int32 tensor cannot hold");
    CHECK_ERR(xsa_tensor_binary_(XSA_DIV, a, b) < 0, "int32 tensor cannot hold");
    CHECK_ERR(xsa_tensor_unary_(XSA_EXP, a) < 0, "float32");
    xsa_tensor *u = xsa_tensor_unary(XSA_ABS, a);
    CHECK(u->dtype == XSA_FLOAT32 && at(u, 0) == 9.0, "unary on int32 gives float32");
    xsa_tensor *cl = xsa_tensor_clamp(a, -4, 4);
    CHECK(cl->dtype == XSA_INT32 && at(cl, 0) == -4 && at(cl, 5) == 4, "int32 clamp");
    xsa_tensor *w = xsa_tensor_where(c, a, b);
    CHECK(w->dtype == XSA_INT32 && at(w, 4) == 3 && at(w, 5) == 2, "int32 where");
    xsa_tensor *sm = xsa_tensor_reduce(XSA_SUM, a, XSA_ALL_DIMS, 0);
    CHECK(sm->dtype == XSA_FLOAT32 && at(sm, 0) == -9.0, "int32 sum gives float32");
    CHECK_ERR(xsa_tensor_full(XSA_INT32, 1, SH(2), 1e10) == NULL, "does not fit int32");
    /* int32 reductions are exact beyond float's 2^24 */
    xsa_tensor *ib = from_vals(XSA_INT32, 2, SH(2, 3), (double[]){16777216, 16777217, 16777216, 5, -7, 5});
    xsa_tensor *iam = xsa_tensor_reduce(XSA_ARGMAX, ib, 1, 0), *iamin = xsa_tensor_reduce(XSA_ARGMIN, ib, 0, 1);
    xsa_tensor *isum = xsa_tensor_reduce(XSA_SUM, ib, XSA_ALL_DIMS, 0);
    xsa_tensor *imax = xsa_tensor_reduce(XSA_MAX, ib, 0, 0), *ivar = xsa_tensor_reduce(XSA_VAR, ib, 1, 0);
    xsa_tensor *ibt = xsa_tensor_transpose(ib, 0, 1);
    xsa_tensor *imean = xsa_tensor_reduce(XSA_MEAN, ibt, 0, 0);
    CHECK(at(iam, 0) == 1 && at(iam, 1) == 0 && iamin->ndim == 2 && at(iamin, 0) == 1 && at(iamin, 1) == 1 &&
              at(isum, 0) == (float)50331652.0 && at(imax, 1) == (float)16777217.0 &&
              fabs(at(ivar, 1) - 48) < 1e-5 && at(imean, 1) == 1.0, "int32 reductions");
    xsa_tensor *l2[] = {ib, iam, iamin, isum, imax, ivar, ibt, imean};
    for (size_t i = 0; i < 8; i++) xsa_tensor_free(l2[i]);
    xsa_tensor *list[] = {a, b, s, d, p, c, big, big2, ne, mx, wr, fl, ones, mix, u, cl, w, sm};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* ---- reductions and softmax ------------------------------------------- */

/* every reduction along each dim, with and without keepdim, against hand loops */
static void check_reduce_dims(const xsa_tensor *a)
{
    const float *p = xsa_tensor_f32(a);
    for (int dim = 0; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++)
            for (int op = XSA_SUM; op <= XSA_VAR; op++) {
                xsa_tensor *r = xsa_tensor_reduce((xsa_redop)op, a, dim - 3 * (dim == 2), keep);
                int shp[3] = {3, 4, 5}, n = shp[dim];
                CHECK(r && r->ndim == (keep ? 3 : 2), "reduce dims");
                CHECK(r->dtype == ((op == XSA_ARGMAX || op == XSA_ARGMIN) ? XSA_INT32 : XSA_FLOAT32),
                      "reduce dtype");
                int bad = 0, k = 0;
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++)
                        for (int l = 0; l < 5; l++) {
                            int idx[3] = {i, j, l};
                            if (idx[dim] != 0) continue;
                            double acc = 0, best = 0, mean;
                            int bi = 0;
                            for (int t = 0; t < n; t++) {
                                idx[dim] = t;
                                double v = p[(idx[0] * 4 + idx[1]) * 5 + idx[2]];
                                acc += v;
                                int better = op == XSA_MAX || op == XSA_ARGMAX ? v > best : v < best;
                                if (t == 0 || better) {
                                    best = v;
                                    bi = t;
                                }
                            }
                            mean = acc / n;
                            double sq = 0;
                            for (int t = 0; t < n; t++) {
                                idx[dim] = t;
                                double v = p[(idx[0] * 4 + idx[1]) * 5 + idx[2]];
                                sq += (v - mean) * (v - mean);
                            }
                            double want = op == XSA_SUM ? acc : op == XSA_MEAN ? mean
                                          : op == XSA_VAR ? sq / (n - 1)
                                          : (op == XSA_ARGMAX || op == XSA_ARGMIN) ? bi : best;
                            if (fabs(at(r, k) - want) > 1e-6 * fmax(1, fabs(want))) bad++;
                            k++;
                        }
                CHECK(bad == 0 && k == xsa_tensor_numel(r), "reduce op %d dim %d keep %d", op, dim, keep);
                xsa_tensor_free(r);
            }
}

/* argmax/argmin ties -> first index; on a transposed view; empty sum and NaN */
static void check_reduce_ties(void)
{
    xsa_tensor *tie = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, 4));
    float *tp = xsa_tensor_f32(tie);
    tp[1] = 5; tp[3] = 5;   /* row 0: 0 5 0 5 */
    tp[4] = -1; tp[6] = -1; /* row 1: -1 0 -1 0 */
    xsa_tensor *am = xsa_tensor_reduce(XSA_ARGMAX, tie, 1, 0);
    xsa_tensor *ami = xsa_tensor_reduce(XSA_ARGMIN, tie, -1, 0);
    xsa_tensor *amall = xsa_tensor_reduce(XSA_ARGMAX, tie, XSA_ALL_DIMS, 0);
    CHECK(at(am, 0) == 1 && at(am, 1) == 1 && at(ami, 0) == 0 && at(ami, 1) == 0 && at(amall, 0) == 1,
          "argmax/argmin ties give the first index");
    xsa_tensor *tt = xsa_tensor_transpose(tie, 0, 1);
    xsa_tensor *amt = xsa_tensor_reduce(XSA_ARGMAX, tt, 0, 1);
    CHECK(amt->ndim == 2 && amt->shape[0] == 1 && at(amt, 0) == 1 && at(amt, 1) == 1,
          "argmax over a transposed view with keepdim");
    xsa_tensor *mxt = xsa_tensor_reduce(XSA_MAX, tt, 1, 0);
    CHECK(at(mxt, 1) == 5 && at(mxt, 0) == 0, "max over a transposed view");
    /* empty sum and NaN */
    xsa_tensor *e = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(0, 3));
    xsa_tensor *es = xsa_tensor_reduce(XSA_SUM, e, 0, 0);
    CHECK(es && es->shape[0] == 3 && at(es, 2) == 0, "sum over an empty dim is 0");
    CHECK_ERR(xsa_tensor_reduce(XSA_MAX, e, 0, 0) == NULL, "empty dimension");
    tp[2] = NAN;
    xsa_tensor *mnan = xsa_tensor_reduce(XSA_MAX, tie, 1, 0);
    CHECK(isnan(at(mnan, 0)) && at(mnan, 1) == 0, "max propagates NaN");
    xsa_tensor *list[] = {tie, am, ami, amall, tt, amt, mxt, e, es, mnan};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_reduce(void)
{
    xsa_tensor *a = seq(3, SH(3, 4, 5), 2.0, 0.5);
    const float *p = xsa_tensor_f32(a);
    /* all */
    double sum = 0;
    for (int i = 0; i < 60; i++) sum += p[i];
    xsa_tensor *s = xsa_tensor_reduce(XSA_SUM, a, XSA_ALL_DIMS, 1);
    CHECK(s->ndim == 0, "all-reduce is 0-d");
    CHECK_NEAR(at(s, 0), sum, 1e-6, "sum all");
    xsa_tensor *mn = xsa_tensor_reduce(XSA_MEAN, a, XSA_ALL_DIMS, 0);
    CHECK_NEAR(at(mn, 0), sum / 60, 1e-6, "mean all");
    double ss = 0;
    for (int i = 0; i < 60; i++) ss += (p[i] - sum / 60) * (p[i] - sum / 60);
    xsa_tensor *va = xsa_tensor_reduce(XSA_VAR, a, XSA_ALL_DIMS, 0);
    CHECK_NEAR(at(va, 0), ss / 59, 1e-6, "var all (unbiased)");
    check_reduce_dims(a);
    check_reduce_ties();
    xsa_tensor *list[] = {a, s, mn, va};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_softmax(void)
{
    xsa_tensor *a = seq(3, SH(2, 3, 7), 20.0, 3.0); /* large values: needs max-subtraction */
    const float *p = xsa_tensor_f32(a);
    for (int dim = 0; dim < 3; dim++) {
        xsa_tensor *s = xsa_tensor_softmax(a, dim);
        xsa_tensor *l = xsa_tensor_log_softmax(a, dim - 3);
        int shp[3] = {2, 3, 7}, n = shp[dim], bad = 0, badsum = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 7; k++) {
                    int idx[3] = {i, j, k};
                    int self = (i * 3 + j) * 7 + k;
                    double m = -INFINITY, z = 0;
                    for (int t = 0; t < n; t++) {
                        idx[dim] = t;
                        m = fmax(m, p[(idx[0] * 3 + idx[1]) * 7 + idx[2]]);
                    }
                    for (int t = 0; t < n; t++) {
                        idx[dim] = t;
                        z += exp(p[(idx[0] * 3 + idx[1]) * 7 + idx[2]] - m);
                    }
                    double want = exp(p[self] - m) / z, lwant = p[self] - m - log(z);
                    if (fabs(at(s, self) - want) > 1e-6) bad++;
                    if (fabs(at(l, self) - lwant) > 1e-5 * fmax(1, fabs(lwant))) bad++;
                }
        CHECK(bad == 0, "softmax/log_softmax dim %d vs double loops: %d mismatches", dim, bad);
        xsa_tensor *rs = xsa_tensor_reduce(XSA_SUM, s, dim, 0);
        for (int64_t i = 0; i < xsa_tensor_numel(rs); i++) badsum += fabs(at(rs, i) - 1.0) > 1e-6;
        CHECK(badsum == 0, "softmax rows sum to 1 (dim %d)", dim);
        xsa_tensor_free(s);
        xsa_tensor_free(l);
        xsa_tensor_free(rs);
    }
    xsa_tensor *hot = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), -1e30);
    xsa_tensor_set(hot, SH(1), 1e30);
    xsa_tensor *sh = xsa_tensor_softmax(hot, 0);
    CHECK(at(sh, 1) == 1.0 && at(sh, 0) == 0.0, "softmax of extreme values is finite");
    /* masked entries (-inf) get exactly 0 / -inf; a fully masked row is NaN */
    xsa_tensor *mk = from_vals(XSA_FLOAT32, 2, SH(2, 3), (double[]){0, -INFINITY, 1, -INFINITY, -INFINITY, -INFINITY});
    xsa_tensor *smk = xsa_tensor_softmax(mk, 1), *lmk = xsa_tensor_log_softmax(mk, -1);
    CHECK(at(smk, 1) == 0.0 && fabs(at(smk, 2) - exp(1.0) / (1 + exp(1.0))) < 1e-7 &&
              isinf(at(lmk, 1)) && at(lmk, 1) < 0 && fabs(at(lmk, 0) + log(1 + exp(1.0))) < 1e-6,
          "masked softmax");
    CHECK(isnan(at(smk, 3)) && isnan(at(lmk, 5)), "all -inf row gives NaN");
    xsa_tensor *mkt = xsa_tensor_transpose(mk, 0, 1);
    xsa_tensor *smkt = xsa_tensor_softmax(mkt, 0); /* along a non-last dim */
    CHECK(at(smkt, 2) == 0.0 && fabs(at(smkt, 4) - exp(1.0) / (1 + exp(1.0))) < 1e-7, "masked softmax over dim 0");
    xsa_tensor_free(mk);
    xsa_tensor_free(smk);
    xsa_tensor_free(lmk);
    xsa_tensor_free(mkt);
    xsa_tensor_free(smkt);
    xsa_tensor *at_ = xsa_tensor_transpose(a, 1, 2);
    xsa_tensor *st = xsa_tensor_softmax(at_, 1), *sr = xsa_tensor_softmax(a, 2);
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 7; k++) {
                double x = NAN, y = NAN;
                xsa_tensor_get(st, (int64_t[]){i, k, j}, &x);
                xsa_tensor_get(sr, (int64_t[]){i, j, k}, &y);
                bad += x != y;
            }
    CHECK(bad == 0, "softmax over a strided view");
    CHECK_ERR(xsa_tensor_softmax(a, 3) == NULL, "softmax: dim 3 is out of range for 3 dims");
    xsa_tensor *list[] = {a, hot, sh, at_, st, sr};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* ---- matmul ----------------------------------------------------------- */

/* max over entries of |c - ref| / sum_k |a_ik b_kj| (the natural scale of
 * float rounding in a dot product) */
static double matmul_norm_err; /* max |c - ref| / max |ref| of the last call */
static double matmul_err(const xsa_tensor *c, const xsa_tensor *a, const xsa_tensor *b, int64_t M,
                         int64_t K, int64_t N)
{
    double worst = 0, maxdiff = 0, maxref = 0;
    double *bt = malloc(sizeof(double) * (size_t)(K * N));
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bt[j * K + k] = at2(b, k, j);
    double *arow = malloc(sizeof(double) * (size_t)K);
    const float *pc = xsa_tensor_f32(c);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t k = 0; k < K; k++) arow[k] = at2(a, i, k);
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            const double *bc = bt + j * K;
            for (int64_t k = 0; k < K; k++) {
                s += arow[k] * bc[k];
                sa += fabs(arow[k] * bc[k]);
            }
            double e = fabs(pc[i * N + j] - s) / (sa > 0 ? sa : 1);
            if (e > worst) worst = e;
            maxdiff = fmax(maxdiff, fabs(pc[i * N + j] - s));
            maxref = fmax(maxref, fabs(s));
        }
    }
    free(bt);
    free(arow);
    matmul_norm_err = maxdiff / (maxref > 0 ? maxref : 1);
    return worst;
}

/* transposed, strided and narrowed operands (a, b: the [1024,128] x [128,4096] pair) */
static void check_matmul_views(xsa_rng *rng, const xsa_tensor *a, xsa_tensor *b)
{
    /* transposed views used in place: A^T and B^T from contiguous storage */
    xsa_tensor *at_src = xsa_tensor_randn(rng, 2, SH(37, 23), 0, 1); /* A^T stored */
    xsa_tensor *bt_src = xsa_tensor_randn(rng, 2, SH(19, 37), 0, 1); /* B^T stored */
    xsa_tensor *A = xsa_tensor_transpose(at_src, 0, 1);             /* [23,37] */
    xsa_tensor *Bm = xsa_tensor_transpose(bt_src, 0, 1);            /* [37,19] */
    xsa_tensor *c2 = xsa_tensor_matmul(A, Bm);
    CHECK(c2 && matmul_err(c2, A, Bm, 23, 37, 19) < 1e-5, "transposed-view operands");
    /* a non-unit-stride view that must be copied */
    xsa_tensor *wide = xsa_tensor_randn(rng, 2, SH(23, 74), 0, 1);
    xsa_tensor *ev = xsa_tensor_view(wide, 3, SH(23, 37, 2));
    xsa_tensor *evs = xsa_tensor_select(ev, 2, 1); /* [23,37] stride (74, 2) */
    xsa_tensor *c3 = xsa_tensor_matmul(evs, Bm);
    CHECK(c3 && matmul_err(c3, evs, Bm, 23, 37, 19) < 1e-5, "strided operand copied");
    /* a narrowed row block keeps its leading dimension */
    xsa_tensor *nr = xsa_tensor_narrow(b, 1, 100, 19); /* [128,19] with ld 4096 */
    xsa_tensor *c4 = xsa_tensor_matmul(a, nr);
    CHECK(c4 && matmul_err(c4, a, nr, 1024, 128, 19) < 1e-5, "narrowed operand with ld > cols");
    xsa_tensor *list[] = {at_src, bt_src, A, Bm, c2, wide, ev, evs, c3, nr, c4};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* errors and empties (ba [3,5,7], bc [3,5,4]: the batched case's) */
static void check_matmul_errors(const xsa_tensor *ba, const xsa_tensor *bc)
{
    xsa_tensor *e1 = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, 3));
    xsa_tensor *e2 = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(4, 5));
    CHECK_ERR(xsa_tensor_matmul(e1, e2) == NULL, "matmul: shapes [2,3] and [4,5] do not align");
    CHECK_ERR(xsa_tensor_matmul(ba, bc) == NULL, "matmul: shapes [3,5,7] and [3,5,4] do not align");
    xsa_tensor *v1 = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(3));
    CHECK_ERR(xsa_tensor_matmul(v1, e1) == NULL, "operands of 1 and 2 dimensions");
    xsa_tensor *ii = xsa_tensor_zeros(XSA_INT32, 2, SH(3, 2));
    CHECK_ERR(xsa_tensor_matmul(e1, ii) == NULL, "float32");
    xsa_tensor *k0a = xsa_tensor_ones(XSA_FLOAT32, 2, SH(2, 0)), *k0b = xsa_tensor_ones(XSA_FLOAT32, 2, SH(0, 3));
    xsa_tensor *k0 = xsa_tensor_matmul(k0a, k0b);
    CHECK(k0 && k0->shape[0] == 2 && k0->shape[1] == 3 && at(k0, 5) == 0, "K = 0 gives zeros");
    xsa_tensor *list[] = {e1, e2, v1, ii, k0a, k0b, k0};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* batched: [B,M,K]x[B,K,N] and [B,M,K]x[K,N], then the errors */
static void check_matmul_batched(xsa_rng *rng)
{
    /* batched: [B,M,K]x[B,K,N] and [B,M,K]x[K,N], including a transposed batch */
    xsa_tensor *ba = xsa_tensor_randn(rng, 3, SH(3, 5, 7), 0, 1);
    xsa_tensor *bb = xsa_tensor_randn(rng, 3, SH(3, 7, 4), 0, 1);
    xsa_tensor *bw = xsa_tensor_randn(rng, 2, SH(7, 6), 0, 1);
    xsa_tensor *bc = xsa_tensor_matmul(ba, bb);
    xsa_tensor *bc2 = xsa_tensor_matmul(ba, bw);
    xsa_tensor *bbT_src = xsa_tensor_randn(rng, 3, SH(3, 4, 7), 0, 1);
    xsa_tensor *bbT = xsa_tensor_transpose(bbT_src, 1, 2); /* [3,7,4] batched transposed view */
    xsa_tensor *bc3 = xsa_tensor_matmul(ba, bbT);
    CHECK(bc && bc->ndim == 3 && bc->shape[0] == 3 && bc->shape[2] == 4 && bc2->shape[2] == 6,
          "batched shapes");
    double worst = 0, worst2 = 0, worst3 = 0;
    for (int64_t i = 0; i < 3; i++) {
        xsa_tensor *ai = xsa_tensor_select(ba, 0, i), *bi = xsa_tensor_select(bb, 0, i);
        xsa_tensor *ci = xsa_tensor_select(bc, 0, i), *ci2 = xsa_tensor_select(bc2, 0, i);
        xsa_tensor *bti = xsa_tensor_select(bbT, 0, i), *ci3 = xsa_tensor_select(bc3, 0, i);
        xsa_tensor *cc = xsa_tensor_contiguous(ci), *cc2 = xsa_tensor_contiguous(ci2);
        xsa_tensor *cc3 = xsa_tensor_contiguous(ci3);
        worst = fmax(worst, matmul_err(cc, ai, bi, 5, 7, 4));
        worst2 = fmax(worst2, matmul_err(cc2, ai, bw, 5, 7, 6));
        worst3 = fmax(worst3, matmul_err(cc3, ai, bti, 5, 7, 4));
        xsa_tensor *l[] = {ai, bi, ci, ci2, bti, ci3, cc, cc2, cc3};
        for (int k = 0; k < 9; k++) xsa_tensor_free(l[k]);
    }
    CHECK(worst < 1e-5 && worst2 < 1e-5 && worst3 < 1e-5, "batched values %g %g %g", worst, worst2, worst3);
    /* [B,M,K]x[K,N] where A's batches are not evenly spaced (narrowed rows) */
    xsa_tensor *bn = xsa_tensor_narrow(ba, 1, 1, 3); /* [3,3,7] */
    xsa_tensor *bnc = xsa_tensor_matmul(bn, bw);
    xsa_tensor *bn1 = xsa_tensor_select(bn, 0, 2), *bnc1 = xsa_tensor_select(bnc, 0, 2);
    xsa_tensor *bnc1c = xsa_tensor_contiguous(bnc1);
    CHECK(matmul_err(bnc1c, bn1, bw, 3, 7, 6) < 1e-5, "batched with uneven batch stride");
    check_matmul_errors(ba, bc);
    xsa_tensor *list[] = {ba, bb, bw, bc, bc2, bbT_src, bbT, bc3, bn, bnc, bn1, bnc1, bnc1c};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_matmul(void)
{
    xsa_rng g;
    xsa_rng_seed(&g, 5);
    /* the size the issue asks for */
    xsa_tensor *a = xsa_tensor_randn(&g, 2, SH(1024, 128), 0, 1);
    xsa_tensor *b = xsa_tensor_randn(&g, 2, SH(128, 4096), 0, 1);
    xsa_tensor *c = xsa_tensor_matmul(a, b);
    CHECK(c && c->shape[0] == 1024 && c->shape[1] == 4096, "matmul shape");
    double err = matmul_err(c, a, b, 1024, 128, 4096);
    CHECK(err < 1e-4 && matmul_norm_err < 1e-4,
          "1024x128 x 128x4096 vs double loop: error %g of sum|a*b|, %g of max|c|", err,
          matmul_norm_err);
    printf("  matmul 1024x128x4096 vs double: max error %.2e of sum|a*b|, %.2e of max|c|\n", err,
           matmul_norm_err);
    check_matmul_views(&g, a, b);
    check_matmul_batched(&g);
    xsa_tensor *list[] = {a, b, c};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_allclose(void)
{
    xsa_tensor *a = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), 1.0);
    xsa_tensor *b = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), 1.0 + 1e-6);
    xsa_tensor *inf = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), INFINITY);
    xsa_tensor *nan = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), NAN);
    CHECK(xsa_tensor_allclose(a, b, 1e-5, 0) == 1 && xsa_tensor_allclose(a, b, 1e-7, 0) == 0,
          "allclose rtol");
    CHECK(xsa_tensor_allclose(a, b, 0, 1e-5) == 1, "allclose atol");
    CHECK(xsa_tensor_allclose(inf, inf, 0, 0) == 1 && xsa_tensor_allclose(inf, a, 1, 1) == 0,
          "equal infinities close");
    CHECK(xsa_tensor_allclose(nan, nan, 1, 1) == 0, "NaN never close");
    xsa_tensor_free(a);
    xsa_tensor_free(b);
    xsa_tensor_free(inf);
    xsa_tensor_free(nan);
}


int main(void)
{
    size_t base = xsa_storage_live_bytes();
    test_broadcast();
    test_int32();
    test_edges();
    test_reduce();
    test_softmax();
    test_matmul();
    test_allclose();
    /* a leak counts as a failure; test_tensor counts the passing check */
    if (xsa_storage_live_bytes() != base)
        CHECK(0, "no storage leaked: %zu bytes live", xsa_storage_live_bytes() - base);
    return check_done("test_tensor_ops");
}
