/* pool.c — the public team and pool calls: rank-list creation, pools and their growth,
 * destruction, and team numbering. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "team/team.h"

/* ---------------------------------------------------------------- rank-list teams */
static symm_status_t check_rank_list(const char *fn, const int *ranks, int n)
{
    if (!ranks) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: rank list is NULL", fn);
    if (n < 1 || n > symm_g.npes)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %d ranks; must be 1..%d", fn, n,
                              symm_g.npes);
    char *seen = calloc((size_t)symm_g.npes, 1);
    if (!seen) return symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    symm_status_t st = SYMM_SUCCESS;
    int member = 0;
    for (int i = 0; i < n && !st; i++) {
        if (ranks[i] < 0 || ranks[i] >= symm_g.npes)
            st = symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: rank %d at position %d is "
                                "outside the world of %d PEs", fn, ranks[i], i, symm_g.npes);
        else if (seen[ranks[i]]++)
            st = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: rank %d appears twice", fn, ranks[i]);
        else
            member |= ranks[i] == symm_g.me;
    }
    free(seen);
    if (!st && !member)
        st = symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not in the rank list; only "
                            "members call it", fn, symm_g.me);
    return st;
}

symm_status_t symm_team_create_list(const int *members, int n, symm_kind_t kind, size_t ndups,
                                    symm_pool_obj_t **out)
{
    symm_pool_obj_t *p = NULL;
    symm_chunk_t *ch = NULL;
    symm_status_t st = symm_pool_obj_new(kind, members, n, &p);
    if (!st) st = symm_chunk_alloc(p, 0, ndups + 1, &ch);
    if (st && !p) return st;
    /* The members alone take part: each sends its block and list hash to every other
     * member's mailbox and reads theirs. One round, whatever the number of duplicates.
     * A local failure is still sent (as UINT64_MAX) so that no member waits for ever. */
    uint64_t *offs = malloc((size_t)n * sizeof *offs);
    if (!offs && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "team creation");
    uint64_t msg[3] = {st ? UINT64_MAX : ch->my_off, p->members_hash, (uint64_t)ndups};
    symm_status_t xst = SYMM_SUCCESS;
    int bad = -1, mism = -1;
    pthread_mutex_lock(&symm_g.create_lock);
    for (int k = 1; k < n && !xst; k++) xst = symm_mbox_send(members[(p->me + k) % n], msg, 3);
    for (int k = 1; k < n && !xst; k++) {
        int j = (p->me + k) % n;
        uint64_t r[3];
        xst = symm_mbox_recv(members[j], r, 3);
        if (xst) break;
        if (r[0] == UINT64_MAX) bad = j;
        if (r[1] != msg[1] || r[2] != msg[2]) mism = j;
        if (offs) offs[j] = r[0];
    }
    pthread_mutex_unlock(&symm_g.create_lock);
    if (!st) st = xst;
    if (!st && mism >= 0)
        st = symm_error_set(SYMM_ERR_MISMATCH, "team creation: world PE %d passed another "
                            "rank list or duplicate count", members[mism]);
    if (!st && bad >= 0)
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "team creation failed on world PE %d",
                            members[bad]);
    if (!st) {
        offs[p->me] = ch->my_off;
        st = symm_chunk_attach(p, ch, offs, 1);
        if (!st) ch = NULL;
    }
    free(offs);
    if (!st) st = symm_pool_obj_register(p);
    if (st) {
        if (ch) {
            symm_team_region_free(ch->my_off);
            symm_chunk_free(ch);
        }
        symm_pool_obj_free(p);
        return st;
    }
    *out = p;
    return SYMM_SUCCESS;
}

symm_status_t symm_team_create(const int *world_ranks, int n, symm_team_t *out)
{
    SYMM_REQUIRE_INIT();
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    CHECK(check_rank_list(__func__, world_ranks, n));
    symm_pool_obj_t *p = NULL;
    CHECK(symm_team_create_list(world_ranks, n, SYMM_KIND_TEAM, 1, &p));
    *out = symm_team_handle(p, 0, 0);
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- pools */
static symm_status_t lookup_pool(const char *fn, symm_pool_t pool, symm_pool_obj_t **out)
{
    symm_pool_obj_t *p = symm_handle_resolve(pool);
    if (!p || !(pool & SYMM_H_POOL_BIT))
        return symm_error_set(SYMM_ERR_TEAM_INVALID, "%s: pool handle 0x%llx is invalid or "
                              "was destroyed", fn, (unsigned long long)pool);
    *out = p;
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_create(symm_team_t team, size_t n, symm_pool_t *out)
{
    SYMM_REQUIRE_INIT();
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    if (n == 0 || n > SYMM_H_DUP_MASK)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %zu duplicates; must be 1..%u",
                              __func__, n, SYMM_H_DUP_MASK);
    symm_coll_t c;
    CHECK(symm_coll_enter(team, "pool_create", (uint64_t)n, &c));
    symm_pool_obj_t *p = NULL;
    symm_status_t st = symm_team_create_via(&c, c.world, c.n, SYMM_KIND_POOL, n, &p);
    symm_coll_leave(&c);
    CHECK(st);
    *out = symm_team_handle(p, 0, 1);
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_obj_grow(symm_pool_obj_t *p, size_t count)
{
    symm_coll_t c;
    symm_team_t h = symm_team_handle(p, 0, 1);
    size_t first = atomic_load(&p->size);
    CHECK(symm_coll_enter_dup(p, p->ctl, h, "pool_grow", first + count, &c));
    symm_chunk_t *ch = NULL;
    symm_status_t st = symm_chunk_alloc(p, first, count, &ch);
    uint64_t *recv = malloc((size_t)p->n * sizeof *recv);
    if (!recv && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "pool growth");
    uint64_t scratch;
    symm_status_t xst = symm_coll_exchange(&c, NULL, st ? UINT64_MAX : ch->my_off,
                                           recv ? recv : &scratch);
    symm_coll_leave(&c);
    if (!st) st = xst;
    for (int j = 0; j < p->n && !st; j++)
        if (recv[j] == UINT64_MAX)
            st = symm_error_set(SYMM_ERR_NO_MEMORY, "pool growth failed on world PE %d",
                                p->world[j]);
    if (!st) {
        st = symm_chunk_attach(p, ch, recv, 0);
        if (!st) ch = NULL;
    }
    free(recv);
    if (ch) {
        symm_team_region_free(ch->my_off);
        symm_chunk_free(ch);
    }
    return st;
}

symm_status_t symm_pool_grow(symm_pool_t pool, size_t n)
{
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *p = NULL;
    CHECK(lookup_pool(__func__, pool, &p));
    if (p->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not a member", __func__,
                              symm_g.me);
    if (n > SYMM_H_DUP_MASK)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %zu duplicates; at most %u",
                              __func__, n, SYMM_H_DUP_MASK);
    size_t size = atomic_load(&p->size);
    if (n <= size) return SYMM_SUCCESS;
    return symm_pool_obj_grow(p, n - size);
}

size_t symm_pool_size(symm_pool_t pool)
{
    symm_pool_obj_t *p = (pool & SYMM_H_POOL_BIT) ? symm_handle_resolve(pool) : NULL;
    return p ? atomic_load_explicit(&p->size, memory_order_acquire) : 0;
}

symm_team_t symm_pool_team(symm_pool_t pool, size_t i)
{
    symm_pool_obj_t *p = (pool & SYMM_H_POOL_BIT) ? symm_handle_resolve(pool) : NULL;
    if (!p || i >= atomic_load_explicit(&p->size, memory_order_acquire))
        return SYMM_TEAM_INVALID;
    return symm_team_handle(p, (uint32_t)i, 0);
}

symm_status_t symm_pool_obj_destroy(symm_pool_obj_t *p, const char *fn)
{
    if (p->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not a member", fn, symm_g.me);
    if (p->gpu && symm_gpu_hooks.pool_quiesce) symm_gpu_hooks.pool_quiesce(p);
    symm_coll_t c;
    symm_team_t h = symm_team_handle(p, 0, p->kind == SYMM_KIND_POOL);
    CHECK(symm_coll_enter_dup(p, p->ctl, h, "destroy", 0, &c));
    /* A duplicate still in a collective here would write into freed blocks: refuse on
     * every member if any member has one busy. */
    int busy = -1;
    size_t size = atomic_load(&p->size);
    for (size_t i = 0; i < size && busy < 0; i++)
        if (atomic_load(&symm_pool_dup_at(p, i)->busy)) busy = (int)i;
    uint64_t *recv = malloc((size_t)p->n * sizeof *recv);
    uint64_t scratch;
    symm_status_t st = symm_coll_exchange(&c, NULL, busy >= 0 ? (uint64_t)busy + 1 : 0,
                                          recv ? recv : &scratch);
    symm_coll_leave(&c);
    if (!st && !recv) st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    for (int j = 0; j < p->n && !st; j++)
        if (recv[j]) {
            char buf[96];
            st = symm_error_set(SYMM_ERR_TEAM_BUSY, "%s: duplicate %llu of %s is in a "
                                "collective on world PE %d", fn,
                                (unsigned long long)(recv[j] - 1),
                                symm_team_describe(h, buf, sizeof buf), p->world[j]);
        }
    free(recv);
    if (st) return st;
    /* After the exchange every member has received every other member's signal, so no
     * one writes into this PE's blocks any more: they can go back to the region. */
    symm_slot_release(p->slot);
    symm_pool_obj_free(p);
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_destroy(symm_pool_t pool)
{
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *p = NULL;
    CHECK(lookup_pool(__func__, pool, &p));
    if (p->name)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: pool '%s' belongs to the registry; "
                              "use symm_pool_release", __func__, p->name);
    return symm_pool_obj_destroy(p, __func__);
}

symm_status_t symm_team_destroy(symm_team_t team)
{
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK(symm_team_lookup(__func__, team, &p, &d));
    if (p->kind != SYMM_KIND_TEAM)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s cannot be destroyed%s", __func__,
                              p->kind == SYMM_KIND_POOL ? "a pool duplicate" : "a predefined team",
                              p->kind == SYMM_KIND_POOL ? " alone (destroy its pool)" : "");
    return symm_pool_obj_destroy(p, __func__);
}

/* ---------------------------------------------------------------- numbering */
static symm_pool_obj_t *team_obj(symm_team_t team)
{
    if (team & SYMM_H_POOL_BIT) return NULL;
    symm_pool_obj_t *p = symm_handle_resolve(team);
    if (p && !symm_pool_dup_at(p, (size_t)(team & SYMM_H_DUP_MASK))) return NULL;
    return p;
}

int symm_team_my_pe(symm_team_t team)
{
    symm_pool_obj_t *p = team_obj(team);
    return p ? p->me : -1;
}

int symm_team_n_pes(symm_team_t team)
{
    symm_pool_obj_t *p = team_obj(team);
    return p ? p->n : -1;
}

int symm_team_world_pe(symm_team_t team, int pe)
{
    symm_pool_obj_t *p = team_obj(team);
    return (p && pe >= 0 && pe < p->n) ? p->world[pe] : -1;
}

int symm_team_translate_pe(symm_team_t src_team, int pe, symm_team_t dst_team)
{
    symm_pool_obj_t *s = team_obj(src_team), *d = team_obj(dst_team);
    if (!s || !d || pe < 0 || pe >= s->n) return -1;
    return d->index_of[s->world[pe]];
}

const char *symm_team_describe(symm_team_t team, char *buf, size_t len)
{
    if (!buf || len == 0) return "";
    symm_pool_obj_t *p = symm_handle_resolve(team);
    if (!p) {
        snprintf(buf, len, "invalid team 0x%llx", (unsigned long long)team);
        return buf;
    }
    static const char *const kinds[] = {"WORLD", "NODE", "internal", "team", "pool"};
    int n = snprintf(buf, len, "%s %u", kinds[p->kind], (unsigned)p->slot);
    if (p->kind == SYMM_KIND_POOL && n > 0 && (size_t)n < len) {
        if (p->name) n += snprintf(buf + n, len - (size_t)n, " '%s'", p->name);
        if (!(team & SYMM_H_POOL_BIT) && n > 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, " dup %u",
                          (unsigned)(team & SYMM_H_DUP_MASK));
    }
    if (n > 0 && (size_t)n < len) {
        if (p->n <= 8) {
            n += snprintf(buf + n, len - (size_t)n, " [");
            for (int i = 0; i < p->n && n > 0 && (size_t)n < len; i++)
                n += snprintf(buf + n, len - (size_t)n, i ? ",%d" : "%d", p->world[i]);
            if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "]");
        } else {
            snprintf(buf + n, len - (size_t)n, " (%d PEs)", p->n);
        }
    }
    return buf;
}
