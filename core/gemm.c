/* gemm.c: xsa_sgemm and the choice of its backend (see gemm.h). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "error.h"
#include "gemm.h"
#include "system.h"

#if defined(XSA_HAVE_DNNL)
#include <oneapi/dnnl/dnnl.h>
/* libgomp comes with libdnnl (its OpenMP runtime), as in matmul_bf16.c */
extern void omp_set_num_threads(int n) __attribute__((weak));
extern int omp_get_max_threads(void) __attribute__((weak));
#define HAVE_DNNL 1
#else
#define HAVE_DNNL 0
#endif

static _Atomic int backend = XSA_GEMM_OPENBLAS;
static _Atomic long failures;
static const char *source = "default";
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char env_error[256]; /* empty: XSA_GEMM unset or valid */
/* oneDNN 2.6's JIT sgemm kernels point rsp into a heap buffer while they
 * run (oneDNN issue #4845, fixed in 3.11), so a signal handler run on that
 * thread writes its frame into the heap: Ctrl-C in xsa (interrupt.c) then
 * aborted with "double free or corruption". Asynchronous signals therefore
 * wait, blocked, until the product is done (milliseconds); faults that the
 * call itself raises are not blocked. */
static sigset_t async_signals;

/* The rule of gemm.h: measured on AVX-512 (Zen 5) only. */
static xsa_gemm_backend default_backend(void)
{
#if HAVE_DNNL && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return XSA_GEMM_DNNL;
#endif
    return XSA_GEMM_OPENBLAS;
}

/* 0 and *out, or -1 with the reason in msg. */
static int parse(const char *name, xsa_gemm_backend *out, char *msg, size_t n)
{
    if (strcmp(name, "openblas") == 0) {
        *out = XSA_GEMM_OPENBLAS;
        return 0;
    }
    if (strcmp(name, "dnnl") == 0) {
        if (!HAVE_DNNL) {
            snprintf(msg, n, "\"dnnl\": this build of xsa has no oneDNN (install libdnnl-dev, then "
                             "rebuild: make clean && make); the backend here is \"openblas\"");
            return -1;
        }
        *out = XSA_GEMM_DNNL;
        return 0;
    }
    if (strcmp(name, "default") == 0) {
        *out = default_backend();
        return 0;
    }
    snprintf(msg, n, "\"%.60s\" is not a GEMM backend (known: \"openblas\"%s, \"default\")", name,
             HAVE_DNNL ? ", \"dnnl\"" : "");
    return -1;
}

static void env_init(void)
{
    sigfillset(&async_signals);
    int sync[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < sizeof sync / sizeof sync[0]; i++) sigdelset(&async_signals, sync[i]);
    const char *e = getenv("XSA_GEMM");
    xsa_gemm_backend b = default_backend();
    if (e) {
        char msg[200];
        if (parse(e, &b, msg, sizeof msg) != 0) {
            snprintf(env_error, sizeof env_error, "XSA_GEMM=%s", msg);
            b = default_backend();
        } else {
            source = "XSA_GEMM";
        }
    }
    backend = b;
}

int xsa_gemm_init(void)
{
    pthread_once(&env_once, env_init);
    return env_error[0] ? xsa_error("%s", env_error) : 0;
}

int xsa_gemm_set(const char *name)
{
    pthread_once(&env_once, env_init);
    xsa_gemm_backend b;
    char msg[200];
    if (!name || parse(name, &b, msg, sizeof msg) != 0)
        return xsa_error("gemm: %s", name ? msg : "no backend named");
    backend = b;
    source = "xsa_gemm_set";
    env_error[0] = 0; /* the program's choice replaces the environment's */
    return 0;
}

xsa_gemm_backend xsa_gemm_get(void)
{
    pthread_once(&env_once, env_init);
    return (xsa_gemm_backend)backend;
}

const char *xsa_gemm_name(void) { return xsa_gemm_get() == XSA_GEMM_DNNL ? "dnnl" : "openblas"; }

const char *xsa_gemm_source(void)
{
    pthread_once(&env_once, env_init);
    return source;
}

int xsa_gemm_has_dnnl(void) { return HAVE_DNNL; }

long xsa_gemm_failures(void) { return failures; }

const char *xsa_gemm_describe(void)
{
    static _Thread_local char buf[80];
#if HAVE_DNNL
    if (xsa_gemm_get() == XSA_GEMM_DNNL) {
        const dnnl_version_t *v = dnnl_version();
        snprintf(buf, sizeof buf, "oneDNN %d.%d.%d dnnl_sgemm", v->major, v->minor, v->patch);
        return buf;
    }
#endif
    snprintf(buf, sizeof buf, "OpenBLAS %s cblas_sgemm", xsa_blas_corename());
    return buf;
}

void xsa_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
#if HAVE_DNNL
    if (xsa_gemm_get() == XSA_GEMM_DNNL) {
        /* one OpenMP thread for this call, on this thread: dnnl_sgemm
         * splits K over its threads when it has several, which would
         * change the bits with the thread count, and the engine already
         * runs products side by side on its own threads */
        int had = omp_get_max_threads ? omp_get_max_threads() : 1;
        if (omp_set_num_threads) omp_set_num_threads(1);
        sigset_t old;
        int masked = pthread_sigmask(SIG_BLOCK, &async_signals, &old) == 0;
        dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                      ldb, beta, C, ldc);
        if (masked) pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (omp_set_num_threads) omp_set_num_threads(had);
        if (st == dnnl_success) return;
        /* only invalid arguments (the callers' bug) or no memory for its
         * packing buffers get here: say so once and give the product to
         * OpenBLAS rather than leave C unwritten */
        if (failures++ == 0)
            fprintf(stderr, "xsa: dnnl_sgemm failed (status %d, %c%c M %d N %d K %d); "
                            "OpenBLAS ran that product\n", (int)st, ta ? 'T' : 'N', tb ? 'T' : 'N',
                    M, N, K);
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
