/* test_team_split.c — every valid (start, stride, size) split of the world (positive,
 * negative and, for size 1, zero strides), checked against a serial model: membership,
 * my_pe, n_pes, world_pe, translate_pe to and from the world, the parent and the
 * previous split (kept alive meanwhile); then splits of a reversed parent, and 2-D
 * splits for every xrange 1..n+1, with barriers on both axes. */
#include "common/test_util.h"

static int me, npes;

typedef struct {
    int n;
    int world[64];
    int index_of[64]; /* world rank -> number, -1 */
} model_t;

static void model_from(model_t *m, const int *world, int n)
{
    m->n = n;
    for (int i = 0; i < npes; i++)
        m->index_of[i] = -1;
    for (int i = 0; i < n; i++) {
        m->world[i] = world[i];
        m->index_of[world[i]] = i;
    }
}

/* The handle t must be exactly the model (or SYMM_TEAM_INVALID if I am not in it). */
static void check_team(symm_team_t t, const model_t *m, const char *what)
{
    int mine = m->index_of[me];
    if (mine < 0) {
        CHECK_TRUE(t == SYMM_TEAM_INVALID, "%s: non-member got handle 0x%llx", what,
                   (unsigned long long)t);
        return;
    }
    CHECK_TRUE(t != SYMM_TEAM_INVALID, "%s: member got SYMM_TEAM_INVALID", what);
    CHECK_TRUE(symm_team_my_pe(t) == mine, "%s: my_pe %d, model %d", what, symm_team_my_pe(t),
               mine);
    CHECK_TRUE(symm_team_n_pes(t) == m->n, "%s: n_pes %d, model %d", what, symm_team_n_pes(t),
               m->n);
    for (int j = -1; j <= m->n; j++) {
        int w = (j >= 0 && j < m->n) ? m->world[j] : -1;
        CHECK_TRUE(symm_team_world_pe(t, j) == w, "%s: world_pe(%d) = %d, model %d", what, j,
                   symm_team_world_pe(t, j), w);
        CHECK_TRUE(symm_team_translate_pe(t, j, SYMM_TEAM_WORLD) == w,
                   "%s: translate(%d -> WORLD) = %d, model %d", what, j,
                   symm_team_translate_pe(t, j, SYMM_TEAM_WORLD), w);
        CHECK_TRUE(symm_team_translate_pe(t, j, t) == (w >= 0 ? j : -1),
                   "%s: translate to itself", what);
    }
    for (int w = -1; w <= npes; w++) {
        int want = (w >= 0 && w < npes) ? m->index_of[w] : -1;
        CHECK_TRUE(symm_team_translate_pe(SYMM_TEAM_WORLD, w, t) == want,
                   "%s: translate(WORLD %d -> team) = %d, model %d", what, w,
                   symm_team_translate_pe(SYMM_TEAM_WORLD, w, t), want);
    }
    char buf[128];
    CHECK_TRUE(strlen(symm_team_describe(t, buf, sizeof buf)) > 0, "describe");
}

/* translate between two live teams against their models */
static void check_translate(symm_team_t a, const model_t *ma, symm_team_t b, const model_t *mb)
{
    if (a == SYMM_TEAM_INVALID || b == SYMM_TEAM_INVALID) return;
    for (int j = 0; j < ma->n; j++) {
        int want = mb->index_of[ma->world[j]];
        CHECK_TRUE(symm_team_translate_pe(a, j, b) == want,
                   "translate(%d) between teams = %d, "
                   "model %d",
                   j, symm_team_translate_pe(a, j, b), want);
    }
}

/* All splits of parent (numbered by pm); returns how many were made. */
static int all_splits(symm_team_t parent, const model_t *pm, int sample, test_rng_t *r)
{
    int pn = pm->n, count = 0;
    symm_team_t prev = SYMM_TEAM_INVALID;
    model_t prev_m = {0};
    for (int size = 1; size <= pn; size++)
        for (int start = 0; start < pn; start++)
            for (int stride = -(pn - 1); stride <= pn - 1; stride++) {
                if (stride == 0 && size > 1) continue;
                long last = (long)start + (long)stride * (size - 1);
                if (last < 0 || last >= pn) continue;
                if (sample && test_rng_below(r, 100) >= (uint64_t)sample) continue;
                int members[64];
                for (int k = 0; k < size; k++)
                    members[k] = pm->world[start + k * stride];
                model_t m;
                model_from(&m, members, size);
                symm_team_t t = 12345;
                CHECK_OK(symm_team_split_strided(parent, start, stride, size, &t));
                char what[96];
                snprintf(what, sizeof what, "split(start %d, stride %d, size %d) of %d", start,
                         stride, size, pn);
                check_team(t, &m, what);
                check_translate(t, &m, prev, &prev_m);
                check_translate(prev, &prev_m, t, &m);
                check_translate(t, &m, parent, pm);
                if (t != SYMM_TEAM_INVALID && (count % 7) == 0) CHECK_OK(symm_barrier(t));
                if (prev != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(prev));
                prev = t;
                prev_m = m;
                count++;
            }
    if (prev != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(prev));
    return count;
}

static void splits_2d(void)
{
    for (int xr = 1; xr <= npes + 1; xr++) {
        symm_team_t x = 1, y = 2;
        CHECK_OK(symm_team_split_2d(SYMM_TEAM_WORLD, xr, &x, &y));
        int xrange = xr > npes ? npes : xr;
        int row = me / xrange, col = me % xrange;
        int xm[64], ym[64], xn = 0, yn = 0;
        for (int p = 0; p < npes; p++) {
            if (p / xrange == row) xm[xn++] = p;
            if (p % xrange == col) ym[yn++] = p;
        }
        model_t mx, my;
        model_from(&mx, xm, xn);
        model_from(&my, ym, yn);
        char what[64];
        snprintf(what, sizeof what, "2-D xrange %d: x axis", xr);
        check_team(x, &mx, what);
        snprintf(what, sizeof what, "2-D xrange %d: y axis", xr);
        check_team(y, &my, what);
        CHECK_EQ_I64(symm_team_my_pe(x), col);
        CHECK_EQ_I64(symm_team_my_pe(y), row);
        check_translate(x, &mx, y, &my);
        check_translate(y, &my, x, &mx);
        /* rows run their barriers concurrently with each other, then columns */
        for (int i = 0; i < 3; i++)
            CHECK_OK(symm_barrier(x));
        for (int i = 0; i < 3; i++)
            CHECK_OK(symm_barrier(y));
        CHECK_OK(symm_team_destroy(x));
        CHECK_OK(symm_team_destroy(y));
        CHECK_EQ_I64(symm_team_my_pe(x), -1);
    }
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    CHECK_TRUE(npes <= 64, "test written for up to 64 PEs");
    symm_info_t info0, info1;
    CHECK_OK(symm_get_info(&info0));
    int all[64];
    for (int i = 0; i < npes; i++)
        all[i] = i;
    model_t world;
    model_from(&world, all, npes);
    check_team(SYMM_TEAM_WORLD, &world, "WORLD");
    int group[64];
    model_t node;
    model_from(&node, group, test_node_group(me, npes, group));
    check_team(SYMM_TEAM_NODE, &node, "NODE");
    double t0 = test_now();
    int n1 = all_splits(SYMM_TEAM_WORLD, &world, 0, NULL);
    /* a parent numbered backwards: splits of it number PEs through it */
    symm_team_t rev;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &rev));
    int back[64];
    for (int i = 0; i < npes; i++)
        back[i] = npes - 1 - i;
    model_t revm;
    model_from(&revm, back, npes);
    check_team(rev, &revm, "reversed world");
    test_rng_t r;
    test_rng_seed(&r, test_seed()); /* the same sample on every PE */
    int n2 = all_splits(rev, &revm, npes <= 4 ? 0 : 30, &r);
    /* a split of a split: odd PEs of the reversed world, then every second of those */
    if (npes >= 2) {
        symm_team_t odd;
        CHECK_OK(symm_team_split_strided(rev, npes % 2 == 0 ? 0 : 1, 2, npes / 2, &odd));
        int om[64], on = 0;
        for (int i = npes % 2 == 0 ? 0 : 1; i < npes; i += 2)
            om[on++] = back[i];
        model_t oddm;
        model_from(&oddm, om, on);
        check_team(odd, &oddm, "every second of the reversed world");
        if (odd != SYMM_TEAM_INVALID) {
            n2 += all_splits(odd, &oddm, 0, NULL);
            CHECK_OK(symm_team_destroy(odd));
        }
    }
    CHECK_OK(symm_team_destroy(rev));
    splits_2d();
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_get_info(&info1));
    CHECK_TRUE(info1.team_heap_used == info0.team_heap_used,
               "team region not returned: %zu bytes used, %zu at start", info1.team_heap_used,
               info0.team_heap_used);
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf("test_team_split: OK (%d PEs, %d + %d splits, %.2f s)\n", npes, n1, n2,
               test_now() - t0);
    return 0;
}
