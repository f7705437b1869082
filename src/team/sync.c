/* sync.c — collective episodes: entering a team, waiting for members, the barrier
 * algorithms and the one-word exchange every other collective and team creation use. */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/wait.h"
#include "team/team.h"

static uint32_t make_tag(const char *what, uint64_t args)
{
    uint64_t h = SYMM_HASH_INIT;
    /* one FNV-1a step per character (not symm_hash64, eight): this runs on every entry */
    for (const char *p = what; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = symm_hash64(h, args);
    return (uint32_t)(h ^ (h >> 24) ^ (h >> 48)) & SYMM_TAG_MASK;
}

symm_status_t symm_coll_enter_dup(symm_pool_obj_t *pool, symm_dup_t *dup, symm_team_t team,
                                  const char *what, uint64_t args, symm_coll_t *c)
{
    if (SYMM_UNLIKELY(pool->me < 0)) {
        char buf[96];
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s on %s: PE %d is not a member", what,
                              symm_team_describe(team, buf, sizeof buf), symm_g.me);
    }
    /* The claim is the only atomic on the way in: one uncontended exchange on a line
     * that no other duplicate shares. */
    if (SYMM_UNLIKELY(atomic_exchange_explicit(&dup->busy, 1, memory_order_acquire))) {
        char buf[96];
        /* The holder may be storing its own name right now: this may still be the
         * previous collective's (every name is a static string, so either is safe). */
        const char *held = atomic_load_explicit(&dup->busy_what, memory_order_relaxed);
        return symm_error_set(
            SYMM_ERR_TEAM_BUSY,
            "%s on %s: the team is already in a collective (%s) on another thread of this "
            "PE; collectives on one team may not run concurrently: give each concurrent "
            "worker its own duplicate (symm_pool_create, then symm_pool_team(pool, i))",
            what, symm_team_describe(team, buf, sizeof buf),
            held ? held : "?");
    }
    atomic_store_explicit(&dup->busy_what, what, memory_order_relaxed);
    c->pool = pool;
    c->dup = dup;
    c->n = pool->n;
    c->me = pool->me;
    c->world = pool->world;
    c->tag = make_tag(what, args);
    c->what = what;
    c->team = team;
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_enter(symm_team_t team, const char *what, uint64_t args,
                              symm_coll_t *c)
{
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *pool;
    symm_dup_t *dup;
    symm_status_t st = symm_team_lookup(what, team, &pool, &dup);
    if (SYMM_UNLIKELY(st)) return st;
    return symm_coll_enter_dup(pool, dup, team, what, args, c);
}

void symm_coll_leave(symm_coll_t *c)
{
    atomic_store_explicit(&c->dup->busy, 0, memory_order_release);
}

/* Reports members of the episode that have not signalled: either a timeout or a
 * failed PE (whose message the wait already recorded). */
static symm_status_t report_missing(const symm_coll_t *c, uint64_t ep, symm_status_t st,
                                    const symm_wait_t *w, const int *peers, int npeers)
{
    if (st != SYMM_ERR_TIMEOUT) return st;
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int k = 0; k < npeers && len < sizeof list - 32; k++) {
        int pe = peers ? peers[k] : k;
        if (pe == c->me) continue;
        uint64_t f = __atomic_load_n(&c->dup->mine[pe].flag, __ATOMIC_ACQUIRE);
        if ((f >> SYMM_TAG_BITS) < ep)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (world %d)",
                                    len ? ", " : "", pe, c->world[pe]);
    }
    char buf[96];
    return symm_error_set(SYMM_ERR_TIMEOUT,
                          "%s on %s: timed out after %.1f s (SYMM_TIMEOUT) waiting for "
                          "PE %s",
                          c->what, symm_team_describe(c->team, buf, sizeof buf),
                          symm_wait_elapsed(w), list[0] ? list : "?");
}

static symm_status_t mismatch(const symm_coll_t *c, int pe)
{
    char buf[96];
    return symm_error_set(SYMM_ERR_COLL_MISMATCH,
                          "%s on %s: PE %d (world %d) entered a different collective or "
                          "passed different arguments (count, type, op or root)",
                          c->what, symm_team_describe(c->team, buf, sizeof buf), pe,
                          c->world[pe]);
}

/* Inline check of one slot: 1 arrived, 0 not yet, -1 mismatch. */
static inline int slot_state(const symm_coll_t *c, int pe, uint64_t ep)
{
    uint64_t f = __atomic_load_n(&c->dup->mine[pe].flag, __ATOMIC_ACQUIRE);
    uint64_t e = f >> SYMM_TAG_BITS;
    if (e < ep) return 0;
    /* A later episode overwrote the tag: the peer already passed this one. */
    if (e == ep && (f & SYMM_TAG_MASK) != c->tag) return -1;
    return 1;
}

symm_status_t symm_coll_wait(const symm_coll_t *c, int pe, uint64_t ep, uint64_t *data)
{
    int s;
    symm_wait_t w = SYMM_WAIT_INIT;
    while ((s = slot_state(c, pe, ep)) == 0) {
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st)) return report_missing(c, ep, st, &w, &pe, 1);
    }
    if (SYMM_UNLIKELY(s < 0)) return mismatch(c, pe);
    if (data) *data = c->dup->mine[pe].data[ep & 1];
    return SYMM_SUCCESS;
}

/* Waits for every member's signal of episode ep, scanning rather than waiting for each
 * in turn so that a timeout can name all the missing ones. */
static symm_status_t wait_all(const symm_coll_t *c, uint64_t ep)
{
    int next = 0; /* members before next have arrived */
    symm_wait_t w = SYMM_WAIT_INIT;
    while (next < c->n) {
        if (next == c->me) {
            next++;
            continue;
        }
        int s = slot_state(c, next, ep);
        if (s > 0) {
            next++;
            continue;
        }
        if (SYMM_UNLIKELY(s < 0)) return mismatch(c, next);
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st)) return report_missing(c, ep, st, &w, NULL, c->n);
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_sync(symm_coll_t *c)
{
    int n = c->n, me = c->me;
    if (n == 1) return SYMM_SUCCESS;
    uint64_t ep = symm_coll_episode(c);
    if (n <= symm_config.barrier_flat_max) {
        /* One round: every member signals every other one; each waits on its own block,
         * so the cost is one cache-line transfer per pair, in parallel. */
        for (int k = 1; k < n; k++) symm_coll_notify(c, (me + k) % n, ep, 0);
        return wait_all(c, ep);
    }
    /* Dissemination: log2(n) rounds; in round r member i signals i + 2^r. The partners
     * of one member differ in every round, so one slot per source suffices. */
    symm_status_t st = SYMM_SUCCESS;
    for (int d = 1; d < n; d <<= 1) {
        symm_coll_notify(c, (me + d) % n, ep, 0);
        if (st) continue;
        st = symm_coll_wait(c, (me - d + n) % n, ep, NULL);
        if (st == SYMM_ERR_COLL_MISMATCH) {
            /* The later partners wait for this member's rounds: signal them anyway, with
             * a tag no collective uses, so that they report the mismatch too instead of
             * waiting until SYMM_TIMEOUT (the poison reaches every member, as the
             * rounds' information does). */
            c->tag = SYMM_TAG_MASK;
        } else if (st) {
            return st; /* timeout or failed PE: the others will notice it themselves */
        }
    }
    return st;
}

symm_status_t symm_coll_exchange(symm_coll_t *c, const uint64_t *send, uint64_t value,
                                 uint64_t *recv)
{
    int n = c->n, me = c->me;
    recv[me] = send ? send[me] : value;
    if (n == 1) return SYMM_SUCCESS;
    uint64_t ep = symm_coll_episode(c);
    for (int k = 1; k < n; k++) {
        int pe = (me + k) % n;
        symm_coll_notify(c, pe, ep, send ? send[pe] : value);
    }
    CHECK(wait_all(c, ep));
    for (int pe = 0; pe < n; pe++)
        if (pe != me) recv[pe] = c->dup->mine[pe].data[ep & 1];
    return SYMM_SUCCESS;
}
