/*
 * bench_generate.c: decoding speed of the study's default model (V=50257,
 * C=128, 2 layers, 2 heads, seq_len 64) with the key/value cache, against
 * the machine's memory bandwidth. Not a test: prints numbers.
 *
 *  - bandwidth: a STREAM-like copy (a[i] = b[i], counted as read + write
 *    bytes) and a read-only sum, over 256 MB arrays (well beyond the caches),
 *    on as many threads as the engine uses; best of 5 (as STREAM reports);
 *  - decode: greedy decoding of 63 tokens after a 1-token prompt (the cache
 *    holds 1..64 positions), at batch 1 and batch 16; tokens/s = B * 63 /
 *    time; median of 7 runs after a warm-up. The same through
 *    xsa_gpt_generate (which adds the argmax and the bookkeeping);
 *  - the bound at batch 1: read bandwidth / bytes read per token (every
 *    weight once: the tied lm_head wte alone is 25.7 MB), and the targets:
 *    batch 1 >= half that bound, batch 16 >= 8x batch 1. wte fits a 32 MB
 *    L3, so batch 1 can beat the DRAM bound; batch 16 is then bound by its
 *    multiply-adds (16 V C per step), which the last line reports.
 *  - the bound where the bytes live: the same read, over an array of the
 *    bytes of one token, again and again (best of 31 passes; the first,
 *    cold, never is), so that it stays in whatever cache holds it, as the
 *    weights do when decoding. Against DRAM alone batch 1 measured 83% of
 *    the bound in one run and 155% in another two hours later (the DRAM
 *    read measured 58.8 and 34.2 GB/s): a bound that a run beats bounds
 *    nothing.
 *  - --read-gbs X: bench_peak's read bandwidth (make bench passes it):
 *    the bound uses the better of it and this program's own, since load
 *    only lowers a measured bandwidth; both are printed.
 * Usage: bench_generate [runs] [--read-gbs X]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "../core/xsa.h"
#include "peak.h"

/* ---- bandwidth ---------------------------------------------------------- */

typedef struct {
    float *a;
    const float *b;
    size_t n;
    int copy;
    double sum;
} bw_job;

static void *bw_run(void *p)
{
    bw_job *j = p;
    if (j->copy) {
        memcpy(j->a, j->b, j->n * sizeof(float));
    } else {
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        const float *b = j->b;
        size_t i = 0;
        for (; i + 8 <= j->n; i += 8) {
            s0 += b[i]; s1 += b[i + 1]; s2 += b[i + 2]; s3 += b[i + 3];
            s4 += b[i + 4]; s5 += b[i + 5]; s6 += b[i + 6]; s7 += b[i + 7];
        }
        j->sum = (double)s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    }
    return NULL;
}

/* GB/s of one pass (copy: read + write bytes; else read bytes), best of reps */
static double bandwidth(float *a, const float *b, size_t n, int nthreads, int copy, int reps)
{
    double best = 0, sink = 0;
    pthread_t th[16];
    bw_job jobs[16];
    for (int r = 0; r < reps; r++) {
        double t0 = bench_seconds();
        size_t chunk = n / (size_t)nthreads;
        for (int t = 0; t < nthreads; t++) {
            jobs[t] = (bw_job){a + t * chunk, b + t * chunk, t == nthreads - 1 ? n - t * chunk : chunk, copy, 0};
            pthread_create(&th[t], NULL, bw_run, &jobs[t]);
        }
        for (int t = 0; t < nthreads; t++) {
            pthread_join(th[t], NULL);
            sink += jobs[t].sum;
        }
        double dt = bench_seconds() - t0;
        double gb = (copy ? 2.0 : 1.0) * n * sizeof(float) / 1e9 / dt;
        if (gb > best) best = gb;
    }
    if (sink == 12345.0) puts(""); /* keep the sums */
    return best;
}

/* ---- decoding ------------------------------------------------------------ */

/* seconds to decode `steps` tokens per row greedily after a 1-token prompt */
static double decode_run(xsa_gpt *m, xsa_kv_cache *c, int B, int steps, float *logits, int32_t *ids)
{
    int V = xsa_gpt_get_config(m)->vocab;
    xsa_kv_cache_reset(c);
    for (int b = 0; b < B; b++) ids[b] = (int32_t)(b * 997 % V);
    double t0 = bench_seconds();
    xsa_kv_cache_append(c, ids, 1, NULL, logits, 0);
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < B; b++) ids[b] = xsa_argmax(logits + (size_t)b * V, V);
        if (xsa_kv_cache_append(c, ids, 1, NULL, logits, 0) != 0) {
            printf("decode failed: %s\n", xsa_last_error());
            exit(1);
        }
    }
    return bench_seconds() - t0;
}

static double generate_run(xsa_gpt *m, int B, int steps)
{
    int32_t *p = malloc((size_t)B * sizeof *p), *out = malloc((size_t)B * (steps + 1) * sizeof *out);
    const int32_t **rows = malloc((size_t)B * sizeof *rows);
    int *lens = malloc((size_t)B * sizeof *lens), *nout = malloc((size_t)B * sizeof *nout);
    for (int b = 0; b < B; b++) {
        p[b] = b * 997 % 50257;
        rows[b] = p + b;
        lens[b] = 1;
    }
    xsa_generate_opts o;
    xsa_generate_opts_default(&o);
    o.max_new_tokens = steps + 1;
    o.sampling.temperature = 0;
    double t0 = bench_seconds();
    xsa_gpt_generate(m, B, rows, lens, &o, out, nout);
    double dt = bench_seconds() - t0;
    free(p);
    free(out);
    free(rows);
    free(lens);
    free(nout);
    return dt;
}

/* the machine's copy and read bandwidth over 256 MB arrays (GB/s, read's
 * in *read_bw), printed with the run's setting; -1 when out of memory */
static int measure_bandwidth(int nthreads, double peak_read_gbs, double *read_bw_out)
{
    size_t n = (size_t)64 << 20; /* 64 M floats = 256 MB per array */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        puts("bench_generate: out of memory for the bandwidth arrays");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = (float)(i & 1023);
    }
    double copy_bw = bandwidth(a, b, n, nthreads, 1, 5);
    double read_bw = bandwidth(a, b, n, nthreads, 0, 5);
    free(a);
    free(b);
    printf("bench_generate: CPU %s, OpenBLAS kernel %s, float32 GEMM %s, %d engine thread%s, load average %s\n",
           peak_cpu_model(), xsa_blas_corename(), xsa_gemm_describe(), xsa_threads(), xsa_threads() == 1 ? "" : "s",
           peak_load());
    printf("memory bandwidth (%d thread%s, 256 MB arrays, best of 5): copy %.1f GB/s (read + write), read %.1f GB/s",
           nthreads, nthreads == 1 ? "" : "s", copy_bw, read_bw);
    if (peak_read_gbs > 0) printf("; bench_peak's read %.1f GB/s", peak_read_gbs);
    printf("\n");
    *read_bw_out = read_bw;
    return 0;
}

/* tokens/s decoding with the cache at batch B (median of runs), printed
 * with xsa_gpt_generate's rate */
static double decode_rate(xsa_gpt *m, int B, int V, int steps, int runs)
{
    xsa_kv_cache *c = xsa_kv_cache_new(m, B);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    int32_t *ids = malloc((size_t)B * sizeof *ids);
    decode_run(m, c, B, steps, logits, ids); /* warm-up */
    double *t = malloc((size_t)runs * sizeof *t), *g = malloc((size_t)runs * sizeof *g);
    for (int r = 0; r < runs; r++) {
        t[r] = decode_run(m, c, B, steps, logits, ids);
        g[r] = generate_run(m, B, steps);
    }
    double mt = bench_median(t, runs), mg = bench_median(g, runs);
    double rate = B * steps / mt;
    printf("decode batch %2d: %7.0f tokens/s (%.3f ms per step; median of %d runs of %d steps)  "
           "through xsa_gpt_generate: %7.0f tokens/s\n",
           B, rate, mt / steps * 1e3, runs, steps, B * (steps + 1) / mg);
    xsa_kv_cache_free(c);
    free(logits);
    free(ids);
    free(t);
    free(g);
    return rate;
}

int main(int argc, char **argv)
{
    int runs = 7;
    double peak_read_gbs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--read-gbs") && i + 1 < argc) peak_read_gbs = atof(argv[++i]);
        else runs = atoi(argv[i]);
    }
    if (runs < 1) runs = 1;
    int nthreads = xsa_threads();
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 16) nthreads = 16;

    double read_bw;
    if (measure_bandwidth(nthreads, peak_read_gbs, &read_bw) != 0) return 1;
    if (peak_read_gbs > read_bw) read_bw = peak_read_gbs;

    xsa_gpt_config cfg;
    xsa_gpt_config_default(&cfg);
    xsa_gpt *m = xsa_gpt_new(&cfg);
    int V = cfg.vocab, C = cfg.d_model, steps = cfg.seq_len - 1;
    double wbytes = (double)xsa_gpt_num_params(m) * sizeof(float) - (double)(cfg.seq_len - 1) * C * sizeof(float);
    double kvbytes = 2.0 * cfg.n_layer * C * sizeof(float) * (cfg.seq_len / 2.0); /* mean cache length */
    double per_token = wbytes + kvbytes;
    double bound = read_bw * 1e9 / per_token;
    peak_result ws = peak_read(nthreads, (size_t)per_token, 31);
    double ws_bound = ws.ok ? ws.gflops * 1e9 / per_token : 0;
    printf("bytes read per token at batch 1: %.1f MB (weights %.1f MB, of which lm_head %.1f MB; keys/values %.2f MB)\n",
           per_token / 1e6, wbytes / 1e6, (double)V * C * sizeof(float) / 1e6, kvbytes / 1e6);

    double rate[2] = {0, 0};
    int batches[2] = {1, 16};
    for (int k = 0; k < 2; k++) rate[k] = decode_rate(m, batches[k], V, steps, runs);
    printf("batch 1: %.0f tokens/s = %.0f%% of the bandwidth bound %.0f tokens/s (%.1f MB a token / %.1f GB/s read; "
           "target >= 50%%): %s\n", rate[0], 100 * rate[0] / bound, bound, per_token / 1e6, read_bw,
           rate[0] >= 0.5 * bound ? "met" : "NOT met");
    if (ws_bound > 0)
        printf("batch 1 against the bytes where they live: %.0f tokens/s = %.0f%% of %.0f tokens/s (a sum over %.1f MB, "
               "again and again, on %d thread%s: %.1f GB/s)\n", rate[0], 100 * rate[0] / ws_bound, ws_bound,
               per_token / 1e6, nthreads, nthreads == 1 ? "" : "s", ws.gflops);
    else
        puts("batch 1 against the bytes where they live: not measured (no memory for the array, or a wrong sum)");
    printf("batch 16: %.1fx batch 1 (target >= 8x): %s\n", rate[1] / rate[0], rate[1] >= 8 * rate[0] ? "met" : "NOT met");
    /* what bounds batch 16: the multiply-adds, B*V*C in the lm_head alone */
    double macs = 16.0 * ((double)V * C + cfg.n_layer * 12.0 * C * C);
    printf("batch 16: %.1f G multiply-adds/s (%.0f M per step; a float32 FMA peak is 16 per cycle per core with AVX-512); "
           "batch 1 against DRAM: %.1fx the bandwidth bound\n",
           macs * rate[1] / 16 / 1e9, macs / 1e6, rate[1] / bound);
    printf("load average at the end: %s\n", peak_load());
    xsa_gpt_free(m);
    return 0;
}
