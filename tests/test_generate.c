/*
 * test_generate.c: the key/value cache and sampling of core/generate.h.
 *
 *  - cached decoding (a prefill, single tokens, chunks) gives the logits of
 *    a full forward over the same sequence, for SA and XSA with lambda 0.5
 *    and 1, at a small size and at the study's default size; left-padded
 *    rows give what each row gives alone; a prefill of many rows gives the
 *    full forward's logits bit for bit (the one block, two attentions);
 *  - greedy generation is identical with and without the cache, also past
 *    seq_len (the sliding window), and a batch of prompts of different
 *    lengths gives each row its own continuation;
 *  - sampling: temperature, top-k and top-p give the exact distributions
 *    they define on known inputs (ties, a 50257-token nucleus against a
 *    sort), draws follow them (a chi-square test) and are reproducible;
 *  - errors: a full cache, bad ids, row lengths on a non-empty cache.
 *
 * The logit tolerance is not tuned: it is a first-order bound for two
 * float32 evaluations of one network that differ only in the order of their
 * sums (the products' blocking depends on the number of rows). A sum of K
 * float32 terms is within gamma_K = K u / (1 - K u) (u = 2^-24) of the exact
 * sum, relative to the sum of the terms' magnitudes; two such sums differ by
 * at most 2 gamma_K of it. D = 8 reductions per block (ln_1, c_attn, scores,
 * att.v, c_proj, ln_2, c_fc, mlp.c_proj) plus ln_f and the lm_head are
 * chained, each passing its relative error on, with K the longest reduction
 * (4 C for the MLP, or seq_len); so |difference| <= 2 D gamma_K max(1, |logit|max).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/generate_impl.h"
#include "../core/pool.h"
#include "../core/xsa.h"
#include "check.h"

static double logit_tol(const xsa_gpt_config *c, double maxabs)
{
    double u = ldexp(1.0, -24);
    int K = 4 * c->d_model > c->seq_len ? 4 * c->d_model : c->seq_len;
    double gamma = K * u / (1 - K * u);
    int D = 8 * c->n_layer + 2;
    return 2.0 * D * gamma * fmax(1.0, maxabs);
}

static xsa_gpt *model(int V, int L, int C, int NH, int S, xsa_attention att, double lambda,
                      uint64_t seed)
{
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.vocab = V;
    c.n_layer = L;
    c.d_model = C;
    c.n_head = NH;
    c.seq_len = S;
    c.attention = att;
    c.lambda = lambda;
    c.seed = seed;
    xsa_gpt *m = xsa_gpt_new(&c);
    if (!m) printf("FAIL model: %s\n", xsa_last_error());
    /* larger weights than the initialisation, so attention is not uniform
     * and the logits are not all near 0 */
    float *p = xsa_gpt_params_data(m);
    size_t n = xsa_gpt_num_params(m);
    xsa_rng g;
    xsa_rng_seed(&g, seed + 99);
    for (size_t i = 0; i < n; i++) p[i] += (float)(xsa_rng_normal(&g) * 0.08);
    return m;
}

static void random_ids(int32_t *ids, size_t n, int V, uint64_t seed)
{
    xsa_rng g;
    xsa_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)xsa_rng_int(&g, 0, V);
}

/* largest |a-b| and |b| */
static void maxdiff(const float *a, const float *b, size_t n, double *d, double *mb)
{
    *d = 0;
    *mb = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= *d)) *d = e;
        if (fabs(b[i]) > *mb) *mb = fabs(b[i]);
    }
}

static double worst_ratio = 0; /* largest difference / tolerance seen */

/* Cached logits of B rows of T tokens, appended in the chunks `chunks`
 * (summing to T), against one full forward. */
static void check_cached(xsa_gpt *m, const char *what, int B, int T, const int *chunks)
{
    const xsa_gpt_config *c = xsa_gpt_get_config(m);
    int V = c->vocab;
    int32_t *ids = malloc((size_t)B * T * sizeof *ids);
    random_ids(ids, (size_t)B * T, V, 7 + (uint64_t)T);
    CHECK(xsa_gpt_forward(m, ids, NULL, B, T, NULL) == 0, "%s: forward: %s", what, xsa_last_error());
    const float *full = xsa_gpt_logits(m);
    float *got = malloc((size_t)B * T * V * sizeof *got);
    float *part = malloc((size_t)B * T * V * sizeof *part);
    int32_t *chunk_ids = malloc((size_t)B * T * sizeof *chunk_ids);
    xsa_kv_cache *kc = xsa_kv_cache_new(m, B);
    int t0 = 0;
    for (int k = 0; chunks[k]; k++) {
        int n = chunks[k];
        for (int b = 0; b < B; b++)
            memcpy(chunk_ids + (size_t)b * n, ids + (size_t)b * T + t0, (size_t)n * sizeof *ids);
        CHECK(xsa_kv_cache_append(kc, chunk_ids, n, NULL, part, 1) == 0, "%s append: %s", what,
              xsa_last_error());
        for (int b = 0; b < B; b++)
            memcpy(got + ((size_t)b * T + t0) * V, part + (size_t)b * n * V, (size_t)n * V * sizeof(float));
        t0 += n;
    }
    CHECK(t0 == T && xsa_kv_cache_len(kc) == T, "%s: %d tokens appended", what, t0);
    double d, mb;
    maxdiff(got, full, (size_t)B * T * V, &d, &mb);
    double tol = logit_tol(c, mb);
    CHECK(d <= tol, "%s: cached logits differ from the full forward by %.3g (tolerance %.3g)", what, d, tol);
    if (d / tol > worst_ratio) worst_ratio = d / tol;
    printf("   %-44s max |diff| %.2e  (tolerance %.2e, max |logit| %.2f)\n", what, d, tol, mb);
    /* the last-position-only logits are those of the last position */
    xsa_kv_cache_reset(kc);
    CHECK(xsa_kv_cache_append(kc, ids, T, NULL, part, 0) == 0, "%s: last-only", what);
    for (int b = 0; b < B; b++) {
        maxdiff(part + (size_t)b * V, full + ((size_t)b * T + T - 1) * V, (size_t)V, &d, &mb);
        CHECK(d <= logit_tol(c, mb), "%s: last-position logits of row %d differ by %.3g", what, b, d);
    }
    xsa_kv_cache_free(kc);
    free(ids);
    free(got);
    free(part);
    free(chunk_ids);
}

/* Left-padded rows of different lengths against each row alone. */
static void check_padded(xsa_gpt *m, const char *what)
{
    const xsa_gpt_config *c = xsa_gpt_get_config(m);
    int V = c->vocab, B = 3, T = 9;
    int lens[3] = {9, 4, 1};
    int32_t ids[27];
    random_ids(ids, 27, V, 11);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T - lens[b]; t++) ids[b * T + t] = 0; /* pads */
    xsa_kv_cache *kc = xsa_kv_cache_new(m, B);
    float *lg = malloc((size_t)B * V * sizeof *lg);
    float *lg1 = malloc((size_t)B * V * sizeof *lg1);
    CHECK(xsa_kv_cache_append(kc, ids, T, lens, lg, 0) == 0, "%s padded: %s", what, xsa_last_error());
    int32_t next[3] = {1, 2, 3};
    CHECK(xsa_kv_cache_append(kc, next, 1, NULL, lg1, 0) == 0, "%s padded step", what);
    for (int b = 0; b < B; b++) {
        int32_t row[10];
        memcpy(row, ids + b * T + (T - lens[b]), (size_t)lens[b] * sizeof *row);
        row[lens[b]] = next[b];
        xsa_gpt_forward(m, row, NULL, 1, lens[b] + 1, NULL);
        const float *full = xsa_gpt_logits(m);
        double d, mb;
        maxdiff(lg + (size_t)b * V, full + (size_t)(lens[b] - 1) * V, (size_t)V, &d, &mb);
        CHECK(d <= logit_tol(c, mb), "%s: padded row %d prefill differs by %.3g", what, b, d);
        maxdiff(lg1 + (size_t)b * V, full + (size_t)lens[b] * V, (size_t)V, &d, &mb);
        CHECK(d <= logit_tol(c, mb), "%s: padded row %d step differs by %.3g", what, b, d);
    }
    xsa_kv_cache_free(kc);
    free(lg);
    free(lg1);
}

static void test_cache_matches_forward(void)
{
    struct { xsa_attention a; double lambda; const char *name; } variants[] = {
        {XSA_ATTN_SA, 1.0, "SA"}, {XSA_ATTN_XSA, 0.5, "XSA lambda 0.5"}, {XSA_ATTN_XSA, 1.0, "XSA lambda 1"}};
    int chunks_small[] = {5, 1, 1, 3, 1, 1, 1, 1, 2, 0};  /* 16 */
    int chunks_big[] = {20, 1, 1, 1, 1, 8, 1, 1, 30, 0};  /* 64 */
    for (int i = 0; i < 3; i++) {
        char what[96];
        /* HS = 12: the head loops' masked tails */
        xsa_gpt *m = model(97, 2, 48, 4, 16, variants[i].a, variants[i].lambda, 3);
        snprintf(what, sizeof what, "%s, small (V 97, C 48, 4 heads)", variants[i].name);
        check_cached(m, what, 3, 16, chunks_small);
        check_padded(m, variants[i].name);
        xsa_gpt_free(m);
        /* the study's default size */
        xsa_gpt_config c;
        xsa_gpt_config_default(&c);
        c.attention = variants[i].a;
        c.lambda = variants[i].lambda;
        m = xsa_gpt_new(&c);
        snprintf(what, sizeof what, "%s, default size", variants[i].name);
        check_cached(m, what, 2, 64, chunks_big);
        xsa_gpt_free(m);
    }
    printf("   largest difference / tolerance: %.2g\n", worst_ratio);
}

/* The one block (core/block.c) with its two attention variants: a prefill
 * of more than 64 rows runs the cache's linear layers through the same
 * matrix products as the full forward (a step of a few rows has its own
 * kernel, whose sums the tolerance above covers), the cached attention sums
 * in the full attention's order and XSA projects through the same function,
 * so the logits are the full forward's bit for bit. */
static void test_prefill_is_the_full_block(void)
{
    struct { xsa_attention a; double lambda; } variants[] = {
        {XSA_ATTN_SA, 1.0}, {XSA_ATTN_XSA, 0.5}, {XSA_ATTN_XSA, 1.0}};
    enum { B = 3, T = 32, V = 97 };
    for (int i = 0; i < 3; i++) {
        xsa_gpt *m = model(V, 2, 48, 4, T, variants[i].a, variants[i].lambda, 5);
        int32_t ids[B * T];
        random_ids(ids, B * T, V, 13);
        static float cached[B * T * V];
        xsa_kv_cache *kc = xsa_kv_cache_new(m, B);
        CHECK(xsa_kv_cache_append(kc, ids, T, NULL, cached, 1) == 0, "prefill: %s", xsa_last_error());
        CHECK(xsa_gpt_forward(m, ids, NULL, B, T, NULL) == 0, "forward: %s", xsa_last_error());
        const float *full = xsa_gpt_logits(m);
        CHECK(full && memcmp(cached, full, sizeof cached) == 0,
              "variant %d: a %d-row prefill differs from the full forward", i, B * T);
        xsa_kv_cache_free(kc);
        xsa_gpt_free(m);
    }
}

static void test_greedy_same_both_ways(void)
{
    for (int v = 0; v < 3; v++) {
        xsa_attention att = v == 0 ? XSA_ATTN_SA : XSA_ATTN_XSA;
        double lambda = v == 2 ? 0.5 : 1.0;
        xsa_gpt *m = model(61, 2, 32, 2, 12, att, lambda, 5 + v);
        int32_t p0[20], p1[3] = {4, 5, 6}, p2[1] = {7};
        random_ids(p0, 20, 61, 21); /* longer than seq_len 12: cropped */
        const int32_t *prompts[3] = {p0, p1, p2};
        int lens[3] = {20, 3, 1};
        xsa_generate_opts o;
        xsa_generate_opts_default(&o);
        o.max_new_tokens = 30; /* past seq_len: the window slides */
        o.sampling.temperature = 0;
        int32_t a[90], b[90], one[30];
        int na[3], nb[3], n1;
        CHECK(xsa_gpt_generate(m, 3, prompts, lens, &o, a, na) == 0, "generate: %s", xsa_last_error());
        o.use_cache = 0;
        CHECK(xsa_gpt_generate(m, 3, prompts, lens, &o, b, nb) == 0, "generate: %s", xsa_last_error());
        int same = 1;
        for (int r = 0; r < 3; r++) {
            CHECK(na[r] == 30 && nb[r] == 30, "row %d lengths %d %d", r, na[r], nb[r]);
            same &= memcmp(a + r * 30, b + r * 30, 30 * sizeof(int32_t)) == 0;
        }
        CHECK(same, "variant %d: greedy ids differ with and without the cache", v);
        /* each row alone: the same continuation */
        o.use_cache = 1;
        for (int r = 0; r < 3; r++) {
            CHECK(xsa_gpt_generate(m, 1, &prompts[r], &lens[r], &o, one, &n1) == 0, "alone");
            CHECK(n1 == 30 && memcmp(one, a + r * 30, sizeof one) == 0,
                  "variant %d row %d: batched and alone differ", v, r);
        }
        /* a stop token ends a row and is not included */
        o.eot = a[5];
        int first = 0;
        while (a[first] != o.eot) first++;
        CHECK(xsa_gpt_generate(m, 1, &prompts[0], &lens[0], &o, one, &n1) == 0, "eot");
        CHECK(n1 == first, "eot: %d tokens, expected %d", n1, first);
        xsa_gpt_free(m);
    }
}

static void test_sampling_reproducible(void)
{
    xsa_gpt *m = model(61, 1, 16, 2, 8, XSA_ATTN_XSA, 1.0, 9);
    int32_t p[2] = {1, 2};
    const int32_t *prompts[2] = {p, p};
    int lens[2] = {2, 2};
    xsa_generate_opts o;
    xsa_generate_opts_default(&o);
    o.max_new_tokens = 20;
    o.seed = 42;
    int32_t a[40], b[40], c1[20];
    int na[2], nb[2], n1;
    xsa_gpt_generate(m, 2, prompts, lens, &o, a, na);
    xsa_gpt_generate(m, 2, prompts, lens, &o, b, nb);
    CHECK(memcmp(a, b, sizeof a) == 0, "the same seed gives the same samples");
    CHECK(memcmp(a, a + 20, 20 * sizeof(int32_t)) != 0, "rows draw from different streams");
    o.seed = 43; /* row 1 of seed 42 = row 0 of seed 43 */
    xsa_gpt_generate(m, 1, prompts, lens, &o, c1, &n1);
    CHECK(memcmp(c1, a + 20, sizeof c1) == 0, "row b draws from seed + b");
    xsa_gpt_free(m);
}

static void check_probs(const char *what, const float *logits, int V, double temp, int k, double p,
                        const double *want)
{
    xsa_sampling s = {temp, k, p};
    void *work = malloc(xsa_sample_work_bytes(V));
    float probs[16];
    xsa_sample_probs(probs, logits, V, &s, work);
    for (int i = 0; i < V; i++)
        CHECK(fabs(probs[i] - want[i]) <= 1e-6, "%s: p[%d] = %.7f, expected %.7f", what, i, probs[i], want[i]);
    free(work);
}

/* the kept probabilities of 4 tokens under top_k, top_p, temperature, ties */
static void sampling_small(void)
{
    float l[4];
    double p4[4] = {0.4, 0.3, 0.2, 0.1};
    for (int i = 0; i < 4; i++) l[i] = (float)log(p4[i]) + 3.0f; /* a shift changes nothing */
    check_probs("plain", l, 4, 1.0, 0, 1.0, p4);
    check_probs("top_k 2", l, 4, 1.0, 2, 1.0, (double[]){4 / 7.0, 3 / 7.0, 0, 0});
    check_probs("top_k 4 = all", l, 4, 1.0, 4, 1.0, p4);
    check_probs("top_p 0.5", l, 4, 1.0, 0, 0.5, (double[]){4 / 7.0, 3 / 7.0, 0, 0});
    check_probs("top_p 0.39", l, 4, 1.0, 0, 0.39, (double[]){1, 0, 0, 0});
    check_probs("top_p 0.75", l, 4, 1.0, 0, 0.75, (double[]){4 / 9.0, 3 / 9.0, 2 / 9.0, 0});
    check_probs("top_k 3 then top_p 0.75 of the rest", l, 4, 1.0, 3, 0.75,
                (double[]){4 / 7.0, 3 / 7.0, 0, 0}); /* 0.4/0.9 < 0.75 <= 0.7/0.9 */
    double s = sqrt(0.4) + sqrt(0.3) + sqrt(0.2) + sqrt(0.1);
    check_probs("temperature 2", l, 4, 2.0, 0, 1.0,
                (double[]){sqrt(0.4) / s, sqrt(0.3) / s, sqrt(0.2) / s, sqrt(0.1) / s});
    check_probs("temperature 0 = greedy", l, 4, 0.0, 0, 1.0, (double[]){1, 0, 0, 0});
    float tie[4] = {1, 1, 1, 0};
    check_probs("top_k ties go to lower ids", tie, 4, 1.0, 2, 1.0, (double[]){0.5, 0.5, 0, 0});
    CHECK(xsa_argmax(tie, 4) == 0, "argmax ties: lowest id");
}

/* a 50257-token nucleus against a plain sort; top_k 40 of them */
static void sampling_large_vocab(void)
{
    int V = 50257;
    float *lg = malloc((size_t)V * sizeof *lg), *pr = malloc((size_t)V * sizeof *pr);
    double *ref = malloc((size_t)V * sizeof *ref);
    int *order = malloc((size_t)V * sizeof *order);
    void *work = malloc(xsa_sample_work_bytes(V));
    xsa_rng g;
    xsa_rng_seed(&g, 3);
    for (int i = 0; i < V; i++) lg[i] = (float)(xsa_rng_normal(&g) * 3.0);
    double mx = lg[xsa_argmax(lg, V)], tot = 0;
    for (int i = 0; i < V; i++) tot += ref[i] = expf(lg[i] - (float)mx);
    for (int i = 0; i < V; i++) order[i] = i;
    /* insertion-free reference: selection of the largest until top_p */
    double target = 0.9 * tot, cum = 0;
    char *in = calloc((size_t)V, 1);
    int kept = 0;
    while (cum < target) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if (!in[i] && (best < 0 || ref[i] > ref[best])) best = i;
        in[best] = 1;
        cum += ref[best];
        kept++;
    }
    xsa_sampling sp = {1.0, 0, 0.9};
    int n = xsa_sample_probs(pr, lg, V, &sp, work);
    int mism = 0;
    for (int i = 0; i < V; i++) mism += (pr[i] > 0) != in[i];
    CHECK(n == kept && mism == 0, "top_p 0.9 over 50257: kept %d (expected %d), %d differ", n, kept, mism);
    xsa_sampling sk = {1.0, 40, 1.0};
    n = xsa_sample_probs(pr, lg, V, &sk, work);
    int nz = 0;
    float minkept = INFINITY, maxdropped = -INFINITY;
    for (int i = 0; i < V; i++) {
        if (pr[i] > 0) { nz++; if (lg[i] < minkept) minkept = lg[i]; }
        else if (lg[i] > maxdropped) maxdropped = lg[i];
    }
    CHECK(n == 40 && nz == 40 && minkept > maxdropped, "top_k 40 over 50257 keeps the 40 largest");
    free(in);
    free(lg);
    free(pr);
    free(ref);
    free(order);
    free(work);
}

/* draws follow the kept distribution: chi-square, 2 degrees of freedom
 * (top_k 3 of 5 tokens), 99.9% critical value 13.82; then top_p's */
static void sampling_draws(void)
{
    xsa_rng g;
    float l5[5];
    double p5[5] = {0.35, 0.25, 0.2, 0.12, 0.08};
    for (int i = 0; i < 5; i++) l5[i] = (float)log(p5[i]);
    xsa_sampling s3 = {1.0, 3, 1.0};
    void *w5 = malloc(xsa_sample_work_bytes(5) + 5 * sizeof(float));
    int counts[5] = {0};
    xsa_rng_seed(&g, 1);
    int draws = 100000;
    for (int i = 0; i < draws; i++) counts[xsa_sample(l5, 5, &s3, &g, w5)]++;
    double chi = 0;
    for (int i = 0; i < 3; i++) {
        double e = draws * p5[i] / 0.8;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    CHECK(counts[3] == 0 && counts[4] == 0 && chi < 13.82, "top_k draws: chi2 %.2f, counts %d %d %d %d %d",
          chi, counts[0], counts[1], counts[2], counts[3], counts[4]);
    /* top_p 0.6 keeps {0, 1} (0.35 < 0.6 <= 0.6): 1 degree of freedom, 10.83 */
    xsa_sampling s6 = {1.0, 0, 0.59};
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < draws; i++) counts[xsa_sample(l5, 5, &s6, &g, w5)]++;
    double e0 = draws * 0.35 / 0.6, e1 = draws * 0.25 / 0.6;
    chi = (counts[0] - e0) * (counts[0] - e0) / e0 + (counts[1] - e1) * (counts[1] - e1) / e1;
    CHECK(counts[2] + counts[3] + counts[4] == 0 && chi < 10.83, "top_p draws: chi2 %.2f", chi);
    free(w5);
}

static void test_sampling_rules(void)
{
    sampling_small();
    sampling_large_vocab();
    sampling_draws();
    xsa_sampling bad = {NAN, 0, 1.0};
    CHECK(xsa_sampling_validate(&bad) != 0, "NaN temperature refused");
    bad = (xsa_sampling){1.0, -1, 1.0};
    CHECK(xsa_sampling_validate(&bad) != 0, "negative top_k refused");
    bad = (xsa_sampling){1.0, 0, 0.0};
    CHECK(xsa_sampling_validate(&bad) != 0 && strstr(xsa_last_error(), "top_p"), "top_p 0 refused");
}

static void test_errors(void)
{
    xsa_gpt *m = model(31, 1, 16, 2, 4, XSA_ATTN_SA, 1.0, 1);
    xsa_kv_cache *kc = xsa_kv_cache_new(m, 1);
    int32_t ids[5] = {1, 2, 3, 4, 5};
    CHECK(xsa_kv_cache_append(kc, ids, 5, NULL, NULL, 0) != 0 &&
          strstr(xsa_last_error(), "exceed the model's seq_len 4"), "too long: %s", xsa_last_error());
    CHECK(xsa_kv_cache_append(kc, ids, 3, NULL, NULL, 0) == 0, "3 fit");
    int len = 1;
    CHECK(xsa_kv_cache_append(kc, ids, 1, &len, NULL, 0) != 0, "lengths on a non-empty cache");
    CHECK(xsa_kv_cache_append(kc, ids, 2, NULL, NULL, 0) != 0, "3 + 2 > 4");
    int32_t bad = 31;
    CHECK(xsa_kv_cache_append(kc, &bad, 1, NULL, NULL, 0) != 0 && strstr(xsa_last_error(), "outside [0, 31)"),
          "bad id: %s", xsa_last_error());
    CHECK(xsa_kv_cache_len(kc) == 3, "failed appends change nothing");
    CHECK(xsa_kv_cache_new(m, 0) == NULL, "batch 0 refused");
    xsa_gpt_free(m); /* the cache keeps the model alive */
    CHECK(xsa_kv_cache_append(kc, ids, 1, NULL, NULL, 0) == 0, "model retained by the cache");
    xsa_kv_cache_free(kc);
    m = model(31, 1, 16, 2, 4, XSA_ATTN_SA, 1.0, 1);
    const int32_t *pr[1] = {ids};
    int l0 = 0, n;
    int32_t out[4];
    xsa_generate_opts o;
    xsa_generate_opts_default(&o);
    o.max_new_tokens = 4;
    CHECK(xsa_gpt_generate(m, 1, pr, &l0, &o, out, &n) != 0 && strstr(xsa_last_error(), "empty"),
          "empty prompt");
    xsa_gpt_free(m);
}

/* A decoding cache's packed lm_head goes back to the pool and the next
 * generate reuses it (a fresh 26 MB buffer per call cost more in page
 * faults than decoding), packed again from the model it now serves. */
static void test_packed_lmhead_pooled(void)
{
    xsa_gpt *m1 = model(61, 1, 32, 2, 12, XSA_ATTN_SA, 1.0, 31), *m2 = model(61, 1, 32, 2, 12, XSA_ATTN_SA, 1.0, 32);
    int32_t p[2] = {3, 9}, a[20], b[20], ref[20];
    const int32_t *prompts[1] = {p};
    int lens[1] = {2}, na, nb, nr;
    xsa_generate_opts o;
    xsa_generate_opts_default(&o);
    o.max_new_tokens = 20;
    o.sampling.temperature = 0;
    xsa_pool_trim();
    size_t packed = xsa_lmhead_packed_floats(61, 32) * sizeof(float);
    CHECK(xsa_gpt_generate(m1, 1, prompts, lens, &o, a, &na) == 0, "generate: %s", xsa_last_error());
    size_t held = xsa_pool_bytes();
    CHECK(held >= packed, "after generate the pool holds %zu bytes, the packed lm_head is %zu", held, packed);
    CHECK(xsa_gpt_generate(m2, 1, prompts, lens, &o, b, &nb) == 0, "generate: %s", xsa_last_error());
    CHECK(xsa_pool_bytes() == held, "the second generate reused the buffer (%zu bytes held, %zu before)",
          xsa_pool_bytes(), held);
    o.use_cache = 0;
    CHECK(xsa_gpt_generate(m2, 1, prompts, lens, &o, ref, &nr) == 0, "generate: %s", xsa_last_error());
    CHECK(nb == nr && memcmp(b, ref, sizeof b) == 0, "the reused buffer holds the second model's lm_head");
    CHECK(memcmp(a, b, sizeof a) != 0, "two models, two continuations (the test can tell them apart)");
    xsa_gpt_free(m1);
    xsa_gpt_free(m2);
}

int main(void)
{
    test_cache_matches_forward();
    test_prefill_is_the_full_block();
    test_greedy_same_both_ways();
    test_packed_lmhead_pooled();
    test_sampling_reproducible();
    test_sampling_rules();
    test_errors();
    return check_done("test_generate");
}
