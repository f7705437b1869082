/* test_coll.c — every CPU collective against a serial reference on random data: all
 * types x all valid ops for the reductions, sizes 0, 1, odd, past the small/large
 * threshold and large, on the world, strided sub-teams (positive and negative stride), a
 * shuffled rank list, a 1-PE team and a pool duplicate; both algorithms are run by
 * lowering SYMM_COLL_SMALL in-process (every PE does the same). Then bad inputs (each
 * returns its status and leaves dest unchanged), a dest_capacity failure of alltoallv
 * on one member, and members that pass different arguments (SYMM_ERR_COLL_MISMATCH).
 *
 * alltoallv's two-exchange path (offsets too large to pack) is forced in the second pass.
 *
 * Each PE generates every member's source deterministically from (case, world rank), so
 * it computes the expected result locally. Reductions are compared bit for bit, floats
 * included: symm folds members in team order with one rounding per step (documented in
 * coll/reduce_ops.h), and the reference folds in the same order with the same rounding
 * (fp16/bf16 through symm_float_to_fp16/bf16), so any difference is a bug. */
#include "coll/coll_ref.h"
#include "common/test_util.h"
#include "core/config.h"

extern int symm_coll_a2av_off_bits; /* src/coll/alltoall.c */

#define GUARD     192        /* bytes after every expected result that must stay untouched */
#define BUF_BYTES (6u << 20) /* each of the two symmetric buffers */

static int W, NW;                /* my world rank, world size */
static uint8_t *S, *D;           /* symmetric src and dest */
static uint8_t *ref, *tmp, *acc; /* private */
static uint64_t seed, case_id;
static long ncalls;
static int quick; /* smaller matrix (SYMM_TEST_QUICK=1, e.g. under valgrind) */

static const char *cname; /* current case, for messages */
static char cdesc[256];

typedef struct {
    symm_team_t t;
    const char *name;
} team_t;

/* ------------------------------------------------------------ data and reference */
static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* count elements of type t for world rank w in the current case, never all zero;
 * floating values lie in [-2, 2) so products of 8 stay finite even in fp16. */
static void gen(void *buf, size_t count, symm_type_t t, int w)
{
    test_rng_t r;
    test_rng_seed(&r, mix(mix(seed, case_id), (uint64_t)w + 1));
    size_t es = symm_type_size(t);
    uint8_t *b = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t x = test_rng_next(&r);
        double v = (double)(x >> 11) * 0x1p-53 * 4.0 - 2.0;
        if (t == SYMM_FLOAT) {
            float f = (float)v;
            memcpy(b + i * 4, &f, 4);
        } else if (t == SYMM_DOUBLE) {
            memcpy(b + i * 8, &v, 8);
        } else if (t == SYMM_FP16) {
            uint16_t h = symm_float_to_fp16((float)v);
            memcpy(b + i * 2, &h, 2);
        } else if (t == SYMM_BF16) {
            uint16_t h = symm_float_to_bf16((float)v);
            memcpy(b + i * 2, &h, 2);
        } else {
            memcpy(b + i * es, &x, es); /* little-endian: the low bytes */
        }
    }
}

/* out[0..count) = fold over members (team order) of element block `block` of their
 * sources, which hold `per` elements each. */
static void ref_reduce(symm_team_t team, symm_type_t t, symm_op_t op, size_t count, size_t per,
                       size_t block, uint8_t *out)
{
    int n = symm_team_n_pes(team);
    size_t es = symm_type_size(t);
    for (int j = 0; j < n; j++) {
        gen(tmp, per, t, symm_team_world_pe(team, j));
        const uint8_t *blk = tmp + block * count * es;
        if (j == 0) {
            memcpy(out, blk, count * es);
            continue;
        }
        for (size_t i = 0; i < count; i++)
            ref_op1(t, op, out + i * es, blk + i * es);
    }
}

/* fp16/bf16 sums: how many of the first count elements of `want` (the rule: one rounding
 * per combine) differ from a float accumulator rounded once at the end. With 3 members
 * and more the random data must tell the two apart, or a bit-exact pass proves nothing. */
static size_t half_once_differs(symm_team_t team, symm_type_t t, size_t count,
                                const uint8_t *want)
{
    int n = symm_team_n_pes(team);
    float *a = calloc(count ? count : 1, sizeof(float));
    CHECK_TRUE(a != NULL, "no memory for %zu floats", count);
    for (int j = 0; j < n; j++) {
        gen(tmp, count, t, symm_team_world_pe(team, j));
        for (size_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, tmp + 2 * i, 2);
            a[i] += t == SYMM_FP16 ? symm_fp16_to_float(h) : symm_bf16_to_float(h);
        }
    }
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) {
        uint16_t once = t == SYMM_FP16 ? symm_float_to_fp16(a[i]) : symm_float_to_bf16(a[i]);
        differ += memcmp(&once, want + 2 * i, 2) != 0;
    }
    free(a);
    return differ;
}

/* ------------------------------------------------------------ checking */
static void fill_dest(size_t n)
{
    test_fill_pattern(D, n + GUARD, 0xdead0000u + case_id);
}

/* D[0..n) == want, and the guard after it (or all of D when want is NULL) untouched. */
static void check_dest(const void *want, size_t n)
{
    if (want && n && memcmp(D, want, n)) {
        size_t i = test_find_mismatch(D, want, n);
        TEST_FAIL("%s %s: result byte %zu of %zu: got 0x%02x, expected 0x%02x", cname, cdesc, i,
                  n, D[i], ((const uint8_t *)want)[i]);
    }
    size_t from = want ? n : 0, len = want ? GUARD : n + GUARD;
    for (size_t i = from; i < from + len; i++)
        if (D[i] != test_pattern_byte(0xdead0000u + case_id, i))
            TEST_FAIL("%s %s: byte %zu beyond the result (%zu bytes) was overwritten", cname,
                      cdesc, i, want ? n : 0);
}

static void next_case(const char *name, const team_t *tm, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void next_case(const char *name, const team_t *tm, const char *fmt, ...)
{
    case_id++;
    cname = name;
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(cdesc, sizeof cdesc, "[%s small=%zu case %llu] ", tm->name,
                     symm_config.coll_small, (unsigned long long)case_id);
    vsnprintf(cdesc + k, sizeof cdesc - (size_t)k, fmt, ap);
    va_end(ap);
}

#define CALL(expr)                                                                             \
    do {                                                                                       \
        symm_status_t st_ = (expr);                                                            \
        ncalls++;                                                                              \
        if (st_ != SYMM_SUCCESS)                                                               \
            TEST_FAIL("%s %s: %s returned %s; %s", cname, cdesc, #expr, symm_strerror(st_),    \
                      symm_last_error());                                                      \
    } while (0)

/* ------------------------------------------------------------ the collectives */
static void t_allreduce(const team_t *tm, symm_type_t t, symm_op_t op, size_t count,
                        int inplace)
{
    next_case("allreduce", tm, "%s %s count %zu%s", symm_type_name(t), symm_op_name(op), count,
              inplace ? " in place" : "");
    if (symm_team_my_pe(tm->t) < 0) return;
    size_t nb = count * symm_type_size(t);
    fill_dest(nb);
    uint8_t *src = inplace ? D : S;
    gen(src, count, t, W);
    CALL(symm_allreduce(tm->t, D, src, count, t, op));
    ref_reduce(tm->t, t, op, count, count, 0, ref);
    check_dest(ref, nb);
    if ((t == SYMM_FP16 || t == SYMM_BF16) && op == SYMM_OP_SUM && count >= 1000 &&
        symm_team_n_pes(tm->t) >= 3)
        CHECK_TRUE(half_once_differs(tm->t, t, count, ref) > 0,
                   "%s %s: the data does not tell per-combine rounding from rounding once",
                   cname, cdesc);
}

static void t_reduce(const team_t *tm, symm_type_t t, symm_op_t op, size_t count, int root,
                     int inplace)
{
    next_case("reduce", tm, "%s %s count %zu root %d%s", symm_type_name(t), symm_op_name(op),
              count, root, inplace ? " in place" : "");
    int me = symm_team_my_pe(tm->t);
    if (me < 0) return;
    size_t nb = count * symm_type_size(t);
    fill_dest(nb);
    uint8_t *src = S;
    if (inplace) { /* the source is dest itself: for non-roots too (they must not write it) */
        src = D;
        gen(D, count, t, W);
        memcpy(acc, D, nb);
    } else {
        gen(S, count, t, W);
    }
    CALL(symm_reduce(tm->t, D, src, count, t, op, root));
    if (me == root) {
        ref_reduce(tm->t, t, op, count, count, 0, ref);
        check_dest(ref, nb);
    } else if (inplace) {
        check_dest(acc, nb);
    } else {
        check_dest(NULL, nb);
    }
}

static void t_reduce_scatter(const team_t *tm, symm_type_t t, symm_op_t op, size_t count)
{
    next_case("reduce_scatter", tm, "%s %s count %zu", symm_type_name(t), symm_op_name(op),
              count);
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    size_t nb = count * symm_type_size(t);
    fill_dest(nb);
    gen(S, count * (size_t)n, t, W);
    CALL(symm_reduce_scatter(tm->t, D, S, count, t, op));
    ref_reduce(tm->t, t, op, count, count * (size_t)n, (size_t)me, ref);
    check_dest(ref, nb);
}

static void t_broadcast(const team_t *tm, size_t nbytes, int root, int inplace)
{
    next_case("broadcast", tm, "%zu bytes root %d%s", nbytes, root, inplace ? " in place" : "");
    if (symm_team_my_pe(tm->t) < 0) return;
    fill_dest(nbytes);
    uint8_t *src = inplace ? D : S;
    gen(src, nbytes, SYMM_UINT8, W);
    CALL(symm_broadcast(tm->t, D, src, nbytes, root));
    gen(ref, nbytes, SYMM_UINT8, symm_team_world_pe(tm->t, root));
    check_dest(ref, nbytes);
}

static void t_fcollect(const team_t *tm, size_t nbytes, int inplace)
{
    next_case("fcollect", tm, "%zu bytes%s", nbytes, inplace ? " in place" : "");
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    fill_dest(nbytes * (size_t)n);
    uint8_t *src = inplace ? D + (size_t)me * nbytes : S;
    gen(src, nbytes, SYMM_UINT8, W);
    CALL(symm_fcollect(tm->t, D, src, nbytes));
    for (int j = 0; j < n; j++)
        gen(ref + (size_t)j * nbytes, nbytes, SYMM_UINT8, symm_team_world_pe(tm->t, j));
    check_dest(ref, nbytes * (size_t)n);
}

/* Member j's collect size: varies, with zeros, around base. */
static size_t collect_size(size_t base, int j)
{
    if (base == 0) return 0;
    size_t k = (size_t)mix(case_id, (uint64_t)j) % 4;
    return k == 0 ? 0 : base / k + (size_t)j;
}

static void t_collect(const team_t *tm, size_t base)
{
    next_case("collect", tm, "sizes around %zu bytes", base);
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    size_t total = 0, mine = collect_size(base, me);
    for (int j = 0; j < n; j++) {
        size_t len = collect_size(base, j);
        gen(ref + total, len, SYMM_UINT8, symm_team_world_pe(tm->t, j));
        total += len;
    }
    fill_dest(total);
    gen(S, mine, SYMM_UINT8, W);
    size_t got = 12345;
    CALL(symm_collect(tm->t, D, S, mine, &got));
    CHECK_EQ_U64(got, total);
    check_dest(ref, total);
}

static void t_alltoall(const team_t *tm, size_t nbytes)
{
    next_case("alltoall", tm, "%zu bytes per block", nbytes);
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    fill_dest(nbytes * (size_t)n);
    gen(S, nbytes * (size_t)n, SYMM_UINT8, W);
    CALL(symm_alltoall(tm->t, D, S, nbytes));
    for (int j = 0; j < n; j++) {
        gen(tmp, nbytes * (size_t)n, SYMM_UINT8, symm_team_world_pe(tm->t, j));
        memcpy(ref + (size_t)j * nbytes, tmp + (size_t)me * nbytes, nbytes);
    }
    check_dest(ref, nbytes * (size_t)n);
}

/* Elements member i sends member j: varies, zeros included. */
static size_t a2av_count(size_t base, int i, int j)
{
    uint64_t h = mix(mix(case_id, (uint64_t)i), (uint64_t)j);
    return (h % 5 == 0 || base == 0) ? 0 : (size_t)(h % (base + 1));
}

/* Sender i's layout: packed in member order, or (spread) reversed with gaps. */
static size_t a2av_displs(size_t base, int i, int n, int spread, size_t *displs)
{
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        int j = spread ? n - 1 - k : k;
        displs[j] = at;
        at += a2av_count(base, i, j) + (spread ? 3 : 0);
    }
    return at;
}

static void t_alltoallv(const team_t *tm, size_t base, size_t es, int spread)
{
    next_case("alltoallv", tm, "counts around %zu, elem %zu, %s", base, es,
              spread ? "explicit displs" : "packed");
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    size_t sc[64], sd[64], rc[64], rd[64], xd[64];
    for (int j = 0; j < n; j++)
        sc[j] = a2av_count(base, me, j);
    size_t span = a2av_displs(base, me, n, spread, sd);
    gen(S, span * es, SYMM_UINT8, W);
    size_t total = 0;
    for (int j = 0; j < n; j++) {
        int wj = symm_team_world_pe(tm->t, j);
        size_t jspan = a2av_displs(base, j, n, spread, xd);
        size_t len = a2av_count(base, j, me) * es;
        gen(tmp, jspan * es, SYMM_UINT8, wj);
        memcpy(ref + total, tmp + xd[me] * es, len);
        total += len;
    }
    fill_dest(total);
    memset(rc, 0xab, sizeof rc);
    CALL(symm_alltoallv(tm->t, D, total / es, S, sc, spread ? sd : NULL, es, rc, rd));
    check_dest(ref, total);
    size_t at = 0;
    for (int j = 0; j < n; j++) {
        CHECK_EQ_U64(rc[j], a2av_count(base, j, me));
        CHECK_EQ_U64(rd[j], at);
        at += rc[j];
    }
}

/* ------------------------------------------------------------ the matrix */
static int valid_op(symm_type_t t, symm_op_t op)
{
    if (t == SYMM_FP8_E4M3 || t == SYMM_FP8_E5M2) return 0; /* the tile calls take fp8 */
    return !(is_float(t) && (op == SYMM_OP_AND || op == SYMM_OP_OR || op == SYMM_OP_XOR));
}

/* full: every type x op; else a spread of pairs (one per type, ops rotating). */
static void reductions(const team_t *tm, const size_t *counts, int ncounts, int full)
{
    int n = symm_team_n_pes(tm->t);
    if (n < 1) n = 1;
    for (int ti = 0; ti < SYMM_TYPE_COUNT; ti++) {
        symm_type_t t = (symm_type_t)ti;
        for (int oi = 0; oi < SYMM_OP_COUNT; oi++) {
            symm_op_t op = (symm_op_t)oi;
            if (!valid_op(t, op)) continue;
            if (!full && (oi + ti) % SYMM_OP_COUNT != 0 && oi != SYMM_OP_SUM) continue;
            for (int k = 0; k < ncounts; k++) {
                size_t c = counts[k];
                int variant = (int)((case_id + (uint64_t)k) % 3);
                t_allreduce(tm, t, op, c, variant == 1);
                t_reduce(tm, t, op, c, (int)((case_id + 1) % (uint64_t)n), variant == 2);
                t_reduce_scatter(tm, t, op, c > 10000 ? c / (size_t)n : c);
            }
        }
    }
}

static void movers(const team_t *tm, const size_t *sizes, int nsizes)
{
    int n = symm_team_n_pes(tm->t);
    if (n < 1) n = 1;
    for (int k = 0; k < nsizes; k++) {
        size_t s = sizes[k];
        t_broadcast(tm, s, (int)(case_id % (uint64_t)n), k % 2);
        t_fcollect(tm, s, k % 2);
        t_collect(tm, s);
        t_alltoall(tm, s);
        t_alltoallv(tm, s < 64 ? s : s / 16, k % 2 ? 3 : 8, k % 2);
    }
}

/* pass 0: the default threshold; pass 1: SYMM_COLL_SMALL lowered to 64 bytes, which
 * sends everything over 64 bytes down the large (sliced) path. The full type x op matrix
 * runs on the world in pass 0; elsewhere a spread of pairs covers every type. */
static void run_matrix(team_t *teams, int nteams, int pass)
{
    static const size_t counts[] = {0, 1, 2, 37, 1001}, counts_team[] = {1, 37, 1001},
                        counts_large[] = {37, 1001};
    static const size_t sizes[] = {0, 1, 7, 8, 9, 37, 1001, 20000};
    /* 8 PEs on a 2-core CI machine cost ~10 ms a call: there, the full matrix drops
     * counts 0 and 2 (covered on the other teams), and pass 1 the sub-teams whose shape
     * the other sub-teams already cover */
    int big_job = NW > 4;
    for (int i = 0; i < nteams; i++) {
        if (pass && big_job && (i == 2 || i == 4 || i == 5)) continue;
        if (pass)
            reductions(&teams[i], counts_large, 2, 0);
        else if (i == 0 && big_job)
            reductions(&teams[i], counts_team, 3, !quick);
        else if (i == 0)
            reductions(&teams[i], counts, 5, !quick);
        else
            reductions(&teams[i], counts_team, 3, 0);
        movers(&teams[i], pass ? sizes + 5 : sizes, pass ? 3 : 8);
    }
    /* large: many chunks per slice, slices not multiples of anything */
    static const size_t big[] = {300007};
    if (pass == 0 || !quick) reductions(&teams[0], big, 1, 0);
    static const size_t bigb[] = {600001};
    movers(&teams[0], bigb, 1);
    /* around the size from which two members in different groups split a broadcast
     * (coll/broadcast.c): every root, in place and not */
    static const size_t edge[] = {65535, 65536, 100003};
    int n = symm_team_n_pes(teams[0].t);
    for (int k = 0; pass == 0 && k < 3; k++)
        for (int r = 0; r < n; r++)
            t_broadcast(&teams[0], edge[k], r, (k + r) % 2);
}

/* ------------------------------------------------------------ bad inputs */
#define BAD(expr, want)                                                                        \
    do {                                                                                       \
        test_fill_pattern(D, 4096, 0xbad);                                                     \
        CHECK_STATUS(expr, want);                                                              \
        CHECK_TRUE(test_find_pattern_mismatch(D, 4096, 0xbad) == (size_t)-1,                   \
                   "%s changed dest", #expr);                                                  \
    } while (0)

static void bad_inputs(void)
{
    symm_team_t w = SYMM_TEAM_WORLD, bogus = (symm_team_t)0x7777000001ll;
    uint8_t priv[64];
    size_t cnt[64], big[64];
    symm_info_t info;
    CHECK_OK(symm_get_info(&info));
    for (int j = 0; j < 64; j++) {
        cnt[j] = 1;
        big[j] = info.heap_size + 1; /* runs past the end of the heap */
    }
    gen(S, 4096, SYMM_UINT8, W);
    /* NULL buffers with a size */
    BAD(symm_allreduce(w, NULL, S, 4, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_allreduce(w, D, NULL, 4, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_broadcast(w, NULL, S, 4, 0), SYMM_ERR_INVALID_ARG);
    BAD(symm_fcollect(w, D, NULL, 4), SYMM_ERR_INVALID_ARG);
    BAD(symm_alltoall(w, NULL, S, 4), SYMM_ERR_INVALID_ARG);
    /* not symmetric */
    BAD(symm_allreduce(w, D, priv, 4, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_reduce(w, D, priv, 4, SYMM_INT32, SYMM_OP_SUM, 0), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_reduce_scatter(w, D, priv, 1, SYMM_INT8, SYMM_OP_SUM), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_broadcast(w, D, priv, 16, 0), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_fcollect(w, D, priv, 1), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_collect(w, D, priv, 1, NULL), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_alltoall(w, D, priv, 1), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_alltoallv(w, D, 64, priv, cnt, NULL, 1, NULL, NULL), SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_alltoallv(w, D, 64, S, big, NULL, 1, NULL, NULL), SYMM_ERR_NOT_SYMMETRIC);
    /* a buffer running past the end of the heap */
    BAD(symm_allreduce(w, D, S, SIZE_MAX / 16, SYMM_INT64, SYMM_OP_SUM),
        SYMM_ERR_NOT_SYMMETRIC);
    /* roots */
    BAD(symm_reduce(w, D, S, 4, SYMM_INT32, SYMM_OP_SUM, -1), SYMM_ERR_PE_OUT_OF_RANGE);
    BAD(symm_reduce(w, D, S, 4, SYMM_INT32, SYMM_OP_SUM, NW), SYMM_ERR_PE_OUT_OF_RANGE);
    BAD(symm_broadcast(w, D, S, 4, -1), SYMM_ERR_PE_OUT_OF_RANGE);
    BAD(symm_broadcast(w, D, S, 4, NW), SYMM_ERR_PE_OUT_OF_RANGE);
    /* types and ops */
    BAD(symm_allreduce(w, D, S, 4, SYMM_TYPE_COUNT, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_allreduce(w, D, S, 4, (symm_type_t)-1, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_allreduce(w, D, S, 4, SYMM_INT32, SYMM_OP_COUNT), SYMM_ERR_INVALID_ARG);
    static const symm_type_t ft[] = {SYMM_FLOAT, SYMM_DOUBLE, SYMM_FP16, SYMM_BF16};
    static const symm_op_t bo[] = {SYMM_OP_AND, SYMM_OP_OR, SYMM_OP_XOR};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++) {
            BAD(symm_allreduce(w, D, S, 4, ft[i], bo[k]), SYMM_ERR_INVALID_ARG);
            BAD(symm_reduce(w, D, S, 4, ft[i], bo[k], 0), SYMM_ERR_INVALID_ARG);
            BAD(symm_reduce_scatter(w, D, S, 1, ft[i], bo[k]), SYMM_ERR_INVALID_ARG);
        }
    /* fp8 reductions accumulate in float: the tile calls take them, these do not */
    static const symm_type_t f8[] = {SYMM_FP8_E4M3, SYMM_FP8_E5M2};
    for (int i = 0; i < 2; i++) {
        BAD(symm_allreduce(w, D, S, 4, f8[i], SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
        CHECK_TRUE(strstr(symm_last_error(), "fp8 reductions accumulate in float") != NULL,
                   "fp8 refusal says why: %s", symm_last_error());
        BAD(symm_reduce(w, D, S, 4, f8[i], SYMM_OP_MAX, 0), SYMM_ERR_INVALID_ARG);
        BAD(symm_reduce_scatter(w, D, S, 1, f8[i], SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    }
    /* sizes that overflow */
    BAD(symm_allreduce(w, D, S, SIZE_MAX / 2, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_OVERFLOW);
    BAD(symm_reduce_scatter(w, D, S, SIZE_MAX / 4, SYMM_INT8, SYMM_OP_SUM),
        NW > 4 ? SYMM_ERR_OVERFLOW : SYMM_ERR_NOT_SYMMETRIC);
    BAD(symm_fcollect(w, D, S, SIZE_MAX / 2),
        NW > 2 ? SYMM_ERR_OVERFLOW : SYMM_ERR_NOT_SYMMETRIC);
    size_t huge[64];
    for (int j = 0; j < 64; j++)
        huge[j] = SIZE_MAX / 2;
    BAD(symm_alltoallv(w, D, 64, S, huge, NULL, 4, NULL, NULL), SYMM_ERR_OVERFLOW);
    /* overlap */
    BAD(symm_allreduce(w, D, D + 4, 4, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_broadcast(w, D, D + 1, 8, 0), SYMM_ERR_INVALID_ARG);
    BAD(symm_alltoall(w, D, D + 1, 8), SYMM_ERR_INVALID_ARG);
    BAD(symm_reduce_scatter(w, D, D, 1, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_INVALID_ARG);
    BAD(symm_fcollect(w, D, D + 1, 8), SYMM_ERR_INVALID_ARG);
    /* alltoallv arguments */
    BAD(symm_alltoallv(w, D, 64, S, cnt, NULL, 0, NULL, NULL), SYMM_ERR_INVALID_ARG);
    BAD(symm_alltoallv(w, D, 64, S, NULL, NULL, 1, NULL, NULL), SYMM_ERR_INVALID_ARG);
    /* teams */
    BAD(symm_allreduce(bogus, D, S, 4, SYMM_INT32, SYMM_OP_SUM), SYMM_ERR_TEAM_INVALID);
    BAD(symm_broadcast(bogus, D, S, 4, 0), SYMM_ERR_TEAM_INVALID);
    BAD(symm_alltoallv(bogus, D, 64, S, cnt, NULL, 1, NULL, NULL), SYMM_ERR_TEAM_INVALID);
    BAD(symm_collect(bogus, D, S, 4, NULL), SYMM_ERR_TEAM_INVALID);
}

/* Team rank 0's dest_capacity is one element short: it writes nothing (dest untouched)
 * and tells the others, so every member gets SYMM_ERR_OVERFLOW naming it, with its
 * outputs untouched; the team works for the next call. */
static void a2av_capacity(const team_t *tm)
{
    next_case("alltoallv capacity", tm, "one member short");
    int me = symm_team_my_pe(tm->t), n = symm_team_n_pes(tm->t);
    if (me < 0) return;
    size_t sc[64], rc[64], rd[64];
    for (int j = 0; j < n; j++)
        sc[j] = 5 + (size_t)j;
    gen(S, 1024, SYMM_UINT8, W);
    size_t incoming = (5 + (size_t)me) * (size_t)n;
    fill_dest(incoming * 4);
    for (int j = 0; j < n; j++)
        rc[j] = rd[j] = 777;
    symm_status_t st = symm_alltoallv(tm->t, D, incoming - (me == 0), S, sc, NULL, 4, rc, rd);
    CHECK_STATUS(st, SYMM_ERR_OVERFLOW);
    if (me == 0)
        check_dest(NULL, incoming * 4);
    else
        CHECK_TRUE(strstr(symm_last_error(), "PE 0 ") != NULL, "names no member: %s",
                   symm_last_error());
    for (int j = 0; j < n; j++)
        CHECK_TRUE(rc[j] == 777 && rd[j] == 777, "outputs written");
    CHECK_OK(symm_alltoallv(tm->t, D, incoming, S, sc, NULL, 4, rc, rd));
    for (int j = 0; j < n; j++)
        CHECK_EQ_U64(rc[j], 5 + (size_t)me);
}

/* Members that pass different counts fail with SYMM_ERR_COLL_MISMATCH (on a team of its
 * own, destroyed afterwards). */
static int dissemination; /* run with fanin=N */

static void mismatch(void)
{
    /* With the dissemination barrier a member that detects the mismatch leaves before
     * passing the signal on, so members further along time out instead: only the
     * one-round barrier promises SYMM_ERR_COLL_MISMATCH on every member. */
    if (NW < 2 || dissemination) return;
    symm_team_t t;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, NW, &t));
    gen(S, 64, SYMM_UINT8, W);
    symm_status_t st = symm_allreduce(t, D, S, W == 0 ? 3 : 4, SYMM_INT32, SYMM_OP_SUM);
    CHECK_STATUS(st, SYMM_ERR_COLL_MISMATCH);
    CHECK_OK(symm_team_destroy(t));
    /* the same arguments, but PE 0 with another SYMM_COLL_SMALL (so another algorithm):
     * caught as a mismatch too, rather than corrupting an in-place reduce */
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, NW, &t));
    size_t small0 = symm_config.coll_small;
    if (W == 0) symm_config.coll_small = 64;
    gen(D, 400, SYMM_UINT8, W);
    st = symm_reduce(t, D, D, 100, SYMM_INT32, SYMM_OP_SUM, 0);
    symm_config.coll_small = small0;
    CHECK_STATUS(st, SYMM_ERR_COLL_MISMATCH);
    CHECK_OK(symm_team_destroy(t));
}

int main(int argc, char **argv)
{
    /* "fanin=N" lowers SYMM_BARRIER_FANIN (before init, on every PE alike) so that small
     * teams use the dissemination barrier too */
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "fanin=", 6)) {
            setenv("SYMM_BARRIER_FANIN", argv[i] + 6, 1);
            dissemination = 1;
        }
    TEST_INIT();
    W = symm_my_pe();
    NW = symm_n_pes();
    seed = test_seed();
    quick = (int)test_env_long("SYMM_TEST_QUICK", 0);
    for (int i = 1; i < argc; i++)
        quick |= !strcmp(argv[i], "quick");
    S = symm_malloc(BUF_BYTES);
    D = symm_malloc(BUF_BYTES);
    ref = malloc(BUF_BYTES);
    tmp = malloc(BUF_BYTES);
    acc = malloc(BUF_BYTES);
    CHECK_TRUE(S && D && ref && tmp && acc, "buffers");
    CHECK_TRUE(NW <= 64, "this test handles up to 64 PEs");

    /* the team shapes */
    team_t teams[6];
    int nt = 0;
    teams[nt++] = (team_t){SYMM_TEAM_WORLD, "world"};
    symm_team_t rev, even, one, shuf = SYMM_TEAM_INVALID;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, NW - 1, -1, NW, &rev));
    teams[nt++] = (team_t){rev, "reversed (stride -1)"};
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 2, (NW + 1) / 2, &even));
    teams[nt++] = (team_t){even, "even (stride 2)"};
    /* shuffled: all ranks but 1 (when there are 3 or more) in a fixed random order */
    int perm[64], np = 0;
    for (int i = 0; i < NW; i++)
        if (NW < 3 || i != 1) perm[np++] = i;
    test_rng_t r;
    test_rng_seed(&r, seed ^ 77);
    for (int i = np - 1; i > 0; i--) {
        int k = (int)test_rng_below(&r, (uint64_t)i + 1), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    int in = 0;
    for (int i = 0; i < np; i++)
        in |= perm[i] == W;
    if (in) CHECK_OK(symm_team_create(perm, np, &shuf));
    teams[nt++] = (team_t){shuf, "shuffled list"};
    CHECK_OK(symm_team_create(&W, 1, &one));
    teams[nt++] = (team_t){one, "1-PE"};
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    teams[nt++] = (team_t){symm_pool_team(pool, 2), "pool dup 2"};

    double t0 = test_now();
    size_t small0 = symm_config.coll_small;
    /* default threshold, then one that sends everything over 8 bytes down the large path */
    run_matrix(teams, nt, 0);
    symm_config.coll_small = 64;
    symm_coll_a2av_off_bits = 3; /* alltoallv offsets past 7 take the second exchange */
    run_matrix(teams, nt, 1);
    symm_config.coll_small = small0;
    symm_coll_a2av_off_bits = 31;
    double t1 = test_now();

    bad_inputs();
    for (int i = 0; i < nt; i++)
        a2av_capacity(&teams[i]);
    mismatch();
    CHECK_OK(symm_barrier_all());
    if (W == 0)
        printf("test_coll: %d PEs, %ld collective calls in %.2f s, %llu cases: OK\n", NW,
               ncalls, t1 - t0, (unsigned long long)case_id);
    CHECK_OK(symm_pool_destroy(pool));
    free(ref);
    free(tmp);
    free(acc);
    TEST_FINALIZE();
    return 0;
}
