/*
 * optim.c: AdamW with PyTorch semantics (see optim.h for the formula and the
 * ordering; scalars are computed in double and applied in float, as torch's
 * CPU kernels do for float32 tensors). Non-goals: other optimizers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "optim.h"
#include "simd.h"
#include "system.h"

static int check_hyper(double lr, double b1, double b2, double eps, double wd)
{
    if (!isfinite(lr) || lr < 0) return xsa_error("adamw: lr %g must be finite and >= 0", lr);
    if (!isfinite(b1) || b1 < 0 || b1 >= 1)
        return xsa_error("adamw: beta1 %g is not in [0, 1)", b1);
    if (!isfinite(b2) || b2 < 0 || b2 >= 1)
        return xsa_error("adamw: beta2 %g is not in [0, 1)", b2);
    if (!isfinite(eps) || eps < 0) return xsa_error("adamw: eps %g must be finite and >= 0", eps);
    if (!isfinite(wd) || wd < 0)
        return xsa_error("adamw: weight_decay %g must be finite and >= 0", wd);
    return 0;
}

xsa_adamw *xsa_adamw_new(int n, xsa_tensor *const *params, double lr, double beta1,
                         double beta2, double eps, double weight_decay)
{
    if (n < 0 || (n > 0 && !params)) {
        xsa_error("adamw: bad parameter list");
        return NULL;
    }
    if (check_hyper(lr, beta1, beta2, eps, weight_decay) != 0) return NULL;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const xsa_tensor *p = params[i];
        if (!p || p->dtype != XSA_FLOAT32 || !xsa_tensor_is_contiguous(p)) {
            xsa_error("adamw: parameter %d is not a contiguous float32 tensor", i + 1);
            return NULL;
        }
        if (xsa_ckd_add_size(total, (size_t)xsa_tensor_numel(p), &total) ||
            total > (size_t)XSA_MAX_NUMEL) {
            xsa_error("adamw: the parameters hold more than %lld values in all",
                      (long long)XSA_MAX_NUMEL);
            return NULL;
        }
    }
    xsa_adamw *o = calloc(1, sizeof *o);
    if (!o) goto oom;
    o->n = n;
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    size_t k = n > 0 ? (size_t)n : 1;
    o->params = calloc(k, sizeof *o->params);
    o->m = calloc(k, sizeof *o->m);
    o->v = calloc(k, sizeof *o->v);
    o->steps = calloc(k, sizeof *o->steps);
    o->state = xsa_storage_new((2 * total > 0 ? 2 * total : 1) * sizeof(float));
    if (!o->params || !o->m || !o->v || !o->steps || !o->state) {
        xsa_adamw_free(o);
        goto oom;
    }
    float *base = o->state->data;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        xsa_tensor_retain(params[i]);
        o->params[i] = params[i];
        o->m[i] = base + off;
        o->v[i] = base + total + off;
        off += (size_t)xsa_tensor_numel(params[i]);
    }
    return o;
oom:
    xsa_error("adamw: out of memory");
    return NULL;
}

void xsa_adamw_free(xsa_adamw *o)
{
    if (!o) return;
    if (o->params)
        for (int i = 0; i < o->n; i++) xsa_tensor_free(o->params[i]);
    free(o->params);
    free(o->m);
    free(o->v);
    free(o->steps);
    xsa_storage_free(o->state);
    free(o);
}

int xsa_adamw_set_lr(xsa_adamw *o, double lr)
{
    if (check_hyper(lr, o->beta1, o->beta2, o->eps, o->weight_decay) != 0) return -1;
    o->lr = lr;
    return 0;
}

/* The update's float scalars (optim.h's formula). */
typedef struct {
    float decay, a1, b2, a2, step, bc2_sqrt, eps;
} adamw_hyper;

/* One vector of the update: separate multiplies and adds, no FMA, so each
 * lane computes exactly the scalar formula of optim.h and every SIMD width
 * (one lane in plain C) gives the same weights. */
static inline void adamw_lanes(float *w, const float *g, float *m, float *v, vmask k, int full,
                               const adamw_hyper *h)
{
    vf gk = full ? vf_load(g) : vf_load_mask(k, g), mk = full ? vf_load(m) : vf_load_mask(k, m);
    vf vk = full ? vf_load(v) : vf_load_mask(k, v);
    vf wk = vf_mul(full ? vf_load(w) : vf_load_mask(k, w), vf_set1(h->decay));
    mk = vf_add(mk, vf_mul(vf_set1(h->a1), vf_sub(gk, mk)));
    vk = vf_add(vf_mul(vk, vf_set1(h->b2)), vf_mul(vf_mul(vf_set1(h->a2), gk), gk));
    vf denom = vf_add(vf_div(vf_sqrt(vk), vf_set1(h->bc2_sqrt)), vf_set1(h->eps));
    wk = vf_sub(wk, vf_mul(vf_set1(h->step), vf_div(mk, denom)));
    if (full) {
        vf_store(w, wk);
        vf_store(m, mk);
        vf_store(v, vk);
    } else {
        vf_store_mask(w, k, wk);
        vf_store_mask(m, k, mk);
        vf_store_mask(v, k, vk);
    }
}

typedef struct {
    float *w, *m, *v;
    const float *g;
    size_t n;
    adamw_hyper h;
} adamw_range;

static void *adamw_run(void *arg)
{
    const adamw_range *r = arg;
    size_t k = 0, n = r->n;
    for (; k + VF_W <= n; k += VF_W)
        adamw_lanes(r->w + k, r->g + k, r->m + k, r->v + k, vf_mask(VF_W), 1, &r->h);
    if (k < n) adamw_lanes(r->w + k, r->g + k, r->m + k, r->v + k, vf_mask((int)(n - k)), 0, &r->h);
    return NULL;
}

/* Parameters of at least this many values (the tied wte) are updated in two
 * halves on two threads: the update is memory-bound (7 floats moved per
 * value) and one core does not draw the bandwidth two do. Each lane is the
 * same formula wherever the split falls: the same weights. */
#define ADAMW_SPLIT_MIN ((size_t)1 << 20)

static void adamw_apply(float *w, const float *g, float *m, float *v, size_t n, adamw_hyper h)
{
    size_t half = (n / 2 + 63) & ~(size_t)63;
    if (half > n) half = n; /* a small n: all in the first */
    adamw_range halves[2] = {{w, m, v, g, half, h}, {w + half, m + half, v + half, g + half, n - half, h}};
    xsa_run_halves(halves, sizeof halves[0], n >= ADAMW_SPLIT_MIN, adamw_run);
}

int xsa_adamw_step(xsa_adamw *o)
{
    /* validate everything first so a failure changes nothing */
    for (int i = 0; i < o->n; i++) {
        const xsa_tensor *p = o->params[i], *g = p->grad;
        if (!g) continue;
        if (g->dtype != XSA_FLOAT32 || !xsa_tensor_is_contiguous(g) || !xsa_tensor_same_shape(p, g)) {
            char a[64], b[64];
            return xsa_error("adamw step: parameter %d has shape %s but its gradient %s %s", i + 1,
                             xsa_shape_str(p->ndim, p->shape, a, sizeof a),
                             g->dtype == XSA_FLOAT32 ? "has shape" : "is not float32",
                             xsa_shape_str(g->ndim, g->shape, b, sizeof b));
        }
    }
    for (int i = 0; i < o->n; i++) {
        xsa_tensor *p = o->params[i];
        if (!p->grad) continue;
        long t = ++o->steps[i];
        xsa_storage_bump_version(p->storage); /* an in-place update (tensor.h) */
        float *w = xsa_tensor_f32(p);
        const float *g = xsa_tensor_f32(p->grad);
        float *m = o->m[i], *v = o->v[i];
        size_t n = (size_t)xsa_tensor_numel(p);
        float decay = (float)(1.0 - o->lr * o->weight_decay);
        float a1 = (float)(1.0 - o->beta1), b2 = (float)o->beta2, a2 = (float)(1.0 - o->beta2);
        double bc1 = 1.0 - pow(o->beta1, (double)t);
        double bc2 = 1.0 - pow(o->beta2, (double)t);
        float step_size = (float)(o->lr / bc1);
        float bc2_sqrt = (float)sqrt(bc2);
        float eps = (float)o->eps;
        adamw_apply(w, g, m, v, n,
                    (adamw_hyper){decay, a1, b2, a2, step_size, bc2_sqrt, eps});
    }
    return 0;
}

void xsa_adamw_zero_grad(xsa_adamw *o)
{
    for (int i = 0; i < o->n; i++) {
        xsa_tensor *g = o->params[i]->grad;
        if (g) xsa_tensor_fill_(g, 0.0);
    }
}
