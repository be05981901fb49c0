// The exchange of cuda/comm.h over NCCL. libnccl.so.2 is loaded with dlopen() on first use,
// as cuSPARSE is (cusparse_api.h): libmfact.so links no NCCL and needs none to load, a
// build needs no NCCL headers, and a process that never groups contexts never loads it.
// The few NCCL declarations used are written out below: they are NCCL's stable C ABI
// (nccl.h since 2.0: the enum values, the opaque communicator, the signatures).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/comm.h"
#include "cuda/cuda_internal.h"
#include "cuda/dynamic_library.h"

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t; // ncclSuccess = 0
typedef struct {
    char internal[MF_NCCL_ID_BYTES];
} ncclUniqueId;
enum { nccl_int8 = 0, nccl_int64 = 4, nccl_float32 = 7, nccl_float64 = 8 };
enum { nccl_sum = 0, nccl_max = 2 };

struct nccl_api {
    ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_count)(ncclComm_t, int *);
    ncclResult_t (*comm_user_rank)(ncclComm_t, int *);
    ncclResult_t (*comm_cu_device)(ncclComm_t, int *);
    ncclResult_t (*broadcast)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
};

static nccl_api loaded;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

// NCCL's soname is libnccl.so.2; MFACT_NCCL_LIBRARY names another file (a pip wheel's copy
// under site-packages/nvidia/nccl/lib, say), tried first.
static void load(void)
{
    const char *const names[] = {getenv("MFACT_NCCL_LIBRARY"), "libnccl.so.2", "libnccl.so"};
    nccl_api api;
    const mf_dl_symbol table[] = {
        {(void **)&api.comm_init_all, "ncclCommInitAll"},
        {(void **)&api.get_unique_id, "ncclGetUniqueId"},
        {(void **)&api.comm_init_rank, "ncclCommInitRank"},
        {(void **)&api.comm_destroy, "ncclCommDestroy"},
        {(void **)&api.comm_count, "ncclCommCount"},
        {(void **)&api.comm_user_rank, "ncclCommUserRank"},
        {(void **)&api.comm_cu_device, "ncclCommCuDevice"},
        {(void **)&api.broadcast, "ncclBroadcast"},
        {(void **)&api.all_gather, "ncclAllGather"},
        {(void **)&api.all_reduce, "ncclAllReduce"},
        {(void **)&api.send, "ncclSend"}, // NCCL 2.7
        {(void **)&api.recv, "ncclRecv"},
        {(void **)&api.group_start, "ncclGroupStart"},
        {(void **)&api.group_end, "ncclGroupEnd"},
        {(void **)&api.error_string, "ncclGetErrorString"},
    };
    if (mf_dl_load(names, 3, table, (int)(sizeof table / sizeof *table), load_error,
                   sizeof load_error))
        loaded = api; // published by pthread_once's return
}

static mf_status get_api(mf_ctx *ctx, const char *fn)
{
    pthread_once(&load_once, load);
    if (!loaded.all_reduce)
        return mf_device_fail(ctx, MF_ERR_UNSUPPORTED,
                              "%s: NCCL could not be loaded (%s); install NCCL 2 (libnccl.so.2) "
                              "or name it in MFACT_NCCL_LIBRARY",
                              fn, load_error);
    return MF_OK;
}

#define NCCL_TRY(ctx, call)                                                                        \
    do {                                                                                           \
        ncclResult_t nccl_r_ = (call);                                                             \
        if (nccl_r_ != 0)                                                                          \
            return mf_device_fail((ctx), MF_ERR_CUDA, "%s failed: %s (%s:%d)", #call,              \
                                  loaded.error_string(nccl_r_), __FILE__, __LINE__);               \
    } while (0)

// Queued exchanges timed at once (a ring of event pairs): more than an epoch's shifts of
// SGD over 8 ranks before the ring waits for its oldest.
#define MF_NCCL_MARKS 32

struct nccl_comm {
    mf_comm base;
    ncclComm_t comm;
    int owned;     // created by mfact (init_all): destroyed with the rank
    int device;    // the communicator's device
    void *scratch; // MF_COMM_MAX_VALUES 8-byte values on the device, for the reductions
    // The all-gather's staging: one slot per rank, made on the first gather that needs it
    // (every rank agrees that each made its own; -1: some could not, broadcasts from then on).
    char *staging;
    size_t slot_bytes;  // each rank's slot: the staging's bytes (staging_bytes) / size
    size_t small_bytes; // gathers under this many bytes in all go by broadcasts
    int staging_state;  // 0 not yet, 1 made, -1 refused
    int gather_by;      // how large gathers go (gather_way): GATHER_AUTO, _ALLGATHER, _BROADCASTS
    // The queued exchanges' device time (mf_comm_ops.device_seconds): a ring of event
    // pairs around the latest ones, read once they completed (the ring is never waited on
    // but when full); -1 events: not made (then nothing is timed).
    cudaEvent_t marks[2 * MF_NCCL_MARKS];
    int marks_made, mark_head, mark_count;
    int mark_open; // a start recorded whose end is not: an end counts only after one
    double device_seconds;
};

// The group's all-gather staging: MF_GATHER_STAGING_BYTES in all, whatever the size of the
// group (a slot of 128 MiB on 2 ranks, 32 MiB on 8), so that a rank's fixed cost does not
// grow with the group; chunks of this size run at NCCL's full all-gather bandwidth.
// MFACT_NCCL_GATHER_BYTES changes it (at least 4 KiB; the tests make it small, so that
// their tables travel in many chunks).
#define MF_GATHER_STAGING_BYTES ((size_t)256 << 20)
// Below this many bytes in all (or a quarter of the staging), a gather is latency: the
// grouped broadcasts, no copies.
#define MF_GATHER_SMALL_BYTES ((size_t)1 << 20)

// How a gather of more than MF_GATHER_SMALL_BYTES travels. Measured on H200s (bench/README.md,
// 2026-11-29, thirteenth session): on 2 ranks the grouped broadcasts (each share one transfer,
// in place, no copies) beat the staging's all-gather (iALS lastfm 1.76x -> 1.81x, the users'
// gather 0.46 -> 0.31 ms, ALS netflix 1.92x -> 1.93x). On 4 ranks broadcasts had been measured
// at about 35 GB/s (497e28a). Measured again on 4 H200 (twenty-fourth session), forced for
// every gather, they won iALS lastfm's tables of 184 and 150 MB (2.94x -> 3.08x; the rule
// below then measured 3.03x) and lost ASD 200,000²'s of 16 MB (2.76x against 2.68x, 2.68x and
// 2.69x in three runs); ALS netflix was within noise (3.62-3.66x). So larger groups take
// broadcasts for gathers of MF_GATHER_LARGE_BYTES and more, else the staging (the threshold
// lies between the sizes measured; none between them was). Grouped sends and receives in
// place lost on 2 ranks (iALS 1.53x: the Gram's 10 MB parts took 2.7 ms). MFACT_NCCL_GATHER
// ("allgather" or "broadcast") overrides AUTO, for benches and tests; like
// MFACT_NCCL_GATHER_BYTES it must be the same on every rank.
enum { GATHER_AUTO = 0, GATHER_ALLGATHER = 1, GATHER_BROADCASTS = 2 };
#define MF_GATHER_LARGE_BYTES ((size_t)64 << 20)

static int gather_way(void)
{
    const char *v = getenv("MFACT_NCCL_GATHER");
    return v && !strcmp(v, "allgather")   ? GATHER_ALLGATHER
           : v && !strcmp(v, "broadcast") ? GATHER_BROADCASTS
                                          : GATHER_AUTO;
}

// A byte count from the environment variable `name` (4 KiB to 1 TiB), else `fallback`.
static size_t env_bytes(const char *name, size_t fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    const unsigned long long b = v ? strtoull(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && b >= 4096 && b <= ((size_t)1 << 40) ? (size_t)b
                                                                                : fallback;
}

static mf_status nccl_reduce(nccl_comm *n, mf_ctx *ctx, void *v, int count, int type, int op);

// Fold the completed pairs, oldest first, into device_seconds; `wait`: the oldest is waited
// for (the ring is full). An event's failure only stops the timing.
static void marks_fold(nccl_comm *n, int wait)
{
    while (n->mark_count > 0) {
        cudaEvent_t *m = n->marks + 2 * n->mark_head;
        cudaError_t e = wait ? cudaEventSynchronize(m[1]) : cudaEventQuery(m[1]);
        float ms = 0.0f;
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, m[0], m[1]);
        if (e == cudaErrorNotReady)
            return;
        if (e != cudaSuccess)
            (void)cudaGetLastError(); // not sticky: lose this pair's time, not the run
        else
            n->device_seconds += 1e-3 * ms;
        n->mark_head = (n->mark_head + 1) % MF_NCCL_MARKS;
        n->mark_count--;
        wait = 0;
    }
}

// The event of a queued exchange's start (begin 1) or end, on stream. The pairs are made on
// first use; none made, nothing is timed.
static void mark(nccl_comm *n, cudaStream_t stream, int begin)
{
    if (n->marks_made == 0) {
        n->marks_made = 1;
        for (int i = 0; i < 2 * MF_NCCL_MARKS && n->marks_made == 1; i++)
            if (cudaEventCreate(&n->marks[i]) != cudaSuccess) {
                (void)cudaGetLastError();
                for (int j = 0; j < i; j++)
                    cudaEventDestroy(n->marks[j]);
                n->marks_made = -1;
            }
    }
    if (n->marks_made != 1)
        return;
    if (begin && n->mark_count == MF_NCCL_MARKS)
        marks_fold(n, 1);
    if (!begin && !n->mark_open)
        return;
    const int slot = (n->mark_head + n->mark_count) % MF_NCCL_MARKS;
    n->mark_open = 0;
    if (cudaEventRecord(n->marks[2 * slot + (begin ? 0 : 1)], stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (begin)
        n->mark_open = 1;
    else
        n->mark_count++;
}

static double nccl_device_seconds(mf_comm *c)
{
    nccl_comm *n = (nccl_comm *)c;
    mf_device_guard guard(n->device);
    marks_fold(n, 0);
    return n->device_seconds;
}

// Variable shares by one in-place broadcast per rank, fused into one NCCL group: no copies.
// Small gathers, groups of 2 and the large tables of larger groups go this way; the rest by
// ncclAllGather through the staging (gather_way's measurements).
static mf_status gather_by_broadcasts(nccl_comm *n, mf_ctx *ctx, cudaStream_t stream, void *buf,
                                      const int64_t *bounds, size_t row_bytes, const int *owner)
{
    NCCL_TRY(ctx, loaded.group_start());
    ncclResult_t r = 0;
    for (int b = 0; b < n->base.size && r == 0; b++) {
        const size_t rows = (size_t)(bounds[b + 1] - bounds[b]);
        char *p = (char *)buf + (size_t)bounds[b] * row_bytes;
        if (rows > 0)
            r = loaded.broadcast(p, p, rows * row_bytes, nccl_int8, owner ? owner[b] : b, n->comm,
                                 stream);
    }
    ncclResult_t end = loaded.group_end();
    NCCL_TRY(ctx, r);
    NCCL_TRY(ctx, end);
    return MF_OK;
}

// Every rank makes its staging or none uses it: the first large gather of a rank's life
// agrees on it (one round trip); its result holds for every later gather, on every rank.
static mf_status make_staging(nccl_comm *n, mf_ctx *ctx)
{
    if (n->staging_state != 0)
        return MF_OK;
    int64_t failed =
        cudaMalloc((void **)&n->staging, n->slot_bytes * (size_t)n->base.size) != cudaSuccess;
    if (failed) {
        (void)cudaGetLastError();
        n->staging = NULL;
    }
    const mf_status st = nccl_reduce(n, ctx, &failed, 1, nccl_int64, nccl_max);
    if (st != MF_OK || (failed && n->staging)) {
        // Not agreed (the state stays 0, and a later call allocates again) or refused
        // somewhere: this rank's staging goes now, not over-written by the next cudaMalloc.
        if (n->staging)
            cudaFree(n->staging);
        n->staging = NULL;
    }
    if (st != MF_OK)
        return st;
    n->staging_state = failed ? -1 : 1;
    return MF_OK;
}

// Rows [from, from + count) of a block, clipped to its length.
static size_t chunk_rows(const int64_t *bounds, int b, size_t from, size_t count)
{
    const size_t len = (size_t)(bounds[b + 1] - bounds[b]);
    return from >= len ? 0 : (len - from < count ? len - from : count);
}

// The block that rank q holds: owner is a permutation of the ranks (NULL: block q).
static int block_held_by(const int *owner, int size, int q)
{
    for (int b = 0; owner && b < size; b++)
        if (owner[b] == q)
            return b;
    return q;
}

// Variable shares through ncclAllGather: each chunk of every block goes into this rank's
// slot of the staging (padded to the slot), one all-gather fills every slot on every rank,
// and the other ranks' slots are copied to their blocks' places. The padding costs bytes
// only where the shares' rows differ (they are balanced by work).
static mf_status gather_rows(nccl_comm *n, mf_ctx *ctx, cudaStream_t stream, void *buf,
                             const int64_t *bounds, size_t row_bytes, const int *owner)
{
    mf_comm *c = &n->base;
    size_t most = 0; // the largest block's rows
    for (int b = 0; b < c->size; b++)
        if ((size_t)(bounds[b + 1] - bounds[b]) > most)
            most = (size_t)(bounds[b + 1] - bounds[b]);
    const size_t all = (size_t)(bounds[c->size] - bounds[0]) * row_bytes;
    const int broadcasts = n->gather_by == GATHER_AUTO
                               ? c->size == 2 || all >= MF_GATHER_LARGE_BYTES
                               : n->gather_by == GATHER_BROADCASTS;
    if (broadcasts || most * row_bytes * (size_t)c->size < n->small_bytes || row_bytes == 0)
        return gather_by_broadcasts(n, ctx, stream, buf, bounds, row_bytes, owner);
    const mf_status made = make_staging(n, ctx);
    if (made != MF_OK)
        return made;
    const size_t per_chunk = n->staging_state == 1 ? n->slot_bytes / row_bytes : 0;
    if (per_chunk == 0) // refused, or rows wider than a slot
        return gather_by_broadcasts(n, ctx, stream, buf, bounds, row_bytes, owner);
    char *const base = (char *)buf;
    const int mine = block_held_by(owner, c->size, c->rank);
    for (size_t from = 0; from < most; from += per_chunk) {
        // Every rank sends the same count (all know `most`): the slots are `count` apart.
        const size_t count = (most - from < per_chunk ? most - from : per_chunk) * row_bytes;
        const size_t rows = chunk_rows(bounds, mine, from, per_chunk);
        char *const slot = n->staging + (size_t)c->rank * count;
        if (rows > 0)
            MF_CUDA_TRY(ctx, cudaMemcpyAsync(slot, base + ((size_t)bounds[mine] + from) * row_bytes,
                                             rows * row_bytes, cudaMemcpyDeviceToDevice, stream));
        NCCL_TRY(ctx, loaded.all_gather(slot, n->staging, count, nccl_int8, n->comm, stream));
        for (int q = 0; q < c->size; q++) {
            const int b = block_held_by(owner, c->size, q);
            const size_t got = chunk_rows(bounds, b, from, per_chunk);
            if (q != c->rank && got > 0)
                MF_CUDA_TRY(ctx, cudaMemcpyAsync(base + ((size_t)bounds[b] + from) * row_bytes,
                                                 n->staging + (size_t)q * count, got * row_bytes,
                                                 cudaMemcpyDeviceToDevice, stream));
        }
    }
    return MF_OK;
}

static mf_status nccl_allgatherv(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                                 size_t row_bytes, const int *owner)
{
    nccl_comm *n = (nccl_comm *)c;
    mf_device_guard guard(n->device);
    cudaStream_t stream = mf_device_link_of(ctx)->cuda->stream;
    mark(n, stream, 1);
    const mf_status st = gather_rows(n, ctx, stream, buf, bounds, row_bytes, owner);
    mark(n, stream, 0);
    return st;
}

// v[0..count) of 8-byte values through the device scratch, reduced by op.
static mf_status nccl_reduce(nccl_comm *n, mf_ctx *ctx, void *v, int count, int type, int op)
{
    if (count < 0 || count > MF_COMM_MAX_VALUES)
        return mf_device_fail(ctx, MF_ERR_INTERNAL, "NCCL reduction of %d values", count);
    mf_device_guard guard(n->device);
    cudaStream_t stream = mf_device_link_of(ctx)->cuda->stream;
    const size_t bytes = (size_t)count * 8;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(n->scratch, v, bytes, cudaMemcpyHostToDevice, stream));
    NCCL_TRY(ctx,
             loaded.all_reduce(n->scratch, n->scratch, (size_t)count, type, op, n->comm, stream));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(v, n->scratch, bytes, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    marks_fold(n, 0); // the stream is idle: every queued exchange is done
    return MF_OK;
}

static mf_status nccl_max_i64(mf_comm *c, mf_ctx *ctx, int64_t *v, int count)
{
    return nccl_reduce((nccl_comm *)c, ctx, v, count, nccl_int64, nccl_max);
}

static mf_status nccl_sum_f64(mf_comm *c, mf_ctx *ctx, double *v, int count)
{
    return nccl_reduce((nccl_comm *)c, ctx, v, count, nccl_float64, nccl_sum);
}

static mf_status nccl_sum_buffer(mf_comm *c, mf_ctx *ctx, void *buf, size_t count, int is_double)
{
    nccl_comm *n = (nccl_comm *)c;
    if (count == 0)
        return MF_OK;
    mf_device_guard guard(n->device);
    cudaStream_t stream = mf_device_link_of(ctx)->cuda->stream;
    mark(n, stream, 1);
    NCCL_TRY(ctx, loaded.all_reduce(buf, buf, count, is_double ? nccl_float64 : nccl_float32,
                                    nccl_sum, n->comm, stream));
    mark(n, stream, 0);
    return MF_OK;
}

// The device memory an alltoallv stages through, all peers and both directions together:
// MFACT_NCCL_EXCHANGE_BYTES, else 1 GiB. A split input's entries (billions of them) move in
// rounds of at most this much, where one allocation of every byte to send and receive had
// taken 48 GB of each GPU for 4e9 entries on 2. The ranks take the smallest of theirs.
#define EXCHANGE_BYTES ((size_t)1 << 30)

// A rank's own block of an alltoallv, copied between host buffers (on a thread of its own).
struct own_copy {
    char *to;
    const char *from;
    size_t bytes;
};

static void *copy_own(void *arg)
{
    const own_copy *o = (const own_copy *)arg;
    memcpy(o->to, o->from, o->bytes);
    return NULL;
}

// Host buffers. A rank's own block is a host copy. The others' go in rounds through one
// bounded device allocation: round i moves bytes [i piece, (i + 1) piece) of every block
// to and from every peer (host to device, one NCCL group of sends and receives, device to
// host), the same rounds on every rank. A sender and its receiver cut a block alike, since
// recv_bytes[q] is q's send_bytes[this rank] and the piece is agreed first, together with
// whether every rank could allocate (a max over the ranks), so that none waits forever in
// a send. Copies between pageable host memory and the device are synchronous for the host:
// rounds cost no speed. The caller's recv should have its pages touched already: a copy
// from the device into fresh pages ran at 1 GB/s on an H200 host, into touched ones at 10.
static mf_status nccl_alltoallv(mf_comm *c, mf_ctx *ctx, const void *send,
                                const int64_t *send_bytes, void *recv, const int64_t *recv_bytes)
{
    nccl_comm *n = (nccl_comm *)c;
    mf_device_guard guard(n->device);
    cudaStream_t stream = mf_device_link_of(ctx)->cuda->stream;
    const int peers = c->size - 1;
    size_t most = 0;                 // the largest block to or from a peer
    size_t own_from = 0, own_to = 0; // this rank's block in send and in recv
    for (int q = 0; q < c->size; q++) {
        if (q < c->rank)
            own_from += (size_t)send_bytes[q], own_to += (size_t)recv_bytes[q];
        if (q != c->rank) {
            most = (size_t)send_bytes[q] > most ? (size_t)send_bytes[q] : most;
            most = (size_t)recv_bytes[q] > most ? (size_t)recv_bytes[q] : most;
        }
    }
    // the piece: every rank's largest block, and the least budget (negated for the max)
    const size_t budget_piece =
        peers > 0 ? env_bytes("MFACT_NCCL_EXCHANGE_BYTES", EXCHANGE_BYTES) / (2 * (size_t)peers)
                  : 1;
    int64_t agree[2] = {(int64_t)most,
                        -(int64_t)(budget_piece > 256 ? budget_piece / 256 * 256 : 256)};
    mf_status st = nccl_reduce(n, ctx, agree, 2, nccl_int64, nccl_max);
    if (st != MF_OK)
        return st;
    const size_t all_most = (size_t)agree[0],
                 piece = all_most < (size_t)-agree[1] ? all_most : (size_t)-agree[1];
    const size_t rounds = piece > 0 ? (all_most + piece - 1) / piece : 0;
    char *dev = NULL; // peers x piece to send, then peers x piece received
    int64_t failed =
        rounds > 0 && cudaMalloc((void **)&dev, 2 * (size_t)peers * piece) != cudaSuccess;
    if (failed)
        (void)cudaGetLastError();
    st = nccl_reduce(n, ctx, &failed, 1, nccl_int64, nccl_max);
    if (st == MF_OK && failed)
        st = mf_device_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                            "exchanging host blocks between the ranks: out of device memory to "
                            "stage %zu bytes (on this rank or another)",
                            2 * (size_t)peers * piece);
    // The own block is copied on a thread of its own while the rounds run, where it is
    // larger than a piece (at 9 GB/s into touched pages, 12 GB had cost 1.3 s of 4e9
    // entries on 2 ranks); inline where it is smaller, or where no thread can start.
    own_copy own = {(char *)recv + own_to, (const char *)send + own_from,
                    st == MF_OK ? (size_t)send_bytes[c->rank] : 0};
    pthread_t own_thread;
    const int threaded =
        own.bytes > piece && rounds > 0 && pthread_create(&own_thread, NULL, copy_own, &own) == 0;
    if (!threaded && own.bytes > 0)
        copy_own(&own);
    char *const in_dev = dev ? dev + (size_t)peers * piece : NULL;
    cudaError_t err = cudaSuccess;
    for (size_t i = 0; st == MF_OK && i < rounds; i++) {
        const size_t at = i * piece;
        // this round's slice of a block of b bytes
        auto slice = [&](int64_t b) {
            return (size_t)b > at ? ((size_t)b - at < piece ? (size_t)b - at : piece) : 0;
        };
        size_t out_at = 0;
        for (int q = 0, j = 0; q < c->size && err == cudaSuccess; q++) {
            const size_t len = slice(send_bytes[q]);
            if (q != c->rank && len > 0)
                err = cudaMemcpyAsync(dev + (size_t)j * piece, (const char *)send + out_at + at,
                                      len, cudaMemcpyHostToDevice, stream);
            out_at += (size_t)send_bytes[q];
            j += q != c->rank;
        }
        if (err != cudaSuccess) {
            st = mf_cuda_fail(ctx, err, "staging the exchange", __FILE__, __LINE__);
            break;
        }
        ncclResult_t r = loaded.group_start();
        for (int q = 0, j = 0; q < c->size && r == 0; q++) {
            if (q == c->rank)
                continue;
            const size_t out_len = slice(send_bytes[q]), in_len = slice(recv_bytes[q]);
            if (out_len > 0)
                r = loaded.send(dev + (size_t)j * piece, out_len, nccl_int8, q, n->comm, stream);
            if (r == 0 && in_len > 0)
                r = loaded.recv(in_dev + (size_t)j * piece, in_len, nccl_int8, q, n->comm, stream);
            j++;
        }
        const ncclResult_t end = loaded.group_end();
        if (r != 0 || end != 0) {
            st = mf_device_fail(ctx, MF_ERR_CUDA, "NCCL send/recv between the ranks failed: %s",
                                loaded.error_string(r != 0 ? r : end));
            break;
        }
        size_t in_at = 0;
        for (int q = 0, j = 0; q < c->size && err == cudaSuccess; q++) {
            const size_t len = slice(recv_bytes[q]);
            if (q != c->rank && len > 0)
                err = cudaMemcpyAsync((char *)recv + in_at + at, in_dev + (size_t)j * piece, len,
                                      cudaMemcpyDeviceToHost, stream);
            in_at += (size_t)recv_bytes[q];
            j += q != c->rank;
        }
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "staging the exchange", __FILE__, __LINE__);
    }
    if (st == MF_OK && (err = cudaStreamSynchronize(stream)) != cudaSuccess)
        st = mf_cuda_fail(ctx, err, "staging the exchange", __FILE__, __LINE__);
    if (threaded)
        pthread_join(own_thread, NULL);
    if (dev) {
        cudaStreamSynchronize(stream);
        cudaFree(dev);
    }
    return st;
}

// Device memory: one NCCL group of a send to rank - 1 and a receive from rank + 1 (the same
// peer over 2 ranks, which NCCL pairs within the group), queued on ctx's stream.
static mf_status nccl_shift(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                            size_t row_bytes, int send, int recv)
{
    nccl_comm *n = (nccl_comm *)c;
    mf_device_guard guard(n->device);
    cudaStream_t stream = mf_device_link_of(ctx)->cuda->stream;
    const size_t out = (size_t)(bounds[send + 1] - bounds[send]) * row_bytes;
    const size_t in = (size_t)(bounds[recv + 1] - bounds[recv]) * row_bytes;
    const int to = (c->rank - 1 + c->size) % c->size, from = (c->rank + 1) % c->size;
    mark(n, stream, 1);
    NCCL_TRY(ctx, loaded.group_start());
    ncclResult_t r = 0;
    if (out > 0)
        r = loaded.send((char *)buf + (size_t)bounds[send] * row_bytes, out, nccl_int8, to, n->comm,
                        stream);
    if (r == 0 && in > 0)
        r = loaded.recv((char *)buf + (size_t)bounds[recv] * row_bytes, in, nccl_int8, from,
                        n->comm, stream);
    ncclResult_t end = loaded.group_end();
    NCCL_TRY(ctx, r);
    NCCL_TRY(ctx, end);
    mark(n, stream, 0);
    return MF_OK;
}

static void nccl_release(mf_comm *c)
{
    nccl_comm *n = (nccl_comm *)c;
    mf_device_guard guard(n->device);
    if (n->scratch)
        cudaFree(n->scratch);
    if (n->staging)
        cudaFree(n->staging);
    if (n->marks_made == 1)
        for (int i = 0; i < 2 * MF_NCCL_MARKS; i++)
            cudaEventDestroy(n->marks[i]);
    if (n->owned && n->comm)
        loaded.comm_destroy(n->comm);
    free(n);
}

static const mf_comm_ops nccl_ops = {nccl_allgatherv, nccl_max_i64,       nccl_sum_f64,
                                     nccl_sum_buffer, nccl_alltoallv,     nccl_shift,
                                     nccl_release,    nccl_device_seconds};

// The rank for ctx over comm, its scratch allocated on the communicator's device.
static mf_status make_rank(mf_ctx *ctx, ncclComm_t comm, int owned, const char *fn, mf_comm **out)
{
    int size = 0, rank = 0, device = -1;
    NCCL_TRY(ctx, loaded.comm_count(comm, &size));
    NCCL_TRY(ctx, loaded.comm_user_rank(comm, &rank));
    NCCL_TRY(ctx, loaded.comm_cu_device(comm, &device));
    const int ctx_device = mf_device_link_of(ctx)->cuda->device;
    if (device != ctx_device)
        return mf_device_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                              "%s: the communicator is on device %d, the context on device %d", fn,
                              device, ctx_device);
    nccl_comm *n = (nccl_comm *)calloc(1, sizeof *n);
    if (!n)
        return mf_device_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    mf_device_guard guard(device);
    cudaError_t err = cudaMalloc(&n->scratch, (size_t)MF_COMM_MAX_VALUES * 8);
    if (err != cudaSuccess) {
        free(n);
        return mf_cuda_fail(ctx, err, "cudaMalloc (NCCL scratch)", __FILE__, __LINE__);
    }
    n->base = mf_comm();
    n->base.ops = &nccl_ops, n->base.rank = rank, n->base.size = size, n->base.device_buffers = 1;
    // read once: the same on every rank's calls
    const size_t staging = env_bytes("MFACT_NCCL_GATHER_BYTES", MF_GATHER_STAGING_BYTES);
    n->slot_bytes = staging / (size_t)size / 256 * 256;
    n->small_bytes = staging / 4 < MF_GATHER_SMALL_BYTES ? staging / 4 : MF_GATHER_SMALL_BYTES;
    n->comm = comm;
    n->owned = owned;
    n->gather_by = gather_way(); // read once, as the staging's size
    n->device = device;
    *out = &n->base;
    return MF_OK;
}

mf_status mf_nccl_comm_wrap(mf_ctx *ctx, void *nccl_comm, mf_comm **out)
{
    static const char fn[] = "mf_ctx_set_nccl_comm";
    mf_status st = get_api(ctx, fn);
    return st != MF_OK ? st : make_rank(ctx, (ncclComm_t)nccl_comm, 0, fn, out);
}

mf_status mf_nccl_comm_init_all(mf_ctx *const *ctxs, int n, mf_comm **out)
{
    static const char fn[] = "mf_ctx_join_local";
    mf_ctx *ctx = ctxs[0];
    mf_status loaded_st = get_api(ctx, fn);
    if (loaded_st != MF_OK)
        return loaded_st;
    int *devices = (int *)malloc((size_t)n * sizeof *devices);
    ncclComm_t *comms = (ncclComm_t *)calloc((size_t)n, sizeof *comms);
    if (!devices || !comms) {
        free(devices);
        free(comms);
        return mf_device_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    for (int i = 0; i < n; i++)
        devices[i] = mf_device_link_of(ctxs[i])->cuda->device;
    ncclResult_t r;
    {
        mf_device_guard guard(devices[0]);
        r = loaded.comm_init_all(comms, n, devices);
    }
    free(devices);
    mf_status st = MF_OK;
    if (r != 0)
        st = mf_device_fail(ctx, MF_ERR_CUDA, "%s: ncclCommInitAll failed: %s", fn,
                            loaded.error_string(r));
    int made = 0;
    while (st == MF_OK && made < n &&
           (st = make_rank(ctxs[made], comms[made], 1, fn, &out[made])) == MF_OK)
        made++;
    if (st != MF_OK && r == 0) {
        // Ranks made so far own their communicators; the rest are destroyed here.
        for (int i = 0; i < made; i++)
            nccl_release(out[i]);
        for (int i = made; i < n; i++)
            loaded.comm_destroy(comms[i]);
    }
    free(comms);
    return st;
}

mf_status mf_nccl_unique_id(mf_ctx *ctx, unsigned char id[MF_NCCL_ID_BYTES])
{
    static const char fn[] = "mf_ctx_join_launched";
    const mf_status st = get_api(ctx, fn);
    if (st != MF_OK)
        return st;
    ncclUniqueId made;
    NCCL_TRY(ctx, loaded.get_unique_id(&made));
    memcpy(id, made.internal, MF_NCCL_ID_BYTES);
    return MF_OK;
}

mf_status mf_nccl_comm_init_rank(mf_ctx *ctx, const unsigned char id[MF_NCCL_ID_BYTES], int rank,
                                 int size, mf_comm **out)
{
    static const char fn[] = "mf_ctx_join_launched";
    const mf_status loaded_st = get_api(ctx, fn);
    if (loaded_st != MF_OK)
        return loaded_st;
    ncclUniqueId given;
    memcpy(given.internal, id, MF_NCCL_ID_BYTES);
    ncclComm_t comm = NULL;
    const int device = mf_device_link_of(ctx)->cuda->device;
    ncclResult_t r;
    {
        mf_device_guard guard(device);
        r = loaded.comm_init_rank(&comm, size, given, rank);
    }
    if (r != 0)
        return mf_device_fail(ctx, MF_ERR_CUDA, "%s: ncclCommInitRank (rank %d of %d) failed: %s",
                              fn, rank, size, loaded.error_string(r));
    mf_status st = make_rank(ctx, comm, 1, fn, out);
    if (st != MF_OK)
        loaded.comm_destroy(comm);
    return st;
}
