/* team.h — teams, pools and the synchronisation episodes that collectives are built on.
 *
 * Every team is a pool: a plain team is a pool of one duplicate. A pool object holds the
 * member list; each duplicate has a small local record (struct symm_dup: busy flag and
 * episode counter, one cache line) and, on every member, a sync block in that member's
 * team region: one slot per member, written only by that member.
 *
 * A collective runs as a sequence of episodes. In episode e member j stores e into the
 * flag of its slot in the blocks of the peers it signals, after a data word in data[e & 1]
 * and a check word in check[e & 1]; receivers wait until the flag reaches e. Both words
 * are double-buffered by parity: a member can be at most one episode ahead of the
 * slowest reader of its words.
 *
 * The check word is how every member agrees on every outcome. It holds the call's 64-bit
 * fingerprint (the collective and every argument that members must pass equal) or, if
 * the member failed, an error word: its team number and status. The first episode of a
 * call has a pattern that depends on the team's size only (one flat round up to
 * SYMM_BARRIER_FANIN members, dissemination beyond), so a member whose arguments are bad
 * still takes part in it and every member learns, in that episode, the same verdict:
 * success, the lowest-numbered failing member's status, or a mismatch. Later episodes
 * carry the same words, so a failure found mid-call (an output that does not fit) is
 * agreed in the next one. No round is added on the success path.
 *
 * A timeout or a failed PE leaves the duplicate broken: the member that gave up stores a
 * poison (a flag beyond any episode and a broken error word) into every peer's slot, a
 * member that meets it does the same, and every later call on the duplicate fails with
 * SYMM_ERR_TEAM_BROKEN on every member until the team is destroyed. */
#ifndef SYMM_TEAM_H
#define SYMM_TEAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/log.h"
#include "core/runtime.h"
#include "symm.h"
#include "transport/shm/shm.h"

/* One cache line: a signal is one line's transfer, and no two writers share a line. The
 * two words of an episode sit side by side, so that a member of another group sends them
 * in one put. */
typedef struct symm_sync_slot {
    volatile uint64_t flag; /* last episode signalled; SYMM_FLAG_POISON once broken */
    struct {
        volatile uint64_t data;  /* payload word */
        volatile uint64_t check; /* fingerprint or error word */
    } ep[2];                     /* by episode parity */
} __attribute__((aligned(64))) symm_sync_slot_t;

/* A flag beyond any episode: the writer broke the duplicate (see the check word). */
#define SYMM_FLAG_POISON ((uint64_t)1 << 62)

struct symm_pool_obj;
struct symm_chunk;

typedef struct symm_dup {
    atomic_uint busy; /* a worker of this PE is inside a collective on it */
    uint32_t index;   /* duplicate number; UINT32_MAX for the pool's control */
    uint64_t episode; /* episodes begun */
    struct symm_pool_obj *pool;
    struct symm_chunk *chunk;
    uint64_t block;                  /* offset of this dup's block from the chunk's base */
    symm_sync_slot_t *mine;          /* my block (local address) */
    _Atomic(const char *) busy_what; /* collective holding it, for the BUSY message */
    int32_t broken;                  /* 0, or the status that broke it (timeout, failed PE) */
    int32_t broken_origin; /* the member that gave up first, as far as this PE knows */
} __attribute__((aligned(64))) symm_dup_t;

/* Duplicates allocated by one creation or growth: their blocks are contiguous on each
 * member, at member_base[j] in j's segment as mapped here. */
typedef struct symm_chunk {
    size_t first, count;
    uint8_t **member_base; /* [n]; NULL for a member whose segment is not mapped here */
    uint64_t *member_off;  /* [n] team-region offsets of the blocks on each member */
    uint64_t my_off;       /* my team-region allocation */
    symm_dup_t *dups;      /* [count] */
    struct symm_chunk *next;
} symm_chunk_t;

typedef enum {
    SYMM_KIND_WORLD,
    SYMM_KIND_NODE,
    SYMM_KIND_INTERNAL,
    SYMM_KIND_TEAM,
    SYMM_KIND_POOL
} symm_kind_t;

/* The most members outside its group that a member of a two-level team may have for the
 * team's syncs to stay flat (symm_pool_obj_t.flat_sync): as many as every member of a
 * four-member team has when each is its own group. */
#define SYMM_TL_FLAT_REMOTE 3

typedef struct symm_pool_obj {
    uint64_t slot; /* serial number: names it in handles and messages (see handles below) */
    symm_kind_t kind;
    int n;         /* members */
    int me;        /* my team number */
    int *world;    /* [n] team number -> world rank */
    int *index_of; /* [npes] world rank -> team number or -1 */
    /* [n] 1 where the member is reachable by load/store (a peer pointer exists), from
     * the transport at creation; remote counts the members where it is 0. Algorithms
     * go node-local by load/store where the bit is set and by put/signal elsewhere. */
    uint8_t *reach;
    int remote;
    /* [n] each member's group (PEs that share memory: a host) numbered in the order of
     * their first member; two_level is set where the team spans several groups and one
     * of them holds several members: the collectives of coll/two_level.c serve it. */
    int *group;
    int *lead; /* [ngroups] each group's first member: its leader in two-level syncs */
    int ngroups;
    int two_level;
    /* set on a two-level team where no member has more than SYMM_TL_FLAT_REMOTE members
     * outside its group (and the team is within SYMM_BARRIER_FANIN): its syncs and
     * exchanges stay flat (one round, a few messages across groups) rather than two-level
     * (three dependent rounds); the data paths stay two-level */
    int flat_sync;
    uint64_t members_hash;
    size_t block_size;
    symm_dup_t *ctl; /* control duplicate (growth, destroy) */
    _Atomic(symm_dup_t **) table;
    atomic_size_t size;
    symm_chunk_t *chunks;
    void **retired; /* old tables, freed with the pool */
    size_t nretired;
    int keep_region; /* freed without agreement: its blocks stay out of the region */
    char *name;      /* registry name, or NULL */
    void *gpu;       /* GPU state (team/cuda/cuda_pool.h), or NULL */
} symm_pool_obj_t;

/* ---- handles
 * A handle is a non-negative int64_t: bits 0-23 the duplicate index, bit 24 set for a
 * pool handle (its duplicate bits are 0), bits 25-62 the object's serial number. Every
 * object (team or pool) created on a PE gets the next serial of that PE, skipping those
 * whose home slot in the resolution table is taken by a live object; the table keeps at
 * most half its slots live, so at least every other serial goes to a new object. A serial
 * comes back only when the 38-bit counter wraps: a destroyed object's handle can name
 * another object only after more than 2^37 (1.4e11) creations on that PE, days of nothing
 * but creating and destroying. WORLD is serial 0, NODE serial 1. */
#define SYMM_H_DUP_BITS     24
#define SYMM_H_DUP_MASK     0xffffffu /* the most duplicates a pool may have */
#define SYMM_H_POOL_BIT     ((int64_t)1 << SYMM_H_DUP_BITS)
#define SYMM_H_SERIAL_SHIFT (SYMM_H_DUP_BITS + 1)
#define SYMM_H_SERIAL_BITS  (63 - SYMM_H_SERIAL_SHIFT)
/* Never a valid handle: its serial (the last) is never given out. Collectives on the
 * internal team carry it as their team, so messages and user calls never resolve it. */
#define SYMM_H_INTERNAL INT64_MAX

/* What a separately built part keeps per pool (the GPU state of team/cuda, in
 * symm_pool_obj_t.gpu) is looked after through these: pool_quiesce runs before a pool's
 * destroy exchange (nothing of this PE may still use that state), pool_release when the
 * pool object is freed. Both are called only for a pool whose gpu field is set. register
 * returns SYMM_ERR_NO_MEMORY past SYMM_TEAM_POOL_HOOKS_MAX; symm_team_layer_finalize
 * forgets every hook. */
typedef struct symm_team_pool_hooks {
    void (*pool_quiesce)(struct symm_pool_obj *p);
    void (*pool_release)(struct symm_pool_obj *p);
} symm_team_pool_hooks_t;
#define SYMM_TEAM_POOL_HOOKS_MAX 4
symm_status_t symm_team_pool_hooks_register(const symm_team_pool_hooks_t *h);
void symm_team_pool_hooks_unregister(const symm_team_pool_hooks_t *h);
void symm_team_pool_quiesce(struct symm_pool_obj *p);

symm_status_t symm_team_layer_init(void);
void symm_team_layer_finalize(void);
/* SYMM_ERR_TEAM_BUSY (message naming the call) if a thread of this PE is inside a call
 * on a team or creating one. */
symm_status_t symm_team_layer_busy(const char *fn);

/* Resolves a team handle; records an error naming fn if it is invalid. */
symm_status_t symm_team_lookup(const char *fn, symm_team_t team, symm_pool_obj_t **pool_out,
                               symm_dup_t **dup_out);

/* ---- collective episodes (the interface collectives are written against) */
/* Where a call's first verdict is told to other threads of this PE (the worker threads
 * of a _parallel form wait for worker 0's: they touch their duplicates only once every
 * member is known to run the same call with the same worker count). open is a futex
 * word: 0 until st is set. */
typedef struct symm_coll_gate {
    uint32_t open;
    symm_status_t st;
} symm_coll_gate_t;
/* Sets the gate's status and wakes its waiters (once; later calls do nothing). */
void symm_coll_gate_open(symm_coll_gate_t *g, symm_status_t st);
/* Waits until the gate is open; returns its status. */
symm_status_t symm_coll_gate_wait(symm_coll_gate_t *g);

/* The pattern of a sync episode: flat (every member signals every other), dissemination
 * (log2 n rounds), two-level (members to their leader, leaders, leader to members). */
enum { SYMM_ROUND_FLAT = 0, SYMM_ROUND_DISSEM = 1, SYMM_ROUND_TWO_LEVEL = 2 };

typedef struct symm_coll {
    symm_pool_obj_t *pool;
    symm_dup_t *dup;
    int n, me;
    const int *world;
    uint64_t fp;         /* the call's fingerprint (never in the error-word range) */
    symm_status_t local; /* this member's own failure, told to all in the next episode */
    int agreed;          /* the first episode has run: every member passed the same fp */
    const char *what;
    symm_team_t team;
    symm_coll_gate_t *gate; /* opened with the first verdict, if set (NULL at enter) */
    int last_round;         /* the last episode's pattern: SYMM_ROUND_* (sync.c) */
} symm_coll_t;

/* Gives the call a gate to open with its first verdict (at once in a 1-PE team, where
 * no member can disagree). g may be NULL. */
void symm_coll_set_gate(symm_coll_t *c, symm_coll_gate_t *g);

/* Enters a collective on team: validates the handle and membership, claims the
 * duplicate (SYMM_ERR_TEAM_BUSY if another thread holds it, SYMM_ERR_TEAM_BROKEN if a
 * timeout broke it) and sets the fingerprint from what and args (a hash of every
 * argument that members must pass equal, symm_coll_args). A member whose own arguments
 * are bad enters all the same, sets c->local and runs symm_coll_sync once (see
 * symm_coll_fail): only a call that cannot enter the team fails alone. */
symm_status_t symm_coll_enter(symm_team_t team, const char *what, uint64_t args,
                              symm_coll_t *c);
/* symm_coll_enter in two steps, for calls whose checks need the team's shape (c->n,
 * c->me) before the fingerprint is known: the handle is resolved once, and the
 * fingerprint computed once, by symm_coll_set_args, which must come before the call's
 * first episode (symm_coll_sync, _exchange or _fail). symm_coll_begin also checks that
 * symm is initialised, naming what in the error. */
symm_status_t symm_coll_begin(symm_team_t team, const char *what, symm_coll_t *c);
void symm_coll_set_args(symm_coll_t *c, uint64_t args);
symm_status_t symm_coll_enter_dup(symm_pool_obj_t *pool, symm_dup_t *dup, symm_team_t team,
                                  const char *what, uint64_t args, symm_coll_t *c);
void symm_coll_leave(symm_coll_t *c);

/* For a member whose arguments failed its own checks (st, message recorded): records st
 * as its local status and runs the validity episode that its peers' first episode
 * meets, so that every member returns the same status, which it returns (the caller
 * still leaves the collective). */
symm_status_t symm_coll_fail(symm_coll_t *c, symm_status_t st);

/* A wait of a collective outside its episodes (for data that a member announces by
 * store64 on the remote transport) gave up after waited seconds with st (a timeout or
 * a failed PE) while member pe had not come: breaks the duplicate as an episode's wait
 * does, so that every member fails instead of waiting in turn, and returns the error
 * (which the call returns at once, running no further episode). */
symm_status_t symm_coll_wait_fail(symm_coll_t *c, int pe, symm_status_t st, double waited);

/* One episode on the internal world team, for calls that every PE makes with the same
 * arguments (symmetric allocation): every PE passed the same args (a hash) and succeeded
 * locally (local_ok), or every PE returns an error: the status local_fail of the
 * lowest-numbered PE that failed (naming it), or SYMM_ERR_MISMATCH. */
symm_status_t symm_agree(const char *fn, uint64_t args, int local_ok, symm_status_t local_fail);

/* Pointer to member pe's copy of a symmetric address. */
static inline void *symm_coll_ptr(const symm_coll_t *c, const void *addr, int pe)
{
    return symm_shm_ptr(addr, c->world[pe]);
}

/* The slot that I write in member pe's block for this duplicate. */
static inline symm_sync_slot_t *symm_coll_peer_slot(const symm_coll_t *c, int pe)
{
    const symm_chunk_t *ch = c->dup->chunk;
    return (symm_sync_slot_t *)(ch->member_base[pe] + c->dup->block) + c->me;
}

/* Starts an episode and returns its number. */
static inline uint64_t symm_coll_episode(symm_coll_t *c)
{
    return ++c->dup->episode;
}

/* symm_coll_notify for a member whose segment is not mapped here: the same words
 * through the remote transport, flag last (sync.c). */
void symm_coll_notify_remote(const symm_coll_t *c, int pe, uint64_t ep, uint64_t data,
                             uint64_t check);

/* Signals member pe in episode ep, with a data word and a check word. */
static inline void symm_coll_notify(const symm_coll_t *c, int pe, uint64_t ep, uint64_t data,
                                    uint64_t check)
{
    if (SYMM_UNLIKELY(!c->dup->chunk->member_base[pe])) {
        symm_coll_notify_remote(c, pe, ep, data, check);
        return;
    }
    symm_sync_slot_t *s = symm_coll_peer_slot(c, pe);
    s->ep[ep & 1].data = data;
    s->ep[ep & 1].check = check;
    __atomic_store_n(&s->flag, ep, __ATOMIC_RELEASE);
}

/* One full synchronisation episode (barrier without quiet). Carries c->local: returns
 * SYMM_SUCCESS only if every member succeeded so far and passed the same fingerprint,
 * else the status every member returns. On a two-level team (pool->two_level) the
 * members of a group signal its leader by load/store, the leaders signal each other
 * across groups, and each tells its group the verdict: one transfer per pair of groups
 * instead of one per pair of members. */
symm_status_t symm_coll_sync(symm_coll_t *c);
/* All-to-all of one word per pair: recv[j] = what j sent me (send[me] for me). send ==
 * NULL sends value to everyone (an all-gather); recv may be NULL (a member that
 * failed: it still takes part). On a two-level team the all-gather is one two-level sync
 * carrying the values, read back from the group leaders' blocks; otherwise one flat
 * episode (on a two-level team preceded by a sync as a call's first episode); as a call's first
 * episode in a team larger than SYMM_BARRIER_FANIN it is preceded by a sync, so that the
 * first episode's pattern never depends on arguments. Agrees like symm_coll_sync. */
symm_status_t symm_coll_exchange(symm_coll_t *c, const uint64_t *send, uint64_t value,
                                 uint64_t *recv);

/* FNV-1a, for member lists and allocation arguments. */
static inline uint64_t symm_hash64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}
#define SYMM_HASH_INIT 0xcbf29ce484222325ull

/* The murmur3 finaliser: a bijective 64-bit mix with full avalanche. */
static inline uint64_t symm_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Hash of a collective's arguments that every member must pass equal, folded into the
 * call's 64-bit fingerprint. Chained mixes: two argument sets that collide take a
 * generic 2^32 search, not arithmetic (the terms are not combined linearly). */
static inline uint64_t symm_coll_args(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t h = symm_mix64(a ^ 0x9e3779b97f4a7c15ull);
    h = symm_mix64(h ^ b);
    h = symm_mix64(h ^ c);
    return symm_mix64(h ^ d);
}

/* Heap offset of a symmetric address for a fingerprint (0 for NULL): collectives reach
 * a peer's buffer through the caller's own address, so members must name the same
 * object. */
static inline uint64_t symm_coll_off(const void *p)
{
    return p ? (uint64_t)((const uint8_t *)p - symm_g.seg[symm_g.me]) : 0;
}

/* ---- object internals shared by team.c, pool.c and registry.c */
symm_team_t symm_team_handle(const symm_pool_obj_t *p, uint32_t dup, int pool_bit);
symm_pool_obj_t *symm_handle_resolve(int64_t h);
static inline symm_dup_t *symm_pool_dup_at(symm_pool_obj_t *p, size_t i)
{
    size_t size = atomic_load_explicit(&p->size, memory_order_acquire);
    if (i >= size) return NULL;
    symm_dup_t **t = atomic_load_explicit(&p->table, memory_order_acquire);
    return t[i];
}
symm_status_t symm_pool_obj_new(symm_kind_t kind, const int *world, int n,
                                symm_pool_obj_t **out);
void symm_pool_obj_free(symm_pool_obj_t *p);
symm_status_t symm_pool_obj_register(symm_pool_obj_t *p);
void symm_slot_release(uint64_t slot);
symm_status_t symm_chunk_alloc(symm_pool_obj_t *p, size_t first, size_t count,
                               symm_chunk_t **out);
symm_status_t symm_chunk_attach(symm_pool_obj_t *p, symm_chunk_t *ch, const uint64_t *offs,
                                int has_ctl);
void symm_chunk_free(symm_chunk_t *ch);
/* Creates a pool of ndups duplicates (plus control) over members through an exchange on
 * the parent collective c; every parent member calls, each with the member list of its
 * own new team (or a list without it: *out = NULL). O(1) rounds. */
symm_status_t symm_team_create_via(symm_coll_t *c, const int *members, int n, symm_kind_t kind,
                                   size_t ndups, symm_pool_obj_t **out);
/* Same over the members only, through the world mailboxes (rank-list teams). */
symm_status_t symm_team_create_list(const int *members, int n, symm_kind_t kind, size_t ndups,
                                    symm_pool_obj_t **out);
/* Grows p to target duplicates via its control duplicate (collective; local: this
 * member's own failure, told to the others). */
symm_status_t symm_pool_obj_grow(symm_pool_obj_t *p, size_t target, symm_status_t local);
/* Collective destroy over the members through the control duplicate. */
symm_status_t symm_pool_obj_destroy(symm_pool_obj_t *p, const char *fn);

/* The internal world team that heap allocation synchronises on. It has no handle that
 * resolves (user calls on any handle never reach it); internal code enters it here. */
symm_status_t symm_team_internal_enter(const char *what, uint64_t args, symm_coll_t *c);
/* A barrier on the internal team (earlier stores visible to every PE before anyone
 * leaves), for symmetric allocation. */
symm_status_t symm_team_internal_barrier(void);

#endif
