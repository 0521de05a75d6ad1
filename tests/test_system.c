/*
 * test_system.c: the engine's threads and buffers. xsa_run_split on the
 * kept workers (core/workers.c): every job once, job 0 on the caller's
 * thread and the others on workers that are reused, not created per call,
 * with every signal blocked; nested splits, callers on several threads at
 * once (a job no worker is free for runs on its caller's thread),
 * xsa_run_halves (a worker only when asked to split, at two threads), and the
 * bits of the embedding's and GELU's halves against one thread (attention's:
 * test_nn's test_attention_threads). xsa_threads_lend (system.c),
 * and the buffer pool (pool.h).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/nn.h"
#include "../core/pool.h"
#include "../core/system.h"
#include "check.h"

/* ---- xsa_run_split ---- */

typedef struct {
    atomic_int runs;     /* times this job ran */
    pid_t on;            /* the kernel's id of the thread it ran on (pthread_t
                          * values come back for new threads on cached stacks) */
    int sigint_blocked;  /* SIGINT blocked where it ran */
    int inner;           /* > 0: split again into this many jobs */
    atomic_int *inner_runs;
} split_job;

static void *split_fn(void *arg)
{
    split_job *j = arg;
    sigset_t now;
    pthread_sigmask(SIG_SETMASK, NULL, &now);
    j->sigint_blocked = sigismember(&now, SIGINT) == 1;
    j->on = gettid();
    if (j->inner > 0) {
        split_job in[XSA_SPLIT_MAX];
        memset(in, 0, sizeof in);
        xsa_run_split(in, sizeof in[0], j->inner, split_fn);
        for (int k = 0; k < j->inner; k++) atomic_fetch_add(j->inner_runs, atomic_load(&in[k].runs));
    }
    atomic_fetch_add(&j->runs, 1);
    return NULL;
}

static void test_split_jobs(void)
{
    pid_t me = gettid(), first_worker = 0;
    int once = 1, caller0 = 1, elsewhere = 1, blocked = 1, reused = 1;
    for (int rep = 0; rep < 200; rep++)
        for (int n = 1; n <= XSA_SPLIT_MAX; n++) {
            split_job j[XSA_SPLIT_MAX];
            memset(j, 0, sizeof j);
            xsa_run_split(j, sizeof j[0], n, split_fn);
            for (int k = 0; k < n; k++) once &= atomic_load(&j[k].runs) == 1;
            caller0 &= j[0].on == me && !j[0].sigint_blocked;
            for (int k = 1; k < n; k++) {
                elsewhere &= j[k].on != me;
                blocked &= j[k].sigint_blocked;
            }
            /* one caller, all workers free: job 1 always goes to the first one */
            if (n > 1 && !first_worker) first_worker = j[1].on;
            if (n > 1) reused &= j[1].on == first_worker;
        }
    CHECK(once, "every job runs exactly once, n = 1..%d", XSA_SPLIT_MAX);
    CHECK(caller0, "job 0 runs on the caller's thread, its signal mask untouched");
    CHECK(elsewhere, "jobs 1.. run on workers");
    CHECK(blocked, "workers block SIGINT (signals go to the application's threads)");
    CHECK(reused, "the same worker takes job 1 every time: workers are kept");
    split_job outer[4];
    atomic_int inner_runs = 0;
    memset(outer, 0, sizeof outer);
    for (int k = 0; k < 4; k++) {
        outer[k].inner = 5;
        outer[k].inner_runs = &inner_runs;
    }
    xsa_run_split(outer, sizeof outer[0], 4, split_fn);
    CHECK(atomic_load(&inner_runs) == 20, "4 jobs each splitting into 5: %d inner runs", atomic_load(&inner_runs));
}

/* xsa_run_halves: both jobs once; the second on a worker only when asked
 * to split and there are two engine threads, else on the caller. */
static void test_run_halves(void)
{
    pid_t me = gettid();
    int had = xsa_threads();
    for (int threads = 1; threads <= 2; threads++)
        for (int split = 0; split <= 1; split++) {
            xsa_set_threads(threads);
            split_job j[2];
            memset(j, 0, sizeof j);
            xsa_run_halves(j, sizeof j[0], split, split_fn);
            int away = split && threads > 1;
            CHECK(atomic_load(&j[0].runs) == 1 && atomic_load(&j[1].runs) == 1 && j[0].on == me &&
                      (j[1].on != me) == away,
                  "halves, %d thread(s), split %d: runs %d %d, second %s", threads, split,
                  atomic_load(&j[0].runs), atomic_load(&j[1].runs), j[1].on == me ? "here" : "on a worker");
        }
    xsa_set_threads(had);
}

/* Several callers at once: each job of each call still runs once. */
static void *caller(void *arg)
{
    int *ok = arg;
    for (int rep = 0; rep < 300; rep++) {
        split_job j[8];
        memset(j, 0, sizeof j);
        xsa_run_split(j, sizeof j[0], 8, split_fn);
        for (int k = 0; k < 8; k++) *ok &= atomic_load(&j[k].runs) == 1;
    }
    return NULL;
}

static void test_split_callers(void)
{
    pthread_t t[4];
    int ok[4] = {1, 1, 1, 1}, started = 1;
    for (int i = 0; i < 4; i++) started &= pthread_create(&t[i], NULL, caller, &ok[i]) == 0;
    CHECK(started, "four caller threads");
    for (int i = 0; i < 4 && started; i++) {
        pthread_join(t[i], NULL);
        CHECK(ok[i], "caller %d: every job of its 300 splits ran once", i);
    }
}

/* The embedding (rows forward, columns backward, tokens repeated) and the
 * GELU (halves at a multiple of 64, a scalar tail) on two threads: the
 * bits of one. */
static float *lcg_floats(size_t n, uint32_t seed)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 4194304.0f - 2.0f;
    }
    return p;
}

static void test_split_elementwise(void)
{
    enum { B = 8, T = 96, C = 100, V = 50 }; /* B T C over the halves' minimum */
    size_t nr = (size_t)B * T * C, ng = nr + 37;
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7) % V; /* each token about 15 times */
    float *wte = lcg_floats((size_t)V * C, 1), *wpe = lcg_floats((size_t)T * C, 2), *d = lcg_floats(nr, 3);
    float *x = lcg_floats(ng, 4), *dg = lcg_floats(ng, 5);
    float *out[2], *dwte[2], *dwpe[2], *g[2], *gd[2];
    int had = xsa_threads();
    for (int k = 0; k < 2; k++) {
        xsa_set_threads(k ? 2 : 1);
        out[k] = malloc(nr * sizeof(float));
        dwte[k] = lcg_floats((size_t)V * C, 6);
        dwpe[k] = lcg_floats((size_t)T * C, 7);
        g[k] = malloc(ng * sizeof(float));
        gd[k] = lcg_floats(ng, 8);
        xsa_nn_embedding_forward(out[k], ids, wte, wpe, B, T, C);
        xsa_nn_embedding_backward(dwte[k], dwpe[k], d, ids, B, T, C);
        xsa_nn_gelu_forward(g[k], x, ng);
        xsa_nn_gelu_backward(gd[k], x, dg, ng);
    }
    xsa_set_threads(had);
    CHECK(memcmp(out[0], out[1], nr * sizeof(float)) == 0, "embedding forward: two threads, the bits of one");
    CHECK(memcmp(dwte[0], dwte[1], (size_t)V * C * sizeof(float)) == 0 &&
              memcmp(dwpe[0], dwpe[1], (size_t)T * C * sizeof(float)) == 0,
          "embedding backward: two threads, the bits of one");
    CHECK(memcmp(g[0], g[1], ng * sizeof(float)) == 0 && memcmp(gd[0], gd[1], ng * sizeof(float)) == 0,
          "gelu forward and backward: two threads, the bits of one");
    free(wte); free(wpe); free(d); free(x); free(dg);
    for (int k = 0; k < 2; k++) {
        free(out[k]); free(dwte[k]); free(dwpe[k]); free(g[k]); free(gd[k]);
    }
}

/* ---- xsa_threads_lend ---- */

/* xsa_threads_lend: the calling thread counts *busy fewer engine threads
 * (at least 1), as *busy moves, until it lends NULL; other threads count
 * them all meanwhile. */
static void *threads_seen(void *arg)
{
    *(int *)arg = xsa_threads();
    return NULL;
}

static void test_threads_lend(void)
{
    int had = xsa_threads(), other = 0;
    xsa_set_threads(3);
    atomic_int busy = 2;
    xsa_threads_lend(&busy);
    CHECK(xsa_threads() == 1, "3 threads, 2 lent: %d", xsa_threads());
    pthread_t t;
    CHECK(pthread_create(&t, NULL, threads_seen, &other) == 0 && pthread_join(t, NULL) == 0 && other == 3,
          "another thread counts all 3: %d", other);
    atomic_store(&busy, 5);
    CHECK(xsa_threads() == 1, "5 lent of 3: at least 1, %d", xsa_threads());
    atomic_store(&busy, 1);
    CHECK(xsa_threads() == 2, "one back: %d", xsa_threads());
    xsa_threads_lend(NULL);
    CHECK(xsa_threads() == 3, "lent NULL: all 3, %d", xsa_threads());
    xsa_set_threads(had);
}

/* ---- the buffer pool ---- */

/* The pool hands back what was put, by kind, the smallest that fits first. */
static void test_pool(void)
{
    xsa_pool_trim();
    float *a = xsa_pool_get(XSA_POOL_SCRATCH, 1000), *b = xsa_pool_get(XSA_POOL_SCRATCH, 5000);
    CHECK(a && b && a != b, "pool get");
    CHECK(((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "pool buffers are 64-byte aligned");
    a[999] = 1.0f;
    b[4999] = 2.0f;
    xsa_pool_put(a);
    xsa_pool_put(b);
    CHECK(xsa_pool_bytes() >= 6000 * sizeof(float), "pool keeps what was put");
    float *o = xsa_pool_get(XSA_POOL_ACTS, 10);
    CHECK(o != a && o != b, "another kind does not get them");
    float *c = xsa_pool_get(XSA_POOL_SCRATCH, 800), *d = xsa_pool_get(XSA_POOL_SCRATCH, 4000);
    CHECK(c == a && d == b, "the smallest buffer that fits is handed out");
    xsa_pool_put(c);
    float *e = xsa_pool_get(XSA_POOL_SCRATCH, 100000);
    CHECK(e != NULL && e != b, "a miss allocates");
    xsa_pool_put(d);
    xsa_pool_put(e);
    xsa_pool_put(o);
    xsa_pool_put(NULL);
    CHECK(xsa_pool_bytes() == (100000 + 5000 + 10) * sizeof(float),
          "the too-small buffer made way for the new size (%zu bytes held)", xsa_pool_bytes());
    xsa_pool_trim();
    CHECK(xsa_pool_bytes() == 0, "trim empties the pool");
    /* a buffer of huge-page size (advised before its first touch) is whole:
     * every page written and read back, at both ends and inside */
    size_t big = ((size_t)5 << 20) / sizeof(float) + 3;
    float *h = xsa_pool_get(XSA_POOL_SCRATCH, big);
    CHECK(h && ((uintptr_t)h & 63) == 0, "a 5 MB pool buffer, 64-byte aligned");
    int whole = h != NULL;
    if (h) {
        for (size_t i = 0; i < big; i += 1021) h[i] = (float)(i % 4099);
        h[big - 1] = -1.0f;
        for (size_t i = 0; i < big - 1; i += 1021) whole &= h[i] == (float)(i % 4099);
        whole &= h[big - 1] == -1.0f;
    }
    CHECK(whole, "the 5 MB buffer holds what was written");
    xsa_pool_put(h);
    xsa_pool_trim();
    xsa_advise_huge(NULL, (size_t)1 << 30); /* ignored */
    char small[64];
    xsa_advise_huge(small, sizeof small);   /* under 2 MB: ignored */
}

int main(void)
{
    test_split_jobs();
    test_split_callers();
    test_run_halves();
    test_split_elementwise();
    test_threads_lend();
    test_pool();
    return check_done("test_system");
}
