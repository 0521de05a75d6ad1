/* system.c: OpenBLAS kernel and thread facts (see system.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cblas.h>

#include "error.h"
#include "system.h"

const char *xsa_blas_corename(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

const char *xsa_cpu_best_coretype(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        /* gcc 12 cannot name avx512bf16 here; the cpuid bit (leaf 7,
         * subleaf 1, eax bit 5) tells whether the Cooperlake kernels apply. */
        unsigned a, b, c, d;
        __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        return (a & (1u << 5)) ? "Cooperlake" : "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

/* Kernels at least as good as Haswell's AVX2 path, by OpenBLAS core name. */
static int strong_core(const char *name)
{
    static const char *const strong[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                         "SapphireRapids", NULL};
    for (int i = 0; strong[i]; i++)
        if (strcmp(name, strong[i]) == 0) return 1;
    return 0;
}

int xsa_blas_is_fallback(void)
{
    const char *best = xsa_cpu_best_coretype();
    return best != NULL && !strong_core(xsa_blas_corename());
}

/* The engine's thread count. OpenBLAS itself stays on one thread: its
 * threaded sgemm splits a product's rows and columns over its threads, and
 * its kernel's tiles then fall elsewhere (OpenBLAS 0.3.21's Haswell/Zen
 * sgemm_kernel_8x4_haswell_2.c sums some tiles with two accumulators,
 * even and odd k, and others with one), so a product's bits changed with
 * the thread count (the Cooperlake kernel's too, for some shapes). The
 * engine runs whole products on its own threads instead (the lm_head's
 * vocabulary blocks, a linear layer's two backward products), each one
 * OpenBLAS call on one thread, and adds what they share in a fixed order:
 * any thread count gives the bits of one thread. Read once from OpenBLAS
 * (OPENBLAS_NUM_THREADS, or the cores it found) before it is set to one
 * thread: at load time (the constructor), or at the first call. */
static _Atomic int engine_threads;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void threads_init(void)
{
    int n = openblas_get_num_threads();
    engine_threads = n < 1 ? 1 : n > 1024 ? 1024 : n;
    openblas_set_num_threads(1);
}

__attribute__((constructor)) static void threads_at_load(void)
{
    pthread_once(&threads_once, threads_init);
}

static _Thread_local atomic_int *threads_busy;

int xsa_threads(void)
{
    pthread_once(&threads_once, threads_init);
    int n = engine_threads - (threads_busy ? atomic_load(threads_busy) : 0);
    return n < 1 ? 1 : n;
}

void xsa_threads_lend(atomic_int *busy)
{
    threads_busy = busy;
}

int xsa_set_threads(int n)
{
    if (n < 1 || n > 1024) return xsa_error("set_threads: %d threads is not in [1, 1024]", n);
    pthread_once(&threads_once, threads_init);
    engine_threads = n;
    openblas_set_num_threads(1); /* again, should the embedder have changed it */
    return 0;
}

void xsa_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (!p || bytes < ((size_t)2 << 20)) return;
    /* the whole 4 KB pages inside the buffer */
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, z = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (z > a) madvise((void *)a, z - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}
