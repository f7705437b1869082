/* team.c — team and pool objects: handles, the slot table that resolves them without a
 * lock, creation (predefined, split, 2-D split, rank list), pools and their growth,
 * destruction, and the team-numbering queries. */
#include "team/team.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

/* ---------------------------------------------------------------- slot table */
/* Objects are found by serial number in a power-of-two table: serial s lives in slot
 * s & mask, and a serial is given out only when its slot is free, so a slot holds at
 * most one object and a reader indexes once with no lock (only creation, destruction
 * and growth take slot_lock). The table doubles before it is half full; old tables stay
 * until finalize, since a reader may still be indexing one. */
#define SLOT_TABLE_MIN 1024
/* Serials run 0 .. SERIAL_END - 1, then again from 2 (WORLD and NODE never go); the
 * last one, SERIAL_END, is SYMM_H_INTERNAL's and never given out. */
#define SERIAL_END          (((uint64_t)1 << SYMM_H_SERIAL_BITS) - 1)
#define SERIAL_FIRST_REUSED 2

typedef struct slot_table {
    uint64_t mask;
    struct slot_table *older; /* retired, freed at finalize */
    _Atomic(symm_pool_obj_t *) slot[];
} slot_table_t;

static _Atomic(slot_table_t *) slots;
static uint64_t serial_next, slots_live;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

/* The internal world team: outside the table, so that no handle reaches it. */
static symm_pool_obj_t *internal_obj;

static slot_table_t *slot_table_new(uint64_t size)
{
    if (size > ((uint64_t)1 << 40) || size > (SIZE_MAX - sizeof(slot_table_t)) / sizeof(void *))
        return NULL;
    slot_table_t *t = calloc(1, sizeof *t + (size_t)size * sizeof t->slot[0]);
    if (t) t->mask = size - 1;
    return t;
}

/* Doubles the table (slot_lock held). Two live serials share no slot in the old table,
 * so they share none in the new one, whose mask keeps the old one's bits. */
static symm_status_t slot_table_grow(slot_table_t *t)
{
    slot_table_t *g = slot_table_new(2 * (t->mask + 1));
    if (!g)
        return symm_error_set(SYMM_ERR_NO_MEMORY,
                              "team slot table for %llu live teams "
                              "and pools",
                              (unsigned long long)slots_live + 1);
    for (uint64_t i = 0; i <= t->mask; i++) {
        symm_pool_obj_t *p = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (p) atomic_init(&g->slot[p->slot & g->mask], p);
    }
    g->older = t;
    atomic_store_explicit(&slots, g, memory_order_release);
    return SYMM_SUCCESS;
}

/* Gives p the next serial whose slot is free and makes it resolvable. */
static symm_status_t slot_insert(symm_pool_obj_t *p)
{
    pthread_mutex_lock(&slot_lock);
    symm_status_t st = SYMM_SUCCESS;
    slot_table_t *t = atomic_load_explicit(&slots, memory_order_relaxed);
    if (!t) {
        if (!(t = slot_table_new(SLOT_TABLE_MIN)))
            st = symm_error_set(SYMM_ERR_NO_MEMORY, "team slot table");
        else
            atomic_store_explicit(&slots, t, memory_order_release);
    } else if (2 * (slots_live + 1) > t->mask + 1) {
        st = slot_table_grow(t);
        t = atomic_load_explicit(&slots, memory_order_relaxed);
    }
    if (st) {
        pthread_mutex_unlock(&slot_lock);
        return st;
    }
    /* At most half the slots are taken: a free one comes within mask/2 + 1 serials. */
    uint64_t s;
    do {
        s = serial_next;
        serial_next = s + 1 < SERIAL_END ? s + 1 : SERIAL_FIRST_REUSED;
    } while (atomic_load_explicit(&t->slot[s & t->mask], memory_order_relaxed));
    p->slot = s;
    slots_live++;
    /* A reader that finds p in the slot sees its serial and every field set before. */
    atomic_store_explicit(&t->slot[s & t->mask], p, memory_order_release);
    pthread_mutex_unlock(&slot_lock);
    return SYMM_SUCCESS;
}

void symm_slot_release(uint64_t slot)
{
    pthread_mutex_lock(&slot_lock);
    slot_table_t *t = atomic_load_explicit(&slots, memory_order_relaxed);
    _Atomic(symm_pool_obj_t *) *e = t ? &t->slot[slot & t->mask] : NULL;
    symm_pool_obj_t *p = e ? atomic_load_explicit(e, memory_order_relaxed) : NULL;
    if (p && p->slot == slot) {
        atomic_store_explicit(e, NULL, memory_order_release);
        slots_live--;
    }
    pthread_mutex_unlock(&slot_lock);
}

symm_team_t symm_team_handle(const symm_pool_obj_t *p, uint32_t dup, int pool_bit)
{
    return (int64_t)(p->slot << SYMM_H_SERIAL_SHIFT) | (pool_bit ? SYMM_H_POOL_BIT : 0) |
           (int64_t)(dup & SYMM_H_DUP_MASK);
}

/* The object a handle's serial names, or NULL; O(1), no lock. */
static inline symm_pool_obj_t *resolve_serial(int64_t h)
{
    if (h < 0 || !symm_g.initialized) return NULL;
    if ((h & SYMM_H_POOL_BIT) && (h & SYMM_H_DUP_MASK)) return NULL; /* not one we made */
    uint64_t serial = (uint64_t)h >> SYMM_H_SERIAL_SHIFT;
    slot_table_t *t = atomic_load_explicit(&slots, memory_order_acquire);
    if (!t) return NULL;
    symm_pool_obj_t *p = atomic_load_explicit(&t->slot[serial & t->mask], memory_order_acquire);
    if (!p || p->slot != serial) return NULL;
    return p;
}

/* Resolves a handle to its object (any kind) or NULL: a team handle must name one of
 * the object's duplicates, a pool handle a pool (never WORLD, NODE or a team, which a
 * pool call would otherwise grow or destroy). */
symm_pool_obj_t *symm_handle_resolve(int64_t h)
{
    symm_pool_obj_t *p = resolve_serial(h);
    if (!p) return NULL;
    if (h & SYMM_H_POOL_BIT) return p->kind == SYMM_KIND_POOL ? p : NULL;
    return symm_pool_dup_at(p, (size_t)(h & SYMM_H_DUP_MASK)) ? p : NULL;
}

symm_status_t symm_team_lookup(const char *fn, symm_team_t team, symm_pool_obj_t **pool_out,
                               symm_dup_t **dup_out)
{
    symm_pool_obj_t *p = resolve_serial(team);
    if (SYMM_UNLIKELY(!p || (team & SYMM_H_POOL_BIT)))
        return symm_error_set(SYMM_ERR_TEAM_INVALID,
                              "%s: team handle 0x%llx is invalid or was destroyed%s", fn,
                              (unsigned long long)team,
                              (p && (team & SYMM_H_POOL_BIT) && p->kind == SYMM_KIND_POOL)
                                  ? " (it is a pool: use symm_pool_team(pool, i))"
                                  : "");
    symm_dup_t *d = symm_pool_dup_at(p, (size_t)(team & SYMM_H_DUP_MASK));
    if (SYMM_UNLIKELY(!d))
        return symm_error_set(SYMM_ERR_TEAM_INVALID,
                              "%s: team handle 0x%llx names a "
                              "duplicate beyond its pool",
                              fn, (unsigned long long)team);
    *pool_out = p;
    *dup_out = d;
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- objects */
void symm_chunk_free(symm_chunk_t *ch)
{
    free(ch->member_base);
    free(ch->member_off);
    free(ch->dups);
    free(ch);
}

/* ---------------------------------------------------------------- pool hooks */
static const symm_team_pool_hooks_t *pool_hooks[SYMM_TEAM_POOL_HOOKS_MAX];
static int npool_hooks;

symm_status_t symm_team_pool_hooks_register(const symm_team_pool_hooks_t *h)
{
    if (npool_hooks == SYMM_TEAM_POOL_HOOKS_MAX)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "pool hooks: %d registered already",
                              npool_hooks);
    pool_hooks[npool_hooks++] = h;
    return SYMM_SUCCESS;
}

void symm_team_pool_hooks_unregister(const symm_team_pool_hooks_t *h)
{
    for (int i = 0; i < npool_hooks; i++)
        if (pool_hooks[i] == h) {
            pool_hooks[i] = pool_hooks[--npool_hooks];
            pool_hooks[npool_hooks] = NULL;
            return;
        }
}

void symm_team_pool_quiesce(symm_pool_obj_t *p)
{
    if (!p->gpu) return;
    for (int i = 0; i < npool_hooks; i++)
        if (pool_hooks[i]->pool_quiesce) pool_hooks[i]->pool_quiesce(p);
}

static void pool_release_hooks(symm_pool_obj_t *p)
{
    if (!p->gpu) return;
    for (int i = 0; i < npool_hooks; i++)
        if (pool_hooks[i]->pool_release) pool_hooks[i]->pool_release(p);
}

void symm_pool_obj_free(symm_pool_obj_t *p)
{
    if (!p) return;
    pool_release_hooks(p);
    symm_chunk_t *ch = p->chunks;
    while (ch) {
        symm_chunk_t *next = ch->next;
        if (!p->keep_region) symm_team_region_free(ch->my_off);
        symm_chunk_free(ch);
        ch = next;
    }
    for (size_t i = 0; i < p->nretired; i++)
        free(p->retired[i]);
    free(p->retired);
    free(atomic_load(&p->table));
    free(p->world);
    free(p->index_of);
    free(p->reach);
    free(p->group);
    free(p->lead);
    free(p->name);
    free(p);
}

/* Numbers the members' groups by first appearance in team order (the same on every
 * member: symm_g.group is the job's), so that every member picks the same algorithms. */
static void pool_groups(symm_pool_obj_t *p)
{
    int largest = 0, smallest = p->n;
    p->ngroups = 0;
    for (int i = 0; i < p->n; i++) {
        int j = 0;
        while (j < i && symm_g.group[p->world[j]] != symm_g.group[p->world[i]])
            j++;
        if (j == i) p->lead[p->ngroups] = i;
        p->group[i] = j < i ? p->group[j] : p->ngroups++;
    }
    for (int g = 0; g < p->ngroups; g++) {
        int k = 0;
        for (int i = 0; i < p->n; i++)
            k += p->group[i] == g;
        largest = k > largest ? k : largest;
        smallest = k < smallest ? k : smallest;
    }
    p->two_level = p->ngroups > 1 && largest > 1;
    p->flat_sync = p->two_level && p->n - smallest <= SYMM_TL_FLAT_REMOTE &&
                   p->n <= symm_config.barrier_flat_max;
}

/* A pool object for the given members (world ranks, in team order), without state. */
symm_status_t symm_pool_obj_new(symm_kind_t kind, const int *world, int n,
                                symm_pool_obj_t **out)
{
    symm_pool_obj_t *p = calloc(1, sizeof *p);
    if (!p) return symm_error_set(SYMM_ERR_NO_MEMORY, "team object");
    p->kind = kind;
    p->n = n;
    p->me = -1;
    p->world = malloc((size_t)n * sizeof(int));
    p->index_of = malloc((size_t)symm_g.npes * sizeof(int));
    p->reach = malloc((size_t)n);
    p->group = malloc((size_t)n * sizeof(int));
    p->lead = malloc((size_t)n * sizeof(int));
    if (!p->world || !p->index_of || !p->reach || !p->group || !p->lead) {
        symm_pool_obj_free(p);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "team of %d members", n);
    }
    for (int i = 0; i < symm_g.npes; i++)
        p->index_of[i] = -1;
    uint64_t h = SYMM_HASH_INIT;
    for (int i = 0; i < n; i++) {
        p->world[i] = world[i];
        p->index_of[world[i]] = i;
        p->reach[i] = (uint8_t)symm_transport_reachable(world[i]);
        p->remote += !p->reach[i];
        h = symm_hash64(h, (uint64_t)world[i]);
    }
    p->members_hash = h;
    p->me = p->index_of[symm_g.me];
    pool_groups(p);
    p->block_size = ((size_t)n * sizeof(symm_sync_slot_t) + 63) & ~(size_t)63;
    *out = p;
    return SYMM_SUCCESS;
}

/* Allocates my blocks for count duplicates (plus the control one if with_ctl). */
symm_status_t symm_chunk_alloc(symm_pool_obj_t *p, size_t first, size_t count,
                               symm_chunk_t **out)
{
    symm_chunk_t *ch = calloc(1, sizeof *ch);
    if (!ch) return symm_error_set(SYMM_ERR_NO_MEMORY, "pool chunk");
    ch->first = first;
    ch->count = count;
    ch->member_base = calloc((size_t)p->n, sizeof(uint8_t *));
    ch->member_off = calloc((size_t)p->n, sizeof(uint64_t));
    ch->dups = aligned_alloc(64, count * sizeof(symm_dup_t));
    if (!ch->member_base || !ch->member_off || !ch->dups) {
        symm_chunk_free(ch);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "pool of %zu duplicates", count);
    }
    if (count > SIZE_MAX / p->block_size) {
        symm_chunk_free(ch);
        return symm_error_set(SYMM_ERR_OVERFLOW, "pool of %zu duplicates", count);
    }
    symm_status_t st = symm_team_region_alloc(count * p->block_size, &ch->my_off);
    if (st) {
        symm_chunk_free(ch);
        return st;
    }
    uint8_t *mine = symm_team_region_ptr(symm_g.me, ch->my_off);
    memset(ch->dups, 0, count * sizeof(symm_dup_t));
    for (size_t i = 0; i < count; i++) {
        symm_dup_t *d = &ch->dups[i];
        atomic_init(&d->busy, 0);
        d->pool = p;
        d->chunk = ch;
        d->block = i * p->block_size;
        d->mine = (symm_sync_slot_t *)(mine + d->block);
        d->index = (uint32_t)(first + i);
    }
    *out = ch;
    return SYMM_SUCCESS;
}

/* Records the members' offsets of a chunk and adds its duplicates to the table. The
 * first duplicate of the first chunk of a pool is its control duplicate. */
symm_status_t symm_chunk_attach(symm_pool_obj_t *p, symm_chunk_t *ch, const uint64_t *offs,
                                int has_ctl)
{
    for (int j = 0; j < p->n; j++) {
        ch->member_off[j] = offs[j];
        ch->member_base[j] = p->reach[j] ? symm_team_region_ptr(p->world[j], offs[j]) : NULL;
    }
    size_t skip = has_ctl ? 1 : 0;
    size_t old = atomic_load(&p->size), add = ch->count - skip;
    symm_dup_t **t = malloc((old + add) * sizeof *t);
    if (!t) return symm_error_set(SYMM_ERR_NO_MEMORY, "pool table of %zu", old + add);
    symm_dup_t **ot = atomic_load(&p->table);
    if (old) memcpy(t, ot, old * sizeof *t);
    for (size_t i = 0; i < add; i++) {
        t[old + i] = &ch->dups[skip + i];
        t[old + i]->index = (uint32_t)(old + i);
    }
    if (has_ctl) {
        p->ctl = &ch->dups[0];
        p->ctl->index = UINT32_MAX;
    }
    /* Readers may be using the old table right now (growth while duplicates run), so it
     * is retired, not freed, until the pool goes. */
    if (ot) {
        void **r = realloc(p->retired, (p->nretired + 1) * sizeof *r);
        if (!r) {
            free(t);
            return symm_error_set(SYMM_ERR_NO_MEMORY, "pool table");
        }
        p->retired = r;
        p->retired[p->nretired++] = ot;
    }
    atomic_store_explicit(&p->table, t, memory_order_release);
    atomic_store_explicit(&p->size, old + add, memory_order_release);
    ch->next = p->chunks;
    p->chunks = ch;
    return SYMM_SUCCESS;
}

symm_status_t symm_pool_obj_register(symm_pool_obj_t *p)
{
    return slot_insert(p);
}

/* ---------------------------------------------------------------- predefined teams */
/* A world team object of the given kind; in the slot table if registered. */
static symm_status_t make_predefined(symm_kind_t kind, int registered, symm_pool_obj_t **out)
{
    int *all = malloc((size_t)symm_g.npes * sizeof(int)), n = 0;
    if (!all) return symm_error_set(SYMM_ERR_NO_MEMORY, "world team");
    /* NODE: the PEs that share memory with this one (its group under MPI) */
    for (int i = 0; i < symm_g.npes; i++)
        if (kind != SYMM_KIND_NODE || symm_transport_reachable(i)) all[n++] = i;
    symm_pool_obj_t *p;
    symm_status_t st = symm_pool_obj_new(kind, all, n, &p);
    free(all);
    CHECK(st);
    /* Every PE makes the predefined teams first, in the same order, on an empty team
     * region: the offsets agree without an exchange (NODE, whose size differs between
     * groups, comes last). */
    symm_chunk_t *ch;
    if ((st = symm_chunk_alloc(p, 0, 2, &ch))) {
        symm_pool_obj_free(p);
        return st;
    }
    uint64_t *offs = malloc((size_t)symm_g.npes * sizeof *offs);
    if (!offs) {
        symm_chunk_free(ch);
        symm_pool_obj_free(p);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "world team");
    }
    for (int i = 0; i < n; i++)
        offs[i] = ch->my_off;
    st = symm_chunk_attach(p, ch, offs, 1);
    free(offs);
    if (st) {
        symm_team_region_free(ch->my_off);
        symm_chunk_free(ch);
        symm_pool_obj_free(p);
        return st;
    }
    if (registered && (st = symm_pool_obj_register(p))) {
        symm_pool_obj_free(p);
        return st;
    }
    *out = p;
    return SYMM_SUCCESS;
}

/* Makes a predefined team, which must get the public handle expect. */
static symm_status_t make_public(symm_kind_t kind, symm_team_t expect)
{
    symm_pool_obj_t *p;
    CHECK(make_predefined(kind, 1, &p));
    symm_team_t h = symm_team_handle(p, 0, 0);
    if (h != expect)
        return symm_error_set(SYMM_ERR_SYSTEM, "predefined team got handle 0x%llx, not 0x%llx",
                              (unsigned long long)h, (unsigned long long)expect);
    return SYMM_SUCCESS;
}

symm_status_t symm_team_layer_init(void)
{
    symm_status_t st;
    if ((st = make_public(SYMM_KIND_WORLD, SYMM_TEAM_WORLD)) ||
        (st = make_predefined(SYMM_KIND_INTERNAL, 0, &internal_obj)) ||
        (st = make_public(SYMM_KIND_NODE, SYMM_TEAM_NODE))) {
        /* A later symm_init must find the slot table empty, or WORLD gets another serial. */
        symm_team_layer_finalize();
        return st;
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_team_internal_enter(const char *what, uint64_t args, symm_coll_t *c)
{
    SYMM_REQUIRE_INIT();
    if (SYMM_UNLIKELY(!internal_obj))
        return symm_error_set(SYMM_ERR_NOT_INITIALIZED, "%s: no internal team", what);
    return symm_coll_enter_dup(internal_obj, symm_pool_dup_at(internal_obj, 0), SYMM_H_INTERNAL,
                               what, args, c);
}

symm_status_t symm_team_internal_barrier(void)
{
    symm_coll_t c;
    CHECK(symm_team_internal_enter("barrier", 0, &c));
    symm_shm_fence(); /* quiet: earlier stores are visible before anyone leaves */
    symm_status_t st = symm_coll_sync(&c);
    symm_coll_leave(&c);
    return st;
}

void symm_registry_finalize(void);

/* SYMM_ERR_TEAM_BUSY naming the call if a thread of this PE is inside one on p. */
static symm_status_t pool_obj_busy(const char *fn, symm_pool_obj_t *p)
{
    size_t size = atomic_load(&p->size);
    for (size_t i = 0; i <= size; i++) {
        symm_dup_t *d = i < size ? symm_pool_dup_at(p, i) : p->ctl;
        if (!d || !atomic_load(&d->busy)) continue;
        const char *what = atomic_load_explicit(&d->busy_what, memory_order_relaxed);
        char buf[96];
        symm_team_t h = p == internal_obj
                            ? SYMM_H_INTERNAL
                            : symm_team_handle(p, (uint32_t)(i < size ? i : 0), 0);
        return symm_error_set(SYMM_ERR_TEAM_BUSY,
                              "%s: another thread of this PE is inside %s on %s; finalize "
                              "only once every call has returned (nothing was changed)",
                              fn, what ? what : "a call",
                              symm_team_describe(h, buf, sizeof buf));
    }
    return SYMM_SUCCESS;
}

/* Whether any thread of this PE is inside a call on a team: finalize must not free what
 * it uses. A scan of every duplicate (finalize only; no counter on the hot path). */
symm_status_t symm_team_layer_busy(const char *fn)
{
    pthread_mutex_lock(&slot_lock);
    symm_status_t st = internal_obj ? pool_obj_busy(fn, internal_obj) : SYMM_SUCCESS;
    slot_table_t *t = atomic_load_explicit(&slots, memory_order_relaxed);
    for (uint64_t i = 0; t && i <= t->mask && !st; i++) {
        symm_pool_obj_t *p = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (p) st = pool_obj_busy(fn, p);
    }
    pthread_mutex_unlock(&slot_lock);
    if (!st && pthread_mutex_trylock(&symm_g.create_lock) == 0) {
        pthread_mutex_unlock(&symm_g.create_lock);
    } else if (!st) {
        st = symm_error_set(SYMM_ERR_TEAM_BUSY,
                            "%s: another thread of this PE is creating a "
                            "team; finalize only once every call has returned",
                            fn);
    }
    return st;
}

void symm_team_layer_finalize(void)
{
    symm_registry_finalize();
    pthread_mutex_lock(&slot_lock);
    slot_table_t *t = atomic_load_explicit(&slots, memory_order_relaxed);
    if (t)
        for (uint64_t i = 0; i <= t->mask; i++) {
            symm_pool_obj_t *p = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (p) symm_pool_obj_free(p);
        }
    while (t) {
        slot_table_t *older = t->older;
        free(t);
        t = older;
    }
    atomic_store_explicit(&slots, NULL, memory_order_release);
    serial_next = slots_live = 0;
    symm_pool_obj_free(internal_obj);
    internal_obj = NULL;
    pthread_mutex_unlock(&slot_lock);
    npool_hooks = 0; /* a later symm_init starts without them */
}

/* ---------------------------------------------------------------- creation */
symm_status_t symm_agree(const char *fn, uint64_t args, int local_ok, symm_status_t local_fail)
{
    symm_coll_t c;
    CHECK(symm_team_internal_enter(fn, args, &c));
    c.local = local_ok ? SYMM_SUCCESS : local_fail;
    symm_status_t st = symm_coll_sync(&c);
    symm_coll_leave(&c);
    if (st == SYMM_ERR_COLL_MISMATCH) {
        char why[512];
        snprintf(why, sizeof why, "%s", symm_last_error());
        st = symm_error_set(SYMM_ERR_MISMATCH,
                            "%s: PEs made different calls (symmetric "
                            "allocation needs the same calls with the same arguments, in the "
                            "same order, on every PE): %s",
                            fn, why);
    }
    return st;
}

/* Creates a pool over `members` with ndups duplicates, exchanging offsets through the
 * collective c of a parent team (every parent member calls; non-members of the new team
 * allocate nothing and get *out = NULL). One exchange episode: O(1) rounds. A local
 * failure travels in the exchange, so every parent member returns the same status. */
symm_status_t symm_team_create_via(symm_coll_t *c, const int *members, int n, symm_kind_t kind,
                                   size_t ndups, symm_pool_obj_t **out)
{
    symm_status_t st = SYMM_SUCCESS;
    symm_pool_obj_t *p = NULL;
    symm_chunk_t *ch = NULL;
    uint64_t mine = 0;
    int member = 0;
    for (int i = 0; i < n; i++)
        member |= members[i] == symm_g.me;
    if (member) {
        st = symm_pool_obj_new(kind, members, n, &p);
        if (!st) st = symm_chunk_alloc(p, 0, ndups + 1, &ch);
        if (!st) mine = ch->my_off;
    }
    uint64_t *recv = malloc((size_t)c->n * sizeof *recv);
    if (!recv && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "team creation");
    /* Everyone takes part in the exchange even after a local failure, so that no member
     * waits for ever; a failure anywhere fails the creation everywhere. */
    c->local = st;
    st = symm_coll_exchange(c, NULL, mine, recv);
    c->local = SYMM_SUCCESS;
    if (st) goto out_free;
    if (!member) {
        free(recv);
        *out = NULL;
        return SYMM_SUCCESS;
    }
    {
        uint64_t *offs = malloc((size_t)n * sizeof *offs);
        if (!offs) {
            st = symm_error_set(SYMM_ERR_NO_MEMORY, "team creation");
            goto out_free;
        }
        for (int i = 0; i < n; i++)
            offs[i] = recv[c->pool->index_of[members[i]]];
        st = symm_chunk_attach(p, ch, offs, 1);
        free(offs);
        if (st) goto out_free;
        ch = NULL;
    }
    free(recv);
    if ((st = symm_pool_obj_register(p))) {
        symm_pool_obj_free(p);
        return st;
    }
    *out = p;
    return SYMM_SUCCESS;
out_free:
    free(recv);
    if (ch) {
        symm_team_region_free(ch->my_off);
        symm_chunk_free(ch);
    }
    symm_pool_obj_free(p);
    return st;
}

static symm_status_t check_out(const char *fn, const void *out)
{
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: output pointer is NULL", fn);
    return SYMM_SUCCESS;
}

/* The parent team of a split, of which this PE must be a member. */
static symm_status_t lookup_parent(const char *fn, symm_team_t parent, symm_pool_obj_t **pp,
                                   symm_dup_t **pd)
{
    CHECK(symm_team_lookup(fn, parent, pp, pd));
    if ((*pp)->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "%s: PE %d is not in the parent team", fn,
                              symm_g.me);
    return SYMM_SUCCESS;
}

/* The checks of a strided split's arguments against a parent of pn members. */
static symm_status_t check_strided(const char *fn, int pn, int start, int stride, int size)
{
    if (size < 1 || size > pn || start < 0 || start >= pn || (stride == 0 && size > 1))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: start %d, stride %d, size %d do not fit a parent of %d "
                              "PEs",
                              fn, start, stride, size, pn);
    long last = (long)start + (long)stride * (size - 1);
    if (last < 0 || last >= pn)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: start %d, stride %d, size %d reach parent PE %ld, outside "
                              "0..%d",
                              fn, start, stride, size, last, pn - 1);
    return SYMM_SUCCESS;
}

/* Splits are collective over the parent: a member whose own arguments are bad still
 * takes part (symm_coll_fail), so that every member returns the same status. */
symm_status_t symm_team_split_strided(symm_team_t parent, int start, int stride, int size,
                                      symm_team_t *out)
{
    const char *fn = __func__;
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *pp;
    symm_dup_t *pd;
    CHECK(lookup_parent(fn, parent, &pp, &pd));
    symm_status_t local = check_out(fn, out);
    if (!local) local = check_strided(fn, pp->n, start, stride, size);
    int *members = local ? NULL : malloc((size_t)size * sizeof(int));
    if (!local && !members) local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    for (int k = 0; !local && k < size; k++)
        members[k] = pp->world[start + k * stride];
    symm_coll_t c;
    symm_status_t st = symm_coll_enter_dup(
        pp, pd, parent, fn,
        symm_coll_args((uint64_t)start, (uint64_t)stride, (uint64_t)size, 0), &c);
    if (st) {
        free(members);
        return st;
    }
    symm_pool_obj_t *p = NULL;
    if (local)
        st = symm_coll_fail(&c, local);
    else
        st = symm_team_create_via(&c, members, size, SYMM_KIND_TEAM, 1, &p);
    symm_coll_leave(&c);
    free(members);
    if (st) return st;
    *out = p ? symm_team_handle(p, 0, 0) : SYMM_TEAM_INVALID;
    return SYMM_SUCCESS;
}

symm_status_t symm_team_split_2d(symm_team_t parent, int xrange, symm_team_t *xaxis,
                                 symm_team_t *yaxis)
{
    const char *fn = __func__;
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *pp;
    symm_dup_t *pd;
    CHECK(lookup_parent(fn, parent, &pp, &pd));
    int pn = pp->n;
    symm_status_t local = check_out(fn, xaxis);
    if (!local) local = check_out(fn, yaxis);
    if (!local && xrange < 1)
        local =
            symm_error_set(SYMM_ERR_INVALID_ARG, "%s: xrange %d must be positive", fn, xrange);
    int xr = xrange < 1 ? 1 : xrange > pn ? pn : xrange; /* OpenSHMEM: beyond is the team */
    int row = pp->me / xr, col = pp->me % xr;
    int nrows = (pn + xr - 1) / xr;
    int xn = (row == nrows - 1) ? pn - row * xr : xr;
    int yn = (col < pn - (nrows - 1) * xr) ? nrows : nrows - 1;
    int *xm = malloc((size_t)xn * sizeof(int)), *ym = malloc((size_t)yn * sizeof(int));
    if (!local && (!xm || !ym)) local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    for (int k = 0; xm && k < xn; k++)
        xm[k] = pp->world[row * xr + k];
    for (int k = 0; ym && k < yn; k++)
        ym[k] = pp->world[k * xr + col];
    symm_coll_t c;
    symm_status_t st = symm_coll_enter_dup(pp, pd, parent, fn, (uint64_t)xr, &c);
    symm_pool_obj_t *px = NULL, *py = NULL;
    /* Each PE is in one row and one column; an axis is one exchange over the parent in
     * which every PE publishes its block and keeps those of its own row (column). */
    if (!st) {
        if (local) {
            st = symm_coll_fail(&c, local);
        } else {
            st = symm_team_create_via(&c, xm, xn, SYMM_KIND_TEAM, 1, &px);
            if (!st) st = symm_team_create_via(&c, ym, yn, SYMM_KIND_TEAM, 1, &py);
        }
        symm_coll_leave(&c);
    }
    free(xm);
    free(ym);
    if (st) {
        if (px) symm_team_destroy(symm_team_handle(px, 0, 0));
        return st;
    }
    *xaxis = symm_team_handle(px, 0, 0);
    *yaxis = symm_team_handle(py, 0, 0);
    return SYMM_SUCCESS;
}
