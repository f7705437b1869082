/* symm.h — the public host API of symm: symmetric memory, teams, team pools and
 * collectives between processes (PEs) on one host's CPUs, and on GPUs with the CUDA
 * transport. This is the only header a CPU user needs. */
#ifndef SYMM_H
#define SYMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYMM_VERSION_MAJOR 0
#define SYMM_VERSION_MINOR 1
#define SYMM_VERSION_PATCH 0

/* ---------------------------------------------------------------- status codes */
/* X(name, value, message) — one table drives the enum and symm_strerror(). */
#define SYMM_FOREACH_STATUS(X)                                                                 \
    X(SYMM_SUCCESS, 0, "success")                                                              \
    X(SYMM_ERR_INVALID_ARG, -1, "invalid argument")                                            \
    X(SYMM_ERR_NOT_INITIALIZED, -2, "symm is not initialized (call symm_init first)")          \
    X(SYMM_ERR_ALREADY_INITIALIZED, -3, "symm is already initialized")                         \
    X(SYMM_ERR_NO_MEMORY, -4, "out of memory")                                                 \
    X(SYMM_ERR_NOT_SYMMETRIC, -5, "address is not in the symmetric heap")                      \
    X(SYMM_ERR_PE_OUT_OF_RANGE, -6, "PE number out of range")                                  \
    X(SYMM_ERR_OVERFLOW, -7, "size overflow or range outside the object")                      \
    X(SYMM_ERR_DOUBLE_FREE, -8, "symmetric object freed twice or never allocated")             \
    X(SYMM_ERR_TIMEOUT, -9, "timed out waiting for PEs (SYMM_TIMEOUT)")                        \
    X(SYMM_ERR_PE_FAILED, -10, "a PE of the job failed")                                       \
    X(SYMM_ERR_TEAM_INVALID, -11, "invalid or destroyed team or pool")                         \
    X(SYMM_ERR_NOT_MEMBER, -12, "calling PE is not a member of the team")                      \
    X(SYMM_ERR_TEAM_BUSY, -13, "team already in use by another worker of this PE")             \
    X(SYMM_ERR_COLL_MISMATCH, -14, "team members called different collectives")                \
    X(SYMM_ERR_NAME_CONFLICT, -15, "registry name already used with other ranks")              \
    X(SYMM_ERR_NOT_FOUND, -16, "no such registry name")                                        \
    X(SYMM_ERR_UNSUPPORTED, -17, "operation not supported here")                               \
    X(SYMM_ERR_BOOTSTRAP, -18, "bootstrap (symmrun rendezvous) failed")                        \
    X(SYMM_ERR_SYSTEM, -19, "system call failed")                                              \
    X(SYMM_ERR_CUDA, -20, "CUDA error")                                                        \
    X(SYMM_ERR_ALIGNMENT, -21, "misaligned address or bad alignment")                          \
    X(SYMM_ERR_MISMATCH, -22, "PEs passed different arguments to a collective call")           \
    X(SYMM_ERR_TEAM_BROKEN, -23, "team unusable after a timeout or failed PE; destroy it")

typedef enum {
#define SYMM_STATUS_ENUM_(name, value, msg) name = value,
    SYMM_FOREACH_STATUS(SYMM_STATUS_ENUM_)
#undef SYMM_STATUS_ENUM_
} symm_status_t;

/* Static description of a status code. */
const char *symm_strerror(symm_status_t status);
/* The status of the calling thread's last failed call, and its detailed message (which
 * names the PE, team and argument). Calls that succeed do not reset it. */
symm_status_t symm_last_status(void);
const char *symm_last_error(void);

/* ---------------------------------------------------------------- init and world */
symm_status_t symm_init(void);
symm_status_t symm_finalize(void);
int symm_initialized(void);
/* World rank and size; -1 before init. */
int symm_my_pe(void);
int symm_n_pes(void);
/* Abort the whole job from any PE: symmrun stops the others and names this PE. */
void symm_abort(int code, const char *why);

/* Start-up under a launcher symm does not know (torchrun and its store, a scheduler's
 * key-value service): the caller says who this PE is and how PEs exchange a few bytes;
 * symm hands the segments between the PEs itself, over an abstract UNIX socket of the
 * host (nothing is left in /dev/shm or /tmp). Every PE of the job must be on one host.
 * The exchange is used only during symm_init_exchange. */
typedef struct symm_exchange {
    size_t size; /* sizeof(symm_exchange_t), so that the struct may grow */
    int rank;    /* this PE, 0 <= rank < npes: becomes symm_my_pe() */
    int npes;    /* the same on every PE */
    /* Collective over all npes PEs: n bytes from every PE's mine into all[npes * n], in
     * rank order. Returns 0 on success; anything else fails symm_init_exchange. symm
     * calls it three times, from the thread that called symm_init_exchange. */
    int (*allgather)(void *ctx, const void *mine, void *all, size_t n);
    void *ctx;
} symm_exchange_t;
/* As symm_init, with the rendezvous of ex whatever SYMM_BOOTSTRAP says. A job on several
 * hosts fails on every PE with SYMM_ERR_UNSUPPORTED naming them. symm_abort tells the
 * other PEs' waits who aborted (they fail naming it) and exits; ending the other
 * processes is the launcher's work. */
symm_status_t symm_init_exchange(const symm_exchange_t *ex);

/* ---------------------------------------------------------------- symmetric heap */
/* Collective over the world: every PE must call with the same arguments in the same
 * order; the returned object has the same offset on every PE. NULL on error
 * (symm_last_status() says why); symm_malloc(0) returns NULL with SYMM_SUCCESS. */
void *symm_malloc(size_t size);
void *symm_calloc(size_t count, size_t size);
void *symm_align(size_t alignment, size_t size);
symm_status_t symm_free(void *ptr);
/* Pointer to PE pe's copy of the symmetric object at addr (directly load/store-able),
 * or NULL if addr is not symmetric or pe is out of range. */
void *symm_ptr(const void *addr, int pe);
/* 1 if [addr, addr+size) lies inside one live symmetric object. */
int symm_addr_accessible(const void *addr, size_t size);

/* ---------------------------------------------------------------- types and ops */
/* X(ENUM, name, C type) — one table for every type of the typed calls and reductions.
 * fp8 (OCP 8-bit floats, PyTorch's float8_e4m3fn and float8_e5m2) are row payloads and
 * tile reduce types: their reductions accumulate in float, which only the tile calls do;
 * the other reductions refuse them. */
#define SYMM_FOREACH_TYPE(X)                                                                   \
    X(SYMM_INT8, int8, int8_t)                                                                 \
    X(SYMM_INT16, int16, int16_t)                                                              \
    X(SYMM_INT32, int32, int32_t)                                                              \
    X(SYMM_INT64, int64, int64_t)                                                              \
    X(SYMM_UINT8, uint8, uint8_t)                                                              \
    X(SYMM_UINT16, uint16, uint16_t)                                                           \
    X(SYMM_UINT32, uint32, uint32_t)                                                           \
    X(SYMM_UINT64, uint64, uint64_t)                                                           \
    X(SYMM_FLOAT, float, float)                                                                \
    X(SYMM_DOUBLE, double, double)                                                             \
    X(SYMM_FP16, fp16, uint16_t)                                                               \
    X(SYMM_BF16, bf16, uint16_t)                                                               \
    X(SYMM_FP8_E4M3, fp8_e4m3, uint8_t)                                                        \
    X(SYMM_FP8_E5M2, fp8_e5m2, uint8_t)

typedef enum {
#define SYMM_TYPE_ENUM_(e, name, ctype) e,
    SYMM_FOREACH_TYPE(SYMM_TYPE_ENUM_)
#undef SYMM_TYPE_ENUM_
        SYMM_TYPE_COUNT
} symm_type_t;

#define SYMM_FOREACH_OP(X)                                                                     \
    X(SYMM_OP_SUM, sum)                                                                        \
    X(SYMM_OP_PROD, prod)                                                                      \
    X(SYMM_OP_MIN, min)                                                                        \
    X(SYMM_OP_MAX, max)                                                                        \
    X(SYMM_OP_AND, and)                                                                        \
    X(SYMM_OP_OR, or)                                                                          \
    X(SYMM_OP_XOR, xor)

typedef enum {
#define SYMM_OP_ENUM_(e, name) e,
    SYMM_FOREACH_OP(SYMM_OP_ENUM_)
#undef SYMM_OP_ENUM_
        SYMM_OP_COUNT
} symm_op_t;

size_t symm_type_size(symm_type_t type); /* 0 for an invalid type */
const char *symm_type_name(symm_type_t type);
const char *symm_op_name(symm_op_t op);

/* fp16 / bf16 conversions, round to nearest even (NaN and infinities kept). */
float symm_fp16_to_float(uint16_t h);
uint16_t symm_float_to_fp16(float f);
float symm_bf16_to_float(uint16_t b);
uint16_t symm_float_to_bf16(float f);
/* fp8 conversions. e4m3: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, NaN
 * 0x7f / 0xff, largest finite 448; e5m2: 5 exponent bits (bias 15), 2 mantissa bits,
 * infinities 0x7c / 0xfc. From float: round to nearest even; a magnitude beyond the
 * largest finite value gives NaN for e4m3 (as PyTorch's conversion and CUDA's
 * __NV_NOSAT do) and infinity for e5m2; NaN gives NaN (0x7f with the sign). */
float symm_fp8_e4m3_to_float(uint8_t b);
uint8_t symm_float_to_fp8_e4m3(float f);
float symm_fp8_e5m2_to_float(uint8_t b);
uint8_t symm_float_to_fp8_e5m2(float f);

/* ---------------------------------------------------------------- RMA */
/* dest (put) or src (get) is a symmetric address; the other side is any local memory. */
symm_status_t symm_put(void *dest, const void *src, size_t nbytes, int pe);
symm_status_t symm_get(void *dest, const void *src, size_t nbytes, int pe);
/* Non-blocking forms: complete at symm_quiet(). */
symm_status_t symm_put_nbi(void *dest, const void *src, size_t nbytes, int pe);
symm_status_t symm_get_nbi(void *dest, const void *src, size_t nbytes, int pe);
/* Typed arrays: count elements of the given type. */
symm_status_t symm_put_typed(void *dest, const void *src, size_t count, symm_type_t type,
                             int pe);
symm_status_t symm_get_typed(void *dest, const void *src, size_t count, symm_type_t type,
                             int pe);
/* Orders earlier puts to each PE before later ones. */
symm_status_t symm_fence(void);
/* Completes every earlier put, get and atomic of the calling PE. */
symm_status_t symm_quiet(void);

/* Typed put/get: symm_put_int32(dest, src, count, pe), symm_get_double(...), ... */
#define SYMM_TYPED_RMA_(e, name, ctype)                                                        \
    static inline symm_status_t symm_put_##name(ctype *dest, const ctype *src, size_t count,   \
                                                int pe)                                        \
    {                                                                                          \
        return symm_put_typed(dest, src, count, e, pe);                                        \
    }                                                                                          \
    static inline symm_status_t symm_get_##name(ctype *dest, const ctype *src, size_t count,   \
                                                int pe)                                        \
    {                                                                                          \
        return symm_get_typed(dest, src, count, e, pe);                                        \
    }
SYMM_FOREACH_TYPE(SYMM_TYPED_RMA_)
#undef SYMM_TYPED_RMA_

/* ---------------------------------------------------------------- atomics */
typedef enum {
    SYMM_AMO_FETCH,     /* *fetched = *dest */
    SYMM_AMO_SET,       /* *dest = value */
    SYMM_AMO_SWAP,      /* *fetched = *dest; *dest = value */
    SYMM_AMO_CSWAP,     /* *fetched = *dest; if (*dest == cond) *dest = value */
    SYMM_AMO_ADD,       /* *dest += value */
    SYMM_AMO_FETCH_ADD, /* *fetched = *dest; *dest += value */
    SYMM_AMO_AND,
    SYMM_AMO_OR,
    SYMM_AMO_XOR,
    SYMM_AMO_FETCH_AND,
    SYMM_AMO_FETCH_OR,
    SYMM_AMO_FETCH_XOR,
    SYMM_AMO_COUNT
} symm_amo_t;

/* dest is a naturally aligned symmetric 32/64-bit integer. fetched may be NULL for the
 * non-fetching operations and must not be NULL for the fetching ones. */
symm_status_t symm_atomic32(symm_amo_t op, uint32_t *dest, uint32_t value, uint32_t cond,
                            int pe, uint32_t *fetched);
symm_status_t symm_atomic64(symm_amo_t op, uint64_t *dest, uint64_t value, uint64_t cond,
                            int pe, uint64_t *fetched);

/* ---------------------------------------------------------------- signals and waits */
typedef enum { SYMM_SIGNAL_SET, SYMM_SIGNAL_ADD } symm_sigop_t;
typedef enum {
    SYMM_CMP_EQ,
    SYMM_CMP_NE,
    SYMM_CMP_GT,
    SYMM_CMP_GE,
    SYMM_CMP_LT,
    SYMM_CMP_LE
} symm_cmp_t;

/* Puts nbytes, then (after the data is visible) updates the symmetric signal word. */
symm_status_t symm_put_signal(void *dest, const void *src, size_t nbytes, uint64_t *sig_addr,
                              uint64_t signal, symm_sigop_t sigop, int pe);
symm_status_t symm_put_signal_nbi(void *dest, const void *src, size_t nbytes,
                                  uint64_t *sig_addr, uint64_t signal, symm_sigop_t sigop,
                                  int pe);
symm_status_t symm_signal_fetch(const uint64_t *sig_addr, uint64_t *value_out);
/* Waits until the local signal word compares true; value_out (may be NULL) gets it. */
symm_status_t symm_signal_wait_until(uint64_t *sig_addr, symm_cmp_t cmp, uint64_t value,
                                     uint64_t *value_out);
/* Point-to-point synchronisation on local symmetric integers. */
symm_status_t symm_wait_until_int32(int32_t *ivar, symm_cmp_t cmp, int32_t value);
symm_status_t symm_wait_until_int64(int64_t *ivar, symm_cmp_t cmp, int64_t value);
symm_status_t symm_wait_until_uint32(uint32_t *ivar, symm_cmp_t cmp, uint32_t value);
symm_status_t symm_wait_until_uint64(uint64_t *ivar, symm_cmp_t cmp, uint64_t value);
/* *result_out = 1 if the comparison holds now, else 0. */
symm_status_t symm_test_int32(int32_t *ivar, symm_cmp_t cmp, int32_t value, int *result_out);
symm_status_t symm_test_int64(int64_t *ivar, symm_cmp_t cmp, int64_t value, int *result_out);
symm_status_t symm_test_uint32(uint32_t *ivar, symm_cmp_t cmp, uint32_t value, int *result_out);
symm_status_t symm_test_uint64(uint64_t *ivar, symm_cmp_t cmp, uint64_t value, int *result_out);

/* ---------------------------------------------------------------- teams */
/* Team and pool handles are small values, valid on the PE that received them; a valid
 * handle is never negative. A stale handle (its team or pool destroyed) is detected: calls
 * on it return SYMM_ERR_TEAM_INVALID and the queries their invalid answer (-1, 0,
 * SYMM_TEAM_INVALID). A PE gives no handle value out twice until more than 2^37 (1.4e11)
 * teams and pools have been created on it, so a stale handle never names a newer one. */
typedef int64_t symm_team_t;
typedef int64_t symm_pool_t;
#define SYMM_TEAM_INVALID ((symm_team_t)-1)
#define SYMM_POOL_INVALID ((symm_pool_t)-1)
#define SYMM_TEAM_WORLD   ((symm_team_t)0)
#define SYMM_TEAM_NODE    ((symm_team_t)((int64_t)1 << 25))

/* Team-relative number of the calling PE / size; -1 for an invalid team or a non-member. */
int symm_team_my_pe(symm_team_t team);
int symm_team_n_pes(symm_team_t team);
/* PE number pe of src_team as numbered in dst_team; -1 if it is not in both. */
int symm_team_translate_pe(symm_team_t src_team, int pe, symm_team_t dst_team);
/* World rank of member pe of team; -1 if out of range. */
int symm_team_world_pe(symm_team_t team, int pe);

/* Split of parent: members parent[start + k*stride], k = 0..size-1 (stride may be
 * negative, not zero unless size is 1). Collective over the parent's members; PEs outside
 * the new team get SYMM_TEAM_INVALID in *out and SYMM_SUCCESS. */
symm_status_t symm_team_split_strided(symm_team_t parent, int start, int stride, int size,
                                      symm_team_t *out);
/* 2-D split: the parent as a grid of rows of xrange PEs; *xaxis is the calling PE's row,
 * *yaxis its column (OpenSHMEM shmem_team_split_2d). Collective over the parent. */
symm_status_t symm_team_split_2d(symm_team_t parent, int xrange, symm_team_t *xaxis,
                                 symm_team_t *yaxis);
/* A team of the given world ranks, numbered in the given order. Collective over those
 * PEs only: every member passes the same list; other PEs take no part. */
symm_status_t symm_team_create(const int *world_ranks, int n, symm_team_t *out);
/* Collective over the team's members. Not allowed on WORLD, NODE or a pool duplicate. */
symm_status_t symm_team_destroy(symm_team_t team);
/* A short name for messages, e.g. "team 3 [0,2,4]" or "pool 5 dup 17 [0..7]". */
const char *symm_team_describe(symm_team_t team, char *buf, size_t len);

/* ---------------------------------------------------------------- team pools */
/* n duplicates of team, each with its own synchronisation state. Collective over the
 * team's members; O(1) rounds whatever n. */
symm_status_t symm_pool_create(symm_team_t team, size_t n, symm_pool_t *out);
/* Grows the pool to at least n duplicates (never shrinks); O(1) rounds; collective over
 * the members; existing duplicates stay valid and may be used during the call. */
symm_status_t symm_pool_grow(symm_pool_t pool, size_t n);
/* Number of duplicates; 0 for an invalid pool. */
size_t symm_pool_size(symm_pool_t pool);
/* Duplicate i as a team; O(1), no lock. SYMM_TEAM_INVALID if i is out of range. */
symm_team_t symm_pool_team(symm_pool_t pool, size_t i);
/* Collective over the members; no duplicate may be in use. */
symm_status_t symm_pool_destroy(symm_pool_t pool);

/* Registry: the pool of name over the given world ranks with at least n duplicates.
 * The first call creates it, later calls return it (growing it if n is larger); the same
 * name with other ranks is SYMM_ERR_NAME_CONFLICT. Collective over the ranks. */
symm_status_t symm_pool_get(const char *name, const int *world_ranks, int nranks, size_t n,
                            symm_pool_t *out);
/* Destroys the named pool; collective over its members. */
symm_status_t symm_pool_release(const char *name);

/* ---------------------------------------------------------------- team-relative RMA */
/* Same as the world forms, with pe numbered in team. */
void *symm_team_ptr(symm_team_t team, const void *addr, int pe);
symm_status_t symm_team_put(symm_team_t team, void *dest, const void *src, size_t nbytes,
                            int pe);
symm_status_t symm_team_get(symm_team_t team, void *dest, const void *src, size_t nbytes,
                            int pe);
symm_status_t symm_team_put_signal(symm_team_t team, void *dest, const void *src, size_t nbytes,
                                   uint64_t *sig_addr, uint64_t signal, symm_sigop_t sigop,
                                   int pe);
symm_status_t symm_team_atomic32(symm_team_t team, symm_amo_t op, uint32_t *dest,
                                 uint32_t value, uint32_t cond, int pe, uint32_t *fetched);
symm_status_t symm_team_atomic64(symm_team_t team, symm_amo_t op, uint64_t *dest,
                                 uint64_t value, uint64_t cond, int pe, uint64_t *fetched);

/* ---------------------------------------------------------------- collectives */
/* Every collective is collective over the team's members, who must pass the same
 * arguments (counts, type, op, root) and name the same symmetric objects (except
 * alltoallv's buffers and collect's dest, which may differ); buffers are symmetric. A second
 * worker of the same PE entering a collective on a team that is in use gets SYMM_ERR_TEAM_BUSY:
 * give each concurrent worker its own duplicate of a pool. Every member agrees on every
 * outcome. A call that fails on one member (a bad argument of its own, an output that does not
 * fit) fails on every member with that member's status, the others' messages naming it; members
 * that pass different arguments or call different collectives all get SYMM_ERR_COLL_MISMATCH.
 * Either way the team stays in step and the next call works. Outputs are written only on
 * success, except that a member's dest may already hold data when another member's late error
 * (alltoallv, collect) fails the call. A wait that times out (SYMM_TIMEOUT) or meets a failed
 * PE breaks the duplicate: that call fails on every member that reaches it (a late member gets
 * SYMM_ERR_TIMEOUT too), and every later call on it gets SYMM_ERR_TEAM_BROKEN until the
 * team (or pool) is destroyed, which always succeeds. This holds for team creation too
 * (split, pool create/grow, rank lists). Only a call whose team handle is invalid fails
 * alone: nobody can be told.
 * Reductions fold members in team order, ((m0 op m1) op m2) ..., with one rounding per
 * combine (fp16/bf16: both operands in float, the result rounded to nearest even before
 * the next member), so every member gets bitwise-identical results, and the stream and
 * device reductions of symm_cuda.h / symm_device.cuh give the same bits. dest may equal src for
 * broadcast, reduce and allreduce, and fcollect runs in place when every member passes its own
 * block of dest as src; any other overlap of dest and src is SYMM_ERR_INVALID_ARG. */

/* Barrier: completes the caller's earlier puts (quiet) and synchronises. */
symm_status_t symm_barrier(symm_team_t team);
symm_status_t symm_barrier_all(void);
/* Synchronisation only (no quiet). */
symm_status_t symm_sync(symm_team_t team);
/* root's src (nbytes) into every member's dest (root's too). */
symm_status_t symm_broadcast(symm_team_t team, void *dest, const void *src, size_t nbytes,
                             int root);
/* dest[i] = op over members of src[i], i < count; dest written on root only. */
symm_status_t symm_reduce(symm_team_t team, void *dest, const void *src, size_t count,
                          symm_type_t type, symm_op_t op, int root);
symm_status_t symm_allreduce(symm_team_t team, void *dest, const void *src, size_t count,
                             symm_type_t type, symm_op_t op);
/* src holds n_pes blocks of count elements; member r gets the reduction of block r. */
symm_status_t symm_reduce_scatter(symm_team_t team, void *dest, const void *src, size_t count,
                                  symm_type_t type, symm_op_t op);
/* dest = concatenation of every member's src (nbytes each), in team order. */
symm_status_t symm_fcollect(symm_team_t team, void *dest, const void *src, size_t nbytes);
/* As fcollect, but nbytes may differ between members; *total_out (may be NULL) gets the
 * total. dest must hold the total. */
symm_status_t symm_collect(symm_team_t team, void *dest, const void *src, size_t nbytes,
                           size_t *total_out);
/* Block j (nbytes) of src goes to member j's dest at block (my team pe). */
symm_status_t symm_alltoall(symm_team_t team, void *dest, const void *src, size_t nbytes);
/* Counts known only to the sender: send_counts[j] elements of elem_size bytes from
 * src + send_displs[j]*elem_size (send_displs NULL = packed) go to member j. dest receives
 * them packed in team order; recv_counts/recv_displs (may be NULL, n_pes entries) get
 * what arrived. dest_capacity (elements) is checked before anything is written: a member
 * whose capacity is too small gets SYMM_ERR_OVERFLOW and writes nothing (no output
 * either), while the other members complete. */
symm_status_t symm_alltoallv(symm_team_t team, void *dest, size_t dest_capacity,
                             const void *src, const size_t *send_counts,
                             const size_t *send_displs, size_t elem_size, size_t *recv_counts,
                             size_t *recv_displs);

/* ---------------------------------------------------------------- tile reduce */
/* A 2-D tile of rows x cols elements whose rows start ld elements apart (ld >= cols
 * when rows > 0 and cols > 0). A tile with 0 rows or 0 cols is empty: valid, its base
 * may be NULL, and the call is still collective (it synchronises and writes nothing);
 * members passing "the same" empty tile may pass any base and ld and either dimension 0.
 * Tiles are read in place: no packing, any ld, odd sizes, single rows or columns.
 * Cost: a one-word exchange (inputs ready, and every member's arguments valid: a bad
 * argument on one member fails the call on all, naming it, and nothing is written), the
 * reads, and a closing sync (a banded allreduce: one more sync between its phases, none
 * on a team whose members are all in different groups, where rows and results travel as
 * packed chunks between the groups). */
typedef struct {
    void *base;
    size_t rows;
    size_t cols;
    size_t ld;
} symm_tile_t;

/* Every member's tile `in` (the same symmetric tile: same offset, shape and ld on
 * every member, since members read each other's tiles at their own tile's offset) is
 * reduced element by element with op, into root's `out`. A member passing another
 * object or offset makes every member fail with SYMM_ERR_COLL_MISMATCH naming it, and
 * nothing is written (checked by the call's 64-bit fingerprint, which covers every in
 * tile and allreduce's out). Types and ops are those of
 * symm_reduce (and, or, xor on integer types only), and fp8 (e4m3, e5m2) with sum, prod,
 * min and max, folded in float and rounded to fp8 once. Every element is combined in team
 * order, member 0 first, so the result is the same whatever the root, the form (plain,
 * worker, parallel) or the number of workers. `out` must have in's
 * rows and cols (its own ld); only root's out is written. If every member passes the
 * same symmetric out tile (as PyTorch requires), the members share the work, each
 * reducing a band of rows straight into root's out; otherwise (out not symmetric, or
 * non-roots passing anything else: they may) root reduces alone. out may be the very
 * tile in (same base and ld: in place) but may not otherwise overlap it. */
symm_status_t symm_tile_reduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                               symm_type_t type, symm_op_t op, int root);
/* The reduction into every member's `out`, which must be symmetric (the same tile on
 * every member, checked as in is). Each member reduces its own band of rows, then copies
 * the others' bands (a tile of at most SYMM_COLL_SMALL bytes, not in place, is reduced
 * whole by every member instead, saving a sync): every member ends with identical
 * bytes. In place (out == in) is allowed. */
symm_status_t symm_tile_allreduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                                  symm_type_t type, symm_op_t op);
/* Multi-root (PyTorch's multi_root_tile_reduce): nroots symmetric tiles in[k]; member
 * roots[k] receives in its `out` the reduction over all members of tile in[k]. Roots
 * are distinct (a PE is root of at most one tile), 0 <= nroots <= n_pes; every member
 * takes part, root or not. The tiles may differ in shape; a root's out must have its
 * tile's rows and cols and must not overlap any in[j] but its own (in place allowed);
 * non-roots' out is not written. Work is shared as for symm_tile_reduce when every
 * member passes the same symmetric out. */
symm_status_t symm_tile_reduce_multi(symm_team_t team, symm_tile_t out, const symm_tile_t *in,
                                     const int *roots, int nroots, symm_type_t type,
                                     symm_op_t op);

/* Worker-parallel forms: the operation split over nworkers workers per PE (the CPU image
 * of one GPU thread block per duplicate). Worker w (0 <= w < nworkers <= pool size) calls
 * the _worker form with duplicate w of pool, from its own thread, with the same other
 * arguments as every other worker of every member; it handles its band of rows
 * (rows w*R/nworkers ..). The operation is complete on this PE once all its workers have
 * returned success. Results are bytewise identical for any nworkers. */
symm_status_t symm_tile_reduce_worker(symm_pool_t pool, int worker, int nworkers,
                                      symm_tile_t out, symm_tile_t in, symm_type_t type,
                                      symm_op_t op, int root);
symm_status_t symm_tile_allreduce_worker(symm_pool_t pool, int worker, int nworkers,
                                         symm_tile_t out, symm_tile_t in, symm_type_t type,
                                         symm_op_t op);
symm_status_t symm_tile_reduce_multi_worker(symm_pool_t pool, int worker, int nworkers,
                                            symm_tile_t out, const symm_tile_t *in,
                                            const int *roots, int nroots, symm_type_t type,
                                            symm_op_t op);
/* The same with workers made internally: the caller is worker 0 and nworkers-1
 * persistent threads run the others on duplicates 1..nworkers-1; nworkers == 0 chooses
 * automatically, the same number on every PE (see symm_pool_auto_workers: the tile
 * forms pass the bytes of their tiles). If a thread cannot be had, the caller runs that
 * worker's share itself, afterwards (duplicates are independent, so this cannot
 * deadlock). The first failing worker's status and message are returned. */
symm_status_t symm_tile_reduce_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                        symm_tile_t in, symm_type_t type, symm_op_t op,
                                        int root);
symm_status_t symm_tile_allreduce_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                           symm_tile_t in, symm_type_t type, symm_op_t op);
symm_status_t symm_tile_reduce_multi_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                              const symm_tile_t *in, const int *roots,
                                              int nroots, symm_type_t type, symm_op_t op);

/* ---------------------------------------------------------------- MoE dispatch/combine */
/* The all-to-all-v family of PyTorch SymmMem (all_to_all_vdev, all_to_all_vdev_2d with
 * major_align, all_to_all_vdev_2d_offset), on rows of row_bytes bytes (any width, any
 * content). Conventions shared by all three:
 *  - `in` is symmetric: members read each other's input directly (pull); the call
 *    returns once every member has finished reading, so in may then be reused. Each
 *    member publishes where its in lies, so members may pass different symmetric
 *    objects (or offsets) as in. in may be NULL if, and only if, this PE sends no rows
 *    (it may still receive); a PE whose splits send rows from a NULL in fails the call
 *    on every member with SYMM_ERR_INVALID_ARG.
 *  - `out` is this PE's local memory of out_capacity rows (symmetric or not) that must
 *    not overlap in. Only rows that receive data are written: alignment padding is left
 *    as it was.
 *  - Split counts are exchanged by the library: each member publishes its n*ne split and
 *    offset table (and its out_capacity) in a per-call scratch of its team region,
 *    announced with one one-word exchange; members read the tables directly. The call
 *    costs 2 synchronisation episodes whatever n and ne (3 when n*n*ne > 65536: the
 *    capacity agreement then takes one more exchange).
 *  - The output layout is checked against out_capacity on every member before anything
 *    is written: if any member's output would not fit, every member fails with
 *    SYMM_ERR_OVERFLOW, naming that member, and writes nothing (outputs included).
 *    Likewise a member that passes bad arguments makes every member fail (its own error
 *    says what was wrong, the others' name it).
 *  - out_splits, out_offsets and out_rows are written on success; each may be NULL.
 *    Offsets and counts are in rows. n is the team's size, "me" the caller's number. */

/* 1-D (all_to_all_vdev): in holds rows packed in member order, in_splits[j] for member
 * j. out receives rows packed in source order: out_splits[s] rows from member s at
 * out_offsets[s] = out_splits[0] + .. + out_splits[s-1]; *out_rows = their sum. */
symm_status_t symm_all_to_all_v(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, size_t row_bytes,
                                size_t *out_splits, size_t *out_offsets, size_t *out_rows);
/* 2-D dispatch (all_to_all_vdev_2d): every member owns ne experts; member j's expert e
 * is global expert j*ne + e. in holds rows rank-major, packed: in_splits[j*ne + e] rows
 * for expert e of member j, in that order (n*ne entries). out receives rows
 * expert-major: for each of my experts e = 0..ne-1, a segment holding the rows of
 * source 0, 1, .., n-1 in that order; out_splits[e*n + s] rows from source s at
 * out_offsets[e*n + s]. With major_align = A >= 1, segment e starts at
 *   start[0] = 0, start[e+1] = start[e] + max(roundup(len[e], A), A),
 * len[e] = sum over s of out_splits[e*n + s]: every segment starts at a multiple of A,
 * and an empty expert still takes one aligned slot of A rows (PyTorch does the same,
 * because grouped GEMMs reject empty groups; with A = 1 an empty expert takes 1 row).
 * A = 0 is an extension: segments packed back to back, empty experts take nothing.
 * *out_rows = start[ne] (the whole layout, padding included); it must be <=
 * out_capacity. ne >= 1 and row_bytes >= 1, equal on every member. */
symm_status_t symm_moe_dispatch(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, int ne,
                                size_t row_bytes, size_t major_align, size_t *out_splits,
                                size_t *out_offsets, size_t *out_rows);
/* Combine (all_to_all_vdev_2d_offset), the inverse: in is expert-major as dispatch left
 * it: in_splits[e*n + j] rows for member j at in_offsets[e*n + j] (any offsets: padding
 * between and around segments is allowed and not sent; segments may be in any order).
 * out receives rows rank-major, packed, in the original dispatch
 * order: for source s = 0..n-1, for its expert e = 0..ne-1, out_splits[s*ne + e] rows
 * at out_offsets[s*ne + e] (the running sum). After a dispatch, a combine of the
 * dispatch output with in_splits = its out_splits and in_offsets = its out_offsets
 * gives back every member's input, rows and splits. *out_rows = the total. */
symm_status_t symm_moe_combine(symm_team_t team, void *out, size_t out_capacity, const void *in,
                               const size_t *in_splits, const size_t *in_offsets, int ne,
                               size_t row_bytes, size_t *out_splits, size_t *out_offsets,
                               size_t *out_rows);

/* Worker-parallel forms, as for tiles: worker w of nworkers runs on duplicate w of pool.
 * Every worker exchanges the splits on its own duplicate and computes the whole layout;
 * the rows to move (in output order, padding excluded) are split into nworkers equal
 * ranges, worker w copying range w, so any nworkers gives bytewise the same output. Only
 * worker 0 writes out_splits, out_offsets and out_rows (the others may pass NULL). */
symm_status_t symm_all_to_all_v_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                       size_t out_capacity, const void *in,
                                       const size_t *in_splits, size_t row_bytes,
                                       size_t *out_splits, size_t *out_offsets,
                                       size_t *out_rows);
symm_status_t symm_moe_dispatch_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                       size_t out_capacity, const void *in,
                                       const size_t *in_splits, int ne, size_t row_bytes,
                                       size_t major_align, size_t *out_splits,
                                       size_t *out_offsets, size_t *out_rows);
symm_status_t symm_moe_combine_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                      size_t out_capacity, const void *in,
                                      const size_t *in_splits, const size_t *in_offsets, int ne,
                                      size_t row_bytes, size_t *out_splits, size_t *out_offsets,
                                      size_t *out_rows);
/* With internal threads (see symm_tile_reduce_parallel). */
symm_status_t symm_all_to_all_v_parallel(symm_pool_t pool, int nworkers, void *out,
                                         size_t out_capacity, const void *in,
                                         const size_t *in_splits, size_t row_bytes,
                                         size_t *out_splits, size_t *out_offsets,
                                         size_t *out_rows);
symm_status_t symm_moe_dispatch_parallel(symm_pool_t pool, int nworkers, void *out,
                                         size_t out_capacity, const void *in,
                                         const size_t *in_splits, int ne, size_t row_bytes,
                                         size_t major_align, size_t *out_splits,
                                         size_t *out_offsets, size_t *out_rows);
symm_status_t symm_moe_combine_parallel(symm_pool_t pool, int nworkers, void *out,
                                        size_t out_capacity, const void *in,
                                        const size_t *in_splits, const size_t *in_offsets,
                                        int ne, size_t row_bytes, size_t *out_splits,
                                        size_t *out_offsets, size_t *out_rows);

/* ---------------------------------------------------------------- MoE top-k */
/* Dispatch and combine as expert-parallel layers use them: every token (a row of in)
 * goes to the experts its router chose, topk_idx[t*k + i] for slot i = 0..k-1 (global
 * expert ids: member j's local expert e is j*ne + e; -1 for a slot with no expert), and
 * their outputs come back reduced with the router's weights.
 *  - A token travels once to each member that holds one of its experts (a row read
 *    once from the source), and lands there in the segment of every one of its experts
 *    on that member: out is expert-major, segment e holding one row per (token, slot)
 *    routed to e, ordered by source member, then token, then slot. Segments start as
 *    in symm_moe_dispatch with major_align = A (A >= 1: each at a multiple of A, an
 *    empty expert taking one slot of A rows; A = 0: packed, empty experts take nothing).
 *  - in (symmetric, tokens rows of row_bytes) is read by its destinations (pull), as in
 *    symm_moe_dispatch: members may pass different objects, and in may be NULL on a
 *    member whose topk_idx routes no slot (tokens == 0, or every slot -1). topk_idx is
 *    this PE's own memory (int64, tokens x k, row-major); a slot is -1 or a global expert
 *    id below n*ne, else the call fails on every member (SYMM_ERR_INVALID_ARG, naming
 *    the token, the slot and the value). The same expert twice in one token's slots is
 *    allowed: it gets one row per slot.
 *  - Side payloads: nside (0..SYMM_MOE_SIDE_MAX) more arrays of per-token rows of any
 *    size (fp8 scale factors, routing weights, ...) travel with the tokens: side[p].in
 *    (symmetric, tokens rows of side[p].row_bytes; NULL as in) lands in side[p].out
 *    (out_capacity rows) at the same rows as the token in out. row_bytes and every
 *    side's row_bytes are the same on every member.
 *  - out (out_capacity rows) and the sides' outs are this PE's memory and must not
 *    overlap any in. Every member's layout is checked against its out_capacity before
 *    anything is written; one that does not fit fails every member (SYMM_ERR_OVERFLOW,
 *    naming it) and nothing is written. Padding rows are not written.
 *  - Outputs, each may be NULL, written on success: out_counts[e] (ne) rows received for
 *    local expert e (padding excluded), out_offsets[e] (ne) where its segment starts,
 *    out_src[r] (out_capacity; the first *out_rows are written) where row r came from
 *    (pe, token, slot; all -1 on a padding row), *out_rows the rows of the layout
 *    (padding included). On the sending side topk_rows[t*k + i] (tokens x k) is the row
 *    of out on member topk_idx[t*k + i] / ne where slot i of token t landed (-1 for a
 *    slot with no expert): the handle symm_moe_topk_combine takes to bring the results
 *    back.
 *  - Limits: 1 <= k <= SYMM_MOE_TOPK_MAX, ne >= 1, n*ne < 2^31, tokens*k < 2^32.
 *  - Cost: 2 synchronisation episodes. Each member publishes its route (8 bytes per slot)
 *    and its count table (n*ne words) in its team region; every member reads every
 *    member's counts (n*n*ne words) to agree on the capacities and to place its own
 *    tokens, and reads the routes of every source (tokens x k words each) to find the
 *    tokens it receives. */
#define SYMM_MOE_SIDE_MAX 8
#define SYMM_MOE_TOPK_MAX 32
typedef struct {
    const void *in;   /* tokens rows, symmetric; may be NULL as in */
    void *out;        /* out_capacity rows, this PE's memory */
    size_t row_bytes; /* >= 1, the same on every member */
} symm_moe_side_t;
typedef struct {
    int32_t pe;    /* the source's team number; -1 for a padding row */
    int32_t slot;  /* the slot of topk_idx (0..k-1) */
    int64_t token; /* the token (row of the source's in) */
} symm_moe_src_t;

symm_status_t symm_moe_topk_dispatch(symm_team_t team, void *out, size_t out_capacity,
                                     const void *in, size_t tokens, size_t row_bytes,
                                     const int64_t *topk_idx, int k, int ne, size_t major_align,
                                     const symm_moe_side_t *side, int nside, size_t *out_counts,
                                     size_t *out_offsets, symm_moe_src_t *out_src,
                                     size_t *out_rows, int64_t *topk_rows);
/* Weighted combine, the way back: in is this member's expert output, in_rows rows of
 * hidden elements of type (SYMM_FLOAT, SYMM_FP16 or SYMM_BF16), laid out as the
 * dispatch's out (row r the result for the token that landed at row r), symmetric
 * (members may pass different objects; NULL with in_rows 0). Every member reduces its
 * own tokens: out[t] (tokens rows of hidden elements of type, this PE's memory) =
 * sum over the slots i with topk_idx[t*k + i] >= 0, in slot order, of
 * topk_weights[t*k + i] x (row topk_rows[t*k + i] of member topk_idx[t*k + i] / ne's
 * in), accumulated in float (acc = fmaf(w, x, acc) from acc = 0) and rounded to type
 * once (nearest even): the same bits on the CPU and the GPU. topk_weights (float,
 * tokens x k) may be NULL: every weight 1 (a plain sum). A token with no expert gets
 * zeros. topk_idx and topk_rows are those of the dispatch (topk_rows may come from
 * anywhere: a row at or beyond its member's in_rows fails every member with
 * SYMM_ERR_INVALID_ARG, naming it, before anything is written). hidden, type, k and ne
 * are the same on every member; out must not overlap in. Cost: 3 synchronisation
 * episodes (where every in lies; every member's rows checked; the closing one). */
symm_status_t symm_moe_topk_combine(symm_team_t team, void *out, size_t tokens, const void *in,
                                    size_t in_rows, size_t hidden, symm_type_t type,
                                    const int64_t *topk_idx, const int64_t *topk_rows,
                                    const float *topk_weights, int k, int ne);
/* Worker forms, as for symm_moe_dispatch: worker w of nworkers on duplicate w of pool,
 * the same arguments on every worker; dispatch splits the tokens it receives, combine
 * the tokens it reduces, into nworkers equal ranges, so any nworkers gives the same
 * bytes. Only worker 0 writes out_counts, out_offsets, out_src, out_rows and topk_rows
 * (the others may pass NULL). */
symm_status_t symm_moe_topk_dispatch_worker(
    symm_pool_t pool, int worker, int nworkers, void *out, size_t out_capacity, const void *in,
    size_t tokens, size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows);
symm_status_t symm_moe_topk_combine_worker(symm_pool_t pool, int worker, int nworkers,
                                           void *out, size_t tokens, const void *in,
                                           size_t in_rows, size_t hidden, symm_type_t type,
                                           const int64_t *topk_idx, const int64_t *topk_rows,
                                           const float *topk_weights, int k, int ne);
/* With internal threads (see symm_tile_reduce_parallel; nworkers == 0: automatic). */
symm_status_t symm_moe_topk_dispatch_parallel(
    symm_pool_t pool, int nworkers, void *out, size_t out_capacity, const void *in,
    size_t tokens, size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows);
symm_status_t symm_moe_topk_combine_parallel(symm_pool_t pool, int nworkers, void *out,
                                             size_t tokens, const void *in, size_t in_rows,
                                             size_t hidden, symm_type_t type,
                                             const int64_t *topk_idx, const int64_t *topk_rows,
                                             const float *topk_weights, int k, int ne);

/* The worker count that nworkers == 0 gives a _parallel form on pool, for an operation
 * of work_bytes bytes (tile forms: the bytes of the tiles reduced, rows x cols x type
 * size summed over the tiles; SIZE_MAX where the size is not the same on every PE, which
 * is how the MoE and all-to-all-v forms ask). It is made only of what every PE sees
 * alike, so all PEs meet on the same duplicates:
 *   min(64, pool size, max(1, node CPUs / PEs), max(1, work_bytes / 64 KiB))
 * where node CPUs is the union of all PEs' CPU affinity masks taken at symm_init (PEs
 * that may run anywhere count each CPU once), or the smallest SYMM_NODE_CPUS any PE set,
 * and PEs is symm_n_pes() (all PEs of a job share one node). 0 if pool is not valid. */
int symm_pool_auto_workers(symm_pool_t pool, size_t work_bytes);

/* ---------------------------------------------------------------- information */
/* Heap sizes and transport in use, for tools. */
typedef struct {
    size_t heap_size;      /* user symmetric heap per PE */
    size_t heap_used;      /* bytes allocated now */
    size_t team_heap_size; /* internal region for team state per PE */
    size_t team_heap_used;
    const char *transport;
} symm_info_t;
symm_status_t symm_get_info(symm_info_t *out);

#ifdef __cplusplus
}
#endif
#endif /* SYMM_H */
