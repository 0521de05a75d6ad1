/*
 * pool.h: a process-wide pool of large float buffers that live only during
 * one call (a training step's backward scratch, the [rows,V] chunk of the
 * fused lm_head) or from a forward to its backward (the pending lm_head
 * gradient). Two models trained in turn then share one set of these buffers
 * instead of each holding its own, and a steady-state step still allocates
 * nothing: a buffer put back is handed out again.
 *
 *   float *s = xsa_pool_get(n);   // n floats, 64-byte aligned; NULL + error
 *   ...
 *   xsa_pool_put(s);              // back to the pool (NULL is a no-op)
 *
 * Thread-safe (one mutex). The pool keeps at most XSA_POOL_KEEP free
 * buffers; xsa_pool_trim() frees them all. Contents are not preserved
 * between a put and the next get. Non-goals: small allocations.
 */
#ifndef XSA_POOL_H
#define XSA_POOL_H

#include <stddef.h>

#define XSA_POOL_KEEP 8

float *xsa_pool_get(size_t nfloats);
void xsa_pool_put(float *p);
/* Frees every buffer the pool holds (those handed out are not affected). */
void xsa_pool_trim(void);
/* Bytes of the free buffers the pool holds now. */
size_t xsa_pool_bytes(void);

#endif
