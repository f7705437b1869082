/* transport.c — picks the transport at init. Only the CPU one exists on the host side;
 * the CUDA transport adds GPU heaps beside it. */
#include "transport/transport.h"

static const symm_transport_ops_t *current;

static symm_status_t shm_init(void) { return SYMM_SUCCESS; }
static void shm_finalize(void) {}

const symm_transport_ops_t symm_shm_transport = {
    .size = sizeof(symm_transport_ops_t),
    .name = "shm",
    .init = shm_init,
    .finalize = shm_finalize,
};

symm_status_t symm_transport_init(void)
{
    current = &symm_shm_transport;
    return current->init();
}

void symm_transport_finalize(void)
{
    if (current) current->finalize();
    current = NULL;
}

const char *symm_transport_name(void) { return current ? current->name : "none"; }
