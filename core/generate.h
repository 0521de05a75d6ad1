/*
 * generate.h: text generation with a GPT of gpt.h: a key/value cache for
 * incremental decoding, the sampling rules (temperature, top-k, top-p) and
 * the generation loop.
 *
 * The cache holds, per layer, the keys and values of every position decoded
 * so far, K and V as [B,NH,T,HS] (T up to the model's seq_len). Appending a
 * token runs the blocks on that token alone, attending to the cached keys;
 * the result is the full forward's (the same kernels, the same order of the
 * attention sums), up to the rounding of the matrix products, whose
 * summation order depends on the number of rows. For XSA each new token is
 * projected with its own value vector exactly as in training:
 * Z = Y - lambda (Y . Vn) Vn, Vn that token's normalised value.
 *
 * Rows of different lengths are left-padded: row b's real tokens start at
 * slot start[b] of the cache; its positions count from 0 there and the pad
 * slots are masked out of its attention, so each row gets what it would get
 * alone.
 *
 * The cache reads the model's weights when a token is appended (it retains
 * the model): train the model and the cache's keys and values are stale
 * (reset it). Appending never touches the model's own activations, so it
 * does not disturb a pending loss backward.
 *
 * Example (greedy decoding of one row):
 *   xsa_kv_cache *c = xsa_kv_cache_new(m, 1);
 *   float *logits = malloc(V * sizeof *logits);
 *   xsa_kv_cache_append(c, prompt, T, NULL, logits, 0);   // prefill
 *   for (...) { int32_t id = xsa_argmax(logits, V); xsa_kv_cache_append(c, &id, 1, NULL, logits, 0); }
 *   xsa_kv_cache_free(c);
 * or the whole loop: xsa_gpt_generate(m, B, prompts, lens, &opts, out, nout).
 *
 * Non-goals: beam search, a paged or shared-prefix cache, repetition
 * penalties, speculative decoding.
 */
#ifndef XSA_GENERATE_H
#define XSA_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt.h"
#include "rng.h"

typedef struct xsa_kv_cache xsa_kv_cache;

/* A cache for B rows of up to the model's seq_len positions each (retains
 * m). NULL with an error for B < 1 or out of memory. */
xsa_kv_cache *xsa_kv_cache_new(xsa_gpt *m, int B);
void xsa_kv_cache_free(xsa_kv_cache *c);
/* Forgets every position (the next append starts at position 0). */
void xsa_kv_cache_reset(xsa_kv_cache *c);
int xsa_kv_cache_len(const xsa_kv_cache *c);      /* slots used */
int xsa_kv_cache_batch(const xsa_kv_cache *c);    /* B */
int xsa_kv_cache_capacity(const xsa_kv_cache *c); /* the model's seq_len */
xsa_gpt *xsa_kv_cache_model(const xsa_kv_cache *c); /* borrowed */
/* Bytes held (the K/V arrays and the scratch). */
size_t xsa_kv_cache_bytes(const xsa_kv_cache *c);

/* Appends T >= 1 tokens to every row: ids [B,T] int32 in [0, V). Fails when
 * len + T exceeds the capacity.
 * lens: NULL, or (only on an empty cache) the number of real tokens of each
 * row, 1..T, right-aligned in ids (left padding; the pad ids are ignored but
 * must be valid ids).
 * logits: NULL, or [B,V] receiving the logits of each row's last new
 * position, or [B,T,V] (every new position) when all != 0. */
int xsa_kv_cache_append(xsa_kv_cache *c, const int32_t *ids, int T, const int *lens,
                        float *logits, int all);

/* ---- sampling ------------------------------------------------------------
 * From logits l[V]: temperature <= 0 is greedy (the argmax, lowest id on
 * ties). Otherwise p = softmax(l / temperature); top_k > 0 keeps the k most
 * probable tokens (ties broken towards lower ids); then top_p < 1 keeps the
 * smallest set of the most probable remaining tokens whose probability
 * reaches top_p of what remains (the token that crosses is kept); the kept
 * probabilities are renormalised. A draw takes u = uniform(g) * (sum kept)
 * and returns the first id, in increasing id order, whose running sum of
 * kept probabilities exceeds u. */
/* Extremes (the rule; tests/test_reliability.lua draws at each): a
 * temperature of 0, or one so small that 1/T overflows a float, is greedy
 * (the limit T -> 0); a huge finite T gives the uniform distribution over
 * the tokens whose logit is above -inf. A logit of -inf is probability 0;
 * logits of +inf share the draw evenly (the limit of large logits). A NaN
 * logit, or every logit -inf, is an error: no token is drawn silently from
 * a broken distribution. */
typedef struct xsa_sampling {
    double temperature; /* 1.0; 0: greedy (negative: an error) */
    int top_k;          /* 0: no limit */
    double top_p;       /* 1.0: no limit; in (0, 1] */
} xsa_sampling;

void xsa_sampling_default(xsa_sampling *s);
/* 0, or -1 with an error naming the bad field (temperature not finite or
 * negative, top_k < 0, top_p outside (0, 1]). */
int xsa_sampling_validate(const xsa_sampling *s);
/* argmax of x[n], lowest index on ties (NaN never wins). */
int32_t xsa_argmax(const float *x, int n);
/* Bytes of work memory the two functions below need for a vocabulary V. */
size_t xsa_sample_work_bytes(int V);
/* Writes the distribution a draw samples from into probs[V] (zero outside
 * the kept set, summing to 1) and returns the number of tokens kept; -1
 * with an error for a NaN logit or when every logit is -inf. */
int xsa_sample_probs(float *probs, const float *logits, int V, const xsa_sampling *s, void *work);
/* One token id drawn from logits[V] with g (no draw for greedy); -1 with an
 * error as xsa_sample_probs. */
int32_t xsa_sample(const float *logits, int V, const xsa_sampling *s, xsa_rng *g, void *work);

/* ---- the generation loop ---------------------------------------------- */
typedef struct xsa_generate_opts {
    int max_new_tokens;    /* 100 */
    xsa_sampling sampling;
    uint64_t seed;         /* row b (0-based) draws from an xsa_rng seeded with seed + b */
    int32_t eot;           /* a row stops when it samples this id (not included); -1: never */
    int use_cache;         /* 1; 0: a full forward per token (the reference), on a copy of the
                            * model, so a loss computed before keeps its backward */
} xsa_generate_opts;

void xsa_generate_opts_default(xsa_generate_opts *o);

/* Continues B prompts (prompts[b], lens[b] >= 1 ids each). A prompt longer
 * than seq_len is cropped to its last seq_len tokens. When a row outgrows
 * seq_len the window slides: every further token is predicted from the last
 * seq_len tokens alone, with the cache recomputed over them (so the result
 * is always what a full forward over the last seq_len tokens gives).
 * out: [B, max_new_tokens] ids; nout[b]: how many row b produced
 * (< max_new_tokens only when it sampled eot). */
int xsa_gpt_generate(xsa_gpt *m, int B, const int32_t *const *prompts, const int *lens,
                     const xsa_generate_opts *o, int32_t *out, int *nout);

#endif
