/* transport.c — picks the transport at init. Only the CPU one exists on the host side;
 * the CUDA transport adds GPU heaps beside it (transport/cuda/heap.c). */
#include "transport/transport.h"

#include "core/log.h"

static const symm_transport_ops_t *current;
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
    if (st) current = NULL;
    return st;
}

void symm_transport_finalize(void)
{
    while (nextra > 0) {
        const symm_transport_ops_t *t = extra[--nextra];
        extra[nextra] = NULL;
        if (t->finalize) t->finalize();
    }
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

int symm_transport_reachable(int pe)
{
    /* Every PE of the one host is mapped: all reachable. A transport with remote PEs
     * answers from its own table of PEs (where ptr gives NULL). */
    (void)pe;
    return current == &symm_shm_transport ? 1 : 0;
}
