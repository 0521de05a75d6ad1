/* system.c: OpenBLAS kernel and thread facts (see system.h). */
#include <string.h>

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

int xsa_threads(void) { return openblas_get_num_threads(); }

int xsa_set_threads(int n)
{
    if (n < 1 || n > 1024) return xsa_error("set_threads: %d threads is not in [1, 1024]", n);
    openblas_set_num_threads(n);
    return 0;
}
