/*
 * test_peak.c: the peak kernels of make bench (peak.h) measure what they
 * claim. Each kernel this CPU runs must return its known sum (so no
 * compiler has merged, dropped or shortened its chains: the sums of n and
 * 2n iterations differ by exactly the n extra products), and its measured
 * rate must be plausible: above 1/16 of one FMA a cycle at 1 GHz (a floor
 * no loaded machine falls under in the best of 20 runs) and under 4 FMA
 * units at 6 GHz (a ceiling no CPU reaches: a miscounted kernel, like 16
 * chains merged into one, lands far above it).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "peak.h"

static const char *isa_of(const char *isa) { return isa ? isa : "none"; }

static void check_kernel(peak_kernel k)
{
    long n = 1L << 12;
    double s1 = k.fn(n), s2 = k.fn(2 * n);
    CHECK(s1 == peak_expected(k, n), "%s: sum %.17g after %ld iterations, want %.17g", k.isa, s1, n,
          peak_expected(k, n));
    CHECK(s2 - s1 == (double)k.chains * k.width * n * 0x1p-20 * (k.flops / 2),
          "%s: n more iterations added %.17g", k.isa, s2 - s1);
    CHECK(s1 != peak_expected(k, n + 1), "%s: the check tells n from n + 1", k.isa);
    peak_result r = peak_run(k, 1, 20, PEAK_ITERS);
    double lanes = (double)k.width * k.flops; /* FLOPs of one instruction's lanes */
    CHECK(r.ok, "%s: a timed run's sum was wrong", k.isa);
    CHECK(r.gflops > 1.0 * lanes / 16 && r.gflops < 6.0 * lanes * 4,
          "%s: %.1f GFLOP/s on 1 thread is outside [%.1f, %.1f]", k.isa, r.gflops, lanes / 16,
          6.0 * lanes * 4);
    printf("%s: %.1f GFLOP/s on 1 thread (best of 20; median %.1f)\n", k.isa, r.gflops, r.median);
}

int main(void)
{
    unsetenv("XSA_PEAK_ISA"); /* the widest kernels first, whatever the caller's environment says */
    /* every path this CPU runs, not only the widest */
    check_kernel((peak_kernel){"scalar", peak_k_scalar, 8, 1, 2});
#ifdef PEAK_X86
    __builtin_cpu_init();
    check_kernel((peak_kernel){"sse2", peak_k_sse2, 12, 4, 2});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        check_kernel((peak_kernel){"avx2", peak_k_avx2, 12, 8, 2});
    if (__builtin_cpu_supports("avx512f")) {
        check_kernel((peak_kernel){"avx512", peak_k_avx512, 16, 16, 2});
        CHECK(!strcmp(isa_of(peak_pick("f32").isa), "avx512"), "an AVX-512 CPU measures with %s",
              isa_of(peak_pick("f32").isa));
    }
#endif
    /* XSA_PEAK_ISA (make bench ISA=avx2): a narrower kernel than the widest,
     * no bf16 beside it; an unknown name, or a path this CPU lacks, refused */
    setenv("XSA_PEAK_ISA", "scalar", 1);
    CHECK(!peak_isa_error() && !strcmp(isa_of(peak_pick("f32").isa), "scalar") && !peak_pick("bf16").isa,
          "XSA_PEAK_ISA=scalar picks %s, bf16 none", isa_of(peak_pick("f32").isa));
    setenv("XSA_PEAK_ISA", "avx3", 1);
    CHECK(peak_isa_error() && strstr(peak_isa_error(), "not one of avx512, avx2, sse2, scalar") &&
              !peak_pick("f32").isa && !peak_f32(1, 1).ok, "an unknown name: %s", peak_isa_error());
#ifdef PEAK_X86
    setenv("XSA_PEAK_ISA", "sse2", 1);
    CHECK(!peak_isa_error() && !strcmp(isa_of(peak_pick("f32").isa), "sse2"), "XSA_PEAK_ISA=sse2 picks %s",
          isa_of(peak_pick("f32").isa));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        setenv("XSA_PEAK_ISA", "avx2", 1);
        peak_result r = peak_f32(2, 3);
        CHECK(!peak_isa_error() && r.ok && !strcmp(isa_of(r.isa), "avx2"), "XSA_PEAK_ISA=avx2 measures with %s",
              isa_of(r.isa));
    }
    if (!__builtin_cpu_supports("avx512f")) {
        setenv("XSA_PEAK_ISA", "avx512", 1);
        CHECK(peak_isa_error() && strstr(peak_isa_error(), "this CPU cannot run it"), "avx512 here: %s",
              peak_isa_error());
    }
#endif
    setenv("XSA_PEAK_ISA", "", 1);
    CHECK(!peak_isa_error() && peak_pick("f32").isa, "empty: the widest, %s", isa_of(peak_pick("f32").isa));
    unsetenv("XSA_PEAK_ISA");
    peak_kernel bf = peak_pick("bf16");
    if (bf.isa) check_kernel(bf);
    else printf("no avx512_bf16 here: bf16 kernel not checked\n");

    /* the engine's threads at once: the same sums on every thread */
    peak_result all = peak_f32(2, 10);
    CHECK(all.ok && all.gflops > 0, "float32 peak on 2 threads: ok %d, %.1f GFLOP/s", all.ok, all.gflops);
    /* 32 MB of ones: the sum is their count */
    peak_result rd = peak_read(2, (size_t)32 << 20, 3);
    CHECK(rd.ok && rd.gflops > 0.1 && rd.gflops < 10000, "read: ok %d, %.1f GB/s", rd.ok, rd.gflops);
    CHECK(strlen(peak_cpu_model()) > 0, "a CPU name");
    return check_done("test_peak");
}
