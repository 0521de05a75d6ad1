/*
 * sample.c: the sampling rules of generate.h: the distribution a draw
 * samples from (temperature, top-k, top-p, the extremes) and the draw.
 * A nucleus over the 50257-token vocabulary is found without sorting it:
 * probabilities are bucketed by their top bits, and only the bucket that
 * crosses top_p is sorted.
 *
 * Non-goals: beam search, repetition penalties, the model (kv_cache.c) and
 * the loop (generate.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h"

/* candidates of the nucleus, sorted by probability descending, then id */
typedef struct { float p; int32_t i; } cand_t;

void xsa_sampling_default(xsa_sampling *s)
{
    s->temperature = 1.0;
    s->top_k = 0;
    s->top_p = 1.0;
}

int xsa_sampling_validate(const xsa_sampling *s)
{
    if (!isfinite(s->temperature) || s->temperature < 0.0)
        return xsa_error("sampling: temperature must be a finite number >= 0 (got %g)", s->temperature);
    if (s->top_k < 0) return xsa_error("sampling: top_k must be >= 0 (got %d)", s->top_k);
    if (!(s->top_p > 0.0 && s->top_p <= 1.0))
        return xsa_error("sampling: top_p must be in (0, 1] (got %g)", s->top_p);
    return 0;
}

int32_t xsa_argmax(const float *x, int n)
{
    int best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv || (bv != bv && x[i] == x[i])) {
            bv = x[i];
            best = i;
        }
    return best;
}

size_t xsa_sample_work_bytes(int V)
{
    return (size_t)V * (sizeof(float) + sizeof(cand_t)) + 4096 * (sizeof(double) + sizeof(int));
}

/* The k-th largest (1-based) of x[n] (x is reordered). */
static float kth_largest(float *x, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float a = x[lo], b = x[(lo + hi) / 2], cc = x[hi];
        float pivot = (a > b) ? ((b > cc) ? b : (a > cc ? cc : a)) : ((a > cc) ? a : (b > cc ? cc : b));
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot) i++;
            while (x[j] < pivot) j--;
            if (i <= j) {
                float t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return x[want];
    }
    return x[want];
}

static int by_prob(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Bucket of a positive float: its top 12 bits (order-preserving). */
static int bucket_of(float p)
{
    uint32_t u;
    memcpy(&u, &p, sizeof u);
    return (int)(u >> 20) & 4095;
}

/* Whether temperature t samples at all: 0, and a t so small that 1/t is
 * not a float, are the greedy limit (argmax). */
static int greedy(double t) { return t <= 0.0 || !isfinite((float)(1.0 / t)); }

/* The extremes of logits (see generate.h): -1 with an error for a NaN or
 * when no logit is above -inf; else 1 when some logit is +inf (they share
 * the draw evenly: the limit of large logits), 0 otherwise. */
static int check_logits(const float *logits, int V)
{
    int any = 0, inf = 0;
    for (int i = 0; i < V; i++) {
        float l = logits[i];
        if (l != l) return xsa_error("sampling: logit %d is NaN", i);
        any |= l > -INFINITY;
        inf |= l == INFINITY;
    }
    if (!any) return xsa_error("sampling: every logit is -inf: no token can be drawn");
    return inf;
}

/* Keeps the top_k largest probs (ties at the k-th: the lowest ids) and
 * zeroes the rest; vals is scratch of V floats. */
static void keep_top_k(float *probs, int V, int top_k, float *vals)
{
    memcpy(vals, probs, (size_t)V * sizeof(float));
    float tau = kth_largest(vals, V, top_k);
    int above = 0;
    for (int i = 0; i < V; i++) above += probs[i] > tau;
    int ties = top_k - above; /* equal to tau: the lowest ids */
    for (int i = 0; i < V; i++) {
        if (probs[i] > tau) continue;
        if (probs[i] == tau && ties > 0) {
            ties--;
            continue;
        }
        probs[i] = 0.0f;
    }
}

/* Keeps the nucleus of probs and zeroes the rest: buckets of probabilities
 * from the top until the sum reaches top_p of the total, then a sort of the
 * one bucket that crosses. bsum, bcount (4096 each) and cand (V) are
 * scratch. */
static void keep_top_p(float *probs, int V, double top_p, double *bsum, int *bcount, cand_t *cand)
{
    double total = 0.0;
    memset(bsum, 0, 4096 * sizeof(double));
    memset(bcount, 0, 4096 * sizeof(int));
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f) {
            int bk = bucket_of(probs[i]);
            bsum[bk] += probs[i];
            bcount[bk]++;
            total += probs[i];
        }
    double target = top_p * total, cum = 0.0;
    int cross = 0;
    for (int bk = 4095; bk >= 0; bk--) {
        if (cum + bsum[bk] >= target) {
            cross = bk;
            break;
        }
        cum += bsum[bk];
    }
    int n = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f && bucket_of(probs[i]) == cross) {
            cand[n].p = probs[i];
            cand[n++].i = i;
        }
    qsort(cand, (size_t)n, sizeof *cand, by_prob);
    int keep = n;
    for (int j = 0; j < n; j++) {
        cum += cand[j].p;
        if (cum >= target) {
            keep = j + 1;
            break;
        }
    }
    for (int j = keep; j < n; j++) probs[cand[j].i] = 0.0f;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f && bucket_of(probs[i]) < cross) probs[i] = 0.0f;
}

int xsa_sample_probs(float *probs, const float *logits, int V, const xsa_sampling *s, void *work)
{
    int inf = check_logits(logits, V);
    if (inf < 0) return -1;
    if (greedy(s->temperature)) {
        memset(probs, 0, (size_t)V * sizeof(float));
        probs[xsa_argmax(logits, V)] = 1.0f;
        return 1;
    }
    if (inf) {
        int n = 0;
        for (int i = 0; i < V; i++) n += logits[i] == INFINITY;
        for (int i = 0; i < V; i++) probs[i] = logits[i] == INFINITY ? 1.0f / (float)n : 0.0f;
        return n;
    }
    double *bsum = work; /* 8-byte aligned first */
    cand_t *cand = (cand_t *)(bsum + 4096);
    float *vals = (float *)(cand + V);
    int *bcount = (int *)(vals + V);
    /* softmax(l / T), unnormalised: exp((l - max) / T) */
    float mx = logits[xsa_argmax(logits, V)];
    float invt = (float)(1.0 / s->temperature);
    for (int i = 0; i < V; i++) {
        float e = expf((logits[i] - mx) * invt);
        probs[i] = e == e ? e : 0.0f;
    }
    if (s->top_k > 0 && s->top_k < V) keep_top_k(probs, V, s->top_k, vals);
    if (s->top_p < 1.0) keep_top_p(probs, V, s->top_p, bsum, bcount, cand);
    double total = 0.0;
    int kept = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f) {
            total += probs[i];
            kept++;
        }
    float inv = (float)(1.0 / total);
    for (int i = 0; i < V; i++) probs[i] *= inv;
    return kept;
}

int32_t xsa_sample(const float *logits, int V, const xsa_sampling *s, xsa_rng *g, void *work)
{
    if (greedy(s->temperature)) return check_logits(logits, V) < 0 ? -1 : xsa_argmax(logits, V);
    float *probs = (float *)((char *)work + xsa_sample_work_bytes(V));
    if (xsa_sample_probs(probs, logits, V, s, work) < 0) return -1;
    double u = xsa_rng_uniform(g), cum = 0.0;
    int32_t last = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0.0f) {
            cum += probs[i];
            last = i;
            if (cum > u) return i;
        }
    return last; /* u beyond the rounded total */
}
