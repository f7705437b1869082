/* team.h — teams, pools and the synchronisation episodes that collectives are built on.
 *
 * Every team is a pool: a plain team is a pool of one duplicate. A pool object holds the
 * member list; each duplicate has a small local record (struct symm_dup: busy flag and
 * episode counter, one cache line) and, on every member, a sync block in that member's
 * team region: one slot per member, written only by that member.
 *
 * A collective runs as a sequence of episodes. In episode e member j writes
 * (e << 24 | tag) into its slot of the block of the peers it signals, with an optional
 * data word in data[e & 1]; receivers wait until the slot's episode reaches e. The data
 * word is double-buffered by parity: a member can be at most one episode ahead of the
 * slowest reader of its data. The tag hashes the collective and its arguments, so
 * members that call different collectives are caught when they meet. */
#ifndef SYMM_TEAM_H
#define SYMM_TEAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/log.h"
#include "core/runtime.h"
#include "symm.h"

typedef struct symm_sync_slot {
    volatile uint64_t flag; /* (episode << 24) | tag */
    volatile uint64_t data[2];
} symm_sync_slot_t;

#define SYMM_TAG_BITS 24
#define SYMM_TAG_MASK ((1u << SYMM_TAG_BITS) - 1)

struct symm_pool_obj;
struct symm_chunk;

typedef struct symm_dup {
    atomic_uint busy;       /* a worker of this PE is inside a collective on it */
    uint32_t index;         /* duplicate number; UINT32_MAX for the pool's control */
    uint64_t episode;       /* episodes begun */
    struct symm_pool_obj *pool;
    struct symm_chunk *chunk;
    uint64_t block;         /* offset of this dup's block from the chunk's base */
    symm_sync_slot_t *mine; /* my block (local address) */
    _Atomic(const char *) busy_what; /* collective holding it, for the BUSY message */
} __attribute__((aligned(64))) symm_dup_t;

/* Duplicates allocated by one creation or growth: their blocks are contiguous on each
 * member, at member_base[j] in j's segment as mapped here. */
typedef struct symm_chunk {
    size_t first, count;
    uint8_t **member_base; /* [n] */
    uint64_t my_off;       /* my team-region allocation */
    symm_dup_t *dups;      /* [count] */
    struct symm_chunk *next;
} symm_chunk_t;

typedef enum { SYMM_KIND_WORLD, SYMM_KIND_NODE, SYMM_KIND_INTERNAL, SYMM_KIND_TEAM, SYMM_KIND_POOL } symm_kind_t;

typedef struct symm_pool_obj {
    uint32_t slot, gen;
    symm_kind_t kind;
    int n;         /* members */
    int me;        /* my team number */
    int *world;    /* [n] team number -> world rank */
    int *index_of; /* [npes] world rank -> team number or -1 */
    uint64_t members_hash;
    size_t block_size;
    symm_dup_t *ctl; /* control duplicate (growth, destroy) */
    _Atomic(symm_dup_t **) table;
    atomic_size_t size;
    symm_chunk_t *chunks;
    void **retired; /* old tables, freed with the pool */
    size_t nretired;
    char *name; /* registry name, or NULL */
    void *gpu;  /* GPU state (src/transport/cuda), or NULL */
} symm_pool_obj_t;

/* ---- handles */
#define SYMM_H_SLOT_SHIFT 40
#define SYMM_H_GEN_SHIFT 32
#define SYMM_H_GEN_MASK 0x7fu
#define SYMM_H_POOL_BIT ((int64_t)1 << 39)
#define SYMM_H_DUP_MASK 0xffffffffu

symm_status_t symm_team_layer_init(void);
void symm_team_layer_finalize(void);

/* Resolves a team handle; records an error naming fn if it is invalid. */
symm_status_t symm_team_lookup(const char *fn, symm_team_t team, symm_pool_obj_t **pool_out,
                               symm_dup_t **dup_out);

/* ---- collective episodes (the interface collectives are written against) */
typedef struct symm_coll {
    symm_pool_obj_t *pool;
    symm_dup_t *dup;
    int n, me;
    const int *world;
    uint32_t tag;
    const char *what;
    symm_team_t team;
} symm_coll_t;

/* Enters a collective on team: validates the handle and membership, claims the
 * duplicate (SYMM_ERR_TEAM_BUSY if another thread holds it) and sets the tag from
 * what and args (a hash of the arguments that every member must pass equal). */
symm_status_t symm_coll_enter(symm_team_t team, const char *what, uint64_t args,
                              symm_coll_t *c);
symm_status_t symm_coll_enter_dup(symm_pool_obj_t *pool, symm_dup_t *dup, symm_team_t team,
                                  const char *what, uint64_t args, symm_coll_t *c);
void symm_coll_leave(symm_coll_t *c);

/* One exchange on the internal world team, for calls that every PE makes with the same
 * arguments (symmetric allocation): every PE passed the same args (a hash; its low bit is
 * not used) and succeeded locally (local_ok), or every PE returns an error: local_fail
 * naming the first PE that failed, or SYMM_ERR_MISMATCH naming one whose args differ. */
symm_status_t symm_agree(const char *fn, uint64_t args, int local_ok,
                         symm_status_t local_fail);

/* Pointer to member pe's copy of a symmetric address. */
static inline void *symm_coll_ptr(const symm_coll_t *c, const void *addr, int pe)
{
    return symm_seg_ptr(addr, c->world[pe]);
}

/* The slot that I write in member pe's block for this duplicate. */
static inline symm_sync_slot_t *symm_coll_peer_slot(const symm_coll_t *c, int pe)
{
    const symm_chunk_t *ch = c->dup->chunk;
    return (symm_sync_slot_t *)(ch->member_base[pe] + c->dup->block) + c->me;
}

/* Starts an episode and returns its number. */
static inline uint64_t symm_coll_episode(symm_coll_t *c) { return ++c->dup->episode; }

/* Signals member pe in episode ep, with a data word. */
static inline void symm_coll_notify(const symm_coll_t *c, int pe, uint64_t ep, uint64_t data)
{
    symm_sync_slot_t *s = symm_coll_peer_slot(c, pe);
    s->data[ep & 1] = data;
    __atomic_store_n(&s->flag, (ep << SYMM_TAG_BITS) | c->tag, __ATOMIC_RELEASE);
}

/* Waits for member pe's signal of episode ep; *data (may be NULL) gets its word. */
symm_status_t symm_coll_wait(const symm_coll_t *c, int pe, uint64_t ep, uint64_t *data);

/* One full synchronisation episode (barrier without quiet). */
symm_status_t symm_coll_sync(symm_coll_t *c);
/* All-to-all of one word per pair in one episode: recv[j] = what j sent me (send[me]
 * for me). send == NULL sends value to everyone (an all-gather). */
symm_status_t symm_coll_exchange(symm_coll_t *c, const uint64_t *send, uint64_t value,
                                 uint64_t *recv);

/* FNV-1a, for tags and argument hashes. */
static inline uint64_t symm_hash64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}
#define SYMM_HASH_INIT 0xcbf29ce484222325ull

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
void symm_slot_release(uint32_t slot);
symm_status_t symm_chunk_alloc(symm_pool_obj_t *p, size_t first, size_t count,
                               symm_chunk_t **out);
symm_status_t symm_chunk_attach(symm_pool_obj_t *p, symm_chunk_t *ch, const uint64_t *offs,
                                int has_ctl);
void symm_chunk_free(symm_chunk_t *ch);
/* Creates a pool of ndups duplicates (plus control) over members through an exchange on
 * the parent collective c; every parent member calls, each with the member list of its
 * own new team (or a list without it: *out = NULL). O(1) rounds. */
symm_status_t symm_team_create_via(symm_coll_t *c, const int *members, int n,
                                   symm_kind_t kind, size_t ndups, symm_pool_obj_t **out);
/* Same over the members only, through the world mailboxes (rank-list teams). */
symm_status_t symm_team_create_list(const int *members, int n, symm_kind_t kind,
                                    size_t ndups, symm_pool_obj_t **out);
/* Grows p by count duplicates via its control duplicate. */
symm_status_t symm_pool_obj_grow(symm_pool_obj_t *p, size_t count);
/* Collective destroy over the members through the control duplicate. */
symm_status_t symm_pool_obj_destroy(symm_pool_obj_t *p, const char *fn);

/* The internal world team that heap allocation synchronises on (never given out). */
extern symm_team_t symm_team_internal;

#endif
