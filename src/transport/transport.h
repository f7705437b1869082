/* transport.h — how bytes move between PEs. A transport is an ops table chosen at init;
 * the CPU shared-memory transport is the default and its hot primitives (a peer
 * pointer, a copy, an atomic) are inline in shm/shm.h, so collectives pay no indirect
 * call per transfer. */
#ifndef SYMM_TRANSPORT_H
#define SYMM_TRANSPORT_H

#include <stddef.h>

#include "symm.h"

typedef struct symm_transport_ops {
    size_t size; /* sizeof(struct symm_transport_ops): lets the table grow */
    const char *name;
    symm_status_t (*init)(void);
    void (*finalize)(void);
} symm_transport_ops_t;

extern const symm_transport_ops_t symm_shm_transport;

symm_status_t symm_transport_init(void);
void symm_transport_finalize(void);
const char *symm_transport_name(void);

#endif
