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
#define SYMM_FOREACH_STATUS(X)                                                           \
    X(SYMM_SUCCESS, 0, "success")                                                        \
    X(SYMM_ERR_INVALID_ARG, -1, "invalid argument")                                      \
    X(SYMM_ERR_NOT_INITIALIZED, -2, "symm is not initialized (call symm_init first)")    \
    X(SYMM_ERR_ALREADY_INITIALIZED, -3, "symm is already initialized")                   \
    X(SYMM_ERR_NO_MEMORY, -4, "out of memory")                                           \
    X(SYMM_ERR_NOT_SYMMETRIC, -5, "address is not in the symmetric heap")                \
    X(SYMM_ERR_PE_OUT_OF_RANGE, -6, "PE number out of range")                            \
    X(SYMM_ERR_OVERFLOW, -7, "size overflow or range outside the object")                \
    X(SYMM_ERR_DOUBLE_FREE, -8, "symmetric object freed twice or never allocated")       \
    X(SYMM_ERR_TIMEOUT, -9, "timed out waiting for PEs (SYMM_TIMEOUT)")                  \
    X(SYMM_ERR_PE_FAILED, -10, "a PE of the job failed")                                 \
    X(SYMM_ERR_TEAM_INVALID, -11, "invalid or destroyed team or pool")                   \
    X(SYMM_ERR_NOT_MEMBER, -12, "calling PE is not a member of the team")                \
    X(SYMM_ERR_TEAM_BUSY, -13, "team already in use by another worker of this PE")       \
    X(SYMM_ERR_COLL_MISMATCH, -14, "team members called different collectives")          \
    X(SYMM_ERR_NAME_CONFLICT, -15, "registry name already used with other ranks")        \
    X(SYMM_ERR_NOT_FOUND, -16, "no such registry name")                                  \
    X(SYMM_ERR_UNSUPPORTED, -17, "operation not supported here")                         \
    X(SYMM_ERR_BOOTSTRAP, -18, "bootstrap (symmrun rendezvous) failed")                  \
    X(SYMM_ERR_SYSTEM, -19, "system call failed")                                        \
    X(SYMM_ERR_CUDA, -20, "CUDA error")                                                  \
    X(SYMM_ERR_ALIGNMENT, -21, "misaligned address or bad alignment")                    \
    X(SYMM_ERR_MISMATCH, -22, "PEs passed different arguments to a collective call")

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
/* X(ENUM, name, C type) — one table for every type of the typed calls and reductions. */
#define SYMM_FOREACH_TYPE(X)                                                             \
    X(SYMM_INT8, int8, int8_t)                                                           \
    X(SYMM_INT16, int16, int16_t)                                                        \
    X(SYMM_INT32, int32, int32_t)                                                        \
    X(SYMM_INT64, int64, int64_t)                                                        \
    X(SYMM_UINT8, uint8, uint8_t)                                                        \
    X(SYMM_UINT16, uint16, uint16_t)                                                     \
    X(SYMM_UINT32, uint32, uint32_t)                                                     \
    X(SYMM_UINT64, uint64, uint64_t)                                                     \
    X(SYMM_FLOAT, float, float)                                                          \
    X(SYMM_DOUBLE, double, double)                                                       \
    X(SYMM_FP16, fp16, uint16_t)                                                         \
    X(SYMM_BF16, bf16, uint16_t)

typedef enum {
#define SYMM_TYPE_ENUM_(e, name, ctype) e,
    SYMM_FOREACH_TYPE(SYMM_TYPE_ENUM_)
#undef SYMM_TYPE_ENUM_
        SYMM_TYPE_COUNT
} symm_type_t;

#define SYMM_FOREACH_OP(X)                                                               \
    X(SYMM_OP_SUM, sum)                                                                  \
    X(SYMM_OP_PROD, prod)                                                                \
    X(SYMM_OP_MIN, min)                                                                  \
    X(SYMM_OP_MAX, max)                                                                  \
    X(SYMM_OP_AND, and)                                                                  \
    X(SYMM_OP_OR, or)                                                                    \
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
#define SYMM_TYPED_RMA_(e, name, ctype)                                                  \
    static inline symm_status_t symm_put_##name(ctype *dest, const ctype *src,           \
                                                size_t count, int pe)                    \
    {                                                                                    \
        return symm_put_typed(dest, src, count, e, pe);                                  \
    }                                                                                    \
    static inline symm_status_t symm_get_##name(ctype *dest, const ctype *src,           \
                                                size_t count, int pe)                    \
    {                                                                                    \
        return symm_get_typed(dest, src, count, e, pe);                                  \
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
symm_status_t symm_test_uint32(uint32_t *ivar, symm_cmp_t cmp, uint32_t value,
                               int *result_out);
symm_status_t symm_test_uint64(uint64_t *ivar, symm_cmp_t cmp, uint64_t value,
                               int *result_out);

/* ---------------------------------------------------------------- teams */
/* Team and pool handles are small values, valid on the PE that received them. A stale
 * handle (its team destroyed) is detected and reported as SYMM_ERR_TEAM_INVALID. */
typedef int64_t symm_team_t;
typedef int64_t symm_pool_t;
#define SYMM_TEAM_INVALID ((symm_team_t)-1)
#define SYMM_POOL_INVALID ((symm_pool_t)-1)
#define SYMM_TEAM_WORLD ((symm_team_t)0)
#define SYMM_TEAM_NODE ((symm_team_t)((int64_t)1 << 40))

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
symm_status_t symm_team_put_signal(symm_team_t team, void *dest, const void *src,
                                   size_t nbytes, uint64_t *sig_addr, uint64_t signal,
                                   symm_sigop_t sigop, int pe);
symm_status_t symm_team_atomic32(symm_team_t team, symm_amo_t op, uint32_t *dest,
                                 uint32_t value, uint32_t cond, int pe, uint32_t *fetched);
symm_status_t symm_team_atomic64(symm_team_t team, symm_amo_t op, uint64_t *dest,
                                 uint64_t value, uint64_t cond, int pe, uint64_t *fetched);

/* ---------------------------------------------------------------- collectives */
/* Every collective is collective over the team's members, who must pass the same
 * arguments (counts, type, op, root); buffers are symmetric. A second worker of the same
 * PE entering a collective on a team that is in use gets SYMM_ERR_TEAM_BUSY: give each
 * concurrent worker its own duplicate of a pool. */

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
symm_status_t symm_reduce_scatter(symm_team_t team, void *dest, const void *src,
                                  size_t count, symm_type_t type, symm_op_t op);
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
 * what arrived. dest_capacity (elements) is checked before anything is written. */
symm_status_t symm_alltoallv(symm_team_t team, void *dest, size_t dest_capacity,
                             const void *src, const size_t *send_counts,
                             const size_t *send_displs, size_t elem_size,
                             size_t *recv_counts, size_t *recv_displs);

/* ---------------------------------------------------------------- tile reduce */
/* A 2-D tile of rows x cols elements with a row stride of ld elements (ld >= cols). */
typedef struct {
    void *base;
    size_t rows;
    size_t cols;
    size_t ld;
} symm_tile_t;

/* Reduce the same tile of every member into root's out tile. */
symm_status_t symm_tile_reduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                               symm_type_t type, symm_op_t op, int root);
/* Reduce into every member's out tile. */
symm_status_t symm_tile_allreduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                                  symm_type_t type, symm_op_t op);
/* Multi-root: nroots tiles in[k] (same shape on every member) reduced into roots[k]'s
 * out tile. A PE is root of at most one tile; every member takes part. */
symm_status_t symm_tile_reduce_multi(symm_team_t team, symm_tile_t out,
                                     const symm_tile_t *in, const int *roots, int nroots,
                                     symm_type_t type, symm_op_t op);

/* ---------------------------------------------------------------- MoE dispatch/combine */
/* 1-D all_to_all_vdev: in holds rows packed in member order, in_splits[j] rows for j.
 * out gets rows packed in member order; out_splits and out_offsets (n_pes each) are
 * written. row_bytes is the size of one row; out_capacity is in rows. */
symm_status_t symm_all_to_all_v(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, size_t row_bytes,
                                size_t *out_splits, size_t *out_offsets);
/* 2-D dispatch: in holds rows rank-major: for member j, for local expert e of j
 * (ne experts per member), in_splits[j*ne + e] rows. out gets rows expert-major: for each
 * of my experts e, the rows of every source member s in order; each expert's segment
 * starts at a multiple of major_align rows (an empty expert still takes one aligned slot
 * of zero rows... its offset is aligned, its length 0). out_splits[e*n + s] and
 * out_offsets[e*n + s] (n*ne each) are written. */
symm_status_t symm_moe_dispatch(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, int ne,
                                size_t row_bytes, size_t major_align, size_t *out_splits,
                                size_t *out_offsets);
/* Combine, the inverse: in is expert-major with in_splits[e*n + s] rows for source s at
 * in_offsets[e*n + s] (padded offsets allowed); out gets rows rank-major in the original
 * dispatch order: out_splits[j*ne + e] and out_offsets[j*ne + e] are written. */
symm_status_t symm_moe_combine(symm_team_t team, void *out, size_t out_capacity,
                               const void *in, const size_t *in_splits,
                               const size_t *in_offsets, int ne, size_t row_bytes,
                               size_t *out_splits, size_t *out_offsets);

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
