/* One ALS fit over the GPUs of several hosts: one MPI process per GPU, NCCL between them,
 * mfact on top (mf_ctx_set_nccl_comm). Every process reads the same ratings file and gets
 * the whole factors; rank 0 prints the result.
 *
 *     mpicc als_mpi.c -o als_mpi $(pkg-config --cflags --libs mfact) -lnccl -lcudart
 *     mpirun -n 8 ./als_mpi ratings.tsv 100
 *
 * Built by CMake only where MPI and NCCL's headers are found (MFACT_BUILD_EXAMPLES). The
 * one-process form, one thread per GPU, needs neither: see mf_ctx_join_local and
 * `mfact als --gpus N`. */
#include <cuda_runtime.h>
#include <mfact/mfact.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(ok, ...)                                                                             \
    do {                                                                                           \
        if (!(ok)) {                                                                               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, local;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc >= 2, "usage: als_mpi RATINGS [RANK]");
    /* The GPU of this process: its rank among the processes of its host. */
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local);

    /* The NCCL communicator, made the usual way: rank 0's id broadcast by MPI. */
    ncclUniqueId id;
    if (rank == 0)
        CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(cudaSetDevice(local) == cudaSuccess, "rank %d: no CUDA device %d", rank, local);
    ncclComm_t comm;
    CHECK(ncclCommInitRank(&comm, size, id, rank) == ncclSuccess, "ncclCommInitRank failed");

    /* A context on that GPU, with the same seed on every rank, joined to the communicator. */
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device = local;
    co.seed = 1;
    mf_ctx *ctx = NULL;
    CHECK(mf_ctx_create(&ctx, &co) == MF_OK, "%s", mf_ctx_last_error(NULL));
    CHECK(mf_ctx_set_nccl_comm(ctx, comm) == MF_OK, "%s", mf_ctx_last_error(ctx));

    mf_sparse *R = NULL;
    CHECK(mf_sparse_read(ctx, &R, argv[1], NULL) == MF_OK, "%s", mf_ctx_last_error(ctx));
    int32_t users, items;
    mf_sparse_shape(R, &users, &items, NULL);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = argc > 2 ? atoi(argv[2]) : o.rank;
    float *U = malloc((size_t)users * o.rank * sizeof *U);
    float *V = malloc((size_t)items * o.rank * sizeof *V);
    mf_als_report rep = {.struct_size = sizeof rep};
    /* Collective: every rank calls it; each solves its share and receives the rest. */
    mf_status st = mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep);
    CHECK(st == MF_OK, "rank %d: %s", rank, mf_ctx_last_error(ctx));
    if (rank == 0)
        printf("%d ranks: %d users x %d items, rank %d, train RMSE %.4f, %.3f s per iteration\n",
               size, users, items, rep.rank, rep.train_rmse,
               rep.iteration_seconds / rep.iterations);

    free(U);
    free(V);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx); /* before the communicator it uses */
    ncclCommDestroy(comm);
    MPI_Comm_free(&host);
    MPI_Finalize();
    return 0;
}
