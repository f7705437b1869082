/* sync.c — collective episodes: entering a team, waiting for members, the barrier
 * algorithms and the one-word exchange every other collective and team creation use,
 * and how the members of a call agree on its outcome (the check words of team.h). */
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/config.h"
#include "core/wait.h"
#include "team/team.h"
#include "transport/transport.h"

/* ---------------------------------------------------------------- check words */
/* An error word: the top three bits set (fingerprints are kept out of that range), then
 * BROKEN (the writer broke the duplicate: a poison), MISMATCH (fingerprints differed:
 * no origin), the origin's team number in bits 32..55 and the negated status in bits
 * 0..7. Of two error words the one with the smaller low 60 bits wins: the lowest-numbered
 * failing member, and any member's own failure before a mismatch. */
#define CHK_MARK       ((uint64_t)7 << 61)
#define CHK_BROKEN     ((uint64_t)1 << 60)
#define CHK_MISMATCH   ((uint64_t)1 << 59)
#define CHK_ORDER      (((uint64_t)1 << 60) - 1)
#define CHK_ORIGIN_MAX 0xffffff

static inline int chk_is_err(uint64_t w)
{
    return (w & CHK_MARK) == CHK_MARK;
}

static inline uint64_t chk_error(int origin, symm_status_t st)
{
    return CHK_MARK | (uint64_t)(origin & CHK_ORIGIN_MAX) << 32 | (uint64_t)(uint8_t)-st;
}

static inline int chk_origin(uint64_t w)
{
    return (int)((w >> 32) & CHK_ORIGIN_MAX);
}
static inline symm_status_t chk_status(uint64_t w)
{
    return (symm_status_t)(-(int)(w & 0xff));
}

/* The verdict of two members' words: equal fingerprints stay, different ones become a
 * mismatch, an error beats any fingerprint, the smaller error wins. Commutative,
 * associative and idempotent, so a dissemination round gives every member the same
 * verdict as a flat one. */
static inline uint64_t chk_join(uint64_t a, uint64_t b)
{
    if (SYMM_LIKELY(a == b)) return a;
    int ea = chk_is_err(a), eb = chk_is_err(b);
    if (!ea && !eb) return CHK_MARK | CHK_MISMATCH | (uint64_t)(uint8_t)-SYMM_ERR_COLL_MISMATCH;
    if (!ea) return b;
    if (!eb) return a;
    return (a & CHK_ORDER) <= (b & CHK_ORDER) ? a : b;
}

/* What this member tells the others in an episode. */
static inline uint64_t my_word(const symm_coll_t *c)
{
    return SYMM_UNLIKELY(c->local) ? chk_error(c->me, c->local) : c->fp;
}

/* The team of a message; the internal team answers to no user handle, so it is named
 * here rather than by symm_team_describe. */
static const char *team_name(symm_team_t team, char *buf, size_t len)
{
    if (team == SYMM_H_INTERNAL) return "the internal world team (symmetric allocation)";
    return symm_team_describe(team, buf, len);
}

/* ---------------------------------------------------------------- entering */
/* The collective's name hashed once per call site and thread: the names are static
 * strings, and hashing one costs a dependent multiply per character. Initial-exec TLS:
 * one segment-relative load, where the shared library's default model calls
 * __tls_get_addr (measured: 25 ns of a 0.27 us 8-byte allreduce at 2 PEs). */
#define SYMM_TLS_FAST __attribute__((tls_model("initial-exec")))
static uint64_t what_hash(const char *what)
{
    static _Thread_local SYMM_TLS_FAST const char *last;
    static _Thread_local SYMM_TLS_FAST uint64_t last_h;
    if (SYMM_LIKELY(what == last)) return last_h;
    uint64_t h = SYMM_HASH_INIT;
    for (const char *p = what; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    last = what;
    last_h = h;
    return h;
}

static uint64_t make_fp(const char *what, uint64_t args)
{
    uint64_t fp = symm_mix64(what_hash(what) ^ args);
    return chk_is_err(fp) ? fp & ~((uint64_t)1 << 63) : fp;
}

static symm_status_t broken_error(const symm_coll_t *c, const char *what, symm_team_t team)
{
    char buf[96];
    const symm_dup_t *d = c->dup;
    return symm_error_set(SYMM_ERR_TEAM_BROKEN,
                          "%s on %s: the team is unusable since a wait on it ended with "
                          "\"%s\" (member %d, world %d); destroy it and make a new one",
                          what, team_name(team, buf, sizeof buf),
                          symm_strerror((symm_status_t)d->broken), d->broken_origin,
                          c->pool->world[d->broken_origin]);
}

/* Claims the duplicate and fills c, all but its fingerprint. */
static inline symm_status_t coll_claim(symm_pool_obj_t *pool, symm_dup_t *dup, symm_team_t team,
                                       const char *what, symm_coll_t *c)
{
    if (SYMM_UNLIKELY(pool->me < 0)) {
        char buf[96];
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s on %s: PE %d is not a member", what,
                              team_name(team, buf, sizeof buf), symm_g.me);
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
            what, team_name(team, buf, sizeof buf), held ? held : "?");
    }
    atomic_store_explicit(&dup->busy_what, what, memory_order_relaxed);
    c->pool = pool;
    c->dup = dup;
    c->n = pool->n;
    c->me = pool->me;
    c->world = pool->world;
    c->local = SYMM_SUCCESS;
    c->agreed = 0;
    c->what = what;
    c->team = team;
    c->gate = NULL;
    c->last_round = SYMM_ROUND_FLAT;
    if (SYMM_UNLIKELY(dup->broken)) {
        symm_status_t st = broken_error(c, what, team);
        symm_coll_leave(c);
        return st;
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_enter_dup(symm_pool_obj_t *pool, symm_dup_t *dup, symm_team_t team,
                                  const char *what, uint64_t args, symm_coll_t *c)
{
    symm_status_t st = coll_claim(pool, dup, team, what, c);
    if (SYMM_LIKELY(!st)) c->fp = make_fp(what, args);
    return st;
}

/* The fingerprint is left to symm_coll_set_args, which every caller runs before the
 * call's first episode: computing it here too would hash the name twice per call. */
symm_status_t symm_coll_begin(symm_team_t team, const char *what, symm_coll_t *c)
{
    SYMM_REQUIRE_INIT_FOR(what);
    symm_pool_obj_t *pool;
    symm_dup_t *dup;
    symm_status_t st = symm_team_lookup(what, team, &pool, &dup);
    if (SYMM_UNLIKELY(st)) return st;
    st = coll_claim(pool, dup, team, what, c);
    c->fp = 0;
    return st;
}

void symm_coll_set_args(symm_coll_t *c, uint64_t args)
{
    c->fp = make_fp(c->what, args);
}

symm_status_t symm_coll_enter(symm_team_t team, const char *what, uint64_t args, symm_coll_t *c)
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

symm_status_t symm_coll_fail(symm_coll_t *c, symm_status_t st)
{
    c->local = st;
    return symm_coll_sync(c);
}

/* ---------------------------------------------------------------- remote members */
/* My slot in member pe's block, named by the address at the same offset of my own team
 * region: every PE's window has the same layout, so the remote transport finds it there. */
static symm_sync_slot_t *remote_slot(const symm_coll_t *c, int pe)
{
    const symm_chunk_t *ch = c->dup->chunk;
    uint8_t *same = symm_team_region_ptr(symm_g.me, ch->member_off[pe]);
    return (symm_sync_slot_t *)(same + c->dup->block) + c->me;
}

/* Members of a group whose data words a leader carries to the other leaders in its
 * signal of an exchange (exchange_two_level); larger groups' words are fetched. */
#define TL_CARRY_MAX 29

/* Words of slots in pe's block (at most TL_CARRY_MAX + 3), stored in order; a failure
 * leaves pe to time out naming me. */
static void remote_store(const symm_coll_t *c, int pe, volatile uint64_t *const *at,
                         const uint64_t *v, int n)
{
    uint64_t *dest[TL_CARRY_MAX + 3];
    for (int i = 0; i < n; i++)
        dest[i] = (uint64_t *)(uintptr_t)at[i];
    if (symm_transport_remote()->store64(dest, v, n, c->world[pe]))
        SYMM_WARN("%s: signalling member %d (PE %d): %s", c->what, pe, c->world[pe],
                  symm_last_error());
}

void symm_coll_notify_remote(const symm_coll_t *c, int pe, uint64_t ep, uint64_t data,
                             uint64_t check)
{
    symm_sync_slot_t *s = remote_slot(c, pe);
    volatile uint64_t *const at[3] = {&s->ep[ep & 1].data, &s->ep[ep & 1].check, &s->flag};
    const uint64_t v[3] = {data, check, ep};
    remote_store(c, pe, at, v, 3);
}

/* symm_coll_notify_remote from a leader to the leader pe of another group, carrying the
 * data words of episode ep of my group's other members (group g, as they signalled them
 * to me) into their slots of pe's block, before my own words: nobody else writes those
 * slots on a two-level team, where a member signals only its leader. */
static void notify_leader_carry(const symm_coll_t *c, int pe, int g, uint64_t ep, uint64_t data,
                                uint64_t check)
{
    symm_sync_slot_t *base = remote_slot(c, pe) - c->me;
    volatile uint64_t *at[TL_CARRY_MAX + 3];
    uint64_t v[TL_CARRY_MAX + 3];
    int w = 0;
    for (int j = 0; j < c->n; j++) {
        if (j == c->me || c->pool->group[j] != g) continue;
        at[w] = &base[j].ep[ep & 1].data;
        v[w++] = c->dup->mine[j].ep[ep & 1].data;
    }
    symm_sync_slot_t *s = base + c->me;
    at[w] = &s->ep[ep & 1].data;
    v[w++] = data;
    at[w] = &s->ep[ep & 1].check;
    v[w++] = check;
    at[w] = &s->flag;
    v[w++] = ep;
    remote_store(c, pe, at, v, w);
}

/* Does leader L's signal to another group's leader carry the data words of L's group
 * (group h)? The same answer on every member: it depends on the group's size alone. */
static int tl_carries(const symm_coll_t *c, int h)
{
    const symm_pool_obj_t *p = c->pool;
    int k = 0;
    for (int j = 0; j < c->n; j++)
        k += p->group[j] == h;
    return k - 1 <= TL_CARRY_MAX;
}

/* ---------------------------------------------------------------- breaking */
/* Stores the poison into every peer's slot of this duplicate: a late member's next wait
 * on it, in this call or a later one, sees a flag beyond its episode and this word. */
static void dup_break(const symm_coll_t *c, symm_status_t why, int origin)
{
    symm_dup_t *d = c->dup;
    if (d->broken) return;
    d->broken = (int32_t)why;
    d->broken_origin = origin;
    uint64_t w = chk_error(origin, why) | CHK_BROKEN;
    for (int pe = 0; pe < c->n; pe++) {
        if (pe == c->me) continue;
        if (!c->dup->chunk->member_base[pe]) {
            symm_sync_slot_t *r = remote_slot(c, pe);
            volatile uint64_t *const at[3] = {&r->ep[0].check, &r->ep[1].check, &r->flag};
            const uint64_t v[3] = {w, w, SYMM_FLAG_POISON};
            remote_store(c, pe, at, v, 3);
            continue;
        }
        symm_sync_slot_t *s = symm_coll_peer_slot(c, pe);
        s->ep[0].check = w;
        s->ep[1].check = w;
        __atomic_store_n(&s->flag, SYMM_FLAG_POISON, __ATOMIC_RELEASE);
    }
}

/* j's slot in the block of a member that j signals in every pattern (j + 1: the first
 * dissemination round, and flat rounds signal everyone), or in mine where that member's
 * segment is not mapped here (right for flat rounds, the only ones of small teams). */
static const symm_sync_slot_t *signalled_slot(const symm_coll_t *c, int j)
{
    int to = (j + 1) % c->n;
    if (c->last_round == SYMM_ROUND_TWO_LEVEL) {
        /* a member signals its leader; a leader first signals the next group's leader */
        const symm_pool_obj_t *p = c->pool;
        int g = p->group[j];
        to = p->lead[g] != j ? p->lead[g] : p->lead[(g + 1) % p->ngroups];
    }
    const symm_chunk_t *ch = c->dup->chunk;
    if (to == c->me || !ch->member_base[to]) return &c->dup->mine[j];
    return (const symm_sync_slot_t *)(ch->member_base[to] + c->dup->block) + j;
}

/* Has member j signalled episode ep to anyone? Read where signalled_slot says, so a
 * timeout names the members that never came, not the partner that waited for them. */
static int arrived(const symm_coll_t *c, int j, uint64_t ep)
{
    return __atomic_load_n(&signalled_slot(c, j)->flag, __ATOMIC_ACQUIRE) >= ep;
}

/* The members that never signalled episode ep, as "1 (world 1), 3 (world 5)". */
static const char *missing(const symm_coll_t *c, uint64_t ep, char *list, size_t size)
{
    size_t len = 0;
    list[0] = '\0';
    for (int pe = 0; pe < c->n && len < size - 32; pe++) {
        if (pe == c->me || arrived(c, pe, ep)) continue;
        len += (size_t)snprintf(list + len, size - len, "%s%d (world %d)", len ? ", " : "", pe,
                                c->world[pe]);
    }
    return list;
}

/* A wait ended without its signal: a timeout (name the members that never arrived) or a
 * failed PE (the wait recorded its message). Either breaks the duplicate. */
static symm_status_t wait_failed(const symm_coll_t *c, uint64_t ep, symm_status_t st,
                                 const symm_wait_t *w)
{
    dup_break(c, st, c->me);
    if (st != SYMM_ERR_TIMEOUT) return st;
    char list[256];
    missing(c, ep, list, sizeof list);
    char buf[96];
    return symm_error_set(SYMM_ERR_TIMEOUT,
                          "%s on %s: timed out after %.1f s (SYMM_TIMEOUT) waiting for "
                          "PE %s; the team is now unusable on every member",
                          c->what, team_name(c->team, buf, sizeof buf), symm_wait_elapsed(w),
                          list[0] ? list : "(all arrived as it gave up)");
}

symm_status_t symm_coll_wait_fail(symm_coll_t *c, int pe, symm_status_t st, double waited)
{
    dup_break(c, st, c->me);
    if (st != SYMM_ERR_TIMEOUT) return st;
    char buf[96];
    return symm_error_set(SYMM_ERR_TIMEOUT,
                          "%s on %s: timed out after %.1f s (SYMM_TIMEOUT) waiting for "
                          "PE %d (world %d); the team is now unusable on every member",
                          c->what, team_name(c->team, buf, sizeof buf), waited, pe,
                          c->world[pe]);
}

/* Member pe's slot says it broke the duplicate (or is further ahead than the protocol
 * allows, which only a poison can be): break it here too and fail with its reason,
 * naming the members still missing from episode ep. */
static symm_status_t met_broken(const symm_coll_t *c, int pe, uint64_t ep, uint64_t w)
{
    symm_status_t why =
        chk_is_err(w) && (w & CHK_BROKEN) ? chk_status(w) : SYMM_ERR_TEAM_BROKEN;
    int origin = chk_is_err(w) && (w & CHK_BROKEN) ? chk_origin(w) : pe;
    if (origin >= c->n) origin = pe;
    dup_break(c, why, origin);
    /* A failed PE: the job's own message names it (the peer only passed it on). */
    symm_ctrl_t *ctrl = symm_g.ctrl;
    if (why == SYMM_ERR_PE_FAILED && ctrl && __atomic_load_n(&ctrl->abort, __ATOMIC_ACQUIRE))
        return symm_error_set(why, "job aborted: %s", ctrl->message);
    char buf[96], list[256];
    missing(c, ep, list, sizeof list);
    return symm_error_set(why,
                          "%s on %s: PE %d (world %d) gave up on this team (%s)%s%s; the team "
                          "is now unusable on every member",
                          c->what, team_name(c->team, buf, sizeof buf), origin,
                          c->world[origin], symm_strerror(why),
                          list[0] ? " waiting for PE " : " before this PE arrived", list);
}

/* ---------------------------------------------------------------- waiting */
/* 1 when member pe signalled episode ep (its check word joined into *acc), 0 not yet,
 * -1 when its slot holds a poison. */
static inline int slot_take(const symm_coll_t *c, int pe, uint64_t ep, uint64_t *acc)
{
    const symm_sync_slot_t *s = &c->dup->mine[pe];
    uint64_t f = __atomic_load_n(&s->flag, __ATOMIC_ACQUIRE);
    if (f < ep) return 0;
    uint64_t w = s->ep[ep & 1].check;
    /* A member is at most one episode ahead of its slowest reader (its own next
     * episode waits for this one), so beyond that is a poison. */
    if (SYMM_UNLIKELY(f > ep + 1 || (chk_is_err(w) && (w & CHK_BROKEN)))) {
        *acc = w;
        return -1;
    }
    *acc = chk_join(*acc, w);
    return 1;
}

/* Before a wait takes its first slot, where members of other groups signal by message
 * (the remote transport applies their words when this PE drains): a signal that an
 * earlier call's drain applied may have been followed by the poison its sender stored
 * when it gave up (dup_break); taking the signal alone would let this PE finish a call
 * that the sender failed. One drain applies what has come since. */
static inline void drain_first(const symm_coll_t *c)
{
    if (c->pool->remote && symm_wait_progress) symm_wait_progress();
}

static symm_status_t wait_one(const symm_coll_t *c, int pe, uint64_t ep, uint64_t *acc)
{
    int s;
    symm_wait_t w = SYMM_WAIT_INIT;
    drain_first(c);
    while ((s = slot_take(c, pe, ep, acc)) == 0) {
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st)) return wait_failed(c, ep, st, &w);
    }
    if (SYMM_UNLIKELY(s < 0)) return met_broken(c, pe, ep, *acc);
    return SYMM_SUCCESS;
}

/* Waits for every member's signal of episode ep, scanning rather than waiting for each
 * in turn so that a timeout can name all the missing ones. */
static symm_status_t wait_all(const symm_coll_t *c, uint64_t ep, uint64_t *acc)
{
    int next = 0; /* members before next have arrived */
    symm_wait_t w = SYMM_WAIT_INIT;
    drain_first(c);
    while (next < c->n) {
        if (next == c->me) {
            next++;
            continue;
        }
        int s = slot_take(c, next, ep, acc);
        if (s > 0) {
            next++;
            continue;
        }
        if (SYMM_UNLIKELY(s < 0)) return met_broken(c, next, ep, *acc);
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st)) return wait_failed(c, ep, st, &w);
    }
    return SYMM_SUCCESS;
}

/* wait_all over the members of group g but me (g >= 0), or over the leaders of the
 * other groups (g < 0): the two waits of a two-level sync's leader. */
static symm_status_t wait_set(const symm_coll_t *c, int g, uint64_t ep, uint64_t *acc)
{
    const symm_pool_obj_t *p = c->pool;
    int next = 0, n = g >= 0 ? c->n : p->ngroups;
    symm_wait_t w = SYMM_WAIT_INIT;
    drain_first(c);
    while (next < n) {
        int j = g >= 0 ? next : p->lead[next];
        if (j == c->me || (g >= 0 && p->group[j] != g)) {
            next++;
            continue;
        }
        int s = slot_take(c, j, ep, acc);
        if (s > 0) {
            next++;
            continue;
        }
        if (SYMM_UNLIKELY(s < 0)) return met_broken(c, j, ep, *acc);
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st)) return wait_failed(c, ep, st, &w);
    }
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- verdicts */
/* Member j's own word of episode ep. After a flat round j signalled me: my own slot of
 * it (where j is in another group, its signal to a member of mine is a message that only
 * that member's waits apply, so its block may not hold it yet). After dissemination, the
 * first signal j sends (to j + 1, where its first round goes); still readable, as nobody
 * can be two episodes ahead of this reader. */
static uint64_t member_word(const symm_coll_t *c, int j, uint64_t ep)
{
    if (j == c->me) return my_word(c);
    if (c->last_round == SYMM_ROUND_FLAT) return c->dup->mine[j].ep[ep & 1].check;
    return signalled_slot(c, j)->ep[ep & 1].check;
}

/* The member that a mismatch names, the same on every member: the lowest one whose word
 * differs from member 0's. */
static int mismatch_member(const symm_coll_t *c, uint64_t ep)
{
    uint64_t w0 = member_word(c, 0, ep);
    for (int j = 1; j < c->n; j++)
        if (member_word(c, j, ep) != w0) return j;
    return -1;
}

/* The same after a two-level sync, where a member hears only its leader: one more flat
 * episode, run by every member alike (all hold the same verdict), carries each member's
 * own word. -1 if that round fails. */
static int mismatch_member_two_level(symm_coll_t *c)
{
    int n = c->n, me = c->me, first = -1;
    uint64_t ep = symm_coll_episode(c), word = my_word(c), acc = word, w0;
    c->last_round = SYMM_ROUND_FLAT;
    for (int k = 1; k < n; k++)
        symm_coll_notify(c, (me + k) % n, ep, word, word);
    if (wait_all(c, ep, &acc)) return -1;
    w0 = me == 0 ? word : c->dup->mine[0].ep[ep & 1].data;
    for (int j = 1; j < n && first < 0; j++)
        if ((j == me ? word : c->dup->mine[j].ep[ep & 1].data) != w0) first = j;
    return first;
}

/* Turns the verdict of episode ep into this member's status and message. */
static symm_status_t verdict_of(symm_coll_t *c, uint64_t ep, uint64_t v)
{
    if (SYMM_LIKELY(!chk_is_err(v))) {
        c->agreed = 1;
        return SYMM_SUCCESS;
    }
    char buf[96];
    const char *team = team_name(c->team, buf, sizeof buf);
    if (v & CHK_MISMATCH) {
        int j = c->last_round == SYMM_ROUND_TWO_LEVEL ? mismatch_member_two_level(c)
                                                      : mismatch_member(c, ep);
        if (j >= 0)
            return symm_error_set(SYMM_ERR_COLL_MISMATCH,
                                  "%s on %s: PE %d (world %d) entered a different collective "
                                  "or passed different arguments than PE 0 (world %d): "
                                  "count, type, op, root or buffer (members must name the "
                                  "same symmetric objects)",
                                  c->what, team, j, c->world[j], c->world[0]);
        return symm_error_set(SYMM_ERR_COLL_MISMATCH,
                              "%s on %s: members entered different collectives or passed "
                              "different arguments (count, type, op, root or buffer)",
                              c->what, team);
    }
    int origin = chk_origin(v);
    symm_status_t st = chk_status(v);
    /* my own message says more than the origin's status would */
    if (origin == c->me || c->local == st) return st;
    if (origin >= c->n) origin = 0;
    char mine[320] = "";
    if (c->local) snprintf(mine, sizeof mine, "; this PE failed too: %s", symm_last_error());
    return symm_error_set(st,
                          "%s on %s: PE %d (world PE %d) failed its part of this call (%s); "
                          "every member returns its status%s",
                          c->what, team, origin, c->world[origin], symm_strerror(st), mine);
}

static symm_status_t verdict(symm_coll_t *c, uint64_t ep, uint64_t v)
{
    symm_status_t st = verdict_of(c, ep, v);
    if (SYMM_UNLIKELY(c->gate != NULL)) {
        symm_coll_gate_open(c->gate, st);
        c->gate = NULL;
    }
    return st;
}

void symm_coll_gate_open(symm_coll_gate_t *g, symm_status_t st)
{
    if (__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) return;
    g->st = st;
    __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &g->open, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void symm_coll_set_gate(symm_coll_t *c, symm_coll_gate_t *g)
{
    if (g && c->n == 1)
        symm_coll_gate_open(g, SYMM_SUCCESS);
    else
        c->gate = g;
}

symm_status_t symm_coll_gate_wait(symm_coll_gate_t *g)
{
    for (int i = 0; i < 2000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++)
        symm_cpu_relax();
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &g->open, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return g->st;
}

/* ---------------------------------------------------------------- episodes */
static symm_status_t sync_flat(symm_coll_t *c)
{
    int n = c->n, me = c->me;
    c->last_round = SYMM_ROUND_FLAT;
    uint64_t ep = symm_coll_episode(c), word = my_word(c), acc = word;
    for (int k = 1; k < n; k++)
        symm_coll_notify(c, (me + k) % n, ep, 0, word);
    CHECK(wait_all(c, ep, &acc));
    return verdict(c, ep, acc);
}

/* Dissemination: log2(n) rounds of one episode; in round r member i signals i + 2^r
 * with what it knows so far. The partners of one member differ in every round, so one
 * slot per source suffices, and after the last round every member has heard, through
 * some chain, from every other: the join of all words is every member's verdict. */
static symm_status_t sync_dissem(symm_coll_t *c)
{
    int n = c->n, me = c->me;
    c->last_round = SYMM_ROUND_DISSEM;
    uint64_t ep = symm_coll_episode(c), acc = my_word(c);
    for (int d = 1; d < n; d <<= 1) {
        symm_coll_notify(c, (me + d) % n, ep, 0, acc);
        CHECK(wait_one(c, (me - d + n) % n, ep, &acc));
    }
    return verdict(c, ep, acc);
}

/* Two levels: members -> their leader (load/store), leader <-> leader (across groups),
 * leader -> its members with the verdict, which is then the join of every word. Each
 * slot still has one write per episode, and nobody finishes an episode before every
 * member has signalled it, so the parity rule of team.h holds. Every signal carries the
 * sender's value in its data word (exchange_two_level). */
static symm_status_t sync_two_level(symm_coll_t *c, uint64_t value, int carry)
{
    const symm_pool_obj_t *p = c->pool;
    int me = c->me, g = p->group[me], lead = p->lead[g];
    uint64_t ep = symm_coll_episode(c), word = my_word(c), acc = word;
    c->last_round = SYMM_ROUND_TWO_LEVEL;
    if (me != lead) {
        symm_coll_notify(c, lead, ep, value, word);
        CHECK(wait_one(c, lead, ep, &acc));
        return verdict(c, ep, acc);
    }
    CHECK(wait_set(c, g, ep, &acc));
    for (int h = 1; h < p->ngroups; h++) {
        int L = p->lead[(g + h) % p->ngroups];
        if (carry && tl_carries(c, g))
            notify_leader_carry(c, L, g, ep, value, acc);
        else
            symm_coll_notify(c, L, ep, value, acc);
    }
    CHECK(wait_set(c, -1, ep, &acc));
    for (int k = 1; k < c->n; k++) {
        int j = (me + k) % c->n;
        if (p->group[j] == g) symm_coll_notify(c, j, ep, value, acc);
    }
    return verdict(c, ep, acc);
}

/* Slots read from another group's leader per get (1 KiB on the stack). */
#define EXCHANGE_WINDOW 16

/* The all-gather form of the exchange on a two-level team: one two-level sync carrying
 * each member's value, after which every value of episode ep sits in its group leader's
 * block (the leaders' own in every leader's), where it stays until every member has
 * signalled ep + 1. Values of my group and the leaders' are read here by load/store; the
 * other groups' in one get of their leader's block each. */
static symm_status_t exchange_two_level(symm_coll_t *c, uint64_t value, uint64_t *recv)
{
    CHECK(sync_two_level(c, value, recv != NULL));
    if (!recv) return SYMM_SUCCESS;
    const symm_pool_obj_t *p = c->pool;
    const symm_chunk_t *ch = c->dup->chunk;
    int n = c->n, me = c->me, lead = p->lead[p->group[me]];
    uint64_t ep = c->dup->episode;
    /* the slots of my leader's block, as written by their members */
    const symm_sync_slot_t *mine = c->dup->mine;
    const symm_sync_slot_t *ldr =
        me == lead ? mine : (const symm_sync_slot_t *)(ch->member_base[lead] + c->dup->block);
    for (int h = 0; h < p->ngroups; h++) {
        int L = p->lead[h], last = L;
        if (h == p->group[me]) {
            for (int j = 0; j < n; j++)
                if (j != me && p->group[j] == h)
                    recv[j] = (j == lead ? mine : ldr)[j].ep[ep & 1].data;
            continue;
        }
        recv[L] = ldr[L].ep[ep & 1].data; /* L signalled my leader (or me) */
        if (tl_carries(c, h)) {           /* and carried its members' words there */
            for (int j = L + 1; j < n; j++)
                if (p->group[j] == h) recv[j] = ldr[j].ep[ep & 1].data;
            continue;
        }
        for (int j = L + 1; j < n; j++)
            last = p->group[j] == h ? j : last;
        /* slots L + 1 .. last of L's block, a window at a time */
        uint8_t *block = symm_team_region_ptr(symm_g.me, ch->member_off[L]) + c->dup->block;
        for (int lo = L + 1; lo <= last; lo += EXCHANGE_WINDOW) {
            symm_sync_slot_t far[EXCHANGE_WINDOW];
            int cnt = last - lo + 1 < EXCHANGE_WINDOW ? last - lo + 1 : EXCHANGE_WINDOW;
            symm_status_t st = symm_transport_remote()->get(
                far, block + (size_t)lo * sizeof *far, (size_t)cnt * sizeof *far, c->world[L]);
            /* the transport failing fails the team, as a signal that cannot be sent does */
            if (st) {
                dup_break(c, st, me);
                return st;
            }
            for (int j = lo; j < lo + cnt; j++)
                if (p->group[j] == h) recv[j] = far[j - lo].ep[ep & 1].data;
        }
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_sync(symm_coll_t *c)
{
    if (c->n == 1) return c->local;
    if (c->pool->two_level && !c->pool->flat_sync) return sync_two_level(c, 0, 0);
    /* One round: every member signals every other one; each waits on its own block,
     * so the cost is one cache-line transfer per pair, in parallel. */
    if (c->n <= symm_config.barrier_flat_max) return sync_flat(c);
    return sync_dissem(c);
}

symm_status_t symm_coll_exchange(symm_coll_t *c, const uint64_t *send, uint64_t value,
                                 uint64_t *recv)
{
    int n = c->n, me = c->me;
    if (recv) recv[me] = send ? send[me] : value;
    if (n == 1) return c->local;
    const int tl = c->pool->two_level && !c->pool->flat_sync;
    if (tl && !send) return exchange_two_level(c, value, recv);
    /* A member with bad arguments cannot know whether its peers' first episode is an
     * exchange or a sync; in a large or two-level team the two differ, so the sync goes
     * first. */
    if ((n > symm_config.barrier_flat_max || tl) && !c->agreed) CHECK(symm_coll_sync(c));
    c->last_round = SYMM_ROUND_FLAT;
    uint64_t ep = symm_coll_episode(c), word = my_word(c), acc = word;
    for (int k = 1; k < n; k++) {
        int pe = (me + k) % n;
        symm_coll_notify(c, pe, ep, send ? send[pe] : value, word);
    }
    CHECK(wait_all(c, ep, &acc));
    CHECK(verdict(c, ep, acc));
    for (int pe = 0; pe < n && recv; pe++)
        if (pe != me) recv[pe] = c->dup->mine[pe].ep[ep & 1].data;
    return SYMM_SUCCESS;
}
