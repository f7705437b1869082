/* transport.c — picks the transport at init. Only the CPU one exists on the host side;
 * the CUDA transport adds GPU heaps beside it (transport/cuda/heap.c). */
#include "transport/transport.h"

static const symm_transport_ops_t *current;

symm_status_t symm_transport_init(void)
{
    current = &symm_shm_transport;
    symm_status_t st = current->init();
    if (st) current = NULL;
    return st;
}

void symm_transport_finalize(void)
{
    if (current) current->finalize();
    current = NULL;
}

const char *symm_transport_name(void) { return current ? current->name : "none"; }

const symm_transport_ops_t *symm_transport(void) { return current; }

int symm_transport_reachable(int pe)
{
    /* Every PE of the one host is mapped: all reachable. A transport with remote PEs
     * answers from its own table of PEs (where ptr gives NULL). */
    (void)pe;
    return current == &symm_shm_transport ? 1 : 0;
}
