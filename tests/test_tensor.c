/*
 * test_tensor.c: the tensor layer below the ops (core/storage.c, rng.c,
 * tensor.c, tensor_print.c) against values computed independently here:
 * views and their strides, the storage reuse cache, creation, a separate
 * reference xoshiro256** and splitmix64 for the RNG, exact PyTorch repr
 * strings for printing, and every error path of the tensor API with its
 * message. Storage must return to its baseline (no leaks).
 * Not here: element-wise ops, reductions, softmax, matmul, allclose
 * (test_tensor_ops.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_tensor.h" /* tensor.h, check.h and the shared helpers */

/* ---- storage and views ------------------------------------------------ */

/* the views test_views makes, freed together at its end (before the
 * baseline check) */
typedef struct {
    xsa_tensor *v, *t, *c, *r1, *r2, *big, *nb, *r3, *pm, *r4, *n2, *s1, *col, *cu, *ex, *sq, *sq2,
        *u0, *ec, *dst, *src, *sq3, *m3, *m3t;
} view_set;

/* a view shares its parent's storage and outlives it */
static void views_share(view_set *w, size_t base)
{
    xsa_tensor *a = xsa_tensor_arange(XSA_FLOAT32, 0, 6, 1);
    CHECK(xsa_storage_live_bytes() == base + 24, "arange(6) holds 24 bytes");
    xsa_tensor *v = xsa_tensor_view(a, 2, SH(2, -1));
    CHECK(v && v->storage == a->storage && v->shape[1] == 3, "view shares storage, infers -1");
    CHECK(a->storage->refcount == 2, "view holds a storage reference");
    xsa_tensor_set(v, (int64_t[]){1, 2}, 42);
    CHECK(xsa_tensor_f32(a)[5] == 42.0f, "write through a view reaches the parent");
    xsa_tensor_free(a); /* the view outlives its parent */
    CHECK(at2(v, 1, 2) == 42.0 && at2(v, 0, 1) == 1.0, "view valid after parent freed");
    CHECK(xsa_storage_live_bytes() == base + 24, "storage kept alive by the view");
    w->v = v;
}

/* transpose + contiguous; reshape: view when strides allow, copy otherwise */
static void views_transpose_reshape(view_set *w)
{
    xsa_tensor *v = w->v;
    xsa_tensor *t = xsa_tensor_transpose(v, 0, 1);
    CHECK(t->shape[0] == 3 && t->shape[1] == 2 && !xsa_tensor_is_contiguous(t), "transpose shape");
    xsa_tensor *c = xsa_tensor_contiguous(t);
    CHECK(c != t && xsa_tensor_is_contiguous(c) && c->storage != t->storage, "contiguous copies");
    int ok = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) ok &= at2(c, i, j) == at2(v, j, i);
    CHECK(ok, "transpose+contiguous values");
    xsa_tensor *c2 = xsa_tensor_contiguous(c);
    CHECK(c2 == c && c->refcount == 2, "contiguous of contiguous retains itself");
    xsa_tensor_free(c2);

    /* reshape: view when strides allow, copy otherwise */
    xsa_tensor *r1 = xsa_tensor_reshape(v, 1, SH(6));
    CHECK(r1 && r1->storage == v->storage, "reshape of contiguous is a view");
    xsa_tensor *r2 = xsa_tensor_reshape(t, 1, SH(-1));
    CHECK(r2 && r2->storage != t->storage && r2->shape[0] == 6, "reshape of transpose copies");
    ok = 1;
    for (int i = 0; i < 6; i++) ok &= at(r2, i) == at(c, i);
    CHECK(ok, "reshape copy values in row-major order");
    CHECK_ERR(xsa_tensor_view(t, 1, SH(6)) == NULL, "not contiguous");
    w->t = t, w->c = c, w->r1 = r1, w->r2 = r2;
}

/* reshape of a narrow and of a permute: views where the strides allow */
static void views_permute(view_set *w)
{
    xsa_tensor *big = seq(3, SH(4, 5, 6), 1, 0);
    xsa_tensor *nb = xsa_tensor_narrow(big, 0, 1, 2); /* [2,5,6], rows contiguous */
    xsa_tensor *r3 = xsa_tensor_reshape(nb, 2, SH(10, 6));
    CHECK(r3 && r3->storage == big->storage && r3->offset == 30, "reshape of a dim-0 narrow is a view");
    xsa_tensor *pm = xsa_tensor_permute(big, (int[]){2, 0, 1});
    CHECK(pm->shape[0] == 6 && pm->shape[1] == 4 && pm->shape[2] == 5 && pm->stride[0] == 1 &&
              pm->stride[1] == 30 && pm->stride[2] == 6, "permute shapes/strides");
    CHECK(at(pm, 1 * 20 + 2 * 5 + 3) == at(big, 2 * 30 + 3 * 6 + 1), "permute element");
    xsa_tensor *r4 = xsa_tensor_reshape(pm, 2, SH(6, 20)); /* dims 1,2 merge: still a view */
    CHECK(r4 && r4->storage == big->storage && r4->stride[0] == 1 && r4->stride[1] == 6,
          "reshape merging permuted-but-contiguous dims is a view");
    int ok = 1;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 20; j++) ok &= at2(r4, i, j) == at(big, j * 6 + i);
    CHECK(ok, "permute+reshape values");
    w->big = big, w->nb = nb, w->r3 = r3, w->pm = pm, w->r4 = r4;
}

/* narrow / select / expand / unsqueeze / squeeze */
static void views_narrow_expand(view_set *w)
{
    xsa_tensor *big = w->big;
    xsa_tensor *n2 = xsa_tensor_narrow(big, 2, 2, 3);
    CHECK(n2->shape[2] == 3 && n2->offset == 2 && at(n2, 4) == at(big, 1 * 6 + 3), "narrow");
    xsa_tensor *s1 = xsa_tensor_select(big, 1, 3);
    CHECK(s1->ndim == 2 && s1->shape[0] == 4 && s1->shape[1] == 6 && at2(s1, 2, 5) == at(big, 2 * 30 + 3 * 6 + 5),
          "select");
    xsa_tensor *col = xsa_tensor_arange(XSA_FLOAT32, 0, 3, 1);
    xsa_tensor *cu = xsa_tensor_unsqueeze(col, 1); /* [3,1] */
    xsa_tensor *ex = xsa_tensor_expand(cu, 3, SH(2, -1, 4));
    CHECK(ex && ex->ndim == 3 && ex->shape[0] == 2 && ex->shape[1] == 3 && ex->shape[2] == 4 &&
              ex->stride[0] == 0 && ex->stride[2] == 0, "expand strides");
    int ok = 1;
    for (int i = 0; i < 24; i++) ok &= at(ex, i) == (double)((i / 4) % 3);
    CHECK(ok, "expand values");
    CHECK_ERR(xsa_tensor_fill_(ex, 1) < 0, "expanded");
    CHECK_ERR(xsa_tensor_binary_scalar_(XSA_ADD, ex, 1) < 0, "expanded");
    xsa_tensor *sq = xsa_tensor_squeeze(cu, 1);
    CHECK(sq->ndim == 1 && sq->shape[0] == 3, "squeeze");
    xsa_tensor *sq2 = xsa_tensor_squeeze(cu, 0); /* size 3: no-op */
    CHECK(sq2->ndim == 2, "squeeze of a non-1 dim is a no-op");
    xsa_tensor *u0 = xsa_tensor_unsqueeze(col, -1);
    CHECK(u0->ndim == 2 && u0->shape[1] == 1, "unsqueeze -1 appends");
    xsa_tensor *ec = xsa_tensor_clone(ex);
    CHECK(ec && xsa_tensor_is_contiguous(ec) && at(ec, 23) == 2.0, "clone of expanded");
    w->n2 = n2, w->s1 = s1, w->col = col, w->cu = cu, w->ex = ex, w->sq = sq, w->sq2 = sq2;
    w->u0 = u0, w->ec = ec;
}

/* copy_ with broadcasting and dtype conversion; overlap */
static void views_copy(view_set *w)
{
    xsa_tensor *dst = xsa_tensor_zeros(XSA_INT32, 2, SH(2, 3));
    xsa_tensor *src = xsa_tensor_arange(XSA_FLOAT32, 0.5, 3, 1); /* 0.5 1.5 2.5 */
    CHECK(xsa_tensor_copy_(dst, src) == 0 && at2(dst, 1, 2) == 2.0 && at2(dst, 0, 1) == 1.0,
          "copy_ broadcasts and truncates to int32");
    xsa_tensor *sq3 = xsa_tensor_arange(XSA_FLOAT32, 0, 9, 1);
    xsa_tensor *m3 = xsa_tensor_view(sq3, 2, SH(3, 3));
    xsa_tensor *m3t = xsa_tensor_transpose(m3, 0, 1);
    CHECK(xsa_tensor_copy_(m3, m3t) == 0 && at2(m3, 0, 1) == 3 && at2(m3, 1, 0) == 1 && at2(m3, 2, 1) == 5,
          "copy_ from an overlapping transpose");
    w->dst = dst, w->src = src, w->sq3 = sq3, w->m3 = m3, w->m3t = m3t;
}

static void test_views(void)
{
    size_t base = xsa_storage_live_bytes();
    view_set w;
    views_share(&w, base);
    views_transpose_reshape(&w);
    views_permute(&w);
    views_narrow_expand(&w);
    views_copy(&w);
    xsa_tensor *list[] = {w.v, w.t, w.c, w.r1, w.r2, w.big, w.nb, w.r3, w.pm, w.r4, w.n2, w.s1,
                          w.col, w.cu, w.ex, w.sq, w.sq2, w.u0, w.ec, w.dst, w.src, w.sq3, w.m3,
                          w.m3t};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
    CHECK(xsa_storage_live_bytes() == base, "live bytes back to baseline (%zu vs %zu)",
          xsa_storage_live_bytes(), base);

    /* from_storage */
    xsa_storage *st = xsa_storage_new(40);
    CHECK(st && xsa_storage_live_bytes() == base + 40, "storage_new counts bytes");
    xsa_tensor *fs = xsa_tensor_from_storage(st, XSA_FLOAT32, 2, SH(2, 4), 2);
    CHECK(fs && fs->offset == 2 && st->refcount == 2 && at(fs, 7) == 0.0, "from_storage");
    CHECK_ERR(xsa_tensor_from_storage(st, XSA_FLOAT32, 2, SH(2, 5), 1) == NULL, "does not fit a storage of 10 elements");
    xsa_storage_free(st);
    xsa_tensor_free(fs);
    CHECK(xsa_storage_live_bytes() == base, "from_storage released");
}

/* ---- lifetime details: the large-buffer cache and the grad/grad_fn hook --- */

static int hook_calls;
static void count_release(struct xsa_ag_node *n)
{
    (void)n;
    hook_calls++;
}

static void test_lifetime(void)
{
    size_t base = xsa_storage_live_bytes();
    xsa_storage_cache_clear();
    CHECK(xsa_storage_cached_bytes() == 0, "cache empty after clear");
    xsa_tensor *big = xsa_tensor_full(XSA_FLOAT32, 1, SH(600000), 7.0); /* 2.4 MB */
    xsa_tensor_free(big);
    size_t cached = xsa_storage_cached_bytes();
    /* sanitizer builds bypass the cache (0); others keep the block */
    CHECK(cached == 0 || cached == 2400000, "freed big block cached (%zu)", cached);
    CHECK(xsa_storage_live_bytes() == base, "cached bytes are not live");
    xsa_tensor *z = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(600000));
    CHECK(xsa_storage_cached_bytes() == 0, "same-size request reuses the cached block");
    xsa_tensor *mx = xsa_tensor_reduce(XSA_MAX, z, XSA_ALL_DIMS, 0);
    CHECK(at(mx, 0) == 0.0, "a reused block is zero-filled for zeros()");
    xsa_tensor_free(mx);
    xsa_tensor *other = xsa_tensor_ones(XSA_FLOAT32, 1, SH(300000));
    xsa_tensor_free(other);
    xsa_tensor_free(z);
    CHECK(cached == 0 || xsa_storage_cached_bytes() == 3600000, "two blocks cached");
    xsa_storage_cache_clear();
    CHECK(xsa_storage_cached_bytes() == 0, "cache cleared");
    /* many frees: the cache stays within its slot count */
    for (int i = 0; i < 20; i++) {
        xsa_tensor *t = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(262144 + i)); /* distinct sizes */
        xsa_tensor_free(t);
    }
    CHECK(xsa_storage_cached_bytes() <= 8 * 4 * (size_t)(262144 + 20), "cache bounded by its slots");
    xsa_storage_cache_clear();

    /* the last reference drops ->grad and calls the grad_fn hook */
    void (*saved)(struct xsa_ag_node *) = xsa_tensor_grad_fn_release;
    xsa_tensor_grad_fn_release = count_release;
    hook_calls = 0;
    xsa_tensor *t = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(4));
    t->grad = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(4));
    t->grad_fn = (struct xsa_ag_node *)&hook_calls; /* any non-NULL marker */
    xsa_tensor_retain(t);
    xsa_tensor_free(t);
    CHECK(hook_calls == 0 && xsa_storage_live_bytes() == base + 32, "retain keeps it alive");
    xsa_tensor_free(t);
    CHECK(hook_calls == 1 && xsa_storage_live_bytes() == base, "free drops grad and grad_fn");
    xsa_tensor_grad_fn_release = saved;
    xsa_tensor_free(NULL); /* allowed */
}

/* ---- creation --------------------------------------------------------- */

static void test_creation(void)
{
    xsa_tensor *z = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, 3));
    xsa_tensor *o = xsa_tensor_ones(XSA_INT32, 1, SH(4));
    xsa_tensor *f = xsa_tensor_full(XSA_FLOAT32, 0, NULL, 2.5);
    CHECK(at(z, 5) == 0 && at(o, 3) == 1 && o->dtype == XSA_INT32 && at(f, 0) == 2.5 &&
              xsa_tensor_numel(f) == 1, "zeros/ones/full");
    xsa_tensor *ar = xsa_tensor_arange(XSA_FLOAT32, 1, 2, 0.25);
    CHECK(ar->shape[0] == 4 && at(ar, 3) == 1.75, "arange fractional step");
    xsa_tensor *ad = xsa_tensor_arange(XSA_INT32, 5, 0, -2);
    CHECK(ad->shape[0] == 3 && at(ad, 2) == 1 && ad->dtype == XSA_INT32, "arange negative step");
    xsa_tensor *e = xsa_tensor_arange(XSA_FLOAT32, 3, 3, 1);
    CHECK(e && e->shape[0] == 0, "empty arange");
    xsa_tensor *h = xsa_tensor_full(XSA_FLOAT32, 1, SH(3), -1.5);
    xsa_tensor *hi = xsa_tensor_to_dtype(h, XSA_INT32);
    CHECK(hi->dtype == XSA_INT32 && at(hi, 0) == -1, "to_dtype truncates toward zero");
    xsa_tensor *hf = xsa_tensor_to_dtype(o, XSA_FLOAT32);
    CHECK(hf->dtype == XSA_FLOAT32 && at(hf, 2) == 1.0, "to_dtype int->float");
    CHECK(xsa_tensor_f32(o) == NULL && has(xsa_last_error(), "int32"), "f32 on int32 refuses");
    CHECK(xsa_tensor_i32(z) == NULL && has(xsa_last_error(), "float32"), "i32 on float32 refuses");
    CHECK(strcmp(xsa_dtype_name(XSA_INT32), "int32") == 0 && xsa_dtype_size(XSA_FLOAT32) == 4,
          "dtype facts");
    char buf[32];
    CHECK(strcmp(xsa_shape_str(3, SH(2, 30, 4), buf, sizeof buf), "[2,30,4]") == 0, "shape_str");
    CHECK(strcmp(xsa_shape_str(0, NULL, buf, sizeof buf), "[]") == 0, "shape_str 0-d");
    char tiny[5];
    xsa_shape_str(3, SH(2, 30, 4), tiny, sizeof tiny);
    CHECK(strlen(tiny) == 4, "shape_str truncates safely");
    xsa_tensor *list[] = {z, o, f, ar, ad, e, h, hi, hf};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* ---- RNG -------------------------------------------------------------- */

/* An independent reference: Vigna's xoshiro256** and splitmix64. */
static uint64_t ref_sm(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
static uint64_t ref_rotl(const uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t ref_next(uint64_t s[4])
{
    const uint64_t result = ref_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return result;
}

/* fill_ with zero takes memset: only the view's own elements, +0.0 (and
 * -0.0 its sign), int32 0 */
static void test_fill_zero(void)
{
    xsa_tensor *a = xsa_tensor_full(XSA_FLOAT32, 2, SH(4, 5), 7.0);
    xsa_tensor *mid = xsa_tensor_narrow(a, 0, 1, 2); /* rows 1-2: contiguous, offset 5 */
    CHECK(mid && xsa_tensor_fill_(mid, 0.0) == 0, "fill_ 0 on a row view");
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= at(a, i) == (i >= 5 && i < 15 ? 0.0 : 7.0);
    CHECK(ok, "fill_ 0 writes the view's rows and nothing else");
    CHECK(xsa_tensor_fill_(mid, -0.0) == 0 && signbit(at(a, 5)) && signbit(at(a, 14)) &&
              at(a, 15) == 7.0, "fill_ -0.0 keeps its sign, within the view");
    xsa_tensor *col = xsa_tensor_narrow(a, 1, 2, 1); /* strided */
    CHECK(col && xsa_tensor_fill_(col, 0.0) == 0 && at(a, 2) == 0.0 && at(a, 17) == 0.0 && at(a, 3) == 7.0,
          "fill_ 0 on a strided view");
    xsa_tensor *n = xsa_tensor_full(XSA_INT32, 1, SH(6), -3);
    xsa_tensor *nv = xsa_tensor_narrow(n, 0, 2, 3);
    CHECK(nv && xsa_tensor_fill_(nv, 0) == 0 && at(n, 1) == -3 && at(n, 2) == 0 && at(n, 4) == 0 &&
              at(n, 5) == -3, "int32 fill_ 0 within its view");
    xsa_tensor_free(col);
    xsa_tensor_free(mid);
    xsa_tensor_free(a);
    xsa_tensor_free(nv);
    xsa_tensor_free(n);
}

/* known answers, the reference stream, the global generator's seed */
static void rng_known_answers(void)
{
    xsa_rng g, h;
    /* computed by a separate reference (Python) for seed 42 */
    xsa_rng_seed(&g, 42);
    CHECK(xsa_rng_next(&g) == UINT64_C(0x15780b2e0c2ec716) &&
              xsa_rng_next(&g) == UINT64_C(0x6104d9866d113a7e) &&
              xsa_rng_next(&g) == UINT64_C(0xae17533239e499a1) &&
              xsa_rng_next(&g) == UINT64_C(0xecb8ad4703b360a1), "xoshiro256** known answers, seed 42");
    for (uint64_t seed = 0; seed < 5; seed++) {
        uint64_t rs[4], x = seed * 1000003u;
        for (int i = 0; i < 4; i++) rs[i] = ref_sm(&x);
        xsa_rng_seed(&g, seed * 1000003u);
        int bad = 0;
        for (int i = 0; i < 1000; i++) bad += xsa_rng_next(&g) != ref_next(rs);
        CHECK(bad == 0, "stream matches the reference for seed %llu", (unsigned long long)seed);
    }
    /* the global generator starts at seed 0 */
    xsa_rng_seed(&h, 0);
    CHECK(xsa_rng_global()->s[0] == h.s[0] && xsa_rng_global()->s[3] == h.s[3],
          "global generator seeded with 0");
}

/* determinism and independence; uniform doubles; Box-Muller's pairs */
static void rng_determinism(void)
{
    xsa_rng g, h;
    xsa_rng_seed(&g, 7);
    xsa_rng_seed(&h, 7);
    xsa_tensor *t1 = xsa_tensor_randn(&g, 1, SH(100), 0, 1);
    xsa_rng other;
    xsa_rng_seed(&other, 8);
    xsa_tensor *tother = xsa_tensor_randn(&other, 1, SH(50), 0, 1); /* does not disturb h */
    xsa_tensor *t2 = xsa_tensor_randn(&h, 1, SH(100), 0, 1);
    CHECK(xsa_tensor_allclose(t1, t2, 0, 0) == 1, "same seed, same normals");
    CHECK(at(tother, 0) != at(t1, 0), "different seed, different numbers");
    /* uniform double = top 53 bits */
    xsa_rng_seed(&g, 3);
    xsa_rng_seed(&h, 3);
    double u = xsa_rng_uniform(&g);
    CHECK(u == (double)(xsa_rng_next(&h) >> 11) / 9007199254740992.0, "uniform is next >> 11 * 2^-53");
    /* Box-Muller with a cached spare: two normals per two uniforms */
    xsa_rng_seed(&g, 11);
    xsa_rng_seed(&h, 11);
    double n1 = xsa_rng_normal(&g), n2 = xsa_rng_normal(&g);
    double u1 = 1.0 - xsa_rng_uniform(&h), u2 = xsa_rng_uniform(&h);
    double r = sqrt(-2 * log(u1));
    CHECK(fabs(n1 - r * cos(2 * M_PI * u2)) < 1e-12 && fabs(n2 - r * sin(2 * M_PI * u2)) < 1e-12,
          "Box-Muller pair from two uniforms");
    CHECK(g.s[0] == h.s[0], "the spare consumed no draws");
    xsa_tensor *list[] = {t1, t2, tother};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* the distributions: normals, uniforms, randint, a huge int range; bad arguments */
static void rng_distributions(void)
{
    xsa_rng g;
    /* statistics of 1e5 normals */
    xsa_rng_seed(&g, 123);
    xsa_tensor *nn = xsa_tensor_randn(&g, 1, SH(100000), 0, 1);
    xsa_tensor *m = xsa_tensor_reduce(XSA_MEAN, nn, XSA_ALL_DIMS, 0);
    xsa_tensor *v = xsa_tensor_reduce(XSA_VAR, nn, XSA_ALL_DIMS, 0);
    CHECK(fabs(at(m, 0)) < 0.015 && fabs(sqrt(at(v, 0)) - 1) < 0.015, "normal mean %g std %g",
          at(m, 0), sqrt(at(v, 0)));
    xsa_tensor *n2t = xsa_tensor_randn(&g, 1, SH(100000), 3, 0.5);
    xsa_tensor *m2 = xsa_tensor_reduce(XSA_MEAN, n2t, XSA_ALL_DIMS, 0);
    xsa_tensor *v2 = xsa_tensor_reduce(XSA_VAR, n2t, XSA_ALL_DIMS, 0);
    CHECK(fabs(at(m2, 0) - 3) < 0.01 && fabs(sqrt(at(v2, 0)) - 0.5) < 0.01, "randn mean/std args");
    /* uniform in [0,1) */
    xsa_tensor *un = xsa_tensor_rand(&g, 1, SH(100000));
    xsa_tensor *umin = xsa_tensor_reduce(XSA_MIN, un, XSA_ALL_DIMS, 0);
    xsa_tensor *umax = xsa_tensor_reduce(XSA_MAX, un, XSA_ALL_DIMS, 0);
    xsa_tensor *umean = xsa_tensor_reduce(XSA_MEAN, un, XSA_ALL_DIMS, 0);
    CHECK(at(umin, 0) >= 0 && at(umax, 0) < 1 && fabs(at(umean, 0) - 0.5) < 0.005, "rand in [0,1)");
    int below = 1;
    for (int i = 0; i < 100000; i++) {
        double d = xsa_rng_uniform(&g);
        below &= d >= 0 && d < 1;
    }
    CHECK(below, "uniform doubles in [0,1)");
    /* randint range and fairness (chi-square over 10 bins) */
    xsa_tensor *ri = xsa_tensor_randint(&g, -5, 5, 1, SH(100000));
    int cnt[10] = {0}, out = 0;
    for (int i = 0; i < 100000; i++) {
        int k = (int)at(ri, i);
        if (k < -5 || k >= 5) out++;
        else cnt[k + 5]++;
    }
    double chi = 0;
    for (int i = 0; i < 10; i++) chi += (cnt[i] - 10000.0) * (cnt[i] - 10000.0) / 10000.0;
    CHECK(ri->dtype == XSA_INT32 && out == 0 && chi < 27.9, "randint range/fairness (chi2 %g)", chi);
    /* a range that does not divide 2^64: the rejection rule is applied */
    int64_t lo = 0, hi = ((int64_t)1 << 62) + 1;
    int okr = 1;
    for (int i = 0; i < 1000; i++) {
        int64_t k = xsa_rng_int(&g, lo, hi);
        okr &= k >= lo && k < hi;
    }
    CHECK(okr, "rng_int on a huge range stays in range");
    CHECK_ERR(xsa_tensor_randint(&g, 3, 3, 1, SH(2)) == NULL, "randint: range [3, 3)");
    CHECK_ERR(xsa_tensor_randn(&g, 1, SH(2), 0, -1) == NULL, "randn: mean 0 and std -1");
    xsa_tensor *list[] = {nn, m, v, n2t, m2, v2, un, umin, umax, umean, ri};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

static void test_rng(void)
{
    rng_known_answers();
    rng_determinism();
    rng_distributions();
}

/* ---- errors ----------------------------------------------------------- */

static void test_errors(void)
{
    xsa_tensor *t = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(3));
    xsa_tensor *m = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, 3));
    double v;
    CHECK_ERR(xsa_tensor_get(t, SH(5), &v) < 0, "get: index 5 out of range for dimension 0 of size 3");
    CHECK_ERR(xsa_tensor_set(m, SH(1, -1), 1) < 0, "set: index -1 out of range for dimension 1 of size 3");
    CHECK_ERR(xsa_tensor_get(NULL, SH(0), &v) < 0, "get: argument t is NULL");
    CHECK_ERR(xsa_tensor_binary(XSA_ADD, NULL, t) == NULL, "add: argument a is NULL");
    CHECK_ERR(xsa_tensor_binary(XSA_MUL, t, NULL) == NULL, "mul: argument b is NULL");
    CHECK_ERR(xsa_tensor_unary(XSA_EXP, NULL) == NULL, "exp: argument a is NULL");
    CHECK_ERR(xsa_tensor_reduce(XSA_SUM, NULL, 0, 0) == NULL, "sum: argument a is NULL");
    CHECK_ERR(xsa_tensor_matmul(NULL, m) == NULL, "matmul: argument a is NULL");
    CHECK_ERR(xsa_tensor_clone(NULL) == NULL, "clone: argument t is NULL");
    CHECK_ERR(xsa_tensor_format(NULL) == NULL, "format: argument t is NULL");
    CHECK_ERR(xsa_tensor_view(NULL, 1, SH(3)) == NULL, "view: argument t is NULL");
    CHECK_ERR(xsa_tensor_copy_(t, NULL) < 0, "copy_: argument src is NULL");
    CHECK_ERR(xsa_tensor_where(NULL, t, t) == NULL, "where: argument cond is NULL");
    CHECK_ERR(xsa_tensor_allclose(t, NULL, 0, 0) < 0, "allclose: argument b is NULL");
    CHECK_ERR(xsa_tensor_softmax(NULL, 0) == NULL, "softmax: argument a is NULL");
    /* dims */
    CHECK_ERR(xsa_tensor_reduce(XSA_SUM, m, 2, 0) == NULL, "sum: dim 2 is out of range for 2 dims");
    CHECK_ERR(xsa_tensor_reduce(XSA_MEAN, m, -3, 0) == NULL, "mean: dim -3 is out of range");
    CHECK_ERR(xsa_tensor_transpose(m, 0, 2) == NULL, "transpose: dim 2 is out of range");
    CHECK_ERR(xsa_tensor_permute(m, (int[]){0, 0}) == NULL, "permute: dim 0 appears twice");
    CHECK_ERR(xsa_tensor_narrow(m, 1, 2, 2) == NULL, "narrow: start 2 and length 2 are out of range for dimension 1 of size 3");
    CHECK_ERR(xsa_tensor_select(m, 0, 2) == NULL, "select: index 2 out of range for dimension 0 of size 2");
    CHECK_ERR(xsa_tensor_unsqueeze(m, 3) == NULL, "unsqueeze: dim 3 is out of range");
    CHECK_ERR(xsa_tensor_squeeze(m, 5) == NULL, "squeeze: dim 5 is out of range");
    CHECK_ERR(xsa_tensor_expand(m, 2, SH(3, 3)) == NULL, "expand: shape [2,3] cannot expand to [3,3]");
    CHECK_ERR(xsa_tensor_log_softmax(m, -3) == NULL, "log_softmax: dim -3");
    /* shapes and sizes */
    CHECK_ERR(xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, -1)) == NULL, "zeros: negative size -1 in shape [2,-1]");
    CHECK_ERR(xsa_tensor_new(XSA_FLOAT32, 9, SH(1, 1, 1, 1, 1, 1, 1, 1, 1)) == NULL, "9 dims is not in [0, 8]");
    CHECK_ERR(xsa_tensor_ones(XSA_FLOAT32, 2, SH((int64_t)1 << 20, (int64_t)1 << 20)) == NULL,
              "ones: shape [1048576,1048576] has more than");
    CHECK_ERR(xsa_tensor_zeros(XSA_FLOAT32, 3, SH(INT64_MAX / 2, 4, 4)) == NULL, "has more than");
    CHECK_ERR(xsa_tensor_full(XSA_FLOAT32, 2, SH((int64_t)1 << 32, (int64_t)1 << 32), 1) == NULL,
              "has more than");
    CHECK_ERR(xsa_tensor_zeros((xsa_dtype)7, 1, SH(2)) == NULL, "zeros: invalid dtype 7");
    CHECK_ERR(xsa_tensor_view(m, 2, SH(4, -1)) == NULL, "view: shape [4,-1] is invalid for a tensor of 6 elements");
    CHECK_ERR(xsa_tensor_view(m, 2, SH(-1, -1)) == NULL, "only one dimension can be -1");
    CHECK_ERR(xsa_tensor_reshape(m, 1, SH(7)) == NULL, "reshape: shape [7] is invalid for a tensor of 6 elements");
    CHECK_ERR(xsa_tensor_copy_(t, m) < 0, "copy_: source shape [2,3] does not broadcast to destination shape [3]");
    CHECK_ERR(xsa_tensor_arange(XSA_FLOAT32, 0, 1, 0) == NULL, "arange: step must be nonzero");
    CHECK_ERR(xsa_tensor_arange(XSA_FLOAT32, 0, 10, -1) == NULL, "arange: step -1 goes away");
    CHECK_ERR(xsa_tensor_arange(XSA_FLOAT32, 0, 1e12, 1) == NULL, "arange: 1e+12 elements");
    CHECK_ERR(xsa_tensor_allclose(t, m, 0, 0) < 0, "allclose: shapes [3] and [2,3] differ");
    CHECK_ERR(xsa_tensor_binary((xsa_binop)99, t, t) == NULL, "invalid op 99");
    CHECK_ERR(xsa_tensor_clamp(t, NAN, 1) == NULL, "clamp: bounds");
#if !defined(__SANITIZE_ADDRESS__)
    /* 64 GB: refused by the kernel's overcommit heuristic on a normal
     * machine (sanitizer allocators abort instead of returning NULL) */
    xsa_clear_error();
    xsa_tensor *huge = xsa_tensor_zeros(XSA_FLOAT32, 1, SH(XSA_MAX_NUMEL));
    if (!huge) CHECK(has(xsa_last_error(), "zeros: out of memory allocating 68719476736 bytes"),
                     "malloc failure message: %s", xsa_last_error());
    xsa_tensor_free(huge);
#endif
    xsa_tensor *list[] = {t, m};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) xsa_tensor_free(list[i]);
}

/* ---- printing (strings as PyTorch 2.x prints the same values) --------- */

static void check_fmt(const xsa_tensor *t, const char *want)
{
    char *s = xsa_tensor_format(t);
    CHECK(s && strcmp(s, want) == 0, "format:\n%s\nwanted:\n%s", s ? s : "(null)", want);
    free(s);
}

/* scalars, vectors, matrices, int32, the number styles, empty tensors */
static void format_basic(void)
{
    xsa_tensor *t;
    t = from_vals(XSA_FLOAT32, 2, SH(2, 2), (double[]){1, 2, 3, 4});
    check_fmt(t, "tensor([[1., 2.],\n        [3., 4.]])");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 1, SH(3), (double[]){1.5, -2.25, 3});
    check_fmt(t, "tensor([ 1.5000, -2.2500,  3.0000])");
    xsa_tensor_free(t);
    t = from_vals(XSA_INT32, 1, SH(3), (double[]){1, -20, 3});
    check_fmt(t, "tensor([  1, -20,   3], dtype=int32)");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 0, NULL, (double[]){3.5});
    check_fmt(t, "tensor(3.5000)");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 1, SH(2), (double[]){1e-5, 1});
    check_fmt(t, "tensor([1.0000e-05, 1.0000e+00])");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 1, SH(3), (double[]){0, NAN, -INFINITY});
    check_fmt(t, "tensor([0., nan, -inf])");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 1, SH(2), (double[]){0.1, 1000});
    check_fmt(t, "tensor([1.0000e-01, 1.0000e+03])");
    xsa_tensor_free(t);
    t = from_vals(XSA_FLOAT32, 1, SH(2), (double[]){0.5, 100});
    check_fmt(t, "tensor([  0.5000, 100.0000])");
    xsa_tensor_free(t);
    t = xsa_tensor_zeros(XSA_FLOAT32, 3, SH(2, 1, 2));
    check_fmt(t, "tensor([[[0., 0.]],\n\n        [[0., 0.]]])");
    xsa_tensor_free(t);
    t = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(0, 3));
    check_fmt(t, "tensor([], size=(0, 3))");
    xsa_tensor_free(t);
    t = xsa_tensor_zeros(XSA_INT32, 1, SH(0));
    check_fmt(t, "tensor([], dtype=int32)");
    xsa_tensor_free(t);
}

/* empty tensors with huge dims: printed, and no size product may overflow */
static void format_huge_empty(void)
{
    xsa_tensor *t;
    t = xsa_tensor_zeros(XSA_FLOAT32, 8, SH(XSA_MAX_NUMEL, XSA_MAX_NUMEL, XSA_MAX_NUMEL, XSA_MAX_NUMEL,
                                            XSA_MAX_NUMEL, XSA_MAX_NUMEL, XSA_MAX_NUMEL, 0));
    check_fmt(t, "tensor([],\n       size=(17179869184, 17179869184, 17179869184, 17179869184, "
                 "17179869184, 17179869184, 17179869184, 0))");
    {
        xsa_tensor *c = xsa_tensor_clone(t), *s1 = xsa_tensor_reduce(XSA_SUM, t, 0, 0);
        xsa_tensor *s2 = xsa_tensor_binary(XSA_ADD, t, c), *s3 = xsa_tensor_softmax(t, 3);
        xsa_tensor *s4 = xsa_tensor_reshape(t, 2, SH(0, -1));
        CHECK(c && s1 && s2 && s3 && xsa_tensor_numel(s1) == 0 && xsa_tensor_is_contiguous(t),
              "ops on an empty tensor with huge dims: %s", xsa_last_error());
        CHECK(s4 == NULL, "reshape [0,-1] of an empty tensor is ambiguous");
        xsa_tensor_free(c);
        xsa_tensor_free(s1);
        xsa_tensor_free(s2);
        xsa_tensor_free(s3);
    }
    xsa_tensor_free(t);
}

/* elision: numel > 1000, in 1, 2 and 3 dimensions */
static void format_elision(void)
{
    xsa_tensor *t;
    t = xsa_tensor_arange(XSA_INT32, 0, 10000, 1);
    check_fmt(t, "tensor([   0,    1,    2,  ..., 9997, 9998, 9999], dtype=int32)");
    xsa_tensor_free(t);
    t = xsa_tensor_arange(XSA_FLOAT32, 0, 2000, 1);
    check_fmt(t, "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
                 "        1.9990e+03])");
    xsa_tensor_free(t);
    xsa_tensor *r = xsa_tensor_arange(XSA_INT32, 0, 1200, 1);
    t = xsa_tensor_view(r, 2, SH(40, 30));
    check_fmt(t, "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
                 "        [  30,   31,   32,  ...,   57,   58,   59],\n"
                 "        [  60,   61,   62,  ...,   87,   88,   89],\n"
                 "        ...,\n"
                 "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
                 "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
                 "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]], dtype=int32)");
    xsa_tensor_free(t);
    xsa_tensor_free(r);
    r = xsa_tensor_arange(XSA_FLOAT32, 0, 1008, 1);
    xsa_tensor *r2 = xsa_tensor_binary_scalar(XSA_DIV, r, 1000, 0);
    t = xsa_tensor_view(r2, 3, SH(8, 2, 63));
    char *s = xsa_tensor_format(t);
    const char *head = "tensor([[[0.0000e+00, 1.0000e-03, 2.0000e-03,  ..., 6.0000e-02,\n"
                       "          6.1000e-02, 6.2000e-02],\n"
                       "         [6.3000e-02,";
    CHECK(s && strncmp(s, head, strlen(head)) == 0 &&
              strstr(s, "]],\n\n        [[1.2600e-01,") && strstr(s, "]],\n\n        ...,\n\n        [[6.3000e-01,") &&
              strstr(s, "1.0070e+00]]])"),
          "3-d elision:\n%s", s ? s : "(null)");
    free(s);
    xsa_tensor_free(t);
    xsa_tensor_free(r2);
    xsa_tensor_free(r);
}

static void test_format(void)
{
    format_basic();
    format_huge_empty();
    /* a strided view prints its logical order */
    xsa_tensor *m = from_vals(XSA_FLOAT32, 2, SH(2, 3), (double[]){1, 2, 3, 4, 5, 6});
    xsa_tensor *mt = xsa_tensor_transpose(m, 0, 1);
    check_fmt(mt, "tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])");
    xsa_tensor_free(mt);
    xsa_tensor_free(m);
    /* wrapping at 80 columns */
    xsa_tensor *t = xsa_tensor_arange(XSA_FLOAT32, 0, 1, 0.05);
    check_fmt(t, "tensor([0.0000, 0.0500, 0.1000, 0.1500, 0.2000, 0.2500, 0.3000, 0.3500, 0.4000,\n"
                 "        0.4500, 0.5000, 0.5500, 0.6000, 0.6500, 0.7000, 0.7500, 0.8000, 0.8500,\n"
                 "        0.9000, 0.9500])");
    xsa_tensor_free(t);
    format_elision();
}

int main(void)
{
    size_t base = xsa_storage_live_bytes();
    test_views();
    test_lifetime();
    test_creation();
    test_fill_zero();
    test_rng();
    test_errors();
    test_format();
    CHECK(xsa_storage_live_bytes() == base, "no storage leaked: %zu bytes live", xsa_storage_live_bytes() - base);
    return check_done("test_tensor");
}
