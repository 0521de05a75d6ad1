/*
 * test_comm.c: the communicator layer (core/comm.h) in a process no launcher
 * started, as every C test runs: MPI is never initialised, and the layer is
 * rank 0 of size 1 whose collectives leave their buffers as they were, in
 * a build with Open MPI and without. The launcher test: a child of a rank
 * (the environment names another pid) is not launched. Across ranks the
 * layer is tested through xsa.mpi under mpirun (tests/test_mpi.lua).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/xsa.h"
#include "check.h"

static void test_one_process(void)
{
    CHECK(xsa_comm_launched() == 0, "no launcher variables here");
    CHECK(xsa_comm_init() == 0, "init without a launcher succeeds: %s", xsa_last_error());
    CHECK(xsa_comm_active() == 0, "and starts nothing");
    CHECK(xsa_comm_rank() == 0 && xsa_comm_size() == 1 && xsa_comm_local_size() == 1, "rank 0 of 1");
    CHECK(xsa_comm_threads_per_rank() == (int)sysconf(_SC_NPROCESSORS_ONLN), "all cores for the one rank");
    CHECK(xsa_comm_barrier() == 0, "barrier");
    float f[3] = {1.5f, -2.0f, 3.25f};
    CHECK(xsa_comm_allreduce_sum_f32(f, 3) == 0 && f[0] == 1.5f && f[1] == -2.0f && f[2] == 3.25f,
          "allreduce of one rank: unchanged");
    double d[2] = {0.1, 1e300};
    CHECK(xsa_comm_allreduce_sum_f64(d, 2) == 0 && d[0] == 0.1 && d[1] == 1e300, "f64 unchanged");
    CHECK(xsa_comm_bcast(f, sizeof f, 0) == 0 && f[2] == 3.25f, "bcast from 0");
    CHECK(xsa_comm_bcast(f, sizeof f, 1) != 0 && strstr(xsa_last_error(), "root 1 is not a rank"),
          "root 1 refused: %s", xsa_last_error());
    CHECK(xsa_comm_bcast(f, sizeof f, -1) != 0, "root -1 refused");
    size_t lens[1] = {99};
    char *out = NULL;
    CHECK(xsa_comm_gather_bytes("hello", 5, &out, lens) == 0 && out && lens[0] == 5 && memcmp(out, "hello", 5) == 0,
          "gather: a copy");
    free(out);
    out = NULL;
    CHECK(xsa_comm_allgather_bytes("", 0, &out, lens) == 0 && out && lens[0] == 0, "allgather of nothing");
    free(out);
}

static void test_child_of_a_rank(void)
{
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("XSA_MPI_RANK_PID", "1", 1); /* a rank's pid, not ours */
    CHECK(xsa_comm_launched() == 0, "a child of a rank is not part of the job");
    unsetenv("XSA_MPI_RANK_PID");
    CHECK(xsa_comm_launched() == 1, "the launcher's variable alone says launched");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    CHECK(xsa_comm_launched() == 0, "and without it, not");
}

int main(void)
{
    test_one_process();
    test_child_of_a_rank();
    return check_done("test_comm");
}
