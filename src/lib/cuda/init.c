/* init.c — symm_cuda_init: brings the GPU transport up (transport/cuda) and hands the
 * team layer the hooks that look after a pool's GPU state (team/cuda). symm_finalize
 * takes both down: the team layer frees pools (through the hooks) and forgets the
 * hooks, then the transport layer finalizes every registered transport. */
#include "core/log.h"
#include "core/runtime.h"
#include "team/cuda/cuda_pool.h"
#include "transport/cuda/cuda_transport.h"

symm_status_t symm_cuda_init(void)
{
    static const char fn[] = "symm_cuda_init";
    SYMM_REQUIRE_INIT();
    if (symm_cuda.initialized)
        return symm_error_set(SYMM_ERR_ALREADY_INITIALIZED, "%s called twice", fn);
    /* Every PE of such a job has PEs of other groups: all refuse alike. */
    if (symm_g.remote_pes)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "%s: PE %d shares no memory with %d PEs of the job (other hosts "
                              "or SYMM_HOSTS groups); the GPU transport reaches the GPUs of "
                              "one host's PEs only",
                              fn, symm_g.me, symm_g.remote_pes);
    CHECK(symm_team_pool_hooks_register(&symm_cuda_pool_hooks));
    symm_status_t st = symm_cuda_transport_init(fn);
    if (st) symm_team_pool_hooks_unregister(&symm_cuda_pool_hooks);
    return st;
}
