/* transport.c — picks the transports at init: the CPU one for the PEs whose segments are
 * mapped here, MPI's beside it where some PE's is not (another host or group); the CUDA
 * transport adds GPU heaps beside them (transport/cuda/heap.c). */
#include "transport/transport.h"

#include "core/log.h"
#include "core/runtime.h"

static const symm_transport_ops_t *current, *remote;
static const symm_transport_ops_t *extra[SYMM_TRANSPORT_MAX]; /* registered, oldest first */
static int nextra;

symm_status_t symm_transport_register(const symm_transport_ops_t *t)
{
    if (nextra == SYMM_TRANSPORT_MAX)
        return symm_error_set(SYMM_ERR_NO_MEMORY,
                              "transport %s: %d transports registered "
                              "already",
                              t->name, nextra);
    extra[nextra++] = t;
    return SYMM_SUCCESS;
}

void symm_transport_quiesce(void)
{
    for (int i = nextra - 1; i >= 0; i--)
        if (extra[i]->quiesce) extra[i]->quiesce();
    if (current && current->quiesce) current->quiesce();
}

symm_status_t symm_transport_init(void)
{
    current = &symm_shm_transport;
    symm_status_t st = current->init();
    if (st) {
        current = NULL;
        return st;
    }
    symm_g.remote_pes = 0;
    for (int pe = 0; pe < symm_g.npes; pe++)
        symm_g.remote_pes += symm_g.seg[pe] == NULL;
    /* Every PE of a job with groups has PEs outside its own: all of them set it up. */
    if (symm_g.remote_pes) {
        if ((st = symm_mpi_transport_init())) {
            current->finalize();
            current = NULL;
            return st;
        }
        remote = &symm_mpi_transport;
    }
    return SYMM_SUCCESS;
}

void symm_transport_finalize(void)
{
    while (nextra > 0) {
        const symm_transport_ops_t *t = extra[--nextra];
        extra[nextra] = NULL;
        if (t->finalize) t->finalize();
    }
    if (remote) remote->finalize();
    remote = NULL;
    if (current) current->finalize();
    current = NULL;
}

const char *symm_transport_name(void)
{
    return current ? current->name : "none";
}

const symm_transport_ops_t *symm_transport(void)
{
    return current;
}

const symm_transport_ops_t *symm_transport_remote(void)
{
    return remote ? remote : current;
}

int symm_transport_reachable(int pe)
{
    /* The PEs of my group, whose segments are mapped here; those of other groups share
     * no memory with this PE. */
    return current == &symm_shm_transport && symm_g.seg[pe] != NULL;
}
