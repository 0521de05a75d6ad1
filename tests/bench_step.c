/*
 * bench_step.c: speed and memory of the training and evaluation steps of the
 * study's default model (V=50257, C=128, 2 layers, 2 heads; seq_len = T),
 * SA and XSA, in a paired run (two models, two AdamW, the same batch), and
 * the same steps in PyTorch in the same run when a reference script is given.
 *
 *   bench_step [--batch B] [--seq T] [--steps N] [--rounds K]
 *              [--precision f32|bf16] [--torch tests/reference/bench_torch.py]
 *              [--peak-f32 GFLOPS] [--peak-bf16 GFLOPS]
 *
 * Each round runs N train steps of SA, then of XSA, interleaved step by step,
 * N eval steps of each (forward and loss, no activations saved), then, with
 * --torch, the same counts in PyTorch (the script in --serve mode, a child
 * process): outside load then hits both alike. Reported: medians over all
 * rounds, tokens/s, GFLOP/s (counted multiply-adds x 2), eval/train ratio,
 * peak RSS of this process (the two models, their AdamW and the steps), the
 * same step's GEMMs timed alone (after the RSS is read), and the ratios to
 * PyTorch. Not a test: prints numbers.
 *
 * The anchor is the machine's own limit: the step's counted FLOPs over the
 * float32 FMA peak (peak.h), measured after every round of this run and
 * given by bench_peak at the start of make bench (--peak-f32); the better
 * of the two is the limit, since load only lowers a measured peak
 * (peak_limit: threads x one thread's when the threads never ran at once). A bf16
 * step has the lm_head's products at the bf16 dot-product peak and the rest
 * at the float32 one as its own limit, and is also printed against the
 * float32 limit. Every time is printed as a multiple of its limit.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "../core/matmul_bf16.h"
#include "../core/xsa.h"
#include "peak.h"

static void die(const char *what)
{
    fprintf(stderr, "bench_step: %s: %s\n", what, xsa_last_error());
    exit(1);
}

/* ---- samples ------------------------------------------------------------ */

typedef struct {
    double *v;
    int n, cap;
} samples;

static void add(samples *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, sizeof(double) * (size_t)s->cap);
    }
    s->v[s->n++] = x;
}

/* ---- one model ------------------------------------------------------------ */

typedef struct {
    const char *name;
    xsa_gpt *m;
    xsa_adamw *o;
    samples train, eval, fwd, bwd, opt;
    float loss, eval_loss;
} runner;

static void runner_init(runner *r, const char *name, xsa_gpt *m)
{
    memset(r, 0, sizeof *r);
    int nt = xsa_gpt_num_tensors(m);
    xsa_tensor **ps = malloc((size_t)nt * sizeof *ps);
    for (int i = 0; i < nt; i++) ps[i] = xsa_gpt_param(m, i);
    r->name = name;
    r->m = m;
    r->o = xsa_adamw_new(nt, ps, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    free(ps);
    if (!r->o) die("adamw");
}

static void train_step(runner *r, const int32_t *in, const int32_t *tg, int B, int T, int keep)
{
    double t0 = (1e3 * bench_seconds());
    xsa_adamw_zero_grad(r->o);
    if (xsa_gpt_forward(r->m, in, tg, B, T, &r->loss) != 0) die("forward");
    double t1 = (1e3 * bench_seconds());
    if (xsa_gpt_backward(r->m, 1.0f) != 0) die("backward");
    double t2 = (1e3 * bench_seconds());
    xsa_adamw_step(r->o);
    double t3 = (1e3 * bench_seconds());
    if (keep) {
        add(&r->train, t3 - t0);
        add(&r->fwd, t1 - t0);
        add(&r->bwd, t2 - t1);
        add(&r->opt, t3 - t2);
    }
}

static void eval_step(runner *r, const int32_t *in, const int32_t *tg, int B, int T, int keep)
{
    double t0 = (1e3 * bench_seconds());
    if (xsa_gpt_eval_loss(r->m, in, tg, B, T, &r->eval_loss) != 0) die("eval");
    if (keep) add(&r->eval, (1e3 * bench_seconds()) - t0);
}

/* ---- the PyTorch reference (bench_torch.py --serve) ----------------------- */

typedef struct {
    pid_t pid;
    FILE *in, *out;
    char version[128];
    samples train[2], eval[2];
} torch_ref;

static int torch_start(torch_ref *t, const char *script, int threads)
{
    memset(t, 0, sizeof *t);
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        char th[16];
        snprintf(th, sizeof th, "%d", threads);
        execl("/usr/bin/python3", "python3", script, "--serve", th, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    t->pid = pid;
    t->in = fdopen(to[1], "w");
    t->out = fdopen(from[0], "r");
    char line[256];
    if (!fgets(line, sizeof line, t->out) || strncmp(line, "ready ", 6) != 0) return -1;
    line[strcspn(line, "\n")] = 0;
    snprintf(t->version, sizeof t->version, "%.120s", line + 6);
    return 0;
}

/* Sends one command; the reply line into buf. */
static int torch_cmd(torch_ref *t, const char *cmd, char *buf, size_t n)
{
    fprintf(t->in, "%s\n", cmd);
    fflush(t->in);
    if (!fgets(buf, (int)n, t->out)) return -1;
    return strncmp(buf, "error", 5) == 0 ? -1 : 0;
}

static int torch_run(torch_ref *t, const char *kind, int which, int k, samples *s)
{
    char cmd[64], *buf = malloc(65536);
    snprintf(cmd, sizeof cmd, "%s %s %d", kind, which ? "xsa" : "sa", k);
    int rc = torch_cmd(t, cmd, buf, 65536);
    if (rc == 0) {
        char *p = buf, *end;
        for (;;) {
            double v = strtod(p, &end);
            if (end == p) break;
            add(s, v);
            p = end;
        }
    } else {
        fprintf(stderr, "bench_step: PyTorch reference: %s", buf);
    }
    free(buf);
    return rc;
}

static void torch_stop(torch_ref *t)
{
    if (!t->pid) return;
    fprintf(t->in, "quit\n");
    fclose(t->in);
    fclose(t->out);
    waitpid(t->pid, NULL, 0);
    t->pid = 0;
}

/* Thread k runs blocks k, k + T, ... of the vocabulary, its forward
 * products and dinp's (bf16: transposed, wte_b^T e_b), then (after all
 * threads) its dwte products, as xsa_nn_lmhead_ce does: bf16 on oneDNN
 * slot k + 1 with one thread; float32 (mm NULL) through xsa_sgemm, on the
 * calling thread (gemm.h). */
typedef struct {
    xsa_bf16_mm *mm;
    const uint16_t *w16;
    float *lb;
    const uint16_t *et16, *x16;
    float *o, *dw;
    int n, C, V, VB, acc, k, nth;
    pthread_barrier_t *bar;
    const float *wf, *xf; /* float32 */
    float *etf;
} bf_gemms;

static void *bf_gemms_thread(void *arg)
{
    bf_gemms *g = arg;
    int n = g->n, C = g->C, R = n;
    float *lb = g->lb ? g->lb + (size_t)g->k * g->VB * R : NULL, *o = g->o + (size_t)g->k * n * C;
    for (int pass = 0; pass < 2; pass++) {
        for (int v0 = g->k * g->VB; v0 < g->V; v0 += g->nth * g->VB) {
            int nv = g->V - v0 < g->VB ? g->V - v0 : g->VB;
            if (!g->mm) {
                const float *wf = g->wf + (size_t)v0 * C;
                float *ef = g->etf + (size_t)v0 * n;
                if (pass == 0) {
                    xsa_sgemm(0, 1, nv, n, C, 1.0f, wf, C, g->xf, C, 0.0f, ef, n);
                    xsa_sgemm(1, 0, n, C, nv, 1.0f, ef, n, wf, C, 0.0f, o, C);
                } else {
                    xsa_sgemm(0, 0, nv, C, n, 1.0f, ef, n, g->xf, C, g->acc ? 1.0f : 0.0f,
                              g->dw + (size_t)v0 * C, C);
                }
                continue;
            }
            const uint16_t *wb = g->w16 + (size_t)v0 * C, *eb = g->et16 + (size_t)v0 * n;
            if (pass == 0) {
                xsa_bf16_gemm_on(g->mm, g->k + 1, 1, 0, 1, nv, n, C, wb, C, g->x16, C, 0, lb, n);
                xsa_bf16_gemm_on(g->mm, g->k + 1, 1, 1, 0, C, n, nv, wb, C, eb, n, 0, o, n);
            } else {
                xsa_bf16_gemm_on(g->mm, g->k + 1, 1, 0, 0, nv, C, n, eb, n, g->x16, C, g->acc,
                                 g->dw + (size_t)v0 * C, C);
            }
        }
        if (pass == 0) pthread_barrier_wait(g->bar);
    }
    return NULL;
}

static void bf_gemms_run(const bf_gemms *proto, int threads)
{
    enum { MAXT = 16 };
    int T = threads < 1 ? 1 : threads > MAXT - 1 ? MAXT - 1 : threads;
    if (!proto->mm && threads > T) T = threads > MAXT ? MAXT : threads;
    int nblk = (proto->V + proto->VB - 1) / proto->VB;
    if (T > nblk) T = nblk;
    bf_gemms g[MAXT];
    pthread_t tid[MAXT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)T);
    for (int k = 0; k < T; k++) {
        g[k] = *proto;
        g[k].k = k;
        g[k].nth = T;
        g[k].bar = &bar;
    }
    for (int k = 1; k < T; k++)
        if (pthread_create(&tid[k], NULL, bf_gemms_thread, &g[k]) != 0) die("pthread_create");
    bf_gemms_thread(&g[0]);
    for (int k = 1; k < T; k++) pthread_join(tid[k], NULL);
    pthread_barrier_destroy(&bar);
}

/* ---- the GEMMs of one training step, alone ---------------------------------
 * The same calls as the step (lmhead.c): the lm_head's three products per chunk
 * of rows and block of the vocabulary, on the transposed chunk, and the
 * linears' forward and two backward products per layer. bf16: the lm_head's products through matmul_bf16. */
static double gemm_ms(int N, int C, int V, int L, int reps, int bf16, double *lmhead)
{
    int R = xsa_nn_lmhead_rows(N, V, bf16), VB = xsa_nn_lmhead_vblock(R, V);
    int threads = xsa_threads();
    float *x = calloc((size_t)N * 4 * C, sizeof(float)), *w = calloc((size_t)V * C, sizeof(float));
    float *et = calloc((size_t)R * V, sizeof(float)), *o = calloc((size_t)N * 4 * C, sizeof(float));
    float *w2 = calloc((size_t)4 * C * 4 * C, sizeof(float)), *dw = calloc((size_t)V * C, sizeof(float));
    float *ot = calloc((size_t)(threads < 16 ? threads : 16) * N * 4 * C, sizeof(float)); /* per thread */
    uint16_t *w16 = NULL, *et16 = NULL, *x16 = NULL;
    xsa_bf16_mm *mm = NULL;
    if (bf16) {
        w16 = calloc((size_t)V * C, sizeof(uint16_t));
        et16 = calloc((size_t)R * V, sizeof(uint16_t));
        free(et); /* per thread: a block of logits and the rows' products */
        et = calloc((size_t)threads * VB * R, sizeof(float));
        x16 = calloc((size_t)N * C, sizeof(uint16_t));
        mm = xsa_bf16_mm_new();
        if (!mm) die("bf16");
    }
    for (size_t i = 0; i < (size_t)V * C; i++) w[i] = 0.01f * (float)(i % 7);
    samples all = {0}, head = {0};
    for (int s = -2; s < reps; s++) {
        double t0 = (1e3 * bench_seconds());
        for (int r0 = 0; r0 < N; r0 += R) {
            int n = N - r0 < R ? N - r0 : R;
            /* the forward product of every block, then both backward
             * products of every block; bf16 as the step runs them: each
             * thread its own blocks, on one oneDNN thread (lmhead.c) */
            if (bf16) {
                bf_gemms g = {mm, w16, et, et16, x16 + (size_t)r0 * C, ot, dw, n, C, V, VB, r0 > 0, 0, 1, NULL,
                              NULL, NULL, NULL};
                bf_gemms_run(&g, threads);
                if (s == -2 && r0 == 0) /* thread 0 ran a block's three products last on slot 1 */
                    printf("oneDNN implementation (the block products, one thread each): %s\n",
                           xsa_bf16_impl(mm, 1));
                continue;
            }
            bf_gemms g = {NULL, NULL, NULL, NULL, NULL, ot, dw, n, C, V, VB, r0 > 0, 0, 1, NULL,
                          w, x + (size_t)r0 * C, et};
            bf_gemms_run(&g, threads);
        }
        double t1 = (1e3 * bench_seconds());
        for (int l = 0; l < L; l++) {
            int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
            for (int k = 0; k < 4; k++) {
                int ci = shapes[k][0], co = shapes[k][1];
                xsa_nn_linear_forward(o, x, w2, NULL, N, ci, co);
                xsa_nn_linear_backward(x, dw, NULL, o, x, w2, N, ci, co);
            }
        }
        double t2 = (1e3 * bench_seconds());
        if (s >= 0) {
            add(&all, t2 - t0);
            add(&head, t1 - t0);
        }
    }
    double r = bench_median(all.v, all.n);
    *lmhead = bench_median(head.v, head.n);
    free(all.v); free(head.v);
    free(x); free(w); free(et); free(o); free(ot); free(w2); free(dw);
    free(w16); free(et16); free(x16);
    xsa_bf16_mm_free(mm);
    return r;
}


/* the lm_head's three products of a training step (one in an eval step) */
static double lmhead_flops(int B, int T, int C, int V, int train)
{
    return (train ? 3.0 : 1.0) * 2.0 * (double)B * T * C * V;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* the command line's choices */
typedef struct {
    int B, T, steps, rounds, bf16;
    double given_f32, given_bf16;
    const char *torch_script;
} options;

/* 0 when the options parse; otherwise the exit status, the error printed */
static int parse_options(int argc, char **argv, options *o)
{
    *o = (options){16, 64, 5, 4, 0, 0, 0, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_step: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--batch")) o->B = atoi(v);
        else if (!strcmp(a, "--seq")) o->T = atoi(v);
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--rounds")) o->rounds = atoi(v);
        else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "bf16")) o->bf16 = 1;
            else if (strcmp(v, "f32") != 0) {
                fprintf(stderr, "bench_step: --precision f32 or bf16\n");
                return 2;
            }
        } else if (!strcmp(a, "--torch")) o->torch_script = v;
        else if (!strcmp(a, "--peak-f32")) o->given_f32 = atof(v);
        else if (!strcmp(a, "--peak-bf16")) o->given_bf16 = atof(v);
        else {
            fprintf(stderr, "usage: bench_step [--batch B] [--seq T] [--steps N] [--rounds K] "
                            "[--precision f32|bf16] [--torch script.py] [--peak-f32 GFLOPS] "
                            "[--peak-bf16 GFLOPS]\n");
            return 2;
        }
        i++;
    }
    if (o->B < 1 || o->T < 1 || o->steps < 1 || o->rounds < 1) {
        fprintf(stderr, "bench_step: sizes and counts must be positive\n");
        return 2;
    }
    return 0;
}

static void print_setup(const xsa_gpt_config *c, const options *o, int threads)
{
    const char *ct = getenv("OPENBLAS_CORETYPE");
    double load[3] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(la);
    }
    printf("bench_step: V=%d C=%d L=%d NH=%d, batch %dx%d (model seq_len %d), %s; CPU %s; "
           "OpenBLAS %s (OPENBLAS_CORETYPE %s, OPENBLAS_THREAD_TIMEOUT %s); float32 GEMM %s "
           "(XSA_GEMM %s); %d threads; load average %.2f\n",
           c->vocab, c->d_model, c->n_layer, c->n_head, o->B, o->T, c->seq_len,
           o->bf16 ? "bf16 lm_head" : "float32", peak_cpu_model(), xsa_blas_corename(), ct ? ct : "unset",
           getenv("OPENBLAS_THREAD_TIMEOUT") ? getenv("OPENBLAS_THREAD_TIMEOUT") : "unset (28)",
           xsa_gemm_describe(), getenv("XSA_GEMM") ? getenv("XSA_GEMM") : "unset", threads, load[0]);
}

/* the peaks measured after every round: the best, one thread's best, the medians */
typedef struct {
    peak_result pf, pb, pf1, pb1;
    samples pf_med, pb_med;
} peaks;

/* everything a run measured, for the report */
typedef struct {
    options o;
    xsa_gpt_config c;
    int N, threads, have_torch;
    runner rn[2];
    torch_ref tr;
    peaks pk;
    long rss;
    double gm, lm, ftrain, feval;
} run;

static void measure_peaks(peaks *p, int threads, int bf16)
{
    peak_result q = peak_f32(threads, 20), q1 = peak_f32(1, 20);
    if (!q.ok || !q1.ok) die("the float32 peak kernel's sums");
    p->pf.isa = q.isa;
    if (q.gflops > p->pf.gflops) p->pf.gflops = q.gflops;
    if (q1.gflops > p->pf1.gflops) p->pf1.gflops = q1.gflops;
    add(&p->pf_med, q.median);
    if (bf16) {
        q = peak_bf16(threads, 20);
        q1 = peak_bf16(1, 20);
        if (!q.isa || !q.ok || !q1.ok) die("the bf16 peak kernel");
        p->pb.isa = q.isa;
        if (q.gflops > p->pb.gflops) p->pb.gflops = q.gflops;
        if (q1.gflops > p->pb1.gflops) p->pb1.gflops = q1.gflops;
        add(&p->pb_med, q.median);
    }
}

/* warm-up, then rounds: xsa train, xsa eval, PyTorch train and eval, the peaks */
static void run_rounds(run *u, const int32_t *in, const int32_t *tg)
{
    int B = u->o.B, T = u->o.T, steps = u->o.steps;
    runner *rn = u->rn;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            train_step(&rn[k], in, tg, B, T, 0);
            eval_step(&rn[k], in, tg, B, T, 0);
        }
    /* the peaks, after every round: under the same load as the steps */
    u->pk.pf = (peak_result){1, NULL, u->threads, 0, 0};
    u->pk.pb = u->pk.pf1 = u->pk.pb1 = u->pk.pf;
    for (int r = 0; r < u->o.rounds; r++) {
        measure_peaks(&u->pk, u->threads, u->o.bf16);
        for (int s = 0; s < steps; s++)
            for (int k = 0; k < 2; k++) train_step(&rn[k], in, tg, B, T, 1);
        for (int s = 0; s < steps; s++)
            for (int k = 0; k < 2; k++) eval_step(&rn[k], in, tg, B, T, 1);
        if (u->have_torch)
            for (int k = 0; k < 2 && u->have_torch; k++)
                if (torch_run(&u->tr, "train", k, steps, &u->tr.train[k]) != 0 ||
                    torch_run(&u->tr, "eval", k, steps, &u->tr.eval[k]) != 0)
                    u->have_torch = 0;
    }
}

static void print_steps(const run *u)
{
    for (int k = 0; k < 2; k++) {
        const runner *r = &u->rn[k];
        double st = bench_median(r->train.v, r->train.n), ev = bench_median(r->eval.v, r->eval.n);
        printf("%-3s train step %7.1f ms (fwd %.1f, bwd %.1f, adamw %.1f), %6.0f tokens/s, "
               "%5.1f GFLOP/s | eval step %6.1f ms, %6.0f tokens/s, %5.1f GFLOP/s | eval/train %.2f | "
               "median of %d; loss %.4f\n",
               r->name, st, bench_median(r->fwd.v, r->fwd.n), bench_median(r->bwd.v, r->bwd.n),
               bench_median(r->opt.v, r->opt.n), u->N / (st / 1e3), u->ftrain / (st * 1e6), ev,
               u->N / (ev / 1e3), u->feval / (ev * 1e6), ev / st, r->train.n, r->loss);
    }
    double sa_st = bench_median(u->rn[0].train.v, u->rn[0].train.n);
    int R = xsa_nn_lmhead_rows(u->N, u->c.vocab, u->o.bf16);
    printf("GEMMs of a train step alone: %.1f ms = %.0f%% of the SA step, step / GEMMs %.2f "
           "(lm_head's three, in chunks of %d rows x blocks of %d: %.1f ms)\n",
           u->gm, 100 * u->gm / sa_st, sa_st / u->gm, R, xsa_nn_lmhead_vblock(R, u->c.vocab), u->lm);
}

/* the limits of a step, in ms: float32's and, with bf16, the lm_head at the bf16 peak */
typedef struct {
    double lm_t, lm_e, lim_t, lim_e, lim16_t, lim16_e;
} limits;

/* the limits: the better of bench_peak's peak and this run's */
static limits print_limits(const run *u)
{
    const options *o = &u->o;
    const peaks *p = &u->pk;
    int up32 = 0, up16 = 0, bf16 = o->bf16, threads = u->threads;
    double r32 = peak_limit(p->pf1, p->pf, &up32), r16 = bf16 ? peak_limit(p->pb1, p->pb, &up16) : 0;
    double p32 = r32 > o->given_f32 ? r32 : o->given_f32;
    double p16 = r16 > o->given_bf16 ? r16 : o->given_bf16;
    limits l = {0};
    l.lm_t = lmhead_flops(o->B, o->T, u->c.d_model, u->c.vocab, 1);
    l.lm_e = lmhead_flops(o->B, o->T, u->c.d_model, u->c.vocab, 0);
    l.lim_t = u->ftrain / p32 * 1e-6, l.lim_e = u->feval / p32 * 1e-6; /* ms */
    printf("float32 FMA peak (%s, %d threads): %.1f GFLOP/s (bench_peak %.1f; this run's rounds: %.1f%s, best %.1f, "
           "median %.1f)\n", p->pf.isa, threads, p32, o->given_f32, r32, up32 ? " = threads x 1 thread's" : "",
           p->pf.gflops, bench_median(p->pf_med.v, p->pf_med.n));
    printf("limit, float32: a train step's %.1f GFLOP (the lm_head's three products %.1f) / the peak = %.1f ms; "
           "an eval step's %.1f GFLOP = %.1f ms\n", u->ftrain / 1e9, l.lm_t / 1e9, l.lim_t, u->feval / 1e9, l.lim_e);
    if (bf16) {
        l.lim16_t = (l.lm_t / p16 + (u->ftrain - l.lm_t) / p32) * 1e-6;
        l.lim16_e = (l.lm_e / p16 + (u->feval - l.lm_e) / p32) * 1e-6;
        printf("bf16 dot-product peak (%s, %d threads): %.1f GFLOP/s (bench_peak %.1f; this run's rounds: %.1f%s, best "
               "%.1f, median %.1f)\n", p->pb.isa, threads, p16, o->given_bf16, r16,
               up16 ? " = threads x 1 thread's" : "", p->pb.gflops, bench_median(p->pb_med.v, p->pb_med.n));
        printf("limit, bf16 (the lm_head at the bf16 peak, the rest at float32's): train %.1f ms, eval %.1f ms\n",
               l.lim16_t, l.lim16_e);
    }
    return l;
}

static void print_against(const run *u, const limits *l)
{
    int bf16 = u->o.bf16;
    double ftrain = u->ftrain, feval = u->feval, gm = u->gm;
    for (int k = 0; k < 2; k++) {
        const runner *r = &u->rn[k];
        double st = bench_median(r->train.v, r->train.n), ev = bench_median(r->eval.v, r->eval.n);
        printf("%-3s against the limit: train step %.2fx", r->name, st / l->lim_t);
        if (bf16) printf(" the float32 limit, %.2fx its bf16 limit", st / l->lim16_t);
        printf(" | its GEMMs alone %.2fx%s (%.0f%% of the step)", gm / (bf16 ? l->lim16_t : l->lim_t),
               bf16 ? " its bf16 limit" : "", 100 * gm / st);
        printf(" | eval step %.2fx", ev / l->lim_e);
        if (bf16) printf(" (%.2fx its bf16 limit)", ev / l->lim16_e);
        printf(" | eval/train %.2f\n", ev / st);
        /* on a loaded machine the step and the peak kernel lose alike: the
         * train step against the median peak of this run's rounds */
        double pm = bench_median(u->pk.pf_med.v, u->pk.pf_med.n);
        double pm16 = bf16 ? bench_median(u->pk.pb_med.v, u->pk.pb_med.n) : 0;
        double lm_t = l->lm_t, lm_e = l->lm_e;
        if (!bf16 && pm > 0)
            printf("%-3s against this run's median float32 peak (%.1f GFLOP/s, the load's share): train step %.2fx, "
                   "eval step %.2fx\n", r->name, pm, st / (ftrain / pm * 1e-6), ev / (feval / pm * 1e-6));
        if (bf16 && pm > 0 && pm16 > 0)
            printf("%-3s against this run's median peaks (float32 %.1f, bf16 %.1f GFLOP/s, the load's share): "
                   "train step %.2fx, eval step %.2fx its bf16 limit\n", r->name, pm, pm16,
                   st / ((lm_t / pm16 + (ftrain - lm_t) / pm) * 1e-6), ev / ((lm_e / pm16 + (feval - lm_e) / pm) * 1e-6));
    }
}

static void print_torch(const run *u, const limits *l)
{
    const runner *rn = u->rn;
    for (int k = 0; k < 2; k++) {
        const samples *tt = &u->tr.train[k], *te = &u->tr.eval[k];
        double pt = bench_median(tt->v, tt->n), pe = bench_median(te->v, te->n);
        double xt = bench_median(rn[k].train.v, rn[k].train.n), xe = bench_median(rn[k].eval.v, rn[k].eval.n);
        printf("PyTorch %s %-3s train step %7.1f ms (%.2fx the float32 limit), eval step %6.1f ms "
               "(%.2fx) | PyTorch/xsa: train %.2fx, eval %.2fx\n",
               u->tr.version, rn[k].name, pt, pt / l->lim_t, pe, pe / l->lim_e, pt / xt, pe / xe);
    }
}

static void print_report(run *u)
{
    print_steps(u);
    limits l = print_limits(u);
    print_against(u, &l);
    const runner *rn = u->rn;
    double sa_st = bench_median(rn[0].train.v, rn[0].train.n);
    printf("peak RSS: %.0f MB (two models, two AdamW, train and eval steps)\n", u->rss / 1024.0);
    printf("XSA overhead: train %+.1f%%, eval %+.1f%%\n",
           100 * (bench_median(rn[1].train.v, rn[1].train.n) / sa_st - 1),
           100 * (bench_median(rn[1].eval.v, rn[1].eval.n) / bench_median(rn[0].eval.v, rn[0].eval.n) - 1));
    if (u->have_torch)
        print_torch(u, &l);
    else if (u->o.torch_script)
        printf("PyTorch: not measured (the reference failed)\n");
    if (u->o.torch_script) torch_stop(&u->tr);
    FILE *la = fopen("/proc/loadavg", "r");
    double load;
    if (la) {
        if (fscanf(la, "%lf", &load) == 1) printf("load average at the end: %.2f\n", load);
        fclose(la);
    }
}

static void run_free(run *u)
{
    for (int k = 0; k < 2; k++) {
        runner *r = &u->rn[k];
        xsa_adamw_free(r->o);
        free(r->train.v); free(r->eval.v); free(r->fwd.v); free(r->bwd.v);
        free(r->opt.v);
        for (int j = 0; j < 2 && k == 0; j++) { free(u->tr.train[j].v); free(u->tr.eval[j].v); }
    }
    free(u->pk.pf_med.v);
    free(u->pk.pb_med.v);
}

int main(int argc, char **argv)
{
    static run u; /* zeroed: the samples start empty */
    int rc = parse_options(argc, argv, &u.o);
    if (rc) return rc;
    int B = u.o.B, T = u.o.T, bf16 = u.o.bf16;
    xsa_gpt_config *c = &u.c;
    xsa_gpt_config_default(c);
    c->seq_len = T;
    u.N = B * T, u.threads = xsa_threads();
    print_setup(c, &u.o, u.threads);
    if (peak_isa_error()) {
        fprintf(stderr, "bench_step: %s\n", peak_isa_error());
        return 1;
    }
    if (bf16) {
        c->precision = XSA_PREC_BF16;
        if (xsa_bf16_check() != 0) die("bf16");
        printf("bf16 products: %s\n", xsa_bf16_backend());
    }
    int32_t *in, *tg;
    if (bench_batch(u.N, c->vocab, &in, &tg) != 0) die("out of memory");
    xsa_gpt *sa = xsa_gpt_new(c);
    if (!sa) die("model");
    xsa_gpt *xs = xsa_gpt_clone(sa, XSA_ATTN_XSA, 1.0);
    if (!xs) die("clone");
    runner_init(&u.rn[0], "SA", sa);
    runner_init(&u.rn[1], "XSA", xs);
    if (u.o.torch_script) {
        char buf[256], cmd[64];
        snprintf(cmd, sizeof cmd, "setup %d %d", B, T);
        if (torch_start(&u.tr, u.o.torch_script, u.threads) == 0 && torch_cmd(&u.tr, cmd, buf, sizeof buf) == 0)
            u.have_torch = 1;
        else
            fprintf(stderr, "bench_step: the PyTorch reference did not start; xsa alone\n");
    }
    signal(SIGPIPE, SIG_IGN);
    run_rounds(&u, in, tg);
    u.rss = peak_rss_kb();
    u.gm = gemm_ms(u.N, c->d_model, c->vocab, c->n_layer, u.o.steps * 2, bf16, &u.lm);
    u.ftrain = peak_step_flops(B, T, c->d_model, c->vocab, c->n_layer, 1);
    u.feval = peak_step_flops(B, T, c->d_model, c->vocab, c->n_layer, 0);
    print_report(&u);
    run_free(&u);
    xsa_gpt_free(sa);
    xsa_gpt_free(xs);
    free(in);
    free(tg);
    return 0;
}
