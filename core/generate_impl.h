/*
 * generate_impl.h: what the generation files share; internal to the core
 * (not installed, not part of the contract in generate.h):
 *   - the lm_head of a few rows over a packed copy of wte
 *     (lmhead_packed.c), which the key/value cache (kv_cache.c) decodes with;
 *   - the cache's rewind, which the generation loop (generate.c) uses when
 *     its window slides (the weights have not changed, so unlike
 *     xsa_kv_cache_reset it does not pack wte again).
 */
#ifndef XSA_GENERATE_IMPL_H
#define XSA_GENERATE_IMPL_H

#include <stddef.h>

#include "generate.h"

/* Vocabulary rows interleaved per tile of the packed wte: [ceil(V/16)][C][16]. */
#define XSA_LMHEAD_TILE 16
/* Rows up to which a cache packs wte (beyond, a GEMM library is as fast). */
enum { XSA_LMHEAD_PACKED_MAX_ROWS = 64 };

/* floats of the packed copy of a [V,C] wte */
size_t xsa_lmhead_packed_floats(int V, int C);
/* A packed copy of wte [V,C] (64-byte aligned, from the pool: pool.h), NULL
 * when out of memory; xsa_lmhead_packed_free gives it back. */
float *xsa_lmhead_packed_new(const float *wte, int V, int C);
void xsa_lmhead_packed_free(float *wt);
/* Packs wte again into wt (after training changed it). */
void xsa_lmhead_packed_update(float *wt, const float *wte, int V, int C);
/* logits[B,V] = x[B,C] wte^T from the packed wt, over the engine's threads. */
void xsa_lmhead_packed_forward(float *logits, const float *x, const float *wt, int B, int C, int V);

/* Forgets every position, keeping the packed wte. */
void xsa_kv_cache_rewind(xsa_kv_cache *c);

#endif
