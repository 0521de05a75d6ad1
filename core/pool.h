/*
 * pool.h: a process-wide pool of large float buffers that a model needs only
 * during a call (the backward's scratch, the [rows,V] chunk of the fused
 * lm_head) or from a forward to its backward (the activations, the pending
 * lm_head gradient). Two models trained in turn then share one set of these
 * buffers instead of each holding its own, and a steady-state step still
 * allocates nothing: a buffer put back is handed out again.
 *
 *   float *s = xsa_pool_get(XSA_POOL_SCRATCH, n); // n floats, 64-byte aligned; NULL + error
 *   ...
 *   xsa_pool_put(s);                              // back to the pool (NULL: no-op)
 *
 * Buffers are pooled by kind, and a kind's buffers are only handed out for
 * that kind: sizes then stay what each use needs (a size-blind pool would
 * hand a large chunk buffer to a small request and allocate another chunk).
 * A request that no free buffer of its kind can hold replaces the largest
 * free one of that kind. Thread-safe (one mutex); at most XSA_POOL_KEEP free
 * buffers per kind are kept; xsa_pool_trim() frees them all. Contents are
 * not preserved between a put and the next get. Buffers of 2 MB and more
 * are given to transparent huge pages where the kernel offers them
 * (madvise): first touching a fresh 26 MB buffer 4 KB page by page cost
 * 100-180 ms on a Zen 5 VM, more than 60 decoding steps.
 * Non-goals: small buffers.
 */
#ifndef XSA_POOL_H
#define XSA_POOL_H

#include <stddef.h>

typedef enum {
    XSA_POOL_ACTS = 0, /* a model's activations, forward to backward; an evaluation's working set */
    XSA_POOL_PENDING,  /* the lm_head gradient, forward to backward */
    XSA_POOL_SCRATCH,  /* within one call: the lm_head chunk, the backward's scratch, gelu(fch) */
    XSA_POOL_BF16,     /* within one forward: wte in bf16 */
    XSA_POOL_DECODE,   /* a decoding cache's packed lm_head (lmhead_packed.c) */
    XSA_POOL_KINDS
} xsa_pool_kind;

#define XSA_POOL_KEEP 4

float *xsa_pool_get(xsa_pool_kind kind, size_t nfloats);
void xsa_pool_put(float *p);
/* Frees every buffer the pool holds (those handed out are not affected). */
void xsa_pool_trim(void);
/* Bytes of the free buffers the pool holds now. */
size_t xsa_pool_bytes(void);

#endif
