/* test_tile.c — tile reduce (rooted, all, multi-root) against a serial reference on
 * random data: every type x op (fp8 accumulated in float, rounded once), tile shapes with ld >
 * cols, single rows and columns, empty tiles, in place; the worker (own threads) and parallel
 * (internal threads) forms with 1..8 workers and the automatic count give the same bytes as the
 * plain form (the automatic count also on tiles big enough for several workers, with the PEs
 * asking for different SYMM_NODE_CPUS: they must agree); bad arguments fail on every PE and
 * change nothing; members passing in tiles (or allreduce's out) at other offsets or in other
 * objects all fail with SYMM_ERR_COLL_MISMATCH naming the member, while empty tiles of any
 * base and different rooted outs are fine. Every PE can compute every other PE's input
 * (seeded by its rank), so the reference needs no communication. */
#include <pthread.h>

#include "common/test_util.h"

static int me, npes;
static uint64_t seed;

#define MAX_ELEMS 8192 /* elements a tile may span (rows-1)*ld + cols */
#define MAX_TILES 8    /* multi-root tiles */
#define SENTINEL  0xA5

static uint8_t *inbuf;  /* symmetric: MAX_TILES tiles of MAX_ELEMS doubles */
static uint8_t *outbuf; /* symmetric: one tile */
static uint8_t *altbuf; /* symmetric: another object of TILE_BYTES */
static uint8_t *refbuf; /* local */
static const size_t TILE_BYTES = MAX_ELEMS * 8;

/* ---------------------------------------------------------------- data */
/* Element i (row-major index r*cols + c, independent of ld) of PE pe's tile tag. */
static void gen(symm_type_t t, uint64_t tag, int pe, size_t i, void *dst)
{
    uint64_t h = test_mix(test_mix(seed, tag), ((uint64_t)pe << 32) + i);
    double d = ((double)(h >> 11) / 9007199254740992.0) * 8.0 - 4.0; /* [-4, 4) */
    if (d == 0) d = 0.5;
    switch (t) {
    case SYMM_FLOAT: {
        float f = (float)d;
        memcpy(dst, &f, 4);
        break;
    }
    case SYMM_DOUBLE:
        memcpy(dst, &d, 8);
        break;
    case SYMM_FP16: {
        uint16_t v = symm_float_to_fp16((float)d);
        memcpy(dst, &v, 2);
        break;
    }
    case SYMM_BF16: {
        uint16_t v = symm_float_to_bf16((float)d);
        memcpy(dst, &v, 2);
        break;
    }
    case SYMM_FP8_E4M3:
    case SYMM_FP8_E5M2: {
        uint8_t v = t == SYMM_FP8_E4M3 ? symm_float_to_fp8_e4m3((float)d)
                                       : symm_float_to_fp8_e5m2((float)d);
        memcpy(dst, &v, 1);
        break;
    }
    default:
        memcpy(dst, &h, symm_type_size(t)); /* little-endian low bytes */
    }
}

static int is_int(symm_type_t t)
{
    return t <= SYMM_UINT64;
}
static int is_signed(symm_type_t t)
{
    return t <= SYMM_INT64;
}

static int op_valid(symm_type_t t, symm_op_t op)
{
    return op <= SYMM_OP_MAX || is_int(t);
}

/* acc = op(acc, b), one element, as the kernels define it (integers wrap; min keeps acc
 * on ties: b < a ? b : a). */
static void ref_op(symm_type_t t, symm_op_t op, void *acc, const void *b)
{
    size_t sz = symm_type_size(t);
    if (is_int(t)) {
        uint64_t x = 0, y = 0;
        memcpy(&x, acc, sz);
        memcpy(&y, b, sz);
        int bits = (int)sz * 8;
        uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
        int64_t sx = 0, sy = 0;
        if (is_signed(t)) { /* sign-extend */
            sx = (int64_t)(x << (64 - bits)) >> (64 - bits);
            sy = (int64_t)(y << (64 - bits)) >> (64 - bits);
        }
        uint64_t r = 0;
        switch (op) {
        case SYMM_OP_SUM:
            r = x + y;
            break;
        case SYMM_OP_PROD:
            r = x * y;
            break;
        case SYMM_OP_MIN:
            r = is_signed(t) ? (sy < sx ? y : x) : (y < x ? y : x);
            break;
        case SYMM_OP_MAX:
            r = is_signed(t) ? (sy > sx ? y : x) : (y > x ? y : x);
            break;
        case SYMM_OP_AND:
            r = x & y;
            break;
        case SYMM_OP_OR:
            r = x | y;
            break;
        case SYMM_OP_XOR:
            r = x ^ y;
            break;
        default:
            TEST_FAIL("op %d", (int)op);
        }
        r &= mask;
        memcpy(acc, &r, sz);
        return;
    }
    if (t == SYMM_DOUBLE) {
        double a, c, r = 0;
        memcpy(&a, acc, 8);
        memcpy(&c, b, 8);
        switch (op) {
        case SYMM_OP_SUM:
            r = a + c;
            break;
        case SYMM_OP_PROD:
            r = a * c;
            break;
        case SYMM_OP_MIN:
            r = c < a ? c : a;
            break;
        case SYMM_OP_MAX:
            r = c > a ? c : a;
            break;
        default:
            TEST_FAIL("op %d", (int)op);
        }
        memcpy(acc, &r, 8);
        return;
    }
    float a, c, r = 0;
    uint16_t ha, hb;
    if (t == SYMM_FLOAT) {
        memcpy(&a, acc, 4);
        memcpy(&c, b, 4);
    } else {
        memcpy(&ha, acc, 2);
        memcpy(&hb, b, 2);
        a = t == SYMM_FP16 ? symm_fp16_to_float(ha) : symm_bf16_to_float(ha);
        c = t == SYMM_FP16 ? symm_fp16_to_float(hb) : symm_bf16_to_float(hb);
    }
    switch (op) {
    case SYMM_OP_SUM:
        r = a + c;
        break;
    case SYMM_OP_PROD:
        r = a * c;
        break;
    case SYMM_OP_MIN:
        r = c < a ? c : a;
        break;
    case SYMM_OP_MAX:
        r = c > a ? c : a;
        break;
    default:
        TEST_FAIL("op %d", (int)op);
    }
    if (t == SYMM_FLOAT) {
        memcpy(acc, &r, 4);
    } else {
        uint16_t h = t == SYMM_FP16 ? symm_float_to_fp16(r) : symm_float_to_bf16(r);
        memcpy(acc, &h, 2);
    }
}

typedef struct {
    size_t rows, cols, ld;
} shape_t;

/* My input tile number k (tag) of the given shape, at inbuf + k*TILE_BYTES. */
static symm_tile_t fill_in(int k, shape_t s, symm_type_t t, uint64_t tag)
{
    size_t sz = symm_type_size(t);
    uint8_t *base = inbuf + (size_t)k * TILE_BYTES;
    memset(base, 0x5c, TILE_BYTES); /* gaps: garbage that must not leak into results */
    for (size_t r = 0; r < s.rows; r++)
        for (size_t c = 0; c < s.cols; c++)
            gen(t, tag, me, r * s.cols + c, base + (r * s.ld + c) * sz);
    return (symm_tile_t){base, s.rows, s.cols, s.ld};
}

/* fp8: every member folded in float, in team order, rounded once. */
static uint8_t ref_fp8(symm_type_t t, symm_op_t op, uint64_t tag, size_t i)
{
    int e5 = t == SYMM_FP8_E5M2;
    float acc = 0;
    for (int p = 0; p < npes; p++) {
        uint8_t v;
        gen(t, tag, p, i, &v);
        float x = e5 ? symm_fp8_e5m2_to_float(v) : symm_fp8_e4m3_to_float(v);
        if (p == 0)
            acc = x;
        else if (op == SYMM_OP_SUM)
            acc = acc + x;
        else if (op == SYMM_OP_PROD)
            acc = acc * x;
        else if (op == SYMM_OP_MIN)
            acc = x < acc ? x : acc;
        else
            acc = x > acc ? x : acc;
    }
    return e5 ? symm_float_to_fp8_e5m2(acc) : symm_float_to_fp8_e4m3(acc);
}

/* Expected out tile (layout of shape o) in refbuf: sentinel everywhere, the reduction of
 * every PE's tile tag at the tile's elements. */
static void make_ref(shape_t s, size_t out_ld, symm_type_t t, symm_op_t op, uint64_t tag)
{
    size_t sz = symm_type_size(t);
    memset(refbuf, SENTINEL, TILE_BYTES);
    uint8_t v[8];
    for (size_t r = 0; r < s.rows; r++)
        for (size_t c = 0; c < s.cols; c++) {
            uint8_t *acc = refbuf + (r * out_ld + c) * sz;
            if (t == SYMM_FP8_E4M3 || t == SYMM_FP8_E5M2) {
                *acc = ref_fp8(t, op, tag, r * s.cols + c);
                continue;
            }
            gen(t, tag, 0, r * s.cols + c, acc);
            for (int p = 1; p < npes; p++) {
                gen(t, tag, p, r * s.cols + c, v);
                ref_op(t, op, acc, v);
            }
        }
}

static symm_tile_t out_tile(shape_t s, size_t out_ld)
{
    memset(outbuf, SENTINEL, TILE_BYTES);
    return (symm_tile_t){outbuf, s.rows, s.cols, out_ld};
}

static void check_out(int expect_written, const char *what, symm_type_t t, symm_op_t op,
                      shape_t s)
{
    if (expect_written)
        CHECK_BYTES(outbuf, refbuf, TILE_BYTES, "%s %s %s %zux%zu ld %zu", what,
                    symm_type_name(t), symm_op_name(op), s.rows, s.cols, s.ld);
    else
        CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "%s: out of a non-root %s %s", what,
                        symm_type_name(t), symm_op_name(op));
}

/* ---------------------------------------------------------------- one case of each form */
static uint64_t tagc = 1;

static void case_rooted(shape_t s, size_t out_ld, symm_type_t t, symm_op_t op, int root)
{
    uint64_t tag = tagc++;
    symm_tile_t in = fill_in(0, s, t, tag), out = out_tile(s, out_ld);
    make_ref(s, out_ld, t, op, tag);
    CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, out, in, t, op, root));
    check_out(me == root && s.rows && s.cols, "rooted", t, op, s);
}

static void case_all(shape_t s, size_t out_ld, symm_type_t t, symm_op_t op)
{
    uint64_t tag = tagc++;
    symm_tile_t in = fill_in(0, s, t, tag), out = out_tile(s, out_ld);
    make_ref(s, out_ld, t, op, tag);
    CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, t, op));
    check_out(s.rows && s.cols, "all", t, op, s);
}

/* nroots tiles, tile k of shape s with k%3 more rows, rooted at (k + shift) % npes. */
static void case_multi(shape_t s, symm_type_t t, symm_op_t op, int nroots, int shift)
{
    if (nroots > MAX_TILES) nroots = MAX_TILES;
    uint64_t tag0 = tagc;
    tagc += (uint64_t)nroots;
    symm_tile_t in[MAX_TILES];
    int roots[MAX_TILES], mine = -1;
    shape_t sk[MAX_TILES];
    for (int k = 0; k < nroots; k++) {
        sk[k] = s;
        if (s.rows) sk[k].rows += (size_t)(k % 3);
        in[k] = fill_in(k, sk[k], t, tag0 + (uint64_t)k);
        roots[k] = (k + shift) % npes;
        if (roots[k] == me) mine = k;
    }
    shape_t os = mine >= 0 ? sk[mine] : s;
    symm_tile_t out = out_tile(os, os.ld);
    if (mine >= 0) make_ref(os, os.ld, t, op, tag0 + (uint64_t)mine);
    CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, in, roots, nroots, t, op));
    check_out(mine >= 0 && os.rows && os.cols, "multi", t, op, os);
}

static const symm_op_t all_ops[] = {SYMM_OP_SUM, SYMM_OP_PROD, SYMM_OP_MIN, SYMM_OP_MAX,
                                    SYMM_OP_AND, SYMM_OP_OR,   SYMM_OP_XOR};

static void test_types_ops(void)
{
    shape_t s = {5, 7, 9};
    int i = 0;
    for (int t = 0; t < SYMM_TYPE_COUNT; t++)
        for (int o = 0; o < SYMM_OP_COUNT; o++) {
            if (!op_valid((symm_type_t)t, all_ops[o])) continue;
            case_rooted(s, 8, (symm_type_t)t, all_ops[o], i++ % npes);
            case_all(s, 11, (symm_type_t)t, all_ops[o]);
            case_multi(s, (symm_type_t)t, all_ops[o], npes < 3 ? npes : 3, i);
        }
}

static void test_shapes(void)
{
    static const shape_t shapes[] =
        {
            {1, 1, 1}, {1, 13, 13},  {1, 13, 50},  {9, 1, 1},   {9, 1, 4},
            {7, 3, 3}, {17, 33, 40}, {3, 64, 64},  {31, 5, 17}, {0, 5, 5},
            {4, 0, 4}, {0, 0, 0},    {70, 64, 70}, /* over SYMM_COLL_SMALL for 4- and 8-byte
                                                      types: banded allreduce */
        };
    static const struct {
        symm_type_t t;
        symm_op_t op;
    } tops[] = {{SYMM_INT32, SYMM_OP_SUM},
                {SYMM_DOUBLE, SYMM_OP_MAX},
                {SYMM_BF16, SYMM_OP_SUM},
                {SYMM_UINT8, SYMM_OP_XOR},
                {SYMM_FP8_E4M3, SYMM_OP_SUM}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof tops / sizeof tops[0]; j++) {
            shape_t s = shapes[i];
            case_rooted(s, s.cols + (i % 3), tops[j].t, tops[j].op, (int)(i + j) % npes);
            case_all(s, s.cols + (j % 2) * 5, tops[j].t, tops[j].op);
            case_multi(s, tops[j].t, tops[j].op, npes < MAX_TILES ? npes : MAX_TILES, (int)i);
        }
    /* empty tiles with NULL bases, and no roots at all */
    symm_tile_t e = {NULL, 0, 4, 4}, eo = out_tile((shape_t){0, 4, 4}, 4);
    eo.base = NULL;
    CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, eo, e, SYMM_INT32, SYMM_OP_SUM, npes - 1));
    CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, eo, e, SYMM_INT32, SYMM_OP_SUM));
    CHECK_OK(
        symm_tile_reduce_multi(SYMM_TEAM_WORLD, eo, NULL, NULL, 0, SYMM_INT32, SYMM_OP_SUM));
    CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "empty tiles wrote");
}

/* Random shapes, types, ops and roots (drawn alike on every PE). */
static void test_random(void)
{
    test_rng_t r;
    test_rng_seed(&r, test_mix(seed, 777));
    for (int it = 0; it < 60; it++) {
        symm_type_t t = (symm_type_t)test_rng_below(&r, SYMM_TYPE_COUNT);
        symm_op_t op = all_ops[test_rng_below(&r, SYMM_OP_COUNT)];
        if (!op_valid(t, op)) op = SYMM_OP_MAX;
        shape_t s = {test_rng_below(&r, 41), test_rng_below(&r, 41), 0};
        s.ld = s.cols + test_rng_below(&r, 8);
        size_t out_ld = s.cols + test_rng_below(&r, 4);
        switch (it % 3) {
        case 0:
            case_rooted(s, out_ld, t, op, (int)test_rng_below(&r, (uint64_t)npes));
            break;
        case 1:
            case_all(s, out_ld, t, op);
            break;
        default:
            case_multi(s, t, op, 1 + (int)test_rng_below(&r, (uint64_t)npes),
                       (int)test_rng_below(&r, 8));
        }
    }
}

/* In place: out is the in tile. */
static void test_in_place(void)
{
    shape_t s = {6, 5, 8};
    for (int root = 0; root < npes; root++) {
        uint64_t tag = tagc++;
        symm_tile_t in = fill_in(0, s, SYMM_DOUBLE, tag);
        make_ref(s, s.ld, SYMM_DOUBLE, SYMM_OP_SUM, tag);
        CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, in, in, SYMM_DOUBLE, SYMM_OP_SUM, root));
        if (me == root)
            for (size_t r = 0; r < s.rows; r++)
                CHECK_BYTES(inbuf + r * s.ld * 8, refbuf + r * s.ld * 8, s.cols * 8,
                            "in-place rooted reduce, root %d, row %zu", root, r);
        CHECK_OK(symm_barrier_all());
    }
    uint64_t tag = tagc++;
    symm_tile_t in = fill_in(0, s, SYMM_INT16, tag);
    make_ref(s, s.ld, SYMM_INT16, SYMM_OP_PROD, tag);
    CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, in, in, SYMM_INT16, SYMM_OP_PROD));
    for (size_t r = 0; r < s.rows; r++)
        CHECK_BYTES(inbuf + r * s.ld * 2, refbuf + r * s.ld * 2, s.cols * 2,
                    "in-place allreduce row %zu", r);
    /* multi in place: each root's out is its own tile */
    int nroots = npes < 4 ? npes : 4, roots[4], mine = -1;
    symm_tile_t tiles[4];
    for (int k = 0; k < nroots; k++) {
        tiles[k] = fill_in(k, s, SYMM_FLOAT, tag * 10 + (uint64_t)k);
        roots[k] = npes - 1 - k;
        if (roots[k] == me) mine = k;
    }
    symm_tile_t out = mine >= 0 ? tiles[mine] : (symm_tile_t){NULL, 0, 0, 0};
    if (mine >= 0) make_ref(s, s.ld, SYMM_FLOAT, SYMM_OP_MIN, tag * 10 + (uint64_t)mine);
    CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, tiles, roots, nroots, SYMM_FLOAT,
                                    SYMM_OP_MIN));
    if (mine >= 0)
        for (size_t r = 0; r < s.rows; r++)
            CHECK_BYTES(inbuf + (size_t)mine * TILE_BYTES + r * s.ld * 4, refbuf + r * s.ld * 4,
                        s.cols * 4, "in-place multi row %zu", r);
    CHECK_OK(symm_barrier_all());
}

/* ---------------------------------------------------------------- workers */
typedef struct {
    symm_pool_t pool;
    int worker, nworkers, kind; /* 0 rooted, 1 all, 2 multi */
    symm_tile_t out;
    const symm_tile_t *in;
    const int *roots;
    int nroots, root;
    symm_type_t t;
    symm_op_t op;
    symm_status_t st;
} wjob_t;

static void *wjob_main(void *p)
{
    wjob_t *j = p;
    if (j->kind == 0)
        j->st = symm_tile_reduce_worker(j->pool, j->worker, j->nworkers, j->out, j->in[0], j->t,
                                        j->op, j->root);
    else if (j->kind == 1)
        j->st = symm_tile_allreduce_worker(j->pool, j->worker, j->nworkers, j->out, j->in[0],
                                           j->t, j->op);
    else
        j->st = symm_tile_reduce_multi_worker(j->pool, j->worker, j->nworkers, j->out, j->in,
                                              j->roots, j->nroots, j->t, j->op);
    return NULL;
}

static void test_workers(void)
{
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    uint8_t *plain = malloc(TILE_BYTES);
    shape_t s = {90, 50, 56}; /* 18 KB: the banded allreduce */
    const symm_type_t t = SYMM_FLOAT;
    const symm_op_t op = SYMM_OP_SUM;
    for (int kind = 0; kind < 3; kind++) {
        uint64_t tag = tagc;
        tagc += MAX_TILES;
        int nroots = npes < 3 ? npes : 3, roots[3], root = 1 % npes, mine = -1;
        symm_tile_t in[3];
        for (int k = 0; k < nroots; k++) {
            in[k] = fill_in(k, s, t, tag + (uint64_t)k);
            roots[k] = (k + 1) % npes;
            if (roots[k] == me) mine = k;
        }
        int written = kind == 1 || (kind == 0 && me == root) || (kind == 2 && mine >= 0);
        make_ref(s, s.ld, t, op, tag + (uint64_t)(kind == 2 ? (mine >= 0 ? mine : 0) : 0));
        symm_tile_t out = out_tile(s, s.ld);
        if (kind == 0) CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, out, in[0], t, op, root));
        if (kind == 1) CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in[0], t, op));
        if (kind == 2)
            CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, in, roots, nroots, t, op));
        if (written) CHECK_BYTES(outbuf, refbuf, TILE_BYTES, "plain kind %d", kind);
        memcpy(plain, outbuf, TILE_BYTES);
        for (int nw = 0; nw <= 8; nw++) { /* 0: the automatic worker count */
            out = out_tile(s, s.ld);
            if (kind == 0)
                CHECK_OK(symm_tile_reduce_parallel(pool, nw, out, in[0], t, op, root));
            if (kind == 1) CHECK_OK(symm_tile_allreduce_parallel(pool, nw, out, in[0], t, op));
            if (kind == 2)
                CHECK_OK(
                    symm_tile_reduce_multi_parallel(pool, nw, out, in, roots, nroots, t, op));
            CHECK_BYTES(outbuf, plain, TILE_BYTES, "parallel kind %d, %d workers", kind, nw);
            if (nw != 1 && nw != 3 && nw != 8) continue;
            out = out_tile(s, s.ld);
            wjob_t proto = {.pool = pool,
                            .kind = kind,
                            .out = out,
                            .in = in,
                            .roots = roots,
                            .nroots = nroots,
                            .root = root,
                            .t = t,
                            .op = op};
            TEST_RUN_WORKERS(wjob_t, proto, nw, wjob_main);
            CHECK_BYTES(outbuf, plain, TILE_BYTES, "own threads kind %d, %d workers", kind, nw);
        }
    }
    free(plain);
    CHECK_OK(symm_pool_destroy(pool));
}

/* ---------------------------------------------------------------- automatic count */
/* Set before symm_init: every PE asks for a different SYMM_NODE_CPUS (8 x PEs + its rank),
 * so the automatic count is right only if all PEs agree on the least one (8 per PE);
 * left alone where the environment already sets it. */
static int node_cpus_forced;

static void force_node_cpus(void)
{
    if (getenv("SYMM_NODE_CPUS")) return;
    int rank, np;
    test_launch_rank(&rank, &np);
    char buf[32];
    snprintf(buf, sizeof buf, "%d", 8 * np + rank);
    setenv("SYMM_NODE_CPUS", buf, 1);
    node_cpus_forced = 1;
}

/* Tiles big enough for several automatic workers (at least 64 KiB each): nworkers == 0
 * gives the bytes of the plain form and of the explicit count it picks. */
static void test_auto_workers(void)
{
    enum { AUTO_ROWS = 700, AUTO_LD = 1000, AUTO_TILES = 3 };
    const size_t tile_bytes = (size_t)AUTO_ROWS * AUTO_LD * 4;
    uint8_t *big_in = symm_malloc(AUTO_TILES * tile_bytes), *big_out = symm_malloc(tile_bytes);
    uint8_t *plain = malloc(tile_bytes);
    CHECK_TRUE(big_in && big_out && plain, "allocation");
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    if (node_cpus_forced) CHECK_EQ_I64(symm_pool_auto_workers(pool, SIZE_MAX), 8);
    /* float tiles of rows x cols (ld AUTO_LD): just below 2 and 3 x 64 KiB, and 35 x */
    const size_t shapes[][2] = {{32, 1000}, {49, 1000}, {577, 1000}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
        size_t rows = shapes[sh][0], cols = shapes[sh][1];
        symm_tile_t in[AUTO_TILES];
        int roots[AUTO_TILES], nroots = npes < AUTO_TILES ? npes : AUTO_TILES;
        for (int k = 0; k < nroots; k++) {
            uint8_t *base = big_in + (size_t)k * tile_bytes;
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++)
                    gen(SYMM_FLOAT, tagc + (uint64_t)k, me, r * cols + c,
                        base + (r * AUTO_LD + c) * 4);
            in[k] = (symm_tile_t){base, rows, cols, AUTO_LD};
            roots[k] = (k + 1) % npes;
        }
        tagc += AUTO_TILES;
        for (int kind = 0; kind < 3; kind++) {
            symm_tile_t out = {big_out, rows, cols, AUTO_LD};
            size_t work = rows * cols * 4 * (size_t)(kind == 2 ? nroots : 1);
            int nw = symm_pool_auto_workers(pool, work);
            /* all PEs chose the same count */
            int64_t lo = nw, hi = nw, *v = symm_malloc(2 * sizeof *v);
            CHECK_TRUE(v != NULL, "allocation");
            v[0] = -lo;
            v[1] = hi;
            CHECK_OK(symm_allreduce(SYMM_TEAM_WORLD, v, v, 2, SYMM_INT64, SYMM_OP_MAX));
            CHECK_TRUE(-v[0] == nw && v[1] == nw,
                       "automatic count differs between PEs: %d "
                       "here, %lld..%lld",
                       nw, (long long)-v[0], (long long)v[1]);
            symm_free(v);
            if (node_cpus_forced) {
                int want = (int)(work / (64 << 10)) < 8 ? (int)(work / (64 << 10)) : 8;
                CHECK_TRUE(nw == (want < 1 ? 1 : want),
                           "kind %d, %zu bytes: %d workers, "
                           "expected %d",
                           kind, work, nw, want < 1 ? 1 : want);
            }
            for (int pass = 0; pass < 3; pass++) { /* plain, automatic, explicit */
                memset(big_out, SENTINEL, tile_bytes);
                CHECK_OK(symm_barrier_all());
                int w = pass == 1 ? 0 : nw;
                if (pass == 0 && kind == 0)
                    CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, out, in[0], SYMM_FLOAT,
                                              SYMM_OP_SUM, 1 % npes));
                if (pass == 0 && kind == 1)
                    CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in[0], SYMM_FLOAT,
                                                 SYMM_OP_SUM));
                if (pass == 0 && kind == 2)
                    CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, in, roots, nroots,
                                                    SYMM_FLOAT, SYMM_OP_SUM));
                if (pass > 0 && kind == 0)
                    CHECK_OK(symm_tile_reduce_parallel(pool, w, out, in[0], SYMM_FLOAT,
                                                       SYMM_OP_SUM, 1 % npes));
                if (pass > 0 && kind == 1)
                    CHECK_OK(symm_tile_allreduce_parallel(pool, w, out, in[0], SYMM_FLOAT,
                                                          SYMM_OP_SUM));
                if (pass > 0 && kind == 2)
                    CHECK_OK(symm_tile_reduce_multi_parallel(pool, w, out, in, roots, nroots,
                                                             SYMM_FLOAT, SYMM_OP_SUM));
                CHECK_OK(symm_barrier_all()); /* the rooted forms write root's out remotely */
                if (pass == 0)
                    memcpy(plain, big_out, tile_bytes);
                else
                    CHECK_BYTES(big_out, plain, tile_bytes,
                                "kind %d, %zu x %zu, %s (%d "
                                "workers)",
                                kind, rows, cols, pass == 1 ? "automatic" : "explicit", nw);
            }
        }
    }
    CHECK_OK(symm_pool_destroy(pool));
    free(plain);
    CHECK_OK(symm_free(big_out));
    CHECK_OK(symm_free(big_in));
}

/* ---------------------------------------------------------------- bad input */
static void test_bad_input(void)
{
    shape_t s = {4, 6, 6};
    symm_tile_t in = fill_in(0, s, SYMM_INT32, tagc++), out = out_tile(s, 6);
    symm_tile_t bad = in;
    bad.ld = 5; /* < cols */
    CHECK_STATUS(symm_tile_reduce(SYMM_TEAM_WORLD, out, bad, SYMM_INT32, SYMM_OP_SUM, 0),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, out, bad, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_FLOAT, SYMM_OP_XOR),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_TYPE_COUNT, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_INT32, (symm_op_t)99),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_reduce(SYMM_TEAM_WORLD, out, in, SYMM_INT32, SYMM_OP_SUM, npes),
                 SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_tile_reduce(SYMM_TEAM_WORLD, out, in, SYMM_INT32, SYMM_OP_SUM, -1),
                 SYMM_ERR_PE_OUT_OF_RANGE);
    /* out shape differs from in */
    symm_tile_t small = out;
    small.rows = 3;
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, small, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    /* in not symmetric */
    int32_t *local = malloc(64 * sizeof(int32_t));
    for (int i = 0; i < 64; i++)
        local[i] = i + 1;
    symm_tile_t lin = {local, 4, 6, 6};
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, out, lin, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_NOT_SYMMETRIC);
    /* allreduce's out must be symmetric too */
    symm_tile_t lout = {local, 4, 6, 6};
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, lout, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_NOT_SYMMETRIC);
    for (int i = 0; i < 64; i++)
        CHECK_EQ_I64(local[i], i + 1);
    /* out overlapping in without being it */
    symm_tile_t shifted = in;
    shifted.base = inbuf + 4;
    CHECK_STATUS(symm_tile_allreduce(SYMM_TEAM_WORLD, shifted, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    /* NULL base of a non-empty tile */
    symm_tile_t nul = in;
    nul.base = NULL;
    CHECK_STATUS(symm_tile_reduce(SYMM_TEAM_WORLD, out, nul, SYMM_INT32, SYMM_OP_SUM, 0),
                 SYMM_ERR_INVALID_ARG);
    /* multi: duplicate roots, too many roots, NULL arrays */
    if (npes >= 2) {
        symm_tile_t two[2] = {in, fill_in(1, s, SYMM_INT32, tagc++)};
        int dup[2] = {1, 1};
        CHECK_STATUS(
            symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, two, dup, 2, SYMM_INT32, SYMM_OP_SUM),
            SYMM_ERR_INVALID_ARG);
    }
    int r0 = 0;
    CHECK_STATUS(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, &in, &r0, npes + 1, SYMM_INT32,
                                        SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(
        symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, NULL, &r0, 1, SYMM_INT32, SYMM_OP_SUM),
        SYMM_ERR_INVALID_ARG);
    CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "a failed call wrote out");
    /* worker forms */
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
    CHECK_STATUS(symm_tile_allreduce_parallel(pool, 3, out, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce_parallel(pool, -1, out, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce_worker(pool, 2, 2, out, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_tile_allreduce_worker(pool, -1, 2, out, in, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(
        symm_tile_allreduce_parallel((symm_pool_t)12345, 1, out, in, SYMM_INT32, SYMM_OP_SUM),
        SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_tile_allreduce_parallel(pool, 2, out, bad, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_INVALID_ARG);
    CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "a failed worker call wrote out");
    CHECK_OK(symm_pool_destroy(pool));
    /* Only one PE passes a bad argument: every PE fails, nothing is written. */
    if (npes >= 2) {
        symm_tile_t mixed = me == npes - 1 ? bad : in;
        symm_status_t st =
            symm_tile_reduce(SYMM_TEAM_WORLD, out, mixed, SYMM_INT32, SYMM_OP_SUM, 0);
        CHECK_TRUE(st == SYMM_ERR_INVALID_ARG || st == SYMM_ERR_COLL_MISMATCH,
                   "one bad PE: status %d", (int)st);
        CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "one bad PE: out written");
        CHECK_OK(symm_barrier_all());
    }
    /* One PE's bad worker count, or (automatic count) a bad type that would make it
     * pick another count than its peers: every PE fails alike, no worker is left
     * waiting on a duplicate, and the pool's duplicates all work next. */
    if (npes >= 2) {
        CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
        for (int form = 0; form < 2; form++) {
            if (form == 1 && !node_cpus_forced) continue; /* the count is 1 everywhere */
            int odd = me == npes - 1;
            int nw = form == 0 ? (odd ? 3 : 2) : 0;
            symm_type_t ty = form == 1 && odd ? SYMM_TYPE_COUNT : SYMM_INT32;
            symm_status_t st = symm_tile_allreduce_parallel(pool, nw, out, in, ty, SYMM_OP_SUM);
            CHECK_STATUS(st, SYMM_ERR_INVALID_ARG);
            CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "one bad worker call: out written");
            CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_INT32, SYMM_OP_SUM));
            memcpy(refbuf, outbuf, TILE_BYTES);
            memset(outbuf, SENTINEL, TILE_BYTES);
            CHECK_OK(symm_barrier_all());
            CHECK_OK(symm_tile_allreduce_parallel(pool, 2, out, in, SYMM_INT32, SYMM_OP_SUM));
            CHECK_BYTES(outbuf, refbuf, TILE_BYTES, "after one bad worker call, form %d", form);
            memset(outbuf, SENTINEL, TILE_BYTES);
            CHECK_OK(symm_barrier_all());
        }
        CHECK_OK(symm_pool_destroy(pool));
    }
    free(local);
    /* the team still works */
    case_all(s, 6, SYMM_INT32, SYMM_OP_SUM);
}

/* ---------------------------------------------------------------- where tiles lie */
/* Legal: empty tiles with any base (NULL or not) and either dimension 0, and rooted outs
 * that differ between members (each root still gets its reduction). */
static void test_objects_legal(void)
{
    symm_tile_t e = me % 2 ? (symm_tile_t){NULL, 0, 4, 4} : (symm_tile_t){inbuf + 8, 3, 0, 0};
    symm_tile_t eo = e;
    eo.base = me % 2 ? NULL : outbuf + 16;
    memset(outbuf, SENTINEL, TILE_BYTES);
    memset(inbuf, 0x5c, 64);
    CHECK_OK(symm_tile_reduce(SYMM_TEAM_WORLD, eo, e, SYMM_INT32, SYMM_OP_SUM, npes - 1));
    CHECK_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, eo, e, SYMM_INT32, SYMM_OP_SUM));
    symm_tile_t es[2] = {e, e};
    int r2[2] = {0, npes - 1};
    CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, eo, es, r2, npes > 1 ? 2 : 1, SYMM_INT32,
                                    SYMM_OP_SUM));
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    /* the automatic worker count too: every member must pick the same one */
    CHECK_OK(symm_tile_allreduce_parallel(pool, 0, eo, e, SYMM_INT32, SYMM_OP_SUM));
    CHECK_OK(symm_tile_reduce_parallel(pool, 0, eo, e, SYMM_INT32, SYMM_OP_SUM, 0));
    CHECK_OK(symm_tile_reduce_multi_parallel(pool, 0, eo, me % 2 ? NULL : es, NULL, 0,
                                             SYMM_INT32, SYMM_OP_SUM));
    CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "empty tiles wrote");
    CHECK_ALL_BYTES(inbuf, 0x5c, 64, "empty tiles wrote in");
    /* outs in different objects and at different offsets: odd members use altbuf */
    const shape_t shapes[] = {{5, 7, 9}, {40, 33, 35}, {1, 100, 100}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int form = 0; form < 3; form++) {
            shape_t sh = shapes[i];
            uint64_t tag = tagc++;
            symm_tile_t in = fill_in(0, sh, SYMM_FLOAT, tag);
            int root = (int)(i + (size_t)form) % npes;
            make_ref(sh, sh.ld, SYMM_FLOAT, SYMM_OP_SUM, tag);
            memset(outbuf, SENTINEL, TILE_BYTES);
            memset(altbuf, SENTINEL, TILE_BYTES);
            uint8_t *ob = me % 2 ? altbuf + 4 * (size_t)me : outbuf;
            symm_tile_t out = {ob, sh.rows, sh.cols, sh.ld};
            if (form == 0)
                CHECK_OK(
                    symm_tile_reduce(SYMM_TEAM_WORLD, out, in, SYMM_FLOAT, SYMM_OP_SUM, root));
            if (form == 1)
                CHECK_OK(
                    symm_tile_reduce_parallel(pool, 3, out, in, SYMM_FLOAT, SYMM_OP_SUM, root));
            if (form == 2)
                CHECK_OK(symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, &in, &root, 1, SYMM_FLOAT,
                                                SYMM_OP_SUM));
            size_t span = ((sh.rows - 1) * sh.ld + sh.cols) * 4;
            if (me == root)
                CHECK_BYTES(ob, refbuf, span, "different outs, form %d, %zu x %zu", form,
                            sh.rows, sh.cols);
            else
                CHECK_ALL_BYTES(ob, SENTINEL, span, "different outs: a non-root's out written");
            CHECK_OK(symm_barrier_all());
        }
    CHECK_OK(symm_pool_destroy(pool));
}

/* Illegal: member npes-1 passes its in (or allreduce's out) at another offset or in
 * another object, holding the same data. Every member fails with COLL_MISMATCH naming
 * it, and nothing is written. */
static void test_objects_differ(void)
{
    if (npes < 2) return;
    int odd_one = npes - 1;
    char want[64];
    snprintf(want, sizeof want, "PE %d (world %d)", odd_one, odd_one);
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
    shape_t sh = {6, 5, 8};
    const symm_type_t t = SYMM_INT64;
    for (int where = 0; where < 3; where++) { /* in: offset, in: object, allreduce's out */
        uint64_t tag = tagc++;
        symm_tile_t in = fill_in(0, sh, t, tag);
        symm_tile_t out = {outbuf, sh.rows, sh.cols, sh.ld};
        if (me == odd_one && where < 2) {
            uint8_t *b = where == 0 ? inbuf + TILE_BYTES : altbuf;
            memcpy(b, in.base, TILE_BYTES);
            in.base = b;
        }
        if (me == odd_one && where == 2) out.base = altbuf;
        for (int form = 0; form < 6; form++) {
            memset(outbuf, SENTINEL, TILE_BYTES);
            if (where == 2) memset(altbuf, SENTINEL, TILE_BYTES);
            int roots[2] = {0, odd_one};
            symm_tile_t two[2] = {in, in};
            symm_status_t st = SYMM_SUCCESS;
            if (where == 2 && form != 1 && form != 4) continue; /* out matters in allreduce */
            switch (form) {
            case 0:
                st = symm_tile_reduce(SYMM_TEAM_WORLD, out, in, t, SYMM_OP_SUM, 0);
                break;
            case 1:
                st = symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, t, SYMM_OP_SUM);
                break;
            case 2:
                st =
                    symm_tile_reduce_multi(SYMM_TEAM_WORLD, out, two, roots, 2, t, SYMM_OP_SUM);
                break;
            case 3:
                st = symm_tile_reduce_parallel(pool, 2, out, in, t, SYMM_OP_SUM, odd_one);
                break;
            case 4:
                st = symm_tile_allreduce_parallel(pool, 0, out, in, t, SYMM_OP_SUM);
                break;
            default:
                st = symm_tile_reduce_multi_parallel(pool, 2, out, two, roots, 2, t,
                                                     SYMM_OP_SUM);
            }
            CHECK_TRUE(st == SYMM_ERR_COLL_MISMATCH, "where %d form %d: status %d (%s)", where,
                       form, (int)st, symm_strerror(st));
            CHECK_TRUE(strstr(symm_last_error(), want) != NULL,
                       "where %d form %d: names the "
                       "PE: %s",
                       where, form, symm_last_error());
            CHECK_ALL_BYTES(outbuf, SENTINEL, TILE_BYTES, "where %d form %d: out written",
                            where, form);
            if (where == 2)
                CHECK_ALL_BYTES(altbuf, SENTINEL, TILE_BYTES, "where %d form %d: out written",
                                where, form);
        }
    }
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_barrier_all());
    case_all(sh, 8, SYMM_INT32, SYMM_OP_SUM); /* the team still works */
}

/* ---------------------------------------------------------------- large tiles */
/* Tiles of up to 2.2 MB, so that between members that share no memory the rows travel in
 * several chunks and the rings of slots wrap (coll/tile_far.c): the rooted and multi
 * forms with several roots, the allreduce banded and whole, on WORLD and on a team of
 * the world in reverse order (a sub-team of the first half, too, where there are 3 PEs
 * or more), with odd shapes, random data and a serial reference in team order. */
#define LARGE_BYTES ((size_t)5 << 20)

static void large_ref(symm_team_t team, uint8_t *ref, shape_t s, size_t out_ld, symm_type_t t,
                      symm_op_t op, uint64_t tag)
{
    size_t sz = symm_type_size(t);
    int tn = symm_team_n_pes(team);
    uint8_t v[8];
    for (size_t r = 0; r < s.rows; r++)
        for (size_t c = 0; c < s.cols; c++) {
            uint8_t *acc = ref + (r * out_ld + c) * sz;
            gen(t, tag, symm_team_world_pe(team, 0), r * s.cols + c, acc);
            for (int m = 1; m < tn; m++) {
                gen(t, tag, symm_team_world_pe(team, m), r * s.cols + c, v);
                ref_op(t, op, acc, v);
            }
        }
}

static symm_tile_t large_fill(uint8_t *base, shape_t s, symm_type_t t, uint64_t tag)
{
    size_t sz = symm_type_size(t);
    memset(base, 0x5c, ((s.rows - 1) * s.ld + s.cols) * sz);
    for (size_t r = 0; r < s.rows; r++)
        for (size_t c = 0; c < s.cols; c++)
            gen(t, tag, me, r * s.cols + c, base + (r * s.ld + c) * sz);
    return (symm_tile_t){base, s.rows, s.cols, s.ld};
}

static void large_check(const uint8_t *out, const uint8_t *ref, shape_t s, size_t out_ld,
                        symm_type_t t, const char *what)
{
    size_t sz = symm_type_size(t);
    for (size_t r = 0; r < s.rows; r++)
        CHECK_BYTES(out + r * out_ld * sz, ref + r * out_ld * sz, s.cols * sz,
                    "large %s %s %zux%zu ld %zu, row %zu", what, symm_type_name(t), s.rows,
                    s.cols, s.ld, r);
    /* the gaps between rows are not written */
    for (size_t r = 0; r + 1 < s.rows && out_ld > s.cols; r++)
        CHECK_ALL_BYTES(out + (r * out_ld + s.cols) * sz, SENTINEL, (out_ld - s.cols) * sz,
                        "large %s: gap after row %zu", what, r);
}

static void large_cases(symm_team_t team, uint8_t *lin, uint8_t *lout, uint8_t *lref,
                        test_rng_t *rng)
{
    static const struct {
        shape_t s;
        symm_type_t t;
        symm_op_t op;
    } cases[] = {
        {{1, 5000, 5000}, SYMM_DOUBLE, SYMM_OP_SUM},  /* one long row */
        {{1700, 131, 137}, SYMM_FLOAT, SYMM_OP_SUM},  /* 0.9 MB */
        {{2150, 128, 131}, SYMM_DOUBLE, SYMM_OP_MAX}, /* 2.2 MB: allreduce bands wrap */
        {{6001, 67, 67}, SYMM_INT32, SYMM_OP_SUM},    /* contiguous rows */
        {{9000, 9, 16}, SYMM_UINT8, SYMM_OP_XOR},     /* many short rows */
        {{811, 333, 340}, SYMM_BF16, SYMM_OP_SUM},    /* 0.5 MB of 2-byte elements */
    };
    int tn = symm_team_n_pes(team), tme = symm_team_my_pe(team);
    uint64_t tag0 = tagc; /* tagc moves on every PE alike, in or out of the team */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shape_t s = cases[i].s;
        symm_type_t t = cases[i].t;
        symm_op_t op = cases[i].op;
        size_t sz = symm_type_size(t), out_ld = s.cols + (i % 2) * 3;
        size_t span = ((s.rows - 1) * s.ld + s.cols) * sz;
        size_t ospan = ((s.rows - 1) * out_ld + s.cols) * sz;
        CHECK_TRUE(span <= LARGE_BYTES / 2 && ospan <= LARGE_BYTES / 2, "case %zu fits", i);
        /* rooted */
        int root = (int)test_rng_below(rng, (uint64_t)tn);
        uint64_t tag = tag0++;
        symm_tile_t in = large_fill(lin, s, t, tag), out = {lout, s.rows, s.cols, out_ld};
        memset(lout, SENTINEL, ospan);
        CHECK_OK(symm_tile_reduce(team, out, in, t, op, root));
        if (tme == root) {
            large_ref(team, lref, s, out_ld, t, op, tag);
            large_check(lout, lref, s, out_ld, t, "rooted");
        }
        CHECK_OK(symm_sync(team));
        /* allreduce, out of place (banded, or whole when small) */
        tag = tag0++;
        in = large_fill(lin, s, t, tag);
        memset(lout, SENTINEL, ospan);
        CHECK_OK(symm_tile_allreduce(team, out, in, t, op));
        large_ref(team, lref, s, out_ld, t, op, tag);
        large_check(lout, lref, s, out_ld, t, "all");
        /* allreduce in place */
        tag = tag0++;
        in = large_fill(lin, s, t, tag);
        CHECK_OK(symm_tile_allreduce(team, in, in, t, op));
        large_ref(team, lref, s, s.ld, t, op, tag);
        for (size_t r = 0; r < s.rows; r++)
            CHECK_BYTES(lin + r * s.ld * sz, lref + r * s.ld * sz, s.cols * sz,
                        "large in-place all %s row %zu", symm_type_name(t), r);
        CHECK_OK(symm_sync(team));
        /* two roots, tiles of the same shape side by side in lin */
        if (tn >= 2 && 2 * span <= LARGE_BYTES) {
            int roots[2] = {(root + 1) % tn, root};
            symm_tile_t tiles[2];
            tag = tag0;
            tag0 += 2;
            tiles[0] = large_fill(lin, s, t, tag);
            tiles[1] = large_fill(lin + LARGE_BYTES / 2, s, t, tag + 1);
            int mine = tme == roots[0] ? 0 : tme == roots[1] ? 1 : -1;
            memset(lout, SENTINEL, ospan);
            CHECK_OK(symm_tile_reduce_multi(
                team, mine >= 0 ? out : (symm_tile_t){NULL, 0, 0, 0}, tiles, roots, 2, t, op));
            if (mine >= 0) {
                large_ref(team, lref, s, out_ld, t, op, tag + (uint64_t)mine);
                large_check(lout, lref, s, out_ld, t, "multi");
            }
            CHECK_OK(symm_sync(team));
        }
    }
}

static void test_large(void)
{
    uint8_t *lin = symm_malloc(LARGE_BYTES), *lout = symm_malloc(LARGE_BYTES / 2);
    uint8_t *lref = malloc(LARGE_BYTES / 2);
    CHECK_TRUE(lin && lout && lref, "large buffers");
    memset(lref, SENTINEL, LARGE_BYTES / 2);
    test_rng_t rng;
    test_rng_seed(&rng, test_mix(seed, 4242));
    large_cases(SYMM_TEAM_WORLD, lin, lout, lref, &rng);
    int ranks[64], n = npes < 64 ? npes : 64;
    for (int k = 0; k < n; k++)
        ranks[k] = n - 1 - k;
    symm_team_t rev = SYMM_TEAM_INVALID;
    if (me < n) {
        CHECK_OK(symm_team_create(ranks, n, &rev));
        large_cases(rev, lin, lout, lref, &rng);
        CHECK_OK(symm_team_destroy(rev));
    }
    tagc += 1000; /* the same on every PE, whichever teams it was in */
    if (npes >= 3) {
        symm_team_t half;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, (npes + 1) / 2, &half));
        if (half != SYMM_TEAM_INVALID) {
            large_cases(half, lin, lout, lref, &rng);
            CHECK_OK(symm_team_destroy(half));
        }
    }
    tagc += 1000;
    CHECK_OK(symm_barrier_all());
    free(lref);
    CHECK_OK(symm_free(lout));
    CHECK_OK(symm_free(lin));
}

int main(void)
{
    force_node_cpus();
    TEST_INIT();
    me = symm_my_pe();
    npes = symm_n_pes();
    seed = test_seed();
    inbuf = symm_malloc(MAX_TILES * TILE_BYTES);
    outbuf = symm_malloc(TILE_BYTES);
    altbuf = symm_malloc(TILE_BYTES);
    refbuf = malloc(TILE_BYTES);
    CHECK_TRUE(inbuf && outbuf && altbuf && refbuf, "allocation");
    test_types_ops();
    test_shapes();
    test_random();
    test_in_place();
    test_large();
    test_workers();
    test_auto_workers();
    test_bad_input();
    test_objects_legal();
    test_objects_differ();
    CHECK_OK(symm_free(altbuf));
    CHECK_OK(symm_free(outbuf));
    CHECK_OK(symm_free(inbuf));
    free(refbuf);
    CHECK_OK(symm_barrier_all());
    if (me == 0) printf("test_tile: %d PEs OK\n", npes);
    TEST_FINALIZE();
    return 0;
}
