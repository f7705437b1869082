/* pool.c — the public team and pool calls: rank-list creation, pools and their growth,
 * destruction, and team numbering. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wait.h"
#include "team/team.h"

/* ---------------------------------------------------------------- rank-list teams */
/* What one member tells another: its block (or a failure), the creation's identity (the
 * member list's hash, the duplicate count and the kind) so that messages of different
 * creations never pair. */
#define LIST_FAIL  ((uint64_t)0xffff << 48) /* | the negated status */
#define LIST_WORDS 3

static int list_failed(uint64_t w)
{
    return (w & LIST_FAIL) == LIST_FAIL;
}
static uint64_t list_fail_word(symm_status_t st)
{
    return LIST_FAIL | (uint8_t)-st;
}

/* Why this member's creation failed, recorded once (the first reason wins). */
static symm_status_t list_fail(symm_status_t st, symm_status_t why, const char *fmt, int pe)
{
    if (st) return st;
    return symm_error_set(why, fmt, pe);
}

/* The members alone take part: each posts its block and the creation's identity to
 * every other member's mailbox and takes theirs, whatever arrives first. One round,
 * whatever the number of duplicates. A member that failed locally still posts (a
 * failure) and takes what the others posted, so that the mailboxes stay paired; a
 * member that gives up (timeout) withdraws what it posted, so that a late member fails
 * too instead of pairing with it, and drops the late member's message when it comes. */

/* Takes what member j posted (got: symm_mbox_poll's answer), folding it into st. */
static symm_status_t list_take(int pe, int got, const uint64_t *r, const uint64_t *msg,
                               uint64_t *off, symm_status_t st)
{
    if (got == SYMM_MBOX_WITHDRAWN)
        return list_fail(st, SYMM_ERR_TIMEOUT,
                         "team creation: world PE %d gave up on this "
                         "creation (it timed out waiting) before this PE took part; nothing "
                         "was created",
                         pe);
    if (list_failed(r[0]))
        return list_fail(st, (symm_status_t)(-(int)(r[0] & 0xff)),
                         "team creation failed on "
                         "world PE %d (its own arguments or memory); every member returns "
                         "its status",
                         pe);
    if (r[1] != msg[1] || r[2] != msg[2])
        return list_fail(st, SYMM_ERR_MISMATCH,
                         "team creation: world PE %d passed another "
                         "rank list, order or duplicate count",
                         pe);
    if (off) *off = r[0];
    return st;
}

static symm_status_t list_round(const int *members, int n, int me, const uint64_t *msg,
                                uint64_t *offs, symm_status_t st)
{
    char *pending = calloc((size_t)n, 1);
    if (!pending) return symm_error_set(SYMM_ERR_NO_MEMORY, "team creation");
    /* What is posted already is taken first: a member that gave up before this PE came
     * must see this PE's failure, not its block (it may not pair with anyone else). */
    uint64_t r[LIST_WORDS];
    int gone = 0; /* a member gave up: the others cannot see that for themselves */
    for (int k = 1; k < n; k++) {
        int j = (me + k) % n, got = symm_mbox_poll(members[j], r, LIST_WORDS);
        if (got == SYMM_MBOX_NONE)
            pending[j] = 1;
        else
            st = list_take(members[j], got, r, msg, offs ? &offs[j] : NULL, st);
        gone |= got == SYMM_MBOX_WITHDRAWN;
    }
    uint64_t out[LIST_WORDS] = {gone ? list_fail_word(SYMM_ERR_TIMEOUT) : msg[0], msg[1],
                                msg[2]};
    int left = 0;
    for (int k = 1; k < n; k++) {
        int j = (me + k) % n;
        symm_status_t sst = symm_mbox_send(members[j], out, LIST_WORDS);
        if (sst && !st) st = sst;
        if (sst) pending[j] = 0; /* j has not taken the last message: it is not awaited */
        left += pending[j];
    }
    symm_wait_t w = SYMM_WAIT_INIT;
    while (left > 0) {
        int got_any = 0;
        for (int j = 0; j < n; j++) {
            if (!pending[j]) continue;
            int got = symm_mbox_poll(members[j], r, LIST_WORDS);
            if (got == SYMM_MBOX_NONE) continue;
            got_any = 1;
            pending[j] = 0;
            left--;
            st = list_take(members[j], got, r, msg, offs ? &offs[j] : NULL, st);
        }
        if (left == 0 || got_any) continue;
        symm_status_t wst = symm_wait_pause(&w);
        if (!wst) continue;
        /* The members still missing will post later: their messages belong to this
         * attempt, not to the next creation. */
        char list[256];
        size_t len = 0;
        list[0] = '\0';
        for (int j = 0; j < n; j++) {
            if (!pending[j]) continue;
            symm_mbox_abandon(members[j]);
            if (len < sizeof list - 16)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "",
                                        members[j]);
        }
        if (!st && wst == SYMM_ERR_TIMEOUT)
            st = symm_error_set(SYMM_ERR_TIMEOUT,
                                "team creation: timed out after %.1f s "
                                "(SYMM_TIMEOUT) waiting for world PE %s; nothing was created",
                                symm_wait_elapsed(&w), list);
        else if (!st)
            st = wst;
        break;
    }
    free(pending);
    /* A failure every member sees for itself (a failure or mismatch message) needs no
     * withdrawal; one that only this member saw (it gave up waiting) does. */
    if (st == SYMM_ERR_TIMEOUT || st == SYMM_ERR_PE_FAILED)
        for (int k = 1; k < n; k++)
            symm_mbox_withdraw(members[(me + k) % n]);
    return st;
}

symm_status_t symm_team_create_list(const int *members, int n, symm_kind_t kind, size_t ndups,
                                    symm_pool_obj_t **out)
{
    symm_pool_obj_t *p = NULL;
    symm_chunk_t *ch = NULL;
    symm_status_t st = symm_pool_obj_new(kind, members, n, &p);
    if (st) return st;
    st = symm_chunk_alloc(p, 0, ndups + 1, &ch);
    uint64_t *offs = malloc((size_t)n * sizeof *offs);
    if (!offs && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "team creation");
    uint64_t msg[LIST_WORDS] = {st ? list_fail_word(st) : ch->my_off, p->members_hash,
                                (uint64_t)ndups | (uint64_t)kind << 56};
    pthread_mutex_lock(&symm_g.create_lock);
    symm_status_t xst = list_round(members, n, p->me, msg, offs, st);
    pthread_mutex_unlock(&symm_g.create_lock);
    if (!st) st = xst;
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

/* The rank list's faults. Where the list still names this PE and other valid ranks, the
 * creation goes ahead with a failure posted to them (list_ok = 0), so that they fail at
 * once instead of waiting for SYMM_TIMEOUT. */
static symm_status_t check_rank_list(const char *fn, const int *ranks, int n, int *usable)
{
    *usable = 0;
    if (!ranks) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: the rank list is NULL", fn);
    if (n < 1 || n > symm_g.npes)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: the rank list has %d entries; "
                              "must be 1..%d",
                              fn, n, symm_g.npes);
    char *seen = calloc((size_t)symm_g.npes, 1);
    if (!seen) return symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    symm_status_t st = SYMM_SUCCESS;
    int member = 0;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= symm_g.npes) {
            if (!st)
                st = symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE,
                                    "%s: rank %d at position %d is "
                                    "outside the world of %d PEs",
                                    fn, ranks[i], i, symm_g.npes);
        } else if (seen[ranks[i]]++) {
            if (!st)
                st = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: rank %d appears twice", fn,
                                    ranks[i]);
        } else {
            member |= ranks[i] == symm_g.me;
        }
    }
    free(seen);
    if (!member)
        return st ? st
                  : symm_error_set(SYMM_ERR_NOT_MEMBER,
                                   "%s: PE %d is not in the rank list; "
                                   "only members call it",
                                   fn, symm_g.me);
    *usable = 1;
    return st;
}

/* A bad rank list that still names this PE: the valid ranks are told of the failure. */
static symm_status_t fail_rank_list(const int *ranks, int n, symm_status_t st)
{
    int *valid = malloc((size_t)n * sizeof *valid), m = 0, me = 0;
    char *seen = calloc((size_t)symm_g.npes, 1);
    if (valid && seen)
        for (int i = 0; i < n; i++)
            if (ranks[i] >= 0 && ranks[i] < symm_g.npes && !seen[ranks[i]]++) {
                if (ranks[i] == symm_g.me) me = m;
                valid[m++] = ranks[i];
            }
    if (valid && seen && m > 1) {
        uint64_t h = SYMM_HASH_INIT;
        for (int i = 0; i < n; i++)
            h = symm_hash64(h, (uint64_t)ranks[i]);
        uint64_t msg[LIST_WORDS] = {list_fail_word(st), h, 0};
        char why[512];
        snprintf(why, sizeof why, "%s", symm_last_error());
        pthread_mutex_lock(&symm_g.create_lock);
        (void)list_round(valid, m, me, msg, NULL, st);
        pthread_mutex_unlock(&symm_g.create_lock);
        symm_error_set(st, "%s", why); /* this PE's own reason */
    }
    free(valid);
    free(seen);
    return st;
}

symm_status_t symm_team_create(const int *world_ranks, int n, symm_team_t *out)
{
    SYMM_REQUIRE_INIT();
    int usable;
    symm_status_t st = check_rank_list(__func__, world_ranks, n, &usable);
    if (!st && !out) st = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    if (st) return usable ? fail_rank_list(world_ranks, n, st) : st;
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
        return symm_error_set(SYMM_ERR_TEAM_INVALID,
                              "%s: pool handle 0x%llx is invalid or "
                              "was destroyed",
                              fn, (unsigned long long)pool);
    *out = p;
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_create(symm_team_t team, size_t n, symm_pool_t *out)
{
    const char *fn = __func__;
    SYMM_REQUIRE_INIT();
    symm_status_t local = SYMM_SUCCESS;
    if (!out)
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", fn);
    else if (n == 0 || n > SYMM_H_DUP_MASK)
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %zu duplicates; must be 1..%u", fn, n,
                               SYMM_H_DUP_MASK);
    symm_coll_t c;
    CHECK(symm_coll_enter(team, fn, (uint64_t)n, &c));
    symm_pool_obj_t *p = NULL;
    symm_status_t st = local ? symm_coll_fail(&c, local)
                             : symm_team_create_via(&c, c.world, c.n, SYMM_KIND_POOL, n, &p);
    symm_coll_leave(&c);
    CHECK(st);
    *out = symm_team_handle(p, 0, 1);
    return SYMM_SUCCESS;
}

/* Grows p to target duplicates (no change if it has as many), through its control
 * duplicate: every member takes part, a local failure (local, or memory here) included,
 * so every member returns the same status. */
symm_status_t symm_pool_obj_grow(symm_pool_obj_t *p, size_t target, symm_status_t local)
{
    symm_coll_t c;
    symm_team_t h = symm_team_handle(p, 0, 1);
    CHECK(symm_coll_enter_dup(p, p->ctl, h, "symm_pool_grow", target, &c));
    size_t first = atomic_load(&p->size), count = target > first ? target - first : 0;
    symm_chunk_t *ch = NULL;
    symm_status_t st = local;
    if (!st && count) st = symm_chunk_alloc(p, first, count, &ch);
    uint64_t *recv = malloc((size_t)p->n * sizeof *recv);
    if (!recv && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "pool growth");
    c.local = st;
    st = symm_coll_exchange(&c, NULL, ch ? ch->my_off : 0, recv);
    symm_coll_leave(&c);
    if (!st && ch) {
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
    symm_status_t local = SYMM_SUCCESS;
    if (n > SYMM_H_DUP_MASK)
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %zu duplicates; at most %u", __func__,
                               n, SYMM_H_DUP_MASK);
    return symm_pool_obj_grow(p, n, local);
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

/* Frees p here without its members' agreement (its control duplicate is broken): a
 * late peer may still write into its blocks, so they stay out of the region. */
static void pool_obj_abandon(symm_pool_obj_t *p)
{
    p->keep_region = 1;
    symm_slot_release(p->slot);
    symm_pool_obj_free(p);
}

symm_status_t symm_pool_obj_destroy(symm_pool_obj_t *p, const char *fn)
{
    if (p->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not a member", fn, symm_g.me);
    symm_team_pool_quiesce(p);
    symm_coll_t c;
    symm_team_t h = symm_team_handle(p, 0, p->kind == SYMM_KIND_POOL);
    symm_status_t st = symm_coll_enter_dup(p, p->ctl, h, fn, 0, &c);
    if (st == SYMM_ERR_TEAM_BROKEN) { /* a timeout broke it: nobody can be waited for */
        pool_obj_abandon(p);
        return SYMM_SUCCESS;
    }
    CHECK(st);
    /* A duplicate still in a collective here would write into freed blocks: refuse on
     * every member if any member has one busy. */
    size_t size = atomic_load(&p->size);
    for (size_t i = 0; i < size && !c.local; i++)
        if (atomic_load(&symm_pool_dup_at(p, i)->busy)) {
            char buf[96];
            c.local = symm_error_set(SYMM_ERR_TEAM_BUSY,
                                     "%s: duplicate %zu of %s is in a "
                                     "collective on this PE (world PE %d)",
                                     fn, i, symm_team_describe(h, buf, sizeof buf), symm_g.me);
        }
    st = symm_coll_sync(&c);
    int broken = c.dup->broken != 0;
    symm_coll_leave(&c);
    if (broken) { /* timed out here: destroyed on this PE all the same */
        pool_obj_abandon(p);
        return st;
    }
    if (st) return st;
    /* After the sync every member has received every other member's signal, so no one
     * writes into this PE's blocks any more: they can go back to the region. */
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
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: pool '%s' belongs to the registry; "
                              "use symm_pool_release",
                              __func__, p->name);
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
                              p->kind == SYMM_KIND_POOL ? "a pool duplicate"
                                                        : "a predefined team",
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
    int n = snprintf(buf, len, "%s %llu", kinds[p->kind], (unsigned long long)p->slot);
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
