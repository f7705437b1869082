/* init.c — symm_init and symm_finalize: the one place that knows the layers' order.
 * Each layer is brought up on the one below it (core, transport, team; the collectives'
 * workers start on first use) and taken down in the reverse order. */
#include <pthread.h>

#include "bootstrap/boot.h"
#include "coll/tile_moe.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/team.h"
#include "transport/transport.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ex: the caller's exchange (symm_init_exchange), or NULL for the launcher's. */
static symm_status_t init_layers(const symm_exchange_t *ex)
{
    symm_status_t st = SYMM_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (symm_g.initialized) {
        pthread_mutex_unlock(&init_lock);
        return symm_error_set(SYMM_ERR_ALREADY_INITIALIZED, "symm_init called twice");
    }
    symm_boot_exchange_use(ex);
    st = symm_core_init();
    symm_boot_exchange_use(NULL);
    if (st != SYMM_SUCCESS) goto out_unlock;
    CHECK_GOTO(symm_transport_init(), st, out_core);
    CHECK_GOTO(symm_team_layer_init(), st, out_transport);
    pthread_mutex_unlock(&init_lock);
    SYMM_DEBUG("initialized: %d PEs, heap %zu bytes, team region %zu bytes", symm_g.npes,
               symm_g.heap_size, symm_g.team_size);
    return SYMM_SUCCESS;

out_transport:
    symm_transport_finalize();
out_core:
    symm_core_finalize(SYMM_CORE_END_INIT_FAILED);
out_unlock:
    pthread_mutex_unlock(&init_lock);
    return st;
}

symm_status_t symm_init(void)
{
    return init_layers(NULL);
}

symm_status_t symm_init_exchange(const symm_exchange_t *ex)
{
    if (ex == NULL)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "symm_init_exchange: the exchange is NULL");
    return init_layers(ex);
}

symm_status_t symm_finalize(void)
{
    pthread_mutex_lock(&init_lock);
    if (!symm_g.initialized) {
        pthread_mutex_unlock(&init_lock);
        return symm_error_set(SYMM_ERR_NOT_INITIALIZED, "symm_finalize without symm_init");
    }
    symm_status_t busy = symm_team_layer_busy(__func__);
    if (busy) {
        pthread_mutex_unlock(&init_lock);
        return busy;
    }
    symm_transport_quiesce();
    /* Peers may still read this PE's heap until they too reach finalize. */
    symm_status_t st = symm_barrier_all();
    symm_coll_workers_shutdown();
    symm_team_layer_finalize();
    symm_transport_finalize();
    symm_core_finalize(st == SYMM_SUCCESS ? SYMM_CORE_END_CLEAN : SYMM_CORE_END_FAILED);
    pthread_mutex_unlock(&init_lock);
    return st;
}

symm_status_t symm_get_info(symm_info_t *out)
{
    SYMM_REQUIRE_INIT();
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "symm_get_info: out is NULL");
    symm_info_t i;
    pthread_mutex_lock(&symm_g.heap_lock);
    i.heap_used = symm_g.heap_arena.used;
    pthread_mutex_unlock(&symm_g.heap_lock);
    pthread_mutex_lock(&symm_g.team_lock);
    i.team_heap_used = symm_g.team_arena.used;
    pthread_mutex_unlock(&symm_g.team_lock);
    i.heap_size = symm_g.heap_size;
    i.team_heap_size = symm_g.team_size;
    i.transport = symm_transport_name();
    *out = i;
    return SYMM_SUCCESS;
}
