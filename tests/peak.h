/*
 * peak.h: the machine's own limits, measured, for the benchmarks' "x its
 * limit" figures (bench_peak, bench_step, bench_generate) and checked by
 * test_peak: the float32 FMA peak, the bf16 dot-product peak (vdpbf16ps)
 * and the read bandwidth, each on a given number of threads, plus the
 * facts printed with every figure (CPU model, load average).
 *
 *   peak_result r = peak_f32(threads, 10);   // best of 10 runs
 *   if (r.ok) printf("%s %.1f GFLOP/s\n", r.isa, r.gflops);
 *
 * The FMA kernels keep independent chains of x = x * a + b in registers
 * (more chains than an FMA unit's latency times its issue rate, so the
 * chains never wait on each other), with a = 1 and b = 2^-20 read from
 * volatile memory: the compiler cannot fold the loop. Chain i starts at
 * i/16 (also read from volatile memory): with equal starts gcc 12 merged
 * the 16 chains into one, whose sum was still "right". After n <= 2^22
 * iterations every lane holds exactly its start + n * 2^-20, so each run's
 * sum is checked against a known value (a merged, dropped or shortened
 * loop fails it, r.ok = 0). The ISA is picked at run time (AVX-512, AVX2 + FMA, SSE2 on
 * x86-64 without AVX, plain C elsewhere), each kernel compiled with its
 * own target attribute so a build for another machine still has them all.
 * Best of several runs, as STREAM reports: other load only lowers a run,
 * so the best is the closest to what the machine can do.
 *
 * Not here: cache bandwidths, latency, frequency (a VM's /proc/cpuinfo
 * reports the nominal clock, not the boost the kernels run at).
 */
#ifndef XSA_PEAK_H
#define XSA_PEAK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define PEAK_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* the kernels' operands: volatile so that no compiler knows them */
static volatile float peak_a = 1.0f, peak_b = 0x1p-20f, peak_s = 0x1p-4f;
static volatile unsigned short peak_a16 = 0x3F80, peak_b16 = 0x3580; /* bf16 1, 2^-20 */

typedef struct {
    int ok;          /* every run's sum was the known value */
    const char *isa; /* "avx512", "avx2", "sse2", "scalar", "avx512_bf16"; NULL: none */
    int threads;
    double gflops;   /* best run; GB/s for peak_read */
    double median;   /* the median run: what this load left of it */
} peak_result;

static inline double peak_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the kernels: each returns the sum of its lanes after n iterations -- */

#ifdef PEAK_X86
#define PEAK_R4(S) S(0) S(1) S(2) S(3)
#define PEAK_R12(S) PEAK_R4(S) S(4) S(5) S(6) S(7) S(8) S(9) S(10) S(11)
#define PEAK_R16(S) PEAK_R12(S) S(12) S(13) S(14) S(15)

/* 16 chains of 16 lanes (32 zmm registers leave room for a and b) */
__attribute__((target("avx512f"))) static inline double peak_k_avx512(long n)
{
    __m512 a = _mm512_set1_ps(peak_a), b = _mm512_set1_ps(peak_b);
    float s0 = peak_s;
#define D(i) __m512 x##i = _mm512_set1_ps((float)i * s0);
    PEAK_R16(D)
#undef D
    for (long k = 0; k < n; k++) {
#define F(i) x##i = _mm512_fmadd_ps(x##i, a, b);
        PEAK_R16(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double s = 0;
    float l[16];
#define S(i) _mm512_storeu_ps(l, x##i); for (int j = 0; j < 16; j++) s += l[j];
    PEAK_R16(S)
#undef S
    return s;
}

/* 12 chains of 8 lanes (16 ymm registers); a 4-cycle FMA on 2 ports needs 8 */
__attribute__((target("avx2,fma"))) static inline double peak_k_avx2(long n)
{
    __m256 a = _mm256_set1_ps(peak_a), b = _mm256_set1_ps(peak_b);
    float s0 = peak_s;
#define D(i) __m256 x##i = _mm256_set1_ps((float)i * s0);
    PEAK_R12(D)
#undef D
    for (long k = 0; k < n; k++) {
#define F(i) x##i = _mm256_fmadd_ps(x##i, a, b);
        PEAK_R12(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double s = 0;
    float l[8];
#define S(i) _mm256_storeu_ps(l, x##i); for (int j = 0; j < 8; j++) s += l[j];
    PEAK_R12(S)
#undef S
    return s;
}

/* x86-64 without AVX: SSE2's separate multiply and add, 12 chains of 4 */
__attribute__((target("sse2"))) static inline double peak_k_sse2(long n)
{
    __m128 a = _mm_set1_ps(peak_a), b = _mm_set1_ps(peak_b);
    float s0 = peak_s;
#define D(i) __m128 x##i = _mm_set1_ps((float)i * s0);
    PEAK_R12(D)
#undef D
    for (long k = 0; k < n; k++) {
#define F(i) x##i = _mm_add_ps(_mm_mul_ps(x##i, a), b);
        PEAK_R12(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double s = 0;
    float l[4];
#define S(i) _mm_storeu_ps(l, x##i); for (int j = 0; j < 4; j++) s += l[j];
    PEAK_R12(S)
#undef S
    return s;
}

/* vdpbf16ps: each of 16 lanes adds two bf16 products a0 b0 + a1 b1 */
__attribute__((target("avx512f,avx512bf16"))) static inline double peak_k_bf16(long n)
{
    __m512bh a = (__m512bh)_mm512_set1_epi16((short)peak_a16);
    __m512bh b = (__m512bh)_mm512_set1_epi16((short)peak_b16);
    float s0 = peak_s;
#define D(i) __m512 x##i = _mm512_set1_ps((float)i * s0);
    PEAK_R16(D)
#undef D
    for (long k = 0; k < n; k++) {
#define F(i) x##i = _mm512_dpbf16_ps(x##i, a, b);
        PEAK_R16(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double s = 0;
    float l[16];
#define S(i) _mm512_storeu_ps(l, x##i); for (int j = 0; j < 16; j++) s += l[j];
    PEAK_R16(S)
#undef S
    return s;
}
#endif

/* plain C: 8 chains, kept scalar so the figure is what scalar code gets */
__attribute__((optimize("no-tree-vectorize"))) static inline double peak_k_scalar(long n)
{
    float a = peak_a, b = peak_b, s0 = peak_s;
    float x0 = 0, x1 = s0, x2 = 2 * s0, x3 = 3 * s0, x4 = 4 * s0, x5 = 5 * s0, x6 = 6 * s0, x7 = 7 * s0;
    for (long k = 0; k < n; k++) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
        __asm__ volatile("" ::: "memory");
    }
    return (double)x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}

/* ---- what the CPU has --------------------------------------------------- */

static inline int peak_has_bf16(void)
{
#ifdef PEAK_X86
    /* gcc 12's __builtin_cpu_supports cannot name avx512bf16: cpuid leaf 7,
     * subleaf 1, eax bit 5; avx512f (with the OS's zmm state) is checked too */
    unsigned a, b, c, d;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1;
#else
    return 0;
#endif
}

typedef struct {
    const char *isa;
    double (*fn)(long n);
    int chains, width; /* independent chains, float lanes each */
    int flops;         /* per lane and iteration: 2 (an FMA), 4 (a bf16 pair) */
} peak_kernel;

/* XSA_PEAK_ISA (make bench ISA=avx2) names a narrower float32 kernel than
 * the widest, for a run restricted to that path on a wider CPU: "avx512",
 * "avx2", "sse2" or "scalar"; unset or empty: the widest. NULL when it is
 * usable, else why not (an unknown name, or one this CPU cannot run). */
static inline const char *peak_isa_error(void)
{
    static char why[160];
    const char *e = getenv("XSA_PEAK_ISA");
    if (!e || !*e || !strcmp(e, "scalar")) return NULL;
    int known = !strcmp(e, "avx512") || !strcmp(e, "avx2") || !strcmp(e, "sse2");
    int runs = 0;
#ifdef PEAK_X86
    __builtin_cpu_init();
    runs = !strcmp(e, "sse2") || (!strcmp(e, "avx2") && __builtin_cpu_supports("avx2") &&
                                  __builtin_cpu_supports("fma")) ||
           (!strcmp(e, "avx512") && __builtin_cpu_supports("avx512f"));
#endif
    if (runs) return NULL;
    snprintf(why, sizeof why, known ? "XSA_PEAK_ISA=%.40s: this CPU cannot run it"
                                    : "XSA_PEAK_ISA=%.40s: not one of avx512, avx2, sse2, scalar", e);
    return why;
}

/* The widest float32 FMA kernel this CPU runs, or the one XSA_PEAK_ISA
 * names; which = "f32" or "bf16" (isa NULL when the CPU has no bf16 dot
 * product, when XSA_PEAK_ISA names another path, or when XSA_PEAK_ISA is
 * unusable: peak_isa_error). */
static inline peak_kernel peak_pick(const char *which)
{
    peak_kernel k = {NULL, NULL, 0, 0, 0};
    int bf16 = !strcmp(which, "bf16");
    const char *want = getenv("XSA_PEAK_ISA");
    if (want && !*want) want = NULL;
    if (peak_isa_error()) return k;
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (bf16) {
        if (peak_has_bf16() && (!want || !strcmp(want, "avx512")))
            k = (peak_kernel){"avx512_bf16", peak_k_bf16, 16, 16, 4};
        return k;
    }
    if (__builtin_cpu_supports("avx512f") && (!want || !strcmp(want, "avx512")))
        return (peak_kernel){"avx512", peak_k_avx512, 16, 16, 2};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && (!want || !strcmp(want, "avx2")))
        return (peak_kernel){"avx2", peak_k_avx2, 12, 8, 2};
    if (!want || !strcmp(want, "sse2")) return (peak_kernel){"sse2", peak_k_sse2, 12, 4, 2};
#else
    if (bf16) return k;
#endif
    return (peak_kernel){"scalar", peak_k_scalar, 8, 1, 2};
}

/* The sum kernel k returns after n iterations: chain i starts at i/16 and
 * each lane adds 2^-20 per product; every value on the way is a multiple
 * of 2^-20 below 8, exact in float32 while n <= 2^22. */
static inline double peak_expected(peak_kernel k, long n)
{
    return (double)k.width * ((double)peak_s * k.chains * (k.chains - 1) / 2 +
                              k.chains * (double)n * 0x1p-20 * (k.flops / 2));
}

/* ---- running a kernel on threads ------------------------------------------ */

typedef struct {
    double (*fn)(long n);
    long n;
    double sum, t0, t1;
} peak_job;

static inline void *peak_job_run(void *p)
{
    peak_job *j = p;
    j->t0 = peak_now();
    j->sum = j->fn(j->n);
    j->t1 = peak_now();
    return NULL;
}

static int peak_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double peak_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, peak_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define PEAK_MAXT 64

/* Best and median GFLOP/s of `runs` runs of kernel k, n iterations on
 * each of `threads` threads at once, timed from the first thread's start to
 * the last one's end (thread creation left out); ok = 0 when a sum was not
 * the known value. */
static inline peak_result peak_run(peak_kernel k, int threads, int runs, long n)
{
    if (threads < 1) threads = 1;
    if (threads > PEAK_MAXT) threads = PEAK_MAXT;
    if (runs < 1) runs = 1;
    peak_result r = {1, k.isa, threads, 0, 0};
    if (!k.fn) return (peak_result){0, NULL, threads, 0, 0};
    double want = peak_expected(k, n), *g = malloc((size_t)runs * sizeof *g);
    if (!g) return (peak_result){0, k.isa, threads, 0, 0};
    for (int run = 0; run < runs; run++) {
        peak_job j[PEAK_MAXT];
        pthread_t t[PEAK_MAXT];
        for (int i = 0; i < threads; i++) j[i] = (peak_job){k.fn, n, 0, 0, 0};
        int started = 1;
        for (int i = 1; i < threads; i++, started++)
            if (pthread_create(&t[i], NULL, peak_job_run, &j[i]) != 0) break;
        peak_job_run(&j[0]);
        for (int i = 1; i < started; i++) pthread_join(t[i], NULL);
        if (started < threads) r.ok = 0;
        double t0 = j[0].t0, t1 = j[0].t1;
        for (int i = 0; i < started; i++) {
            if (j[i].sum != want) r.ok = 0;
            if (j[i].t0 < t0) t0 = j[i].t0;
            if (j[i].t1 > t1) t1 = j[i].t1;
        }
        g[run] = (double)k.chains * k.width * k.flops * (double)n * started / (t1 - t0) / 1e9;
        if (g[run] > r.gflops) r.gflops = g[run];
    }
    r.median = peak_median(g, runs);
    free(g);
    return r;
}

/* 2^20 iterations, 1-3 ms a run on a current core: short enough that
 * some runs of many fall between other processes' time slices on a loaded
 * machine (the sums stay exact up to 2^22) */
#define PEAK_ITERS (1L << 20)

static inline peak_result peak_f32(int threads, int runs)
{
    return peak_run(peak_pick("f32"), threads, runs, PEAK_ITERS);
}

static inline peak_result peak_bf16(int threads, int runs)
{
    return peak_run(peak_pick("bf16"), threads, runs, PEAK_ITERS / 2); /* 2 products a lane */
}

/* The peak at `all.threads` threads to take as the limit. On a loaded
 * machine the threads of a run rarely all hold a core at once, and the
 * best of many runs can still come out at one core's rate; a run of one
 * thread finds its core free far more often. So: the measured many-thread
 * best when it is at least 0.9x threads x the one-thread best, else
 * threads x the one-thread best, an upper bound (a single busy core boosts
 * higher: 2 x 229 against 444 GFLOP/s measured on a quiet 2-core Zen 5).
 * *upper is set to 1 when the bound was used. */
static inline double peak_limit(peak_result one, peak_result all, int *upper)
{
    double ub = all.threads * one.gflops;
    *upper = all.gflops < 0.9 * ub;
    return *upper ? ub : all.gflops;
}

/* ---- read bandwidth --------------------------------------------------------- */

typedef struct {
    const float *p;
    size_t n;
    double sum;
} peak_rjob;

#ifdef PEAK_X86
__attribute__((target("avx512f"))) static inline double peak_sum_avx512(const float *p, size_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + i));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + i + 48));
    }
    double s = (double)_mm512_reduce_add_ps(s0) + _mm512_reduce_add_ps(s1) +
               _mm512_reduce_add_ps(s2) + _mm512_reduce_add_ps(s3);
    for (; i < n; i++) s += p[i];
    return s;
}

__attribute__((target("avx2"))) static inline double peak_sum_avx2(const float *p, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
    }
    float l[8];
    double s = 0;
    __m256 t = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    _mm256_storeu_ps(l, t);
    for (int j = 0; j < 8; j++) s += l[j];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

static inline double peak_sum_c(const float *p, size_t n)
{
    float s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += p[i + j];
    double t = 0;
    for (int j = 0; j < 8; j++) t += s[j];
    for (; i < n; i++) t += p[i];
    return t;
}

static inline void *peak_rjob_run(void *arg)
{
    peak_rjob *j = arg;
#ifdef PEAK_X86
    if (__builtin_cpu_supports("avx512f")) j->sum = peak_sum_avx512(j->p, j->n);
    else if (__builtin_cpu_supports("avx2")) j->sum = peak_sum_avx2(j->p, j->n);
    else
#endif
        j->sum = peak_sum_c(j->p, j->n);
    return NULL;
}

/* Best GB/s of `runs` passes summing `bytes` of float32 ones (all threads
 * reading their own slice at once); ok = 0 when a sum was not the count.
 * The ones keep every partial sum exact while a lane sums under 2^24 of them. */
static inline peak_result peak_read(int threads, size_t bytes, int runs)
{
    if (threads < 1) threads = 1;
    if (threads > PEAK_MAXT) threads = PEAK_MAXT;
    if (runs < 1) runs = 1;
    peak_result r = {1, "read", threads, 0, 0};
    size_t n = bytes / sizeof(float);
    float *p = malloc(n * sizeof *p);
    double *g = malloc((size_t)runs * sizeof *g);
    if (!p || !g) {
        free(p);
        free(g);
        return (peak_result){0, "read", threads, 0, 0};
    }
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
    for (int run = 0; run < runs; run++) {
        peak_rjob j[PEAK_MAXT];
        pthread_t t[PEAK_MAXT];
        size_t chunk = n / (size_t)threads;
        double t0 = peak_now();
        for (int i = 0; i < threads; i++)
            j[i] = (peak_rjob){p + (size_t)i * chunk, i == threads - 1 ? n - (size_t)i * chunk : chunk, 0};
        for (int i = 1; i < threads; i++)
            if (pthread_create(&t[i], NULL, peak_rjob_run, &j[i]) != 0) r.ok = 0;
        peak_rjob_run(&j[0]);
        for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
        double dt = peak_now() - t0, total = 0;
        for (int i = 0; i < threads; i++) total += j[i].sum;
        if (total != (double)n) r.ok = 0;
        g[run] = (double)n * sizeof(float) / dt / 1e9;
        if (g[run] > r.gflops) r.gflops = g[run];
    }
    r.median = peak_median(g, runs);
    free(p);
    free(g);
    return r;
}

/* ---- facts printed with every figure ------------------------------------------ */

/* The "model name" of /proc/cpuinfo, or "unknown CPU". */
static inline const char *peak_cpu_model(void)
{
    static char name[128] = "";
    if (name[0]) return name;
    snprintf(name, sizeof name, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return name;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(name, sizeof name, "%s", c);
        break;
    }
    fclose(f);
    return name;
}

/* The limit's FLOPs: multiply-adds x 2 of a GPT's training step (forward
 * + backward = 3 x forward) or evaluation step at batch B x T, width C,
 * vocabulary V, L layers: every matrix product, attention counted causal
 * (half the T x T). */
static inline double peak_step_flops(int B, int T, int C, int V, int L, int train)
{
    double N = (double)B * T;
    double fwd = 2.0 * N * C * V + L * (2.0 * N * C * 12.0 * C + 2.0 * B * (double)T * T * C);
    return train ? 3.0 * fwd : fwd;
}

/* "9.29 7.08 5.63" (1, 5, 15 minutes), or "unknown". */
static inline const char *peak_load(void)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return buf;
    double l[3];
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3)
        snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
    fclose(f);
    return buf;
}

#endif
