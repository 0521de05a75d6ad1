/*
 * system.h: facts about the machine the engine runs on: the OpenBLAS kernel
 * ("core") in use, what the CPU could use, and the number of BLAS threads.
 */
#ifndef XSA_SYSTEM_H
#define XSA_SYSTEM_H

#include <stdatomic.h>
#include <stddef.h>

/* The kernel OpenBLAS picked when it loaded, e.g. "Haswell", "SkylakeX". */
const char *xsa_blas_corename(void);
/* The best OPENBLAS_CORETYPE this CPU supports ("Cooperlake", "SkylakeX",
 * "Haswell"), or NULL when none of these applies. */
const char *xsa_cpu_best_coretype(void);
/* 1 when OpenBLAS runs a kernel below what the CPU supports (a fallback). */
int xsa_blas_is_fallback(void);
/* The engine's threads (initially OpenBLAS's count: OPENBLAS_NUM_THREADS or
 * the cores). OpenBLAS itself runs on one thread, and the engine runs
 * whole products on its own threads, so that float32 results do not depend
 * on the thread count (see system.c). An embedder that raises OpenBLAS's
 * threads itself loses that. */
int xsa_threads(void);
/* Lends engine threads to work running beside the calling thread: until
 * xsa_threads_lend(NULL), xsa_threads() on this thread counts *busy fewer
 * (at least 1), so that its kernels do not split onto cores that are
 * busy; the work counts *busy down as its threads finish, and the cores
 * count again. Other threads are not affected. */
void xsa_threads_lend(atomic_int *busy);
/* Sets the number of engine threads (n in [1, 1024]) and OpenBLAS's to 1. */
int xsa_set_threads(int n);
/* For a fresh buffer of 2 MB or more, before its first touch: asks the
 * kernel for transparent huge pages (madvise; "madvise" is Debian's default
 * mode). On a Zen 5 VM first touching 4 KB pages cost about 4 ms per MB
 * (xsa.zeros{4096, 4096}: 283 ms), with huge pages under 1 ms per MB. A
 * refusal only costs that speed; no-op elsewhere. */
void xsa_advise_huge(void *p, size_t bytes);
/* Runs fn(jobs + k * size) for k in [0, n) and returns when all are done:
 * job 0 on the caller's thread, jobs 1.. on kept worker threads (workers.c;
 * a split costs about 1 us, a thread created per call 47); a job no worker
 * is free for (all busy with other callers' jobs, or none could start) runs
 * on the caller's thread after job 0. Each job writes only its own outputs,
 * so where a job runs never changes a bit. Jobs may split again. n <=
 * XSA_SPLIT_MAX. */
#define XSA_SPLIT_MAX 16
void xsa_run_split(void *jobs, size_t size, int n, void *(*fn)(void *));
/* Two jobs: side by side (xsa_run_split) when split is nonzero and the
 * engine has two threads or more, else one after the other on the
 * caller's thread. For kernels cut in two halves whose elements take the
 * same arithmetic in either half, so where they run changes no bit; split
 * is the caller's "enough work to pay for a second thread". */
void xsa_run_halves(void *jobs, size_t size, int split, void *(*fn)(void *));

#endif
