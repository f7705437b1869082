/* coll.cu — collectives on GPU buffers enqueued on a CUDA stream: one block runs the
 * device collective of symm_device.cuh on the team's duplicate. The host side validates
 * the arguments (reported at once); device-side failures go to the error buffer
 * (symm_cuda_check). */
#include "symm_device.cuh"

extern "C" {
#include "core/log.h"
}
#include "transport/cuda/cuda_coll.h"

namespace {

const int kThreads = 512;

__global__ void k_barrier(symm_dev_team_t t) { symm_dev_barrier_block(t); }

__global__ void k_broadcast(symm_dev_team_t t, void *dest, const void *src, size_t nbytes,
                            int root)
{
    symm_dev_broadcast_block(t, dest, src, nbytes, root);
}

template <typename T>
__global__ void k_reduce(symm_dev_team_t t, T *dest, const T *src, size_t count, symm_op_t op,
                         int root)
{
    if (root < 0) symm_dev_allreduce_block(t, dest, src, count, op);
    else symm_dev_reduce_block(t, dest, src, count, op, root);
}

__global__ void k_fcollect(symm_dev_team_t t, void *dest, const void *src, size_t nbytes)
{
    symm_dev_fcollect_block(t, dest, src, nbytes);
}

__global__ void k_alltoall(symm_dev_team_t t, void *dest, const void *src, size_t nbytes)
{
    symm_dev_alltoall_block(t, dest, src, nbytes);
}

symm_status_t prepare(const char *fn, symm_team_t team, symm_dev_team_t *t, const void *dest,
                      size_t dest_bytes, const void *src, size_t src_bytes)
{
    return symm_cuda_coll_prepare(fn, team, t, dest, dest_bytes, src, src_bytes);
}

symm_status_t launched(const char *fn)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

template <typename T>
void launch_reduce(const symm_dev_team_t &t, void *dest, const void *src, size_t count,
                   symm_op_t op, int root, cudaStream_t s)
{
    k_reduce<T><<<1, kThreads, 0, s>>>(t, (T *)dest, (const T *)src, count, op, root);
}

symm_status_t reduce_common(const char *fn, symm_team_t team, void *dest, const void *src,
                            size_t count, symm_type_t type, symm_op_t op, int root,
                            cudaStream_t s)
{
    size_t es = symm_type_size(type);
    if (!es) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid type %d", fn, (int)type);
    if ((int)op < 0 || op >= SYMM_OP_COUNT)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid op %d", fn, (int)op);
    int is_float = type == SYMM_FLOAT || type == SYMM_DOUBLE || type == SYMM_FP16 ||
                   type == SYMM_BF16;
    if (is_float && op >= SYMM_OP_AND)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s is not defined on %s", fn,
                              symm_op_name(op), symm_type_name(type));
    if (count > SIZE_MAX / es)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: count %zu", fn, count);
    symm_dev_team_t t;
    CHECK(prepare(fn, team, &t, dest, count * es, src, count * es));
    if (root >= t.n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", fn, root,
                              t.n);
    switch (type) {
    case SYMM_INT8: launch_reduce<int8_t>(t, dest, src, count, op, root, s); break;
    case SYMM_INT16: launch_reduce<int16_t>(t, dest, src, count, op, root, s); break;
    case SYMM_INT32: launch_reduce<int32_t>(t, dest, src, count, op, root, s); break;
    case SYMM_INT64: launch_reduce<int64_t>(t, dest, src, count, op, root, s); break;
    case SYMM_UINT8: launch_reduce<uint8_t>(t, dest, src, count, op, root, s); break;
    case SYMM_UINT16: launch_reduce<uint16_t>(t, dest, src, count, op, root, s); break;
    case SYMM_UINT32: launch_reduce<uint32_t>(t, dest, src, count, op, root, s); break;
    case SYMM_UINT64: launch_reduce<uint64_t>(t, dest, src, count, op, root, s); break;
    case SYMM_FLOAT: launch_reduce<float>(t, dest, src, count, op, root, s); break;
    case SYMM_DOUBLE: launch_reduce<double>(t, dest, src, count, op, root, s); break;
    case SYMM_FP16: launch_reduce<__half>(t, dest, src, count, op, root, s); break;
    case SYMM_BF16: launch_reduce<__nv_bfloat16>(t, dest, src, count, op, root, s); break;
    default: return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: type %d", fn, (int)type);
    }
    return launched(fn);
}

} // namespace

extern "C" symm_status_t symm_barrier_on_stream(symm_team_t team, cudaStream_t stream)
{
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, NULL, 0, NULL, 0));
    k_barrier<<<1, kThreads, 0, stream>>>(t);
    return launched(__func__);
}

extern "C" symm_status_t symm_broadcast_on_stream(symm_team_t team, void *dest, const void *src,
                                                  size_t nbytes, int root, cudaStream_t stream)
{
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, nbytes, src, nbytes));
    if (root < 0 || root >= t.n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", __func__,
                              root, t.n);
    k_broadcast<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes, root);
    return launched(__func__);
}

extern "C" symm_status_t symm_reduce_on_stream(symm_team_t team, void *dest, const void *src,
                                               size_t count, symm_type_t type, symm_op_t op,
                                               int root, cudaStream_t stream)
{
    if (root < 0)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d", __func__, root);
    return reduce_common(__func__, team, dest, src, count, type, op, root, stream);
}

extern "C" symm_status_t symm_allreduce_on_stream(symm_team_t team, void *dest,
                                                  const void *src, size_t count,
                                                  symm_type_t type, symm_op_t op,
                                                  cudaStream_t stream)
{
    return reduce_common(__func__, team, dest, src, count, type, op, -1, stream);
}

extern "C" symm_status_t symm_fcollect_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, nbytes * (size_t)(n > 0 ? n : 1), src, nbytes));
    k_fcollect<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes);
    return launched(__func__);
}

extern "C" symm_status_t symm_alltoall_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    size_t total = nbytes * (size_t)(n > 0 ? n : 1);
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, total, src, total));
    k_alltoall<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes);
    return launched(__func__);
}
