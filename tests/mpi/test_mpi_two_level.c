/* test_mpi_two_level.c — the collectives on teams that span groups sharing no memory
 * (run under mpirun with SYMM_HOSTS), against serial references on random data: the
 * world, a split, rank lists in other orders and spread unevenly over the groups, and a
 * pool duplicate. Reductions must give the bits of a fold in team order, floating point
 * included; every size class is covered (the word, the small path, several far chunks,
 * streaming stores), broadcast and reduce from every root, fcollect in place. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_ref.h"
#include "common/test_util.h"
#include "symm.h"

#define BUF (6u << 20)

static uint64_t seed;
static uint8_t *sa, *sb; /* symmetric buffers of BUF bytes */

/* Element i of what world PE w contributes to call tag, of type t: floats of widely
 * different magnitudes, so that another combine order shows in the bits. */
static void value(symm_type_t t, uint64_t tag, int w, size_t i, void *out)
{
    uint64_t x = test_mix(seed ^ tag, (uint64_t)w << 40 | i);
    double v = ((double)(x & 0xffffff) / (1 << 24) - 0.5) * (double)(1u << ((x >> 32) % 24));
    switch (t) {
    case SYMM_FLOAT: {
        float f = (float)v;
        memcpy(out, &f, 4);
        break;
    }
    case SYMM_DOUBLE:
        memcpy(out, &v, 8);
        break;
    case SYMM_BF16: {
        uint16_t h = symm_float_to_bf16((float)v);
        memcpy(out, &h, 2);
        break;
    }
    default:
        memcpy(out, &x, symm_type_size(t));
        break;
    }
}

static void fill(uint8_t *buf, symm_type_t t, uint64_t tag, int w, size_t count)
{
    size_t es = symm_type_size(t);
    for (size_t i = 0; i < count; i++)
        value(t, tag, w, i, buf + i * es);
}

/* ref = the fold of every member's values in team order. */
static void reference(symm_team_t team, uint8_t *ref, symm_type_t t, symm_op_t op, uint64_t tag,
                      size_t count)
{
    size_t es = symm_type_size(t);
    uint8_t v[8];
    int n = symm_team_n_pes(team);
    fill(ref, t, tag, symm_team_world_pe(team, 0), count);
    for (int j = 1; j < n; j++)
        for (size_t i = 0; i < count; i++) {
            value(t, tag, symm_team_world_pe(team, j), i, v);
            ref_op1(t, op, ref + i * es, v);
        }
}

static const size_t counts[] = {1, 3000, 25001, 170001};

static void reductions(symm_team_t team, const char *name, uint64_t tag)
{
    static const struct {
        symm_type_t t;
        symm_op_t op;
    } kinds[] = {{SYMM_FLOAT, SYMM_OP_SUM}, {SYMM_DOUBLE, SYMM_OP_SUM},
                 {SYMM_BF16, SYMM_OP_SUM},  {SYMM_INT32, SYMM_OP_SUM},
                 {SYMM_UINT8, SYMM_OP_XOR}, {SYMM_INT64, SYMM_OP_MAX}};
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team), w = symm_team_world_pe(team, me);
    uint8_t *ref = malloc(BUF);
    CHECK_TRUE(ref != NULL, "malloc");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        symm_type_t t = kinds[k].t;
        symm_op_t op = kinds[k].op;
        size_t es = symm_type_size(t);
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t count = counts[c], nb = count * es;
            uint64_t tg = tag * 1000 + k * 10 + c;
            reference(team, ref, t, op, tg, count);
            for (int inplace = 0; inplace < 2; inplace++) {
                fill(sa, t, tg, w, count);
                uint8_t *dest = inplace ? sa : sb;
                CHECK_OK(symm_allreduce(team, dest, sa, count, t, op));
                CHECK_BYTES(dest, ref, nb, "%s: allreduce type %d op %d count %zu inplace %d",
                            name, (int)t, (int)op, count, inplace);
            }
            for (int root = 0; root < n; root++) {
                int inplace = root & 1;
                fill(sa, t, tg, w, count);
                memset(sb, 0x5a, nb);
                uint8_t *dest = inplace ? sa : sb;
                CHECK_OK(symm_reduce(team, dest, sa, count, t, op, root));
                if (me == root)
                    CHECK_BYTES(dest, ref, nb, "%s: reduce type %d count %zu root %d", name,
                                (int)t, count, root);
                else if (!inplace)
                    CHECK_ALL_BYTES(sb, 0x5a, nb, "%s: reduce wrote a non-root's dest", name);
            }
        }
    }
    free(ref);
}

static void data_movement(symm_team_t team, const char *name, uint64_t tag)
{
    static const size_t sizes[] = {5, 3000, 70001, 300000};
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team), w = symm_team_world_pe(team, me);
    uint8_t *want = malloc(BUF);
    CHECK_TRUE(want != NULL, "malloc");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t nb = sizes[s];
        uint64_t tg = tag * 1000 + s;
        for (int root = 0; root < n; root++) {
            int rw = symm_team_world_pe(team, root);
            fill(sa, SYMM_UINT8, tg + root, w, nb);
            memset(sb, 0, nb);
            CHECK_OK(symm_broadcast(team, sb, sa, nb, root));
            fill(want, SYMM_UINT8, tg + root, rw, nb);
            CHECK_BYTES(sb, want, nb, "%s: broadcast %zu B root %d", name, nb, root);
        }
        /* fcollect, then in place (my block of dest as src) */
        for (int j = 0; j < n; j++)
            fill(want + (size_t)j * nb, SYMM_UINT8, tg, symm_team_world_pe(team, j), nb);
        fill(sa, SYMM_UINT8, tg, w, nb);
        memset(sb, 0, (size_t)n * nb);
        CHECK_OK(symm_fcollect(team, sb, sa, nb));
        CHECK_BYTES(sb, want, (size_t)n * nb, "%s: fcollect %zu B", name, nb);
        memset(sb, 0, (size_t)n * nb);
        fill(sb + (size_t)me * nb, SYMM_UINT8, tg, w, nb);
        CHECK_OK(symm_fcollect(team, sb, sb + (size_t)me * nb, nb));
        CHECK_BYTES(sb, want, (size_t)n * nb, "%s: fcollect in place %zu B", name, nb);
        /* collect: sizes that differ by member, one of them 0 */
        size_t total = 0, off = 0;
        for (int j = 0; j < n; j++) {
            size_t len = j == 1 ? 0 : nb / (size_t)(1 + j % 3);
            fill(want + off, SYMM_UINT8, tg + 7, symm_team_world_pe(team, j), len);
            off += len;
        }
        size_t mine = me == 1 ? 0 : nb / (size_t)(1 + me % 3);
        fill(sa, SYMM_UINT8, tg + 7, w, mine);
        CHECK_OK(symm_collect(team, sb, sa, mine, &total));
        CHECK_TRUE(total == off, "%s: collect total %zu, want %zu", name, total, off);
        CHECK_BYTES(sb, want, off, "%s: collect %zu B", name, nb);
        /* alltoall: block j of member i's src is i's values (tag j) */
        for (int j = 0; j < n; j++)
            fill(sa + (size_t)j * nb, SYMM_UINT8,
                 tg * 64 + (uint64_t)symm_team_world_pe(team, j), w, nb);
        for (int i = 0; i < n; i++)
            fill(want + (size_t)i * nb, SYMM_UINT8, tg * 64 + (uint64_t)w,
                 symm_team_world_pe(team, i), nb);
        memset(sb, 0, (size_t)n * nb);
        CHECK_OK(symm_alltoall(team, sb, sa, nb));
        CHECK_BYTES(sb, want, (size_t)n * nb, "%s: alltoall %zu B", name, nb);
    }
    CHECK_OK(symm_barrier(team));
    free(want);
}

static void on_team(symm_team_t team, const char *name, uint64_t tag)
{
    if (team == SYMM_TEAM_INVALID) return;
    data_movement(team, name, tag);
    reductions(team, name, tag);
}

/* A rank-list team (collective over its members only). */
static void on_list(const int *ranks, int n, const char *name, uint64_t tag)
{
    int me = symm_my_pe(), in = 0;
    for (int i = 0; i < n; i++)
        in |= ranks[i] == me;
    if (!in) return;
    symm_team_t t;
    CHECK_OK(symm_team_create(ranks, n, &t));
    on_team(t, name, tag);
    CHECK_OK(symm_team_destroy(t));
}

int main(void)
{
    CHECK_OK(symm_init());
    seed = test_seed();
    int me = symm_my_pe(), npes = symm_n_pes();
    sa = symm_malloc(BUF);
    sb = symm_malloc(BUF);
    CHECK_TRUE(sa && sb, "symm_malloc: %s", symm_last_error());

    on_team(SYMM_TEAM_WORLD, "world", 1);
    /* every member but the first: the first group loses one */
    if (npes >= 3) {
        symm_team_t t;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 1, 1, npes - 1, &t));
        on_team(t, "split 1..", 2);
        if (t != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(t));
    }
    int ranks[64], k = 0;
    for (int i = npes - 1; i >= 0; i--)
        ranks[k++] = i;
    on_list(ranks, npes, "reversed", 3);
    /* the odd ranks first, then the even: groups interleaved in team order */
    k = 0;
    for (int i = 1; i < npes; i += 2)
        ranks[k++] = i;
    for (int i = 0; i < npes; i += 2)
        ranks[k++] = i;
    on_list(ranks, npes, "odd-even", 4);
    /* the last PE and the first two: one member of the last group, two of the first */
    if (npes >= 3) {
        int three[3] = {npes - 1, 0, 1};
        on_list(three, 3, "last,0,1", 5);
    }
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
    on_team(symm_pool_team(pool, 1), "pool dup 1", 6);
    CHECK_OK(symm_pool_destroy(pool));

    symm_free(sb);
    symm_free(sa);
    if (me == 0) printf("two-level collectives: %d PEs ok\n", npes);
    CHECK_OK(symm_finalize());
    return 0;
}
