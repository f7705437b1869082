/* prepare.c — the prologue every GPU stream collective shares: initialised, a member,
 * buffers in the GPU heap, the team's GPU state and engine made, its device value. */
#include "coll/cuda/cuda_coll.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/cuda/cuda_pool.h"

symm_status_t symm_cuda_coll_prepare(const char *fn, symm_team_t team, symm_dev_team_t *t,
                                     const void *dest, size_t dest_bytes, const void *src,
                                     size_t src_bytes, cudaStream_t stream,
                                     symm_cuda_engine_t *engine)
{
    CHECK(symm_cuda_require(fn));
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK(symm_team_lookup(fn, team, &p, &d));
    if (p->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not a member of the team", fn,
                              symm_g.me);
    if (dest_bytes && !symm_cuda_in_heap(dest, dest_bytes))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: dest %p (+%zu bytes) is not in the "
                              "GPU symmetric heap (symm_gpu_malloc)",
                              fn, dest, dest_bytes);
    if (src_bytes && !symm_cuda_in_heap(src, src_bytes))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: src %p (+%zu bytes) is not in the "
                              "GPU symmetric heap (symm_gpu_malloc)",
                              fn, src, src_bytes);
    CHECK(symm_cuda_pool_attach_on(p, fn, stream));
    CHECK(symm_cuda_team_engine(fn, p, team, stream, engine));
    symm_cuda_dev_team(p, (size_t)(team & SYMM_H_DUP_MASK), t);
    return SYMM_SUCCESS;
}
