/* tile_far.h — tile reduction on a team whose members reach some others only through
 * the remote transport (other hosts, SYMM_HOSTS groups): the jobs of a call (tile.c)
 * and the streams that carry their rows between groups (tile_far.c). */
#ifndef SYMM_COLL_TILE_FAR_H
#define SYMM_COLL_TILE_FAR_H

#include <stddef.h>
#include <stdint.h>

#include "coll/reduce_ops.h"
#include "team/team.h"

/* One reduction of a call: rows [r0, r1) of a tile, folded over every member in team
 * order by member owner into its out; spread: the result then goes to every member's
 * out (allreduce). Every member builds the same list, from fingerprinted arguments. */
typedef struct symm_tile_job {
    const uint8_t *in; /* my in tile's first row */
    uint8_t *out;      /* my out tile's first row (read where owner is me, or spread) */
    size_t ild, old;   /* row strides in bytes */
    size_t rb;         /* bytes of a row */
    size_t r0, r1;
    size_t per; /* rows per chunk of the streams (tile_far.c) */
    int owner;
    int spread;
    int in_place; /* out is in: the owner folds a chunk aside before storing it */
} symm_tile_job_t;

/* A call's streams. For each job, every member that the owner reaches only through the
 * transport packs its rows, a chunk at a time, and puts them into a ring of slots in
 * the owner's scratch (team region, inside the transport's window), announcing each
 * chunk with a counter word sent by store64; the owner folds a chunk once every
 * member's part is there, and tells the sender, by a counter word in the sender's
 * scratch, when a slot may be reused. A spread job's owner then streams its result to
 * the members it does not reach. One put of packed rows per chunk where a strided get
 * would cost a transfer per row, and the packing, the transfers and the folds of the
 * members overlap. */
typedef struct symm_tile_far {
    symm_coll_t *c;
    symm_tile_job_t *jobs;
    int njobs;
    symm_reduce_fn_t kern;
    symm_op_t op;
    symm_type_t type;
    size_t esize, slot, hdr;
    uint64_t off; /* my scratch in the team region */
    uint8_t *base;
    uint8_t *pack, *acc;
    float *f8acc;
    void *mem; /* the per-member arrays below */
    uint64_t *peer_off;
    struct symm_tile_far_stream *out_to, *in_from; /* [n] */
} symm_tile_far_t;

/* The rooted forms stream where a tile (a worker's band of it) has at least this many
 * bytes; smaller ones are fetched by their root, one get of the rows' span per member: a
 * stream's first chunk is one more wait on a peer (packed, put and announced after the
 * first exchange), which a small tile does not repay. Measured at 2 PEs, each its own
 * group, on a quiet machine (rows of 4 KiB, 8 KiB apart): 4 KiB 4.2-5.6 us fetched
 * against 5.0-7.0 streamed, 16 KiB even, 64 KiB 19.8-26.6 against 16.6. The banded
 * allreduce always streams (it would fetch its result's bands row by row), the whole
 * one (small tiles) never. */
#define SYMM_TILE_FAR_ROOTED_MIN ((size_t)32 << 10)

/* The exchanged word of a member whose scratch is ready: its offset with this bit, and
 * SYMM_TILE_FAR_NEAR where it reaches another member by load/store (its spread results
 * are then read in place after a sync, which every member takes if any word has it). */
#define SYMM_TILE_FAR_WORD ((uint64_t)1 << 62)
#define SYMM_TILE_FAR_NEAR ((uint64_t)1 << 61)

/* Takes the jobs (kept, not copied) and allocates this member's scratch: a ring for
 * each other member (used for those it does not reach). Returns the word to send in
 * the call's first exchange: SYMM_TILE_FAR_WORD | [SYMM_TILE_FAR_NEAR] | offset, or 0
 * where this member has no room (every member then takes the path that fetches rows). */
uint64_t symm_tile_far_prepare(symm_tile_far_t *t, symm_coll_t *c, symm_tile_job_t *jobs,
                               int njobs, symm_type_t type, symm_op_t op);
/* 1 if every member's word says it is ready: the same answer on every member. */
int symm_tile_far_agreed(const symm_coll_t *c, const uint64_t *words);
/* Runs the streams and folds of every job; where a member reaches another (a NEAR bit
 * in words), then a sync and the copy of spread jobs from the owners this member
 * reaches. A transfer that fails is
 * this member's failure (c->local), agreed in the caller's closing sync; a wait that
 * gives up breaks the team (c->dup->broken): the caller returns at once. */
symm_status_t symm_tile_far_run(symm_tile_far_t *t, const uint64_t *words);
void symm_tile_far_release(symm_tile_far_t *t);

#endif
