/*
 * comm.c: the engine's only MPI calls (comm.h). Without XSA_HAVE_MPI (the
 * Makefile defines it when it finds Open MPI) every function is the
 * one-process case.
 */
#include "comm.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

#ifdef XSA_HAVE_MPI
#include <mpi.h>
#endif

/* The variable a rank sets in its own environment: children it starts
 * inherit it with a pid that is not theirs. */
#define MARK "XSA_MPI_RANK_PID"

int xsa_comm_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", NULL};
    int found = 0;
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) found = 1;
    if (!found) return 0;
    const char *mark = getenv(MARK);
    if (mark && *mark) {
        char self[32];
        snprintf(self, sizeof self, "%ld", (long)getpid());
        if (strcmp(mark, self) != 0) return 0; /* started by a rank, not by the launcher */
    }
    return 1;
}

int xsa_comm_threads_per_rank(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    long t = cores / xsa_comm_local_size();
    return t < 1 ? 1 : (int)(t > INT_MAX ? INT_MAX : t);
}

#ifndef XSA_HAVE_MPI

int xsa_comm_built(void) { return 0; }
int xsa_comm_init(void) { return 0; }
int xsa_comm_active(void) { return 0; }
int xsa_comm_rank(void) { return 0; }
int xsa_comm_size(void) { return 1; }
int xsa_comm_local_size(void) { return 1; }
int xsa_comm_barrier(void) { return 0; }
int xsa_comm_allreduce_sum_f32(float *buf, size_t n)
{
    (void)buf, (void)n;
    return 0;
}
int xsa_comm_allreduce_sum_f64(double *buf, size_t n)
{
    (void)buf, (void)n;
    return 0;
}
int xsa_comm_bcast(void *buf, size_t n, int root)
{
    (void)buf, (void)n;
    if (root != 0) return xsa_error("mpi.bcast: root %d is not a rank (size 1)", root);
    return 0;
}
int xsa_comm_gather_bytes(const void *buf, size_t n, char **out, size_t *lens)
{
    *out = malloc(n ? n : 1);
    if (!*out) return xsa_error("mpi.gather: out of memory (%zu bytes)", n);
    if (n) memcpy(*out, buf, n);
    lens[0] = n;
    return 0;
}
int xsa_comm_allgather_bytes(const void *buf, size_t n, char **out, size_t *lens)
{
    return xsa_comm_gather_bytes(buf, n, out, lens);
}
void xsa_comm_abort(int code) { exit(code); }
void xsa_comm_finalize(void) {}

#else

static int state;      /* 0 not tried, 1 active, -1 failed, 2 finalised */
static int world_rank, world_size = 1, local_size = 1;
static char init_error[512];

int xsa_comm_built(void) { return 1; }

/* Records "what: MPI's message" and returns -1. */
static int mpi_fail(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    return xsa_error("%s: %s", what, msg);
}

int xsa_comm_init(void)
{
    if (state == 1 || state == 2) return 0;
    if (state == -1) return xsa_error("%s", init_error);
    if (!xsa_comm_launched()) return 0;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        state = -1;
        mpi_fail("mpi: MPI_Init_thread failed", rc);
        snprintf(init_error, sizeof init_error, "%s", xsa_last_error());
        return -1;
    }
    state = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local_size);
        MPI_Comm_free(&node);
    }
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    setenv(MARK, self, 1);
    atexit(xsa_comm_finalize);
    if (provided < MPI_THREAD_FUNNELED && world_rank == 0)
        fprintf(stderr, "xsa: warning: MPI provides thread level %d, below MPI_THREAD_FUNNELED\n", provided);
    return 0;
}

int xsa_comm_active(void) { return state == 1; }
int xsa_comm_rank(void) { return state == 1 ? world_rank : 0; }
int xsa_comm_size(void) { return state == 1 ? world_size : 1; }
int xsa_comm_local_size(void) { return state == 1 ? local_size : 1; }

int xsa_comm_barrier(void)
{
    if (state != 1) return 0;
    MPI_Request req;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return mpi_fail("mpi.barrier: MPI_Ibarrier", rc);
    struct timespec nap = {0, 1000000}; /* 1 ms: nothing waits on a barrier for less */
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail("mpi.barrier: MPI_Test", rc);
        if (done) return 0;
        nanosleep(&nap, NULL);
    }
}

/* MPI counts are int: larger buffers go in pieces. */
#define CHUNK ((size_t)1 << 30)

static int allreduce_sum(void *buf, size_t n, size_t size, MPI_Datatype type)
{
    if (state != 1) return 0;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * size, (int)k, type, MPI_SUM,
                               MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail("mpi.allreduce: MPI_Allreduce", rc);
    }
    return 0;
}

int xsa_comm_allreduce_sum_f32(float *buf, size_t n)
{
    return allreduce_sum(buf, n, sizeof *buf, MPI_FLOAT);
}

int xsa_comm_allreduce_sum_f64(double *buf, size_t n)
{
    return allreduce_sum(buf, n, sizeof *buf, MPI_DOUBLE);
}

int xsa_comm_bcast(void *buf, size_t n, int root)
{
    int size = xsa_comm_size();
    if (root < 0 || root >= size) return xsa_error("mpi.bcast: root %d is not a rank (size %d)", root, size);
    if (state != 1) return 0;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        int rc = MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail("mpi.bcast: MPI_Bcast", rc);
    }
    return 0;
}

static int gather_bytes(const void *buf, size_t n, char **out, size_t *lens, int all_ranks)
{
    *out = NULL;
    if (state != 1) {
        *out = malloc(n ? n : 1);
        if (!*out) return xsa_error("mpi.gather: out of memory (%zu bytes)", n);
        if (n) memcpy(*out, buf, n);
        lens[0] = n;
        return 0;
    }
    /* every rank learns every length, so all refuse an oversized gather alike */
    uint64_t mine = n;
    uint64_t *all = malloc((size_t)world_size * sizeof *all);
    int *counts = malloc((size_t)world_size * sizeof *counts);
    int *displs = malloc((size_t)world_size * sizeof *displs);
    if (!all || !counts || !displs) {
        free(all), free(counts), free(displs);
        return xsa_error("mpi.gather: out of memory");
    }
    int rc = MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(all), free(counts), free(displs);
        return mpi_fail("mpi.gather: MPI_Allgather", rc);
    }
    uint64_t total = 0;
    for (int r = 0; r < world_size; r++) {
        total += all[r];
        if (total > INT_MAX) {
            free(all), free(counts), free(displs);
            return xsa_error("mpi.gather: %llu bytes in all is more than one gather can carry (2 GiB)",
                             (unsigned long long)total);
        }
        displs[r] = (int)(total - all[r]);
        counts[r] = (int)all[r];
    }
    char *dst = NULL;
    if (world_rank == 0 || all_ranks) {
        dst = malloc(total ? total : 1);
        if (!dst) {
            /* the others are already sending: take part, then fail */
            free(all), free(counts), free(displs);
            xsa_comm_abort(1);
        }
    }
    if (all_ranks)
        rc = MPI_Allgatherv(buf, (int)n, MPI_BYTE, dst, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    else
        rc = MPI_Gatherv(buf, (int)n, MPI_BYTE, dst, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(dst), free(all), free(counts), free(displs);
        return mpi_fail(all_ranks ? "mpi.allgather: MPI_Allgatherv" : "mpi.gather: MPI_Gatherv", rc);
    }
    if (world_rank == 0 || all_ranks)
        for (int r = 0; r < world_size; r++) lens[r] = all[r];
    *out = dst;
    free(all), free(counts), free(displs);
    return 0;
}

int xsa_comm_gather_bytes(const void *buf, size_t n, char **out, size_t *lens)
{
    return gather_bytes(buf, n, out, lens, 0);
}

int xsa_comm_allgather_bytes(const void *buf, size_t n, char **out, size_t *lens)
{
    return gather_bytes(buf, n, out, lens, 1);
}

void xsa_comm_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (state == 1) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void xsa_comm_finalize(void)
{
    if (state != 1) return;
    state = 2;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

#endif
