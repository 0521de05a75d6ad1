/*
 * generate.c: the generation loop of generate.h (xsa_gpt_generate): B
 * prompts continued together through one key/value cache (kv_cache.c), or
 * through a full forward per token (the reference path), each row drawing
 * from its own seeded generator (sample.c); a row that outgrows the
 * model's seq_len slides its window.
 *
 * Non-goals: see generate.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_impl.h"

void xsa_generate_opts_default(xsa_generate_opts *o)
{
    o->max_new_tokens = 100;
    xsa_sampling_default(&o->sampling);
    o->seed = 0;
    o->eot = -1;
    o->use_cache = 1;
}

typedef struct {
    int B, S, V, maxn;
    int32_t **hist;   /* each row: prompt (cropped) then what it generated */
    int *hlen;
    int32_t *ids;     /* [B,S] a padded window */
    int *lens;
    float *logits;    /* [B,V] */
    void *work;
    xsa_rng *rng;
    int *active;
} gen_state;

static void gen_free(gen_state *g)
{
    if (g->hist)
        for (int b = 0; b < g->B; b++) free(g->hist[b]);
    free(g->hist);
    free(g->hlen);
    free(g->ids);
    free(g->lens);
    free(g->logits);
    free(g->work);
    free(g->rng);
    free(g->active);
}

/* Left-pads each row's last min(hlen, S) tokens into g->ids [B,T]; returns T. */
static int pack_window(gen_state *g)
{
    int T = 1;
    for (int b = 0; b < g->B; b++) {
        g->lens[b] = g->hlen[b] < g->S ? g->hlen[b] : g->S;
        if (g->lens[b] > T) T = g->lens[b];
    }
    for (int b = 0; b < g->B; b++) {
        int32_t *row = g->ids + (size_t)b * T;
        int pad = T - g->lens[b];
        for (int t = 0; t < pad; t++) row[t] = 0;
        memcpy(row + pad, g->hist[b] + g->hlen[b] - g->lens[b], (size_t)g->lens[b] * sizeof(int32_t));
    }
    return T;
}

/* The reference path: one full forward per row over its window. */
static int full_forward_logits(xsa_gpt *m, gen_state *g)
{
    for (int b = 0; b < g->B; b++) {
        if (!g->active[b]) continue;
        int T = g->hlen[b] < g->S ? g->hlen[b] : g->S;
        if (xsa_gpt_forward(m, g->hist[b] + g->hlen[b] - T, NULL, 1, T, NULL) != 0) return -1;
        memcpy(g->logits + (size_t)b * g->V, xsa_gpt_logits(m) + (size_t)(T - 1) * g->V,
               (size_t)g->V * sizeof(float));
    }
    return 0;
}

static int check_generate_args(const xsa_gpt_config *cfg, int B, const int32_t *const *prompts,
                               const int *lens, const xsa_generate_opts *o, int *nout)
{
    if (B < 1) return xsa_error("generate: no prompts");
    if (o->max_new_tokens < 0)
        return xsa_error("generate: max_new_tokens must be >= 0 (got %d)", o->max_new_tokens);
    if (xsa_sampling_validate(&o->sampling) != 0) return -1;
    for (int b = 0; b < B; b++) {
        nout[b] = 0;
        if (!prompts[b] || lens[b] < 1)
            return xsa_error("generate: prompt %d is empty (give at least one token)", b + 1);
        for (int t = 0; t < lens[b]; t++)
            if (prompts[b][t] < 0 || prompts[b][t] >= cfg->vocab)
                return xsa_error("generate: prompt %d has token %d, outside [0, %d)", b + 1,
                                 (int)prompts[b][t], cfg->vocab);
    }
    return 0;
}

/* g's buffers, each row's history its prompt's last seq_len tokens and
 * its generator seeded; -1 when out of memory (no message: the caller's). */
static int gen_alloc(gen_state *g, const int32_t *const *prompts, const int *lens, uint64_t seed)
{
    int B = g->B;
    g->hist = calloc((size_t)B, sizeof *g->hist);
    g->hlen = calloc((size_t)B, sizeof *g->hlen);
    g->ids = malloc((size_t)B * g->S * sizeof *g->ids);
    g->lens = malloc((size_t)B * sizeof *g->lens);
    g->logits = malloc((size_t)B * g->V * sizeof *g->logits);
    g->work = malloc(xsa_sample_work_bytes(g->V) + (size_t)g->V * sizeof(float));
    g->rng = malloc((size_t)B * sizeof *g->rng);
    g->active = malloc((size_t)B * sizeof *g->active);
    if (!g->hist || !g->hlen || !g->ids || !g->lens || !g->logits || !g->work || !g->rng ||
        !g->active)
        return -1;
    for (int b = 0; b < B; b++) {
        int keep = lens[b] < g->S ? lens[b] : g->S;
        g->hist[b] = malloc(((size_t)keep + g->maxn) * sizeof(int32_t));
        if (!g->hist[b]) return -1;
        memcpy(g->hist[b], prompts[b] + lens[b] - keep, (size_t)keep * sizeof(int32_t));
        g->hlen[b] = keep;
        g->active[b] = 1;
        xsa_rng_seed(&g->rng[b], seed + (uint64_t)b);
    }
    return 0;
}

/* One token drawn for each active row (a row that draws eot stops);
 * returns whether any row took a token, -1 with xsa_error. */
static int sample_rows(gen_state *g, const xsa_generate_opts *o, int32_t *out, int *nout)
{
    int any = 0;
    for (int b = 0; b < g->B; b++) {
        if (!g->active[b]) continue;
        int32_t id = xsa_sample(g->logits + (size_t)b * g->V, g->V, &o->sampling, &g->rng[b],
                                g->work);
        if (id < 0) {
            char why[256]; /* xsa_error writes the buffer last_error reads */
            snprintf(why, sizeof why, "%s", xsa_last_error() + strlen("sampling: "));
            return xsa_error("generate: row %d, new token %d: the model's %s", b + 1,
                             nout[b] + 1, why);
        }
        if (id == o->eot) {
            g->active[b] = 0;
            continue;
        }
        out[(size_t)b * g->maxn + nout[b]++] = id;
        g->hist[b][g->hlen[b]++] = id;
        any = 1;
    }
    return any;
}

/* The logits that follow each row's newest token: through the cache, or
 * (no cache) full forwards of ref. */
static int next_logits(gen_state *g, xsa_kv_cache *cache, xsa_gpt *ref)
{
    if (!cache) return full_forward_logits(ref, g);
    if (xsa_kv_cache_len(cache) < g->S) {
        /* one new token per row; finished rows repeat their last one
         * (their logits are no longer read) */
        for (int b = 0; b < g->B; b++) g->ids[b] = g->hist[b][g->hlen[b] - 1];
        return xsa_kv_cache_append(cache, g->ids, 1, NULL, g->logits, 0);
    }
    /* the window is full: recompute over the last seq_len tokens */
    xsa_kv_cache_rewind(cache);
    int T = pack_window(g);
    return xsa_kv_cache_append(cache, g->ids, T, g->lens, g->logits, 0);
}

int xsa_gpt_generate(xsa_gpt *m, int B, const int32_t *const *prompts, const int *lens,
                     const xsa_generate_opts *o, int32_t *out, int *nout)
{
    const xsa_gpt_config *cfg = xsa_gpt_get_config(m);
    if (check_generate_args(cfg, B, prompts, lens, o, nout) != 0) return -1;
    if (o->max_new_tokens == 0) return 0;
    gen_state g = {.B = B, .S = cfg->seq_len, .V = cfg->vocab, .maxn = o->max_new_tokens};
    int rc = -1;
    xsa_kv_cache *cache = NULL;
    /* the reference path's forwards run on a copy of the model: a loss
     * computed before generate keeps its activations for its backward, as
     * with the cache */
    xsa_gpt *ref = NULL;
    if (gen_alloc(&g, prompts, lens, o->seed) != 0) {
        xsa_error("generate: out of memory");
        goto done;
    }
    if (o->use_cache) {
        cache = xsa_kv_cache_new(m, B);
        if (!cache) goto done;
        int T = pack_window(&g);
        if (xsa_kv_cache_append(cache, g.ids, T, g.lens, g.logits, 0) != 0) goto done;
    } else if (!(ref = xsa_gpt_clone(m, cfg->attention, cfg->lambda)) ||
               (xsa_gpt_ext(m) && xsa_gpt_set_ext_attention(ref, xsa_gpt_ext(m)) != 0) ||
               full_forward_logits(ref, &g) != 0) {
        goto done;
    }
    for (int step = 0;; step++) {
        int any = sample_rows(&g, o, out, nout);
        if (any < 0) goto done;
        if (!any || step + 1 == g.maxn) break;
        if (next_logits(&g, cache, ref) != 0) goto done;
    }
    rc = 0;
done:
    xsa_gpt_free(ref);
    xsa_kv_cache_free(cache);
    gen_free(&g);
    return rc;
}
