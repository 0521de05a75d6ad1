/*
 * bench_peak.c: the machine's own limits, measured at the start of `make
 * bench`: the float32 FMA peak (1 thread and the engine's threads), the
 * bf16 dot-product peak where the CPU has avx512_bf16, and the read
 * bandwidth over a buffer far larger than the caches (256 MB). The kernels
 * and why they are right: peak.h. Not a test: prints numbers.
 *
 * Each peak is the best of many short runs (what the machine can do), with
 * the median next to it (what the load of the moment left of it): on a
 * shared machine the two differ by the load, and the best is the limit.
 *
 * Besides the text, three machine-readable lines that tests/bench.sh reads
 * and passes on to bench_step (--peak-f32, --peak-bf16) and bench_generate
 * (--read-gbs):
 *
 *   peak f32 gflops=441.2 median=180.3 isa=avx512 threads=2
 *   peak bf16 gflops=850.1 median=300.2 isa=avx512_bf16 threads=2   (or: peak bf16 none)
 *   peak read gbs=38.5 median=20.1 threads=2
 *
 * Usage: bench_peak [runs]   (default 100; the bandwidth: best of 20)
 */
#include <stdio.h>
#include <stdlib.h>

#include "../core/system.h"
#include "peak.h"

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    if (runs < 1) runs = 1;
    int th = xsa_threads();
    printf("bench_peak: CPU %s, OpenBLAS kernel %s, %d engine thread%s, load average %s\n",
           peak_cpu_model(), xsa_blas_corename(), th, th == 1 ? "" : "s", peak_load());
    peak_result one = peak_f32(1, runs), all = peak_f32(th, runs);
    if (!one.ok || !all.ok) {
        printf("bench_peak: the float32 kernel's sums were wrong\n");
        return 1;
    }
    printf("float32 FMA peak (%s, register-resident chains, best | median of %d runs): "
           "1 thread %.1f | %.1f GFLOP/s; %d threads %.1f | %.1f GFLOP/s (%.2fx 1 thread)\n",
           all.isa, runs, one.gflops, one.median, th, all.gflops, all.median, all.gflops / one.gflops);
    peak_result bf1 = peak_bf16(1, runs), bf = peak_bf16(th, runs);
    if (bf.isa && (!bf.ok || !bf1.ok)) {
        printf("bench_peak: the bf16 kernel's sums were wrong\n");
        return 1;
    }
    if (bf.isa)
        printf("bf16 dot-product peak (vdpbf16ps, bf16 x bf16 -> float32, best | median): 1 thread "
               "%.1f | %.1f GFLOP/s; %d threads %.1f | %.1f GFLOP/s (%.2fx float32)\n",
               bf1.gflops, bf1.median, th, bf.gflops, bf.median, bf.gflops / all.gflops);
    else
        printf("bf16 dot-product peak: none (this CPU has no avx512_bf16)\n");
    peak_result rd = peak_read(th, (size_t)256 << 20, 20);
    if (!rd.ok) {
        printf("bench_peak: the read bandwidth's sum was wrong (or no memory for 256 MB)\n");
        return 1;
    }
    printf("read bandwidth (a sum over 256 MB on %d threads, best | median of 20): %.1f | %.1f GB/s\n", th,
           rd.gflops, rd.median);
    printf("peak f32 gflops=%.1f median=%.1f isa=%s threads=%d\n", all.gflops, all.median, all.isa, th);
    if (bf.isa) printf("peak bf16 gflops=%.1f median=%.1f isa=%s threads=%d\n", bf.gflops, bf.median, bf.isa, th);
    else printf("peak bf16 none\n");
    printf("peak read gbs=%.1f median=%.1f threads=%d\n", rd.gflops, rd.median, th);
    printf("load average at the end: %s\n", peak_load());
    return 0;
}
