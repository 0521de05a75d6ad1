/*
 * gemm.h: the engine's one float32 matrix product, and which library runs
 * it. Every float32 product of the core (the lm_head, the linear layers,
 * tensor matmul) is an xsa_sgemm call; it goes to OpenBLAS's cblas_sgemm
 * or, in a build with oneDNN (XSA_HAVE_DNNL), to oneDNN's dnnl_sgemm.
 *
 *   if (xsa_gemm_init() != 0) fail(xsa_last_error());  // XSA_GEMM names no backend
 *   xsa_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);  // C = A B^T
 *   printf("%s\n", xsa_gemm_describe());                // "oneDNN 2.6.3 dnnl_sgemm"
 *
 * The backend is chosen once, never by timing: XSA_GEMM=openblas|dnnl
 * when set (an unknown name, or dnnl in a build without oneDNN, is an
 * error from xsa_gemm_init, never ignored), else xsa_gemm_set's, else the
 * default: dnnl when the build has oneDNN and the CPU has AVX-512 (on the
 * Zen 5 machine dnnl_sgemm took 0.4-0.6 of OpenBLAS's time with the
 * Haswell kernel its environment selects and about the same time as the
 * Cooperlake kernel, product by product: doc/performance.md), openblas
 * otherwise (AVX2-only CPUs: not measured, so unchanged). The same
 * backend then gives the same bits every run.
 *
 * Threads: each call runs on the calling thread alone, as OpenBLAS does
 * here (system.c): oneDNN (OpenMP) is held to one thread for the call, so
 * a product's bits never depend on the thread count, and the engine's own
 * threads (lmhead.c, nn.c) never oversubscribe the cores. Neither library
 * gives a row the same bits at every row count (oneDNN's AVX2 kernels
 * included), so callers split a product the same way at every thread
 * count (nn.c's linear forward). Asynchronous
 * signals wait until a dnnl_sgemm call is done (oneDNN 2.6's kernels move
 * the stack pointer into the heap: gemm.c).
 *
 * Not here: bf16 products (matmul_bf16.h); the choice of OpenBLAS kernel
 * and the thread count (system.h).
 */
#ifndef XSA_GEMM_H
#define XSA_GEMM_H

typedef enum { XSA_GEMM_OPENBLAS = 0, XSA_GEMM_DNNL = 1 } xsa_gemm_backend;

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, as cblas_sgemm with
 * CblasRowMajor: ta = 0, A is [M,K] (row stride lda); ta = 1, A is stored
 * [K,M] and used transposed; tb likewise for B ([K,N] or stored [N,K]).
 * beta = 0 never reads C. Uses the default backend when xsa_gemm_init
 * has not succeeded (it is called by luaopen_xsa, xsa_gpt_new and
 * xsa_tensor_matmul, which fail on a bad XSA_GEMM). */
void xsa_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

/* Reads XSA_GEMM (once; later calls repeat the first answer). 0, or -1
 * with an error naming the value and the backends this build has. */
int xsa_gemm_init(void);
/* Selects the backend by name ("openblas", "dnnl", or "default": the
 * rule above); it overrides XSA_GEMM. 0, or -1 with an error. Not while
 * products run on other threads. */
int xsa_gemm_set(const char *name);
xsa_gemm_backend xsa_gemm_get(void);
/* "openblas" or "dnnl". */
const char *xsa_gemm_name(void);
/* The library: "OpenBLAS Haswell cblas_sgemm", "oneDNN 2.6.3 dnnl_sgemm". */
const char *xsa_gemm_describe(void);
/* How the backend was chosen: "XSA_GEMM", "xsa_gemm_set" or "default". */
const char *xsa_gemm_source(void);
/* 1 when this build can run dnnl_sgemm (oneDNN). */
int xsa_gemm_has_dnnl(void);
/* Products dnnl_sgemm refused (bad arguments, or no memory for its
 * packing), which OpenBLAS then ran; stderr says so at the first. Never
 * expected: the tests check it stays 0. */
long xsa_gemm_failures(void);

#endif
