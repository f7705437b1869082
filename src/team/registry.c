/* registry.c — pools by group name (PyTorch's get_team / get_n_teams use case): the
 * first request creates the pool over the given ranks, later ones return it, asking for
 * more duplicates grows it. */
#include <stdlib.h>
#include <string.h>

#include "team/team.h"

typedef struct reg_entry {
    symm_pool_obj_t *pool;
    struct reg_entry *next;
} reg_entry_t;

static reg_entry_t *registry;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

static reg_entry_t **find(const char *name)
{
    reg_entry_t **e = &registry;
    while (*e && strcmp((*e)->pool->name, name) != 0)
        e = &(*e)->next;
    return e;
}

symm_status_t symm_pool_get(const char *name, const int *world_ranks, int nranks, size_t n,
                            symm_pool_t *out)
{
    SYMM_REQUIRE_INIT();
    if (!name || !*name)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: name is NULL or empty", __func__);
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    if (!world_ranks || nranks < 1 || nranks > symm_g.npes)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s('%s'): %d ranks; must be 1..%d",
                              __func__, name, nranks, symm_g.npes);
    if (n == 0 || n > SYMM_H_DUP_MASK)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s('%s'): %zu duplicates", __func__, name,
                              n);
    symm_status_t st = SYMM_SUCCESS;
    pthread_mutex_lock(&reg_lock);
    reg_entry_t **e = find(name);
    if (*e) {
        symm_pool_obj_t *p = (*e)->pool;
        int same = p->n == nranks;
        for (int i = 0; same && i < nranks; i++)
            same = p->world[i] == world_ranks[i];
        if (!same)
            st = symm_error_set(SYMM_ERR_NAME_CONFLICT,
                                "%s: '%s' already names a pool of "
                                "other ranks (%d PEs)",
                                __func__, name, p->n);
        else if (n > atomic_load(&p->size))
            st = symm_pool_obj_grow(p, n, SYMM_SUCCESS);
        if (!st) *out = symm_team_handle(p, 0, 1);
        pthread_mutex_unlock(&reg_lock);
        return st;
    }
    /* Validate the list the same way symm_team_create does. */
    int member = 0;
    for (int i = 0; i < nranks; i++) {
        if (world_ranks[i] < 0 || world_ranks[i] >= symm_g.npes) {
            pthread_mutex_unlock(&reg_lock);
            return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s('%s'): rank %d out of range",
                                  __func__, name, world_ranks[i]);
        }
        for (int j = 0; j < i; j++)
            if (world_ranks[j] == world_ranks[i]) {
                pthread_mutex_unlock(&reg_lock);
                return symm_error_set(SYMM_ERR_INVALID_ARG, "%s('%s'): rank %d appears twice",
                                      __func__, name, world_ranks[i]);
            }
        member |= world_ranks[i] == symm_g.me;
    }
    if (!member) {
        pthread_mutex_unlock(&reg_lock);
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s('%s'): PE %d is not in the rank list",
                              __func__, name, symm_g.me);
    }
    reg_entry_t *ne = calloc(1, sizeof *ne);
    char *nm = strdup(name);
    symm_pool_obj_t *p = NULL;
    if (!ne || !nm)
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", __func__);
    else
        st = symm_team_create_list(world_ranks, nranks, SYMM_KIND_POOL, n, &p);
    if (st) {
        free(ne);
        free(nm);
        pthread_mutex_unlock(&reg_lock);
        return st;
    }
    p->name = nm;
    ne->pool = p;
    ne->next = registry;
    registry = ne;
    *out = symm_team_handle(p, 0, 1);
    pthread_mutex_unlock(&reg_lock);
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_release(const char *name)
{
    SYMM_REQUIRE_INIT();
    if (!name) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: name is NULL", __func__);
    pthread_mutex_lock(&reg_lock);
    reg_entry_t **e = find(name);
    if (!*e) {
        pthread_mutex_unlock(&reg_lock);
        return symm_error_set(SYMM_ERR_NOT_FOUND, "%s: no pool named '%s'", __func__, name);
    }
    reg_entry_t *ent = *e;
    symm_status_t st = symm_pool_obj_destroy(ent->pool, __func__);
    if (!st) {
        *e = ent->next;
        free(ent);
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

void symm_registry_finalize(void)
{
    /* The pools themselves are freed with every other team object. */
    pthread_mutex_lock(&reg_lock);
    while (registry) {
        reg_entry_t *n = registry->next;
        free(registry);
        registry = n;
    }
    pthread_mutex_unlock(&reg_lock);
}
