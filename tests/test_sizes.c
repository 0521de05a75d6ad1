/*
 * test_sizes.c: sizes computed from user-supplied numbers near the int64
 * limits: the checked helpers of core/ckd.h, tensor shapes, views and cat,
 * the data loader's window arithmetic, and the GPT batch size. Each must be
 * a clean error (or the right result), never a wrapped size; the sanitizer
 * build (make asan, with -fsanitize=undefined) turns any signed overflow
 * left on these paths into a failure.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "../core/ckd.h"
#include "../core/xsa.h"
#include "check_tensor.h"

static void test_ckd(void)
{
    int64_t r;
    CHECK(xsa_ckd_mul_i64(INT64_MAX / 2, 2, &r) == 0 && r == INT64_MAX - 1, "mul fits");
    CHECK(xsa_ckd_mul_i64(INT64_MAX / 2 + 1, 2, &r) != 0, "mul overflows");
    CHECK(xsa_ckd_mul_i64((int64_t)1 << 31, (int64_t)1 << 32, &r) != 0, "2^63 overflows");
    CHECK(xsa_ckd_add_i64(INT64_MAX, 1, &r) != 0, "add overflows");
    CHECK(xsa_ckd_add_i64(INT64_MAX - 1, 1, &r) == 0 && r == INT64_MAX, "add fits");
    CHECK(xsa_ckd_sub_i64(INT64_MIN, 1, &r) != 0, "sub overflows");
    size_t z;
    CHECK(xsa_ckd_mul_size(SIZE_MAX / 3 + 1, 3, &z) != 0, "size mul overflows");
    CHECK(xsa_ckd_add_size(SIZE_MAX, 1, &z) != 0, "size add overflows");
    CHECK(xsa_ceil_div_i64(10, 3) == 4 && xsa_ceil_div_i64(9, 3) == 3 && xsa_ceil_div_i64(0, 5) == 0,
          "ceil_div");
    CHECK(xsa_ceil_div_i64(5, INT64_MAX) == 1 && xsa_ceil_div_i64(INT64_MAX, INT64_MAX) == 1,
          "ceil_div with a huge divisor (no a + b - 1)");
}

static void test_shapes(void)
{
    int64_t big = (int64_t)1 << 33;
    CHECK_ERR(xsa_tensor_zeros(XSA_FLOAT32, 3, SH(INT64_MAX, INT64_MAX, 0)) == NULL,
              "zeros: shape [9223372036854775807,9223372036854775807,0] has more than");
    CHECK_ERR(xsa_tensor_zeros(XSA_FLOAT32, 4, SH(big, big, big, 2)) == NULL, "has more than");
    /* an empty tensor may have large other dims: its strides saturate and
     * views of it must not compute wrapped offsets */
    xsa_tensor *e = xsa_tensor_zeros(XSA_FLOAT32, 4, SH(0, big, big, big));
    CHECK(e != NULL && xsa_tensor_numel(e) == 0, "empty [0,2^33,2^33,2^33]: %s", xsa_last_error());
    if (e) {
        xsa_tensor *u = xsa_tensor_unsqueeze(e, 1);
        xsa_tensor *n = xsa_tensor_narrow(e, 2, big - 1, 1);
        xsa_tensor *s = xsa_tensor_select(e, 3, big - 1);
        CHECK(u && u->ndim == 5 && n && n->shape[2] == 1 && s && s->ndim == 3,
              "views of an empty tensor with huge dims");
        CHECK(xsa_tensor_numel(u) == 0 && xsa_tensor_numel(n) == 0 && xsa_tensor_numel(s) == 0,
              "still empty");
        xsa_tensor *c = n ? xsa_tensor_contiguous(n) : NULL;
        CHECK(c && xsa_tensor_numel(c) == 0, "contiguous of an empty view: %s", xsa_last_error());
        xsa_tensor_free(c);
        xsa_tensor_free(u);
        xsa_tensor_free(n);
        xsa_tensor_free(s);
    }
    xsa_tensor_free(e);

    xsa_tensor *t = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(2, 3));
    CHECK_ERR(xsa_tensor_view(t, 2, SH(INT64_MAX, -1)) == NULL, "view: shape [9223372036854775807,-1] is too large");
    CHECK_ERR(xsa_tensor_view(t, 3, SH(1 << 30, 1 << 30, -1)) == NULL, "too large");
    CHECK_ERR(xsa_tensor_reshape(t, 2, SH(-1, INT64_MAX)) == NULL, "too large");
    CHECK_ERR(xsa_tensor_narrow(t, 1, 1, INT64_MAX) == NULL,
              "narrow: start 1 and length 9223372036854775807 are out of range");
    CHECK_ERR(xsa_tensor_narrow(t, 1, INT64_MAX, 1) == NULL, "out of range");
    CHECK_ERR(xsa_tensor_select(t, 0, INT64_MIN) == NULL, "select: index");
    xsa_tensor *one = xsa_tensor_zeros(XSA_FLOAT32, 2, SH(1, 1));
    CHECK_ERR(xsa_tensor_expand(one, 2, SH(1 << 30, 1 << 30)) == NULL, "expand: shape [1073741824,1073741824] has more than");
    CHECK_ERR(xsa_tensor_expand(one, 3, SH(INT64_MAX, INT64_MAX, 1)) == NULL, "has more than");
    /* a storage offset near the limit: a clean error, no offset + numel */
    CHECK_ERR(xsa_tensor_from_storage(t->storage, XSA_FLOAT32, 1, SH(4), INT64_MAX) == NULL,
              "from_storage: shape [4] (4 elements) at offset 9223372036854775807 does not fit");
    /* cat along a dimension whose total passes the limit */
    xsa_tensor *w = xsa_tensor_expand(one, 2, SH(1, XSA_MAX_NUMEL));
    xsa_tensor *parts[3] = {w, w, w};
    CHECK(w != NULL, "expand to the limit: %s", xsa_last_error());
    if (w) CHECK_ERR(xsa_ag_cat(3, parts, 1) == NULL, "cat: the joined dimension 1 grows past");
    xsa_tensor_free(w);
    xsa_tensor_free(one);
    xsa_tensor_free(t);
}

static void test_loader(void)
{
    int64_t n = 100;
    xsa_tensor *tok = xsa_tensor_zeros(XSA_INT32, 1, &n);
    const int64_t huge = (int64_t)1 << 62;
    struct { int64_t first, nw, T, B; } bad[] = {
        {huge, huge, 1, 1},          /* first + n overflows */
        {0, huge, 1, 1},             /* n * (T + 1) overflows */
        {0, 1, INT64_MAX, 1},        /* T + 1 overflows */
        {0, 2, huge, 1},             /* 2 * (2^62 + 1) overflows */
        {INT64_MAX, 1, 1, 1},        /* first + 1 overflows */
        {0, 51, 1, 1},               /* plainly past the 100 tokens */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        xsa_clear_error();
        xsa_data_loader *l = xsa_data_loader_new(tok, bad[i].first, bad[i].nw, bad[i].T, bad[i].B, 0, 0);
        CHECK(l == NULL && has(xsa_last_error(), "exceed the 100 tokens available"),
              "loader case %zu: %s", i, xsa_last_error());
        xsa_data_loader_free(l);
    }
    CHECK_ERR(xsa_data_loader_new(tok, -1, 1, 1, 1, 0, 0) == NULL, "must be >= 0");
    /* a batch larger than the windows: one batch holding them all */
    xsa_data_loader *l = xsa_data_loader_new(tok, 0, 10, 9, INT64_MAX, 0, 0);
    CHECK(l && xsa_data_loader_num_batches(l) == 1, "batch 2^63-1, 10 windows: 1 batch: %s", xsa_last_error());
    xsa_tensor *x = NULL, *y = NULL;
    CHECK(l && xsa_data_loader_next(l, &x, &y) == 0 && x->shape[0] == 10 && x->shape[1] == 9,
          "the batch is [10,9]: %s", xsa_last_error());
    xsa_tensor_free(x);
    xsa_tensor_free(y);
    xsa_data_loader_free(l);
    l = xsa_data_loader_new(tok, 0, 10, 9, INT64_MAX, 1, 0);
    CHECK(l && xsa_data_loader_num_batches(l) == 0, "shuffled: no complete batch");
    xsa_data_loader_free(l);
    /* seq_len huge with no windows is an empty loader, not a wrapped size */
    l = xsa_data_loader_new(tok, 0, 0, huge, huge, 0, 0);
    CHECK(l && xsa_data_loader_num_batches(l) == 0, "0 windows of 2^62 tokens: %s", xsa_last_error());
    xsa_data_loader_free(l);
    xsa_tensor_free(tok);

    int64_t nw, nt;
    CHECK_ERR(xsa_data_split(100, INT64_MAX, 0.1, &nw, &nt) != 0, "data split: seq_len 9223372036854775807 is too large");
    CHECK(xsa_data_split(INT64_MAX, INT64_MAX - 1, 0.5, &nw, &nt) == 0 && nw == 1 && nt == 0,
          "split of 2^63-1 tokens into windows of 2^63-1");
}

static void test_gpt_batch(void)
{
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.vocab = 16;
    c.d_model = 4;
    c.n_head = 1;
    c.n_layer = 1;
    c.seq_len = 1 << 20;
    xsa_gpt *m = xsa_gpt_new(&c);
    CHECK(m != NULL, "model: %s", xsa_last_error());
    if (!m) return;
    int32_t ids[4] = {0};
    float loss;
    /* 2^12 x 2^20 = 2^32 tokens: N = B*T does not fit an int (the inputs are
     * never read: the shape is refused first) */
    CHECK_ERR(xsa_gpt_forward(m, ids, ids, 1 << 12, 1 << 20, &loss) != 0,
              "gpt forward: batch shape [4096,1048576] has more than 2147483647 tokens");
    CHECK_ERR(xsa_gpt_probe(m, ids, INT32_MAX, 2, NULL) != 0, "has more than 2147483647 tokens");
    CHECK(xsa_gpt_forward(m, ids, ids, 2, 2, &loss) == 0 && isfinite(loss), "a small batch still runs");
    xsa_gpt_free(m);
}

int main(void)
{
    size_t base = xsa_storage_live_bytes();
    test_ckd();
    test_shapes();
    test_loader();
    test_gpt_batch();
    CHECK(xsa_storage_live_bytes() == base, "no storage leaked: %zu bytes live",
          xsa_storage_live_bytes() - base);
    return check_done("test_sizes");
}
