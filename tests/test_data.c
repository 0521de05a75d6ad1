/*
 * test_data.c: core/data.c without Lua: story joining, the split arithmetic,
 * loaders over a known token sequence (shapes, shift by one, permutation per
 * epoch, determinism, reset), and the token cache (reuse, rebuild on a
 * changed source, corruption, truncation). The Lua face is test_data.lua.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/xsa.h"
#include "check.h"

static xsa_bpe *load_tok(void)
{
    const char *root = getenv("XSA_ROOT");
    const char *env = getenv("XSA_DATA");
    char dirs[2][1100], e[1200], v[1200];
    int n = 0;
    if (env) snprintf(dirs[n++], sizeof dirs[0], "%.1000s", env);
    snprintf(dirs[n++], sizeof dirs[0], "%.1000s/data", root ? root : ".");
    for (int i = 0; i < n; i++) {
        snprintf(e, sizeof e, "%.1100s/encoder.json", dirs[i]);
        snprintf(v, sizeof v, "%.1100s/vocab.bpe", dirs[i]);
        if (access(e, R_OK) == 0) return xsa_bpe_load(e, v);
    }
    return NULL;
}

static void test_stories(xsa_bpe *tok)
{
    const char *text = "\nOne day.\n<|endoftext|>\n\n<|endoftext|>\r\nTwo <|endoftext|> x  \n<|endoftext|>\n";
    size_t n, na, nb;
    int32_t *ids = xsa_data_tokenize_stories(tok, text, strlen(text), &n);
    int32_t *a = xsa_bpe_encode(tok, "One day.", 8, 0, &na);
    int32_t *b = xsa_bpe_encode(tok, "Two <|endoftext|> x", 19, 0, &nb);
    CHECK(ids && n == na + nb + 2, "story ids: %zu, want %zu", n, na + nb + 2);
    if (ids && n == na + nb + 2) {
        CHECK(memcmp(ids, a, na * sizeof *a) == 0 && ids[na] == 50256, "first story + EOT");
        CHECK(memcmp(ids + na + 1, b, nb * sizeof *b) == 0 && ids[n - 1] == 50256, "second story + EOT");
    }
    free(ids);
    free(a);
    free(b);
}

static void test_split(void)
{
    int64_t nw, nt;
    CHECK(xsa_data_split(500000, 64, 0.1, &nw, &nt) == 0 && nw == 7692 && nt == 6922,
          "500k tokens, T=64: %lld windows, %lld train", (long long)nw, (long long)nt);
    CHECK(xsa_data_split(650, 64, 0.1, &nw, &nt) == 0 && nw == 10 && nt == 9, "0.9 * 10 = 9 exactly");
    CHECK(xsa_data_split(100, 9, 0.0, &nw, &nt) == 0 && nw == 10 && nt == 10, "no validation");
    CHECK(xsa_data_split(100, 0, 0.1, &nw, &nt) == -1 && strstr(xsa_last_error(), "seq_len"), "seq_len 0");
    CHECK(xsa_data_split(100, 4, 1.0, &nw, &nt) == -1 && strstr(xsa_last_error(), "val_fraction"),
          "val_fraction 1");
}

/* train batches over 2.5 epochs (tr and tr2: the same seed), each epoch a
 * permutation of the windows, reset */
static void loaders_train(xsa_data_loader *tr, xsa_data_loader *tr2)
{
    xsa_tensor *x, *y, *x2, *y2;
    int ok = 1;
    for (int step = 0; step < 25; step++) { /* 2.5 epochs */
        CHECK(xsa_data_loader_next(tr, &x, &y) == 0 && xsa_data_loader_next(tr2, &x2, &y2) == 0, "next");
        ok &= x->shape[0] == 8 && x->shape[1] == 10 && y->shape[0] == 8 && y->shape[1] == 10;
        for (int r = 0; r < 8; r++) {
            int32_t first = xsa_tensor_i32(x)[r * 10];
            ok &= first % 11 == 0 && first / 11 < 83;
            for (int t = 0; t < 10; t++) {
                ok &= xsa_tensor_i32(x)[r * 10 + t] == first + t;
                ok &= xsa_tensor_i32(y)[r * 10 + t] == first + t + 1;
            }
        }
        ok &= memcmp(xsa_tensor_i32(x), xsa_tensor_i32(x2), 80 * sizeof(int32_t)) == 0;
        xsa_tensor_free(x);
        xsa_tensor_free(y);
        xsa_tensor_free(x2);
        xsa_tensor_free(y2);
    }
    CHECK(ok, "train batches: shapes, contiguous windows, targets shifted by one, same seed same batches");
    CHECK(xsa_data_loader_epoch(tr) == 2, "25 batches = epoch index 2 (0-based)");
    /* each epoch is a permutation of the 83 windows */
    int seen[83] = {0}, perm_ok = 1;
    for (int k = 0; k < 83; k++) {
        int64_t w = xsa_data_loader_window(tr, k);
        perm_ok &= w >= 0 && w < 83 && !seen[w];
        if (w >= 0 && w < 83) seen[w] = 1;
    }
    CHECK(perm_ok, "epoch order is a permutation");
    int64_t e2first = xsa_data_loader_window(tr, 0);
    xsa_data_loader_reset(tr);
    CHECK(xsa_data_loader_epoch(tr) == 0 && xsa_data_loader_position(tr) == 0, "reset");
    int differs = 0;
    for (int k = 0; k < 83; k++) differs |= xsa_data_loader_window(tr, k) != xsa_data_loader_window(tr2, k);
    CHECK(differs || e2first != xsa_data_loader_window(tr, 0), "epochs differ");
}

/* seek: a loader put where another got by next() hands out its batches */
static void loaders_seek(xsa_data_loader *tr, xsa_data_loader *tr2)
{
    xsa_tensor *x, *y, *x2, *y2;
    /* seek: tr2 stands at epoch 2 (0-based), position 5 after its 25 batches; a
     * loader put there by seek hands out the same batches from then on */
    CHECK(xsa_data_loader_epoch(tr2) == 2 && xsa_data_loader_position(tr2) == 5, "tr2 after 25 batches");
    CHECK(xsa_data_loader_seek(tr, 2, 5) == 0 && xsa_data_loader_epoch(tr) == 2 &&
          xsa_data_loader_position(tr) == 5, "seek");
    int same = 1;
    for (int step = 0; step < 12; step++) { /* across the next epoch boundary */
        CHECK(xsa_data_loader_next(tr, &x, &y) == 0 && xsa_data_loader_next(tr2, &x2, &y2) == 0, "next");
        same &= memcmp(xsa_tensor_i32(x), xsa_tensor_i32(x2), 80 * sizeof(int32_t)) == 0;
        xsa_tensor_free(x);
        xsa_tensor_free(y);
        xsa_tensor_free(x2);
        xsa_tensor_free(y2);
    }
    CHECK(same, "after seek: the batches of the loader that got there by next()");
    CHECK(xsa_data_loader_seek(tr, 0, 11) == -1 && strstr(xsa_last_error(), "cannot seek"),
          "position past the epoch: %s", xsa_last_error());
    CHECK(xsa_data_loader_seek(tr, -1, 0) == -1, "negative epoch");
    CHECK(xsa_data_loader_seek(tr, 0, 10) == 0, "position = num_batches: the epoch is used up");
    xsa_data_loader_reset(tr);
}

/* validation: in order, remainder last; out-of-range batches and windows */
static void loaders_val(xsa_data_loader *va, xsa_tensor *tok)
{
    xsa_tensor *x, *y;
    CHECK(xsa_data_loader_batch(va, 2, &x, &y) == 0 && x->shape[0] == 2 &&
          xsa_tensor_i32(x)[0] == 89 * 11 && xsa_tensor_i32(y)[10] == 90 * 11 + 1, "last val batch");
    xsa_tensor_free(x);
    xsa_tensor_free(y);
    CHECK(xsa_data_loader_batch(va, 3, &x, &y) == -1 && strstr(xsa_last_error(), "out of range"),
          "batch out of range: %s", xsa_last_error());
    CHECK(xsa_data_loader_new(tok, 85, 10, 10, 3, 0, 0) == NULL && strstr(xsa_last_error(), "exceed"),
          "windows beyond the tokens: %s", xsa_last_error());
}

static void test_loaders(void)
{
    /* tokens 0..1009: window w holds w*11 .. w*11+10 (T = 10) */
    int64_t shape[1] = {1010};
    xsa_tensor *tok = xsa_tensor_new(XSA_INT32, 1, shape);
    for (int i = 0; i < 1010; i++) xsa_tensor_i32(tok)[i] = i;
    xsa_data_loader *tr = xsa_data_loader_new(tok, 0, 83, 10, 8, 1, 42);
    xsa_data_loader *tr2 = xsa_data_loader_new(tok, 0, 83, 10, 8, 1, 42);
    xsa_data_loader *va = xsa_data_loader_new(tok, 83, 8, 10, 3, 0, 42);
    CHECK(tr && tr2 && va, "loaders: %s", xsa_last_error());
    if (!tr || !tr2 || !va) goto out;
    CHECK(xsa_data_loader_num_batches(tr) == 10, "83 windows / 8 = 10 batches (last dropped)");
    CHECK(xsa_data_loader_num_batches(va) == 3, "ceil(8 / 3) = 3 val batches");
    loaders_train(tr, tr2);
    loaders_seek(tr, tr2);
    loaders_val(va, tok);
out:
    xsa_data_loader_free(tr);
    xsa_data_loader_free(tr2);
    xsa_data_loader_free(va);
    xsa_tensor_free(tok);
}

static void put(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(s, 1, n, f);
        fclose(f);
    }
}

static void test_cache(xsa_bpe *tok)
{
    char dir[] = "/tmp/xsa_test_data_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char src[64], cache[64];
    snprintf(src, sizeof src, "%s/s.txt", dir);
    snprintf(cache, sizeof cache, "%s/s.cache", dir);
    const char *text = "Once upon a time.\n<|endoftext|>\nThe end!\n<|endoftext|>\n";
    put(src, text, strlen(text));
    xsa_data_cache_status st;
    size_t n1, n2, n;
    int32_t *a = xsa_data_story_tokens(tok, src, cache, &n1, &st);
    CHECK(a && !st.from_cache && st.written && strcmp(st.reason, "no cache file yet") == 0, "built");
    int32_t *b = xsa_data_story_tokens(tok, src, cache, &n2, &st);
    CHECK(b && st.from_cache && n1 == n2 && memcmp(a, b, n1 * sizeof *a) == 0, "reused, same ids");
    free(b);
    size_t clen;
    char *c = xsa_read_file(cache, &clen);
    CHECK(c && clen == 64 + 2 * n1, "cache size");
    if (c && clen > 70) {
        c[clen - 1] ^= 1;
        put(cache, c, clen);
        b = xsa_data_story_tokens(tok, src, cache, &n, &st);
        CHECK(b && !st.from_cache && strstr(st.reason, "checksum"), "corrupt id: %s", st.reason);
        free(b);
        put(cache, c, clen - 2);
        b = xsa_data_story_tokens(tok, src, cache, &n, &st);
        CHECK(b && !st.from_cache && strstr(st.reason, "truncated"), "truncated: %s", st.reason);
        free(b);
    }
    free(c);
    put(src, "Once upon a time!\n<|endoftext|>\nThe end!\n<|endoftext|>\n", strlen(text));
    b = xsa_data_story_tokens(tok, src, cache, &n, &st);
    CHECK(b && !st.from_cache && strcmp(st.reason, "source changed") == 0 && st.written, "source changed");
    free(b);
    b = xsa_data_story_tokens(tok, src, cache, &n, &st);
    CHECK(b && st.from_cache, "reused after the rebuild");
    free(b);
    free(a);
    snprintf(cache, sizeof cache, "%s/nodir/s.cache", dir);
    a = xsa_data_story_tokens(tok, src, cache, &n, &st);
    CHECK(a && !st.written && st.write_error[0], "unwritable cache reported: %s", st.write_error);
    free(a);
    CHECK(xsa_data_story_tokens(tok, "/nonexistent/s.txt", NULL, &n, &st) == NULL &&
          strstr(xsa_last_error(), "/nonexistent/s.txt"), "missing source: %s", xsa_last_error());
    snprintf(cache, sizeof cache, "%s/s.cache", dir);
    unlink(cache);
    unlink(src);
    rmdir(dir);
}

int main(void)
{
    xsa_bpe *tok = load_tok();
    CHECK(tok != NULL, "GPT-2 files not found: %s", xsa_last_error());
    test_split();
    test_loaders();
    if (tok) {
        test_stories(tok);
        test_cache(tok);
    }
    xsa_bpe_free(tok);
    return check_done("test_data");
}
