/* coll_spec.h — what one collective at one size means, shared by symm-bench and the MPI
 * anchor so that both move the same bytes: the nccl-tests size convention, bus bandwidth
 * factors, and the data pattern and expected results of the correctness check. */
#ifndef SYMM_BENCH_COLL_SPEC_H
#define SYMM_BENCH_COLL_SPEC_H

#include <stddef.h>

enum {
    OP_BARRIER,
    OP_BROADCAST,
    OP_REDUCE,
    OP_ALLREDUCE,
    OP_REDUCE_SCATTER,
    OP_FCOLLECT,
    OP_ALLTOALL,
    OP_ALLTOALLV,
    OP_COUNT
};

static const char *const coll_op_name[OP_COUNT] = {"barrier",   "broadcast",      "reduce",
                                                   "allreduce", "reduce_scatter", "fcollect",
                                                   "alltoall",  "alltoallv"};

static inline int coll_is_reduction(int op)
{
    return op == OP_REDUCE || op == OP_ALLREDUCE || op == OP_REDUCE_SCATTER;
}

static inline int coll_is_blocked(int op)
{
    return op == OP_REDUCE_SCATTER || op == OP_FCOLLECT || op == OP_ALLTOALL ||
           op == OP_ALLTOALLV;
}

/* bytes: the larger per-PE buffer (nccl-tests "size"); count = bytes / 4 floats; block:
 * floats per member block for the blocked collectives (else count). */
typedef struct {
    size_t bytes, count, block;
} coll_size_t;

static inline coll_size_t coll_size_for(int op, size_t size, int n)
{
    coll_size_t z;
    if (coll_is_blocked(op)) {
        z.block = size / 4 / (size_t)n;
        if (!z.block) z.block = 1;
        z.count = z.block * (size_t)n;
    } else {
        z.count = size / 4 ? size / 4 : 1;
        z.block = z.count;
    }
    z.bytes = z.count * 4;
    return z;
}

static inline double coll_bus_factor(int op, int n)
{
    if (op == OP_ALLREDUCE) return 2.0 * (n - 1) / n;
    if (coll_is_blocked(op)) return (double)(n - 1) / n;
    return 1.0;
}

static inline size_t coll_src_elems(int op, const coll_size_t *z)
{
    return op == OP_FCOLLECT ? z->block : z->count;
}

static inline size_t coll_dst_elems(int op, const coll_size_t *z)
{
    return op == OP_REDUCE_SCATTER ? z->block : z->count;
}

/* Element i of PE p's source: small integers, so that float sums are exact. */
static inline float coll_pattern(int op, int p, size_t i)
{
    if (coll_is_reduction(op)) return (float)((p + 1) * (int)(i % 13 + 1));
    return (float)(p * 100000 + (int)(i % 100000));
}

static inline float coll_expected(int op, const coll_size_t *z, int me, int n, size_t i)
{
    float tri = (float)(n * (n + 1) / 2);
    switch (op) {
    case OP_BROADCAST:
        return coll_pattern(op, 0, i);
    case OP_REDUCE:
    case OP_ALLREDUCE:
        return (float)(i % 13 + 1) * tri;
    case OP_REDUCE_SCATTER:
        return (float)((me * z->block + i) % 13 + 1) * tri;
    case OP_FCOLLECT:
        return coll_pattern(op, (int)(i / z->block), i % z->block);
    case OP_ALLTOALL:
    case OP_ALLTOALLV:
        return coll_pattern(op, (int)(i / z->block), (size_t)me * z->block + i % z->block);
    }
    return 0;
}

#endif
