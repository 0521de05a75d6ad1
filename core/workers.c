/*
 * workers.c: xsa_run_split (system.h) on threads that are kept, not
 * created per call. A training step splits its kernels a few dozen times
 * (the linear layers, attention, AdamW, the lm_head's passes), and on the
 * Zen 5 VM a pthread_create and pthread_join took 46-47 us: about 1 ms a
 * step, and each second half started that much after the first. A kept
 * worker is handed its job through one atomic store (it spins a little
 * before it sleeps, as OpenBLAS's and OpenMP's threads do) and the caller
 * waits for it the same way.
 *
 * The contract stays system.h's: job 0 runs on the caller's thread, jobs 1..
 * on workers; a job no worker is free for (every worker busy with another
 * caller's jobs, or a worker that could not start) runs on the caller's
 * thread after job 0. Each job writes only its own outputs, so where a job
 * runs never changes a bit. Workers start at the first split that needs
 * them (up to XSA_SPLIT_MAX - 1), block every signal (they go to the
 * application's threads, where the interrupt handling is; and oneDNN's
 * kernels move the stack pointer into the heap, gemm.c), and are told to
 * end and joined when the library is unloaded or the process exits, so a
 * dlclose (a Lua state closing the xsa module) leaves none behind.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "system.h"

#define NWORKERS (XSA_SPLIT_MAX - 1)
/* How long a thread polls before it sleeps: longer than most of a
 * training step's gaps between two splits (a layer norm, 0.1-0.2 ms at the
 * study's sizes, is a long one), far shorter than a scheduler time slice,
 * so that a machine shared with other runs loses little. */
#define SPIN_NS 200000L

typedef struct {
    pthread_t tid;
    atomic_int claimed; /* a caller holds it, from claim to its job's end */
    atomic_int posted;  /* a job waits in fn, arg */
    atomic_int done;    /* the posted job has ended */
    void *(*fn)(void *);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* posted, done, or quit changed */
} worker;

static worker workers[NWORKERS];
static int nstarted;   /* workers[0..nstarted) run; under start_mu */
static atomic_int nlive; /* the same, read without the lock */
static atomic_int quit; /* set under each worker's mu, so that none misses it */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static inline void pause_once(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Spins on *flag, then sleeps on w's condition until it is set (or the
 * pool quits, for a worker). 1 when the flag is set. */
static int wait_flag(worker *w, atomic_int *flag, int for_worker)
{
    long until = 0;
    for (int i = 0;; i++) {
        if (atomic_load_explicit(flag, memory_order_acquire)) return 1;
        if (i % 64 == 0) {
            long t = now_ns();
            if (!until) until = t + SPIN_NS;
            else if (t > until) break;
        }
        pause_once();
    }
    pthread_mutex_lock(&w->mu);
    while (!atomic_load_explicit(flag, memory_order_acquire) && !(for_worker && atomic_load(&quit)))
        pthread_cond_wait(&w->cv, &w->mu);
    int set = atomic_load_explicit(flag, memory_order_acquire);
    pthread_mutex_unlock(&w->mu);
    return set;
}

/* Sets *flag and wakes whoever sleeps on w's condition. */
static void raise_flag(worker *w, atomic_int *flag)
{
    pthread_mutex_lock(&w->mu);
    atomic_store_explicit(flag, 1, memory_order_release);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (;;) {
        if (!wait_flag(w, &w->posted, 1)) return NULL; /* quit */
        atomic_store_explicit(&w->posted, 0, memory_order_relaxed);
        w->fn(w->arg);
        raise_flag(w, &w->done);
    }
}

/* Starts workers up to n (under start_mu); those that cannot start are
 * not counted, and their jobs run on the caller's thread. */
static void start_workers(int n)
{
    pthread_mutex_lock(&start_mu);
    while (nstarted < n) {
        worker *w = &workers[nstarted];
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the worker */
        int rc = pthread_create(&w->tid, NULL, worker_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            pthread_cond_destroy(&w->cv);
            pthread_mutex_destroy(&w->mu);
            break;
        }
        nstarted++;
        atomic_store(&nlive, nstarted);
    }
    pthread_mutex_unlock(&start_mu);
}

__attribute__((destructor)) static void stop_workers(void)
{
    pthread_mutex_lock(&start_mu);
    for (int i = 0; i < nstarted; i++) {
        pthread_mutex_lock(&workers[i].mu);
        atomic_store(&quit, 1);
        pthread_cond_broadcast(&workers[i].cv);
        pthread_mutex_unlock(&workers[i].mu);
    }
    for (int i = 0; i < nstarted; i++) {
        pthread_join(workers[i].tid, NULL);
        pthread_cond_destroy(&workers[i].cv);
        pthread_mutex_destroy(&workers[i].mu);
    }
    nstarted = 0;
    atomic_store(&nlive, 0);
    atomic_store(&quit, 0); /* a split after this (another destructor's) starts new ones */
    pthread_mutex_unlock(&start_mu);
}

void xsa_run_split(void *jobs, size_t size, int n, void *(*fn)(void *))
{
    char *base = jobs;
    worker *mine[XSA_SPLIT_MAX] = {0}; /* job k's worker, or NULL: the caller runs it */
    if (n > XSA_SPLIT_MAX) n = XSA_SPLIT_MAX;
    if (n < 1) return;
    if (atomic_load(&nlive) < n - 1) start_workers(n - 1);
    int live = atomic_load(&nlive), k = 1;
    for (int i = 0; i < live && k < n; i++) {
        int idle = 0;
        if (!atomic_compare_exchange_strong(&workers[i].claimed, &idle, 1)) continue;
        worker *w = &workers[i];
        w->fn = fn;
        w->arg = base + (size_t)k * size;
        atomic_store_explicit(&w->done, 0, memory_order_relaxed);
        raise_flag(w, &w->posted);
        mine[k++] = w;
    }
    fn(base);
    for (int j = 1; j < n; j++)
        if (!mine[j]) fn(base + (size_t)j * size);
    for (int j = 1; j < n; j++) {
        if (!mine[j]) continue;
        wait_flag(mine[j], &mine[j]->done, 0);
        atomic_store(&mine[j]->claimed, 0);
    }
}

void xsa_run_halves(void *jobs, size_t size, int split, void *(*fn)(void *))
{
    if (split && xsa_threads() > 1) {
        xsa_run_split(jobs, size, 2, fn);
    } else {
        fn(jobs);
        fn((char *)jobs + size);
    }
}
