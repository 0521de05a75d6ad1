/*
 * matmul_bf16.h: matrix products bf16 x bf16 -> float32 through oneDNN's
 * matmul primitive (mixed precision, opt-in). oneDNN is an optional build
 * dependency: without it (the Makefile defines XSA_HAVE_DNNL when it finds
 * <oneapi/dnnl/dnnl.h>) these functions are stubs that fail with an error
 * saying so; nothing falls back to float32 silently.
 *
 *   if (xsa_bf16_check() != 0) puts(xsa_last_error());   // no oneDNN / no avx512_bf16
 *   xsa_bf16_mm *mm = xsa_bf16_mm_new();
 *   xsa_bf16_from_f32(a16, a, M * K); xsa_bf16_from_f32(b16, b, K * N);
 *   xsa_bf16_gemm(mm, 0, 0, M, N, K, a16, K, b16, N, 0, c, N);   // c = a b
 *   xsa_bf16_mm_free(mm);
 *
 * A primitive is created once per shape (and transposition, leading
 * dimensions, accumulate flag) and kept in the xsa_bf16_mm; later calls of
 * that shape only execute it. Threads: oneDNN's own (OpenMP), set to
 * xsa_threads() before each product.
 * Non-goals: other precisions, GPUs, int8.
 */
#ifndef XSA_MATMUL_BF16_H
#define XSA_MATMUL_BF16_H

#include <stddef.h>
#include <stdint.h>

/* 1 when built with oneDNN. */
int xsa_bf16_built(void);
/* 0 when bf16 products can run here (built with oneDNN, and the CPU lists
 * avx512_bf16 in /proc/cpuinfo), else -1 with the reason as the error. */
int xsa_bf16_check(void);
/* "oneDNN 2.6.3" or "none". */
const char *xsa_bf16_backend(void);

typedef struct xsa_bf16_mm xsa_bf16_mm;
/* NULL with an error when xsa_bf16_check() fails. */
xsa_bf16_mm *xsa_bf16_mm_new(void);
void xsa_bf16_mm_free(xsa_bf16_mm *mm);

/* Row-major C[M,N] = op(A) op(B) (accumulate = 0) or C += op(A) op(B)
 * (accumulate = 1). ta = 0: A is [M,K] with row stride lda; ta = 1: A is
 * stored as [K,M] (row stride lda) and used transposed; tb likewise for B
 * ([K,N] or stored [N,K]). A, B bf16; C float32 (row stride ldc).
 * 0, or -1 with an error. */
int xsa_bf16_gemm(xsa_bf16_mm *mm, int ta, int tb, int M, int N, int K, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, int accumulate, float *C, int ldc);
/* The same on one of XSA_BF16_SLOTS independent sets of primitives, with
 * oneDNN running it on `threads` threads: threads that run products side by
 * side each use a slot of their own (typically slot k and 1 thread), so
 * no parallel region of oneDNN waits on a thread of another. Slot 0 is the
 * one xsa_bf16_gemm uses (with xsa_threads()). */
#define XSA_BF16_SLOTS 16
int xsa_bf16_gemm_on(xsa_bf16_mm *mm, int slot, int threads, int ta, int tb, int M, int N, int K,
                     const uint16_t *A, int lda, const uint16_t *B, int ldb, int accumulate,
                     float *C, int ldc);
/* The implementation oneDNN picked for the last product of a slot (for benchmarks). */
const char *xsa_bf16_impl(const xsa_bf16_mm *mm, int slot);

/* Round to nearest even (no oneDNN needed). */
void xsa_bf16_from_f32(uint16_t *dst, const float *src, size_t n);
void xsa_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

#endif
