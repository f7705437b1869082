/* two_level.h — the data phases of collectives on a team whose members sit in several
 * groups that share no memory (hosts, or SYMM_HOSTS blocks), some group holding several
 * of them (pool->two_level). Each phase runs between the same episodes as the flat one
 * it replaces: what must cross between groups crosses once per group, fetched by one
 * member of the group (or a share by each), which stores it into its group peers'
 * buffers by load/store. Teams of one group, or of one member per group, never get
 * here: the flat phases serve them unchanged. */
#ifndef SYMM_COLL_TWO_LEVEL_H
#define SYMM_COLL_TWO_LEVEL_H

#include "coll/coll.h"

/* 1 where the two-level phases serve this call's team. */
static inline int symm_coll_two_level(const symm_coll_t *c)
{
    return c->pool->two_level;
}

/* broadcast (above the word size): root's src into my dest, a share of it fetched here
 * for the whole group when root is in another group. */
void symm_coll_tl_broadcast(symm_coll_t *c, void *dest, const void *src, size_t nbytes,
                            int root, int nt);

/* fcollect and collect: every member's block into dest at where(ctx, j, &len); member
 * j's block is read from j's src, or, in place, from j's dest at that offset. A block of
 * another group is fetched by one member of mine and stored into the others' dest. */
void symm_coll_tl_pull(symm_coll_t *c, void *dest, const void *src,
                       size_t (*where)(const void *ctx, int j, size_t *len), const void *ctx,
                       int inplace, int nt);

/* alltoall: block me of every member's src into dest at block j. Every member of another
 * group is read by one member of mine, for the whole group at once where my group's
 * blocks lie side by side. */
void symm_coll_tl_alltoall(symm_coll_t *c, void *dest, const void *src, size_t nbytes, int nt);

/* A reduction whose every member folds, in team order, elements [off, off + len) of all
 * sources into dst (local memory), reading far members through the transport. */
typedef void (*symm_coll_fold_fn)(symm_coll_t *c, void *ctx, void *dst, size_t off, size_t len);

/* 1 where a reduction of this team goes two-level: rooted (only root's group reduces),
 * or to every member across two groups (each group reduces everything for itself: with
 * more groups that would pull more bytes across than the flat slices move). */
static inline int symm_coll_tl_reduces(const symm_coll_t *c, int root)
{
    return c->pool->two_level && (root >= 0 || c->pool->ngroups == 2);
}

/* The two-level reduction between the call's two syncs: the members of root's group (of
 * every group when root < 0) split count elements of es bytes among them, fold their
 * share in steps of step elements and store it into root's dest (every group member's
 * dest). inplace (dest is src, root < 0): the shares are folded whole first, and a sync
 * keeps the sources alive until every group has read them. */
symm_status_t symm_coll_tl_reduce(symm_coll_t *c, void *dest, size_t count, size_t es,
                                  size_t step, int root, int inplace, symm_coll_fold_fn fold,
                                  void *ctx);

#endif
