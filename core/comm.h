/*
 * comm.h: the communicator layer: every MPI call of the engine is in
 * comm.c, behind these functions. Built without MPI (no Open MPI found, or
 * `make MPI=0`), or in a process that mpirun/srun did not start, there is one
 * process: rank 0 of size 1, and every collective is a no-op that succeeds.
 *
 * MPI is initialised by xsa_comm_init() only when the environment says a
 * launcher started this process (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK,
 * PMI_SIZE), never as a "singleton": a plain `xsa` must not pay for, or fail
 * in, MPI_Init. A process that a rank starts (os.execute) inherits those
 * variables but is not part of the job; comm.c marks its own environment
 * (XSA_MPI_RANK_PID) so that such children stay single processes.
 * MPI_Init_thread asks for MPI_THREAD_FUNNELED: OpenBLAS runs threads of its
 * own, but only the main thread calls MPI. MPI_Finalize runs at exit.
 *
 * Errors: functions returning int return 0, or -1 with xsa_last_error()
 * naming the call and MPI's own message (MPI_ERRORS_RETURN is set, so MPI
 * does not abort the job on its own).
 */
#ifndef XSA_COMM_H
#define XSA_COMM_H

#include <stddef.h>

/* 1 when this build has MPI. */
int xsa_comm_built(void);
/* 1 when the environment says mpirun/srun started this process (and it is
 * not a child of a rank). */
int xsa_comm_launched(void);
/* Initialises MPI when launched (once; later calls return the first
 * outcome); 0 and nothing done otherwise. */
int xsa_comm_init(void);
/* 1 once MPI is initialised and not finalised. */
int xsa_comm_active(void);
int xsa_comm_rank(void);       /* 0 when not active */
int xsa_comm_size(void);       /* 1 when not active */
/* Ranks on this node (MPI_COMM_TYPE_SHARED); 1 when not active. */
int xsa_comm_local_size(void);
/* BLAS threads a rank should use so the ranks of a node do not
 * oversubscribe it: max(1, online cores / local ranks). */
int xsa_comm_threads_per_rank(void);
/* A barrier that sleeps while it waits (MPI's blocking barrier polls and
 * would take a core from the ranks still working). */
int xsa_comm_barrier(void);
/* In place, over every rank: buf[i] = sum over ranks. */
int xsa_comm_allreduce_sum_f32(float *buf, size_t n);
int xsa_comm_allreduce_sum_f64(double *buf, size_t n);
/* root's n bytes to every rank. */
int xsa_comm_bcast(void *buf, size_t n, int root);
/* Every rank's bytes to rank 0: there *out gets one malloc'd buffer of all
 * of them in rank order and lens[r] (the caller's array of size() entries)
 * each length; on other ranks *out is NULL. All ranks fail alike when the
 * total exceeds what MPI can count (2 GiB). */
int xsa_comm_gather_bytes(const void *buf, size_t n, char **out, size_t *lens);
/* The same, to every rank: *out and lens are filled everywhere. */
int xsa_comm_allgather_bytes(const void *buf, size_t n, char **out, size_t *lens);
/* Ends every rank of the job with `code` (MPI_Abort), or this process
 * (exit) when not active. */
void xsa_comm_abort(int code);
/* MPI_Finalize (registered with atexit by xsa_comm_init). */
void xsa_comm_finalize(void);

#endif
