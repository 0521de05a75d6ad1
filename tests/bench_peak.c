/*
 * bench_peak.c: the machine's own limits, measured at the start of `make
 * bench`: the float32 FMA peak (1 thread and the engine's threads), the
 * bf16 dot-product peak where the CPU has avx512_bf16, and the read
 * bandwidth over a buffer far larger than the caches (256 MB). The kernels
 * and why they are right: peak.h. Not a test: prints numbers.
 *
 * Each peak is the best of many short runs (what the machine can do), with
 * the median next to it (what the load of the moment left of it): on a
 * shared machine the two differ by the load, and the best is the limit
 * (gflops=; peak_limit in peak.h says when it is threads x one thread's).
 *
 * Besides the text, three machine-readable lines that tests/bench.sh reads
 * and passes on to bench_step (--peak-f32, --peak-bf16) and bench_generate
 * (--read-gbs):
 *
 *   peak f32 gflops=441.2 measured=441.2 one=229.0 median=180.3 isa=avx512 threads=2
 *   peak bf16 gflops=850.1 measured=850.1 one=458.0 median=300.2 isa=avx512_bf16 threads=2
 *                                                       (or: peak bf16 none)
 *   peak read gbs=38.5 measured=38.5 one=22.4 median=20.1 threads=2
 *
 * Usage: bench_peak [runs]   (default 100, 400 on many threads; the bandwidth: 10 and 20)
 * XSA_PEAK_ISA=avx2 (make bench ISA=avx2) measures a narrower path's peak (peak.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "../core/gemm.h"
#include "../core/system.h"
#include "peak.h"

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    if (runs < 1) runs = 1;
    if (peak_isa_error()) {
        printf("bench_peak: %s\n", peak_isa_error());
        return 1;
    }
    int th = xsa_threads();
    printf("bench_peak: CPU %s, OpenBLAS kernel %s, float32 GEMM %s, %d engine thread%s, load average %s\n",
           peak_cpu_model(), xsa_blas_corename(), xsa_gemm_describe(), th, th == 1 ? "" : "s", peak_load());
    /* more runs on many threads: they need every core free at once */
    peak_result one = peak_f32(1, runs), all = peak_f32(th, th > 1 ? 4 * runs : runs);
    if (!one.ok || !all.ok) {
        printf("bench_peak: the float32 kernel's sums were wrong\n");
        return 1;
    }
    printf("float32 FMA peak (%s, register-resident chains, best | median of %d runs): "
           "1 thread %.1f | %.1f GFLOP/s; %d threads %.1f | %.1f GFLOP/s (%.2fx 1 thread)\n",
           all.isa, runs, one.gflops, one.median, th, all.gflops, all.median, all.gflops / one.gflops);
    int up32 = 0, up16 = 0;
    double lim32 = peak_limit(one, all, &up32), lim16 = 0;
    peak_result bf1 = peak_bf16(1, runs), bf = peak_bf16(th, th > 1 ? 4 * runs : runs);
    if (bf.isa && (!bf.ok || !bf1.ok)) {
        printf("bench_peak: the bf16 kernel's sums were wrong\n");
        return 1;
    }
    if (bf.isa) lim16 = peak_limit(bf1, bf, &up16);
    if (bf.isa)
        printf("bf16 dot-product peak (vdpbf16ps, bf16 x bf16 -> float32, best | median): 1 thread "
               "%.1f | %.1f GFLOP/s; %d threads %.1f | %.1f GFLOP/s (%.2fx float32)\n",
               bf1.gflops, bf1.median, th, bf.gflops, bf.median, bf.gflops / all.gflops);
    else
        printf("bf16 dot-product peak: none (this CPU has no avx512_bf16)\n");
    /* more threads read at least as fast as one (more misses in flight), so
     * a one-thread pass that found its core free bounds the threads' below */
    peak_result rd1 = peak_read(1, (size_t)256 << 20, 10), rd = peak_read(th, (size_t)256 << 20, 20);
    double lim_rd = rd1.gflops > rd.gflops ? rd1.gflops : rd.gflops;
    if (!rd.ok || !rd1.ok) {
        printf("bench_peak: the read bandwidth's sum was wrong (or no memory for 256 MB)\n");
        return 1;
    }
    printf("read bandwidth (a sum over 256 MB, best | median): 1 thread %.1f | %.1f GB/s (of 10), %d threads %.1f | "
           "%.1f GB/s (of 20)\n", rd1.gflops, rd1.median, th, rd.gflops, rd.median);
    if (up32 || up16)
        printf("the %d-thread runs never had every core at once (load): the limit%s %d x the 1-thread peak\n", th,
               up32 && up16 ? "s are" : up32 ? " (float32) is" : " (bf16) is", th);
    printf("peak f32 gflops=%.1f measured=%.1f one=%.1f median=%.1f isa=%s threads=%d\n", lim32, all.gflops,
           one.gflops, all.median, all.isa, th);
    if (bf.isa)
        printf("peak bf16 gflops=%.1f measured=%.1f one=%.1f median=%.1f isa=%s threads=%d\n", lim16, bf.gflops,
               bf1.gflops, bf.median, bf.isa, th);
    else printf("peak bf16 none\n");
    printf("peak read gbs=%.1f measured=%.1f one=%.1f median=%.1f threads=%d\n", lim_rd, rd.gflops, rd1.gflops,
           rd.median, th);
    printf("load average at the end: %s\n", peak_load());
    return 0;
}
