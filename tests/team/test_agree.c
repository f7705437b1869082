/* test_agree.c — every member of a team agrees on every outcome: one member's bad
 * argument, or an argument that differs from the others', fails the collective (or the
 * team creation) on every member with the same status, names that member in the others'
 * messages, writes nothing, and leaves the team usable for a checked call right after.
 * Run on a full-size split, a strided sub-team, a pool duplicate and 1-PE teams, while
 * PEs outside the team use a team of their own; and in = NULL on a PE that sends nothing.
 * Statuses are compared through a mailbox of plain words (atomic sets and local waits),
 * not through a team, so a member that a broken call leaves waiting cannot stall or
 * break the comparison. SYMM_AGREE_KEEP_GOING=1 lists every disagreement instead of
 * stopping at the first; SYMM_AGREE_ONLY=<collective> runs the cases of one collective
 * only, SYMM_AGREE_PARTS=<letters> some parts only (c collectives, t tile and MoE, n
 * in = NULL, r team creation; f full team, s sub-team, d pool duplicate, 1 1-PE teams). */
#include "common/test_util.h"

#define MAXPES        64
#define TINY          8                  /* payloads that ride in the episode's data word */
#define SMALL         4100               /* <= SYMM_COLL_SMALL (16 KiB) */
#define LARGE         (100 * 1024 + 44)  /* > SYMM_COLL_SMALL */
#define WANT_SAME     ((symm_status_t)1) /* any error, the one member k gets */
#define WANT_MISMATCH ((symm_status_t)2) /* SYMM_ERR_MISMATCH or SYMM_ERR_COLL_MISMATCH */
#define SENTINEL      ((symm_team_t)0x7777)

static int me, npes, keep_going, failures, ncases;
static const char *only, *parts;

static int part(char c)
{
    return !parts || strchr(parts, c) != NULL;
}
static size_t cap; /* bytes of each test buffer */
static uint8_t *a_dest, *a_src, *b_dest, *b_src, *o_dest, *o_src, *heapbuf;
static uint64_t *mbox, *bar_word;
static uint32_t gseq;   /* mailbox round */
static uint32_t rot;    /* picks the bad member, in turn */
static uint32_t caseno; /* seeds the data */

/* ---------------------------------------------------------------- the test teams */
typedef struct {
    const char *name;
    symm_team_t team;        /* SYMM_TEAM_INVALID on PEs outside it */
    symm_team_t other;       /* what PEs outside it use meanwhile (INVALID: nothing) */
    symm_pool_t pool;        /* team is duplicate 2 of this pool, if not INVALID */
    symm_team_t base;        /* the split the pool is made of */
    int is_dup;              /* team is a pool duplicate */
    int solo;                /* every PE on a 1-PE team of its own */
    int n, my;               /* size, my number (-1 outside) */
    int world[MAXPES];       /* world rank of member i */
    int start, stride;       /* the split of WORLD it is (or of the pool's team) */
    int ostart, ostride, on; /* the split the others use */
} tctx_t;

static int in_team(const tctx_t *t, int p)
{
    if (t->solo) return 1;
    for (int i = 0; i < t->n; i++)
        if (t->world[i] == p) return 1;
    return 0;
}

/* ---------------------------------------------------------------- status mailbox */
/* Every PE's (status, flags) of the step just done, on every PE. Two rounds of slots:
 * a PE can be at most one round ahead of any other (it waits for everyone's word). */
static void gather(symm_status_t st, int flags, symm_status_t *st_all, int *fl_all)
{
    gseq++;
    uint64_t *slot = mbox + (size_t)(gseq & 1) * (size_t)npes;
    uint64_t v =
        (uint64_t)gseq << 32 | (uint64_t)(uint16_t)(int16_t)st | (uint64_t)(flags & 0xff) << 16;
    for (int p = 0; p < npes; p++)
        CHECK_OK(symm_atomic64(SYMM_AMO_SET, slot + me, v, 0, p, NULL));
    for (int p = 0; p < npes; p++) {
        symm_status_t w;
        int tries = 0;
        /* a PE whose call timed out comes SYMM_TIMEOUT late: wait on (local words only) */
        while ((w = symm_wait_until_uint64(slot + p, SYMM_CMP_GE, (uint64_t)gseq << 32)) ==
                   SYMM_ERR_TIMEOUT &&
               ++tries < 12) {
        }
        CHECK_OK(w);
        uint64_t x = __atomic_load_n(slot + p, __ATOMIC_ACQUIRE);
        CHECK_TRUE(x >> 32 == gseq, "mailbox of PE %d at round %llu, expected %u", p,
                   (unsigned long long)(x >> 32), gseq);
        st_all[p] = (symm_status_t)(int16_t)(uint16_t)x;
        fl_all[p] = (int)((x >> 16) & 0xff);
    }
}

/* 1 if msg names member k: "PE <kt>" or "world <kw>" not followed by a digit. */
static int names_pe(const char *msg, int kt, int kw)
{
    char pat[2][32];
    snprintf(pat[0], sizeof pat[0], "PE %d", kt);
    snprintf(pat[1], sizeof pat[1], "world %d", kw);
    for (int i = 0; i < 2; i++)
        for (const char *p = msg; (p = strstr(p, pat[i])) != NULL; p++) {
            char c = p[strlen(pat[i])];
            if (c < '0' || c > '9') return 1;
        }
    return 0;
}

#define FL_DATA 1 /* results right / nothing written after a failure */
#define FL_NAME 2 /* the message names the failing member */

/* Compares every PE's outcome of one step; members of t must all have want (a status,
 * WANT_SAME or WANT_MISMATCH), PEs outside it success. kw/kt: the failing member (world
 * and team number), -1 when every member passes good arguments. Returns 1 if they agree. */
static int judge(const tctx_t *t, const char *what, symm_status_t want, int kw, int kt,
                 symm_status_t st, int data_ok)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st ? symm_last_error() : "");
    int flags = data_ok ? FL_DATA : 0;
    int member = in_team(t, me);
    if (!member || !st || kw < 0 || kw == me || t->solo || names_pe(msg, kt, kw))
        flags |= FL_NAME;
    else
        fprintf(stderr, "  [PE %d] %s: the message does not name PE %d (world %d): %s\n", me,
                what, kt, kw, msg);
    symm_status_t all[MAXPES];
    int fl[MAXPES];
    gather(st, flags, all, fl);
    ncases++;
    symm_status_t kst = kw >= 0 ? all[kw] : SYMM_SUCCESS;
    int ok = 1;
    for (int p = 0; p < npes; p++) {
        symm_status_t s = all[p];
        if (fl[p] != (FL_DATA | FL_NAME)) ok = 0;
        if (!in_team(t, p))
            ok &= s == SYMM_SUCCESS;
        else if (t->solo)
            ok &= want == WANT_SAME ? s != SYMM_SUCCESS : s == want;
        else if (want == WANT_SAME)
            ok &= s == kst && s != SYMM_SUCCESS;
        else if (want == WANT_MISMATCH)
            ok &= s == kst && (s == SYMM_ERR_MISMATCH || s == SYMM_ERR_COLL_MISMATCH);
        else
            ok &= s == want;
    }
    if (ok) return 1;
    failures++;
    if (me == 0) {
        char line[1024];
        size_t len =
            (size_t)snprintf(line, sizeof line, "DISAGREE %s on %s (bad: world %d): want %d;",
                             what, t->name, kw, (int)want);
        for (int p = 0; p < npes && len < sizeof line - 40; p++)
            len += (size_t)snprintf(line + len, sizeof line - len, " %d:%d%s%s", p, (int)all[p],
                                    fl[p] & FL_DATA ? "" : "/data",
                                    fl[p] & FL_NAME ? "" : "/name");
        fprintf(stderr, "%s\n", line);
    }
    if (st && (kw != me || t->solo)) fprintf(stderr, "  [PE %d] %s: %s\n", me, what, msg);
    if (!keep_going) TEST_FAIL("%s on %s: the members do not agree (see above)", what, t->name);
    return 0;
}

/* ---------------------------------------------------------------- data and references */
static void gen(void *buf, size_t bytes, uint32_t c, int j)
{
    test_rng_t r;
    test_rng_seed(&r, test_seed() + (uint64_t)c * 1000003u + (uint64_t)j);
    test_fill_random(&r, buf, bytes);
}

static void canary(void *buf, size_t bytes)
{
    test_fill_pattern(buf, bytes, 0xca4a7ull);
}
static int canary_ok(const void *buf, size_t bytes)
{
    return test_find_pattern_mismatch(buf, bytes, 0xca4a7ull) == (size_t)-1;
}

/* A checked allreduce (uint64 sum of 37 random words) on team t of n members. */
static symm_status_t checked_allreduce(symm_team_t t, int *ok)
{
    *ok = 1;
    if (t == SYMM_TEAM_INVALID) return SYMM_SUCCESS;
    int n = symm_team_n_pes(t), my = symm_team_my_pe(t);
    enum { CNT = 37 };
    /* seeded by the mailbox round, the same on every PE whatever calls failed before
     * (one checked allreduce per round at most) */
    uint32_t c = 0x80000000u + gseq;
    gen(o_src, CNT * 8, c, my);
    symm_status_t st = symm_allreduce(t, o_dest, o_src, CNT, SYMM_UINT64, SYMM_OP_SUM);
    if (st) return st;
    uint64_t want[CNT] = {0}, x[CNT];
    for (int j = 0; j < n; j++) {
        gen(x, sizeof x, c, j);
        for (int i = 0; i < CNT; i++)
            want[i] += x[i];
    }
    *ok = memcmp(want, o_dest, sizeof want) == 0;
    if (!*ok) fprintf(stderr, "  [PE %d] checked allreduce: wrong result\n", me);
    return st;
}

/* ---------------------------------------------------------------- collective calls */
enum {
    C_BARRIER,
    C_SYNC,
    C_BCAST,
    C_REDUCE,
    C_ALLREDUCE,
    C_RSCATTER,
    C_FCOLLECT,
    C_COLLECT,
    C_ALLTOALL,
    C_ALLTOALLV,
    C_NCOLL
};
static const char *coll_name[C_NCOLL] = {"barrier",   "sync",           "broadcast", "reduce",
                                         "allreduce", "reduce_scatter", "fcollect",  "collect",
                                         "alltoall",  "alltoallv"};
/* The collective that member k calls instead (K_COLL). */
static const int coll_alt[C_NCOLL] = {C_SYNC,     C_BARRIER,   C_FCOLLECT, C_ALLREDUCE,
                                      C_BARRIER,  C_ALLREDUCE, C_BCAST,    C_FCOLLECT,
                                      C_FCOLLECT, C_ALLTOALL};

enum {
    K_NONSYM_DEST,
    K_NONSYM_SRC,
    K_NULL_DEST,
    K_NULL_SRC,
    K_ROOT_OOR,
    K_ROOT_NEG,
    K_OVERLAP,
    K_TYPE,
    K_OP,
    K_OP_FLOAT,
    K_ELEM0,
    K_COUNTS_NULL,
    /* mismatches */
    K_COUNT,
    K_MTYPE,
    K_MOP,
    K_ROOT,
    K_DEST_OBJ,
    K_SRC_OBJ,
    K_COLL,
    K_NKIND
};
static const char *kind_name[K_NKIND] = {"non-symmetric dest",
                                         "non-symmetric src",
                                         "NULL dest",
                                         "NULL src",
                                         "root = n",
                                         "root = -1",
                                         "overlapping dest/src",
                                         "bad type",
                                         "bad op",
                                         "xor on float",
                                         "elem_size 0",
                                         "send_counts NULL",
                                         "other count",
                                         "other type",
                                         "other op",
                                         "other root",
                                         "other dest object",
                                         "other src object",
                                         "other collective"};

static symm_status_t kind_want(int k)
{
    switch (k) {
    case K_NONSYM_DEST:
    case K_NONSYM_SRC:
        return SYMM_ERR_NOT_SYMMETRIC;
    case K_ROOT_OOR:
    case K_ROOT_NEG:
        return SYMM_ERR_PE_OUT_OF_RANGE;
    default:
        return k >= K_COUNT ? SYMM_ERR_COLL_MISMATCH : SYMM_ERR_INVALID_ARG;
    }
}

static int is_reduction(int c)
{
    return c == C_REDUCE || c == C_ALLREDUCE || c == C_RSCATTER;
}
static int is_rooted(int c)
{
    return c == C_BCAST || c == C_REDUCE;
}

static int kind_applies(int c, int k, int n)
{
    if (k >= K_COUNT && n < 2) return 0; /* one member cannot disagree with itself */
    if (c == C_BARRIER || c == C_SYNC) return k == K_COLL;
    switch (k) {
    case K_ROOT_OOR:
    case K_ROOT_NEG:
    case K_ROOT:
        return is_rooted(c);
    case K_TYPE:
    case K_OP:
    case K_OP_FLOAT:
    case K_MTYPE:
    case K_MOP:
        return is_reduction(c);
    case K_ELEM0:
    case K_COUNTS_NULL:
        return c == C_ALLTOALLV;
    case K_COUNT:
        return c != C_COLLECT; /* collect's sizes may differ */
    case K_OVERLAP: /* collect learns its dest's size late: a src moved into it is first a
                     * mismatch with the others' src */
        return c != C_COLLECT;
    case K_DEST_OBJ: /* written by its owner alone: it may differ (symm.h) */
        return c != C_ALLTOALLV && c != C_COLLECT;
    case K_SRC_OBJ:
        return c != C_ALLTOALLV; /* senders publish where their rows are */
    default:
        return 1;
    }
}

typedef struct {
    int coll;
    void *dest;
    const void *src;
    size_t count; /* elements (reductions, per block for reduce_scatter), else bytes */
    symm_type_t type;
    symm_op_t op;
    int root;
    size_t es; /* alltoallv element size */
    const size_t *counts;
} call_t;

static const size_t sizes[3] = {TINY, SMALL, LARGE};
static const symm_type_t size_type[3] = {SYMM_UINT32, SYMM_INT64, SYMM_UINT16};
static const symm_type_t size_twin[3] = {SYMM_INT32, SYMM_UINT64, SYMM_INT16};
static const symm_op_t size_op[3] = {SYMM_OP_SUM, SYMM_OP_XOR, SYMM_OP_MIN};

/* alltoallv: elements member i sends member j (some zero) */
static size_t a2av_cnt(int i, int j, size_t s, int n)
{
    return (i + 2 * j) % 5 == 4 ? 0 : s / (4 * (size_t)n) + (size_t)((i * 3 + j * 5) % 7);
}

static size_t src_bytes(int c, int sz, int n, int j)
{
    size_t s = sizes[sz], es = symm_type_size(size_type[sz]);
    switch (c) {
    case C_BCAST:
    case C_FCOLLECT:
        return s;
    case C_REDUCE:
    case C_ALLREDUCE:
        return s / es * es;
    case C_RSCATTER:
        return (size_t)n * (s / es) * es;
    case C_COLLECT:
        return s + (size_t)j * 5;
    case C_ALLTOALL:
        return (size_t)n * s;
    case C_ALLTOALLV: {
        size_t t = 0;
        for (int p = 0; p < n; p++)
            t += a2av_cnt(j, p, s, n) * 4;
        return t;
    }
    default:
        return 0;
    }
}

static size_t dest_bytes(int c, int sz, int n, int my)
{
    size_t s = sizes[sz], es = symm_type_size(size_type[sz]), t = 0;
    switch (c) {
    case C_BCAST:
        return s;
    case C_REDUCE:
    case C_ALLREDUCE:
    case C_RSCATTER:
        return s / es * es;
    case C_FCOLLECT:
    case C_ALLTOALL:
        return (size_t)n * s;
    case C_COLLECT:
        for (int j = 0; j < n; j++)
            t += s + (size_t)j * 5;
        return t;
    case C_ALLTOALLV:
        for (int j = 0; j < n; j++)
            t += a2av_cnt(j, my, s, n) * 4;
        return t;
    default:
        return 0;
    }
}

static size_t my_counts[MAXPES];

/* The good arguments of member my; fills its source with this case's data and its dest
 * (the part the call writes) with the canary. */
static void make_call(int c, int sz, int n, int my, call_t *k)
{
    size_t s = sizes[sz], es = symm_type_size(size_type[sz]);
    *k =
        (call_t){c, a_dest,   a_src, s, size_type[sz], size_op[sz], (int)(caseno % (uint32_t)n),
                 4, my_counts};
    if (is_reduction(c)) k->count = s / es;
    if (c == C_COLLECT) k->count = s + (size_t)my * 5;
    for (int j = 0; j < n; j++)
        my_counts[j] = a2av_cnt(my, j, s, n);
    gen(a_src, src_bytes(c, sz, n, my), caseno, my);
    canary(a_dest, dest_bytes(c, sz, n, my));
}

static void make_bad(int kind, int sz, int n, int my, call_t *k)
{
    size_t es = symm_type_size(k->type);
    switch (kind) {
    case K_NONSYM_DEST:
        k->dest = heapbuf;
        break;
    case K_NONSYM_SRC:
        memcpy(heapbuf, a_src, src_bytes(k->coll, sz, n, my));
        k->src = heapbuf;
        break;
    case K_NULL_DEST:
        k->dest = NULL;
        break;
    case K_NULL_SRC:
        k->src = NULL;
        break;
    case K_ROOT_OOR:
        k->root = n;
        break;
    case K_ROOT_NEG:
        k->root = -1;
        break;
    case K_OVERLAP:
        if (k->coll == C_FCOLLECT || k->coll == C_COLLECT)
            k->src = a_dest + 1; /* inside dest, not my own block */
        else
            k->dest = a_src + (is_reduction(k->coll) ? es : k->coll == C_ALLTOALLV ? 4 : 1);
        break;
    case K_TYPE:
        k->type = SYMM_TYPE_COUNT;
        break;
    case K_OP:
        k->op = SYMM_OP_COUNT;
        break;
    case K_OP_FLOAT:
        k->type = SYMM_FLOAT;
        k->op = SYMM_OP_XOR;
        break;
    case K_ELEM0:
        k->es = 0;
        break;
    case K_COUNTS_NULL:
        k->counts = NULL;
        break;
    case K_COUNT:
        if (k->coll == C_ALLTOALLV)
            k->es = 8;
        else
            k->count++;
        break;
    case K_MTYPE:
        k->type = size_twin[sz];
        break;
    case K_MOP:
        k->op = k->op == SYMM_OP_SUM ? SYMM_OP_MAX : SYMM_OP_SUM;
        break;
    case K_ROOT:
        k->root = (k->root + 1) % n;
        break;
    case K_DEST_OBJ:
        k->dest = b_dest;
        break;
    case K_SRC_OBJ:
        memcpy(b_src, a_src, src_bytes(k->coll, sz, n, my));
        k->src = b_src;
        break;
    case K_COLL:
        make_call(coll_alt[k->coll], sz, n, my, k);
        break;
    }
}

static size_t recv_counts[MAXPES], recv_displs[MAXPES], collect_total;

static symm_status_t do_call(symm_team_t t, const call_t *k)
{
    switch (k->coll) {
    case C_BARRIER:
        return symm_barrier(t);
    case C_SYNC:
        return symm_sync(t);
    case C_BCAST:
        return symm_broadcast(t, k->dest, k->src, k->count, k->root);
    case C_REDUCE:
        return symm_reduce(t, k->dest, k->src, k->count, k->type, k->op, k->root);
    case C_ALLREDUCE:
        return symm_allreduce(t, k->dest, k->src, k->count, k->type, k->op);
    case C_RSCATTER:
        return symm_reduce_scatter(t, k->dest, k->src, k->count, k->type, k->op);
    case C_FCOLLECT:
        return symm_fcollect(t, k->dest, k->src, k->count);
    case C_COLLECT:
        return symm_collect(t, k->dest, k->src, k->count, &collect_total);
    case C_ALLTOALL:
        return symm_alltoall(t, k->dest, k->src, k->count);
    case C_ALLTOALLV:
        return symm_alltoallv(t, k->dest, cap / 8, k->src, k->counts, NULL, k->es, recv_counts,
                              recv_displs);
    }
    return SYMM_ERR_INVALID_ARG;
}

/* acc = acc op x, for the (type, op) pairs the good calls use */
static void fold(symm_type_t type, symm_op_t op, void *acc, const void *x, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (type == SYMM_UINT32) {
            uint32_t a, b;
            memcpy(&a, (uint8_t *)acc + 4 * i, 4);
            memcpy(&b, (const uint8_t *)x + 4 * i, 4);
            a += b;
            memcpy((uint8_t *)acc + 4 * i, &a, 4);
        } else if (type == SYMM_INT64) {
            uint64_t a, b;
            memcpy(&a, (uint8_t *)acc + 8 * i, 8);
            memcpy(&b, (const uint8_t *)x + 8 * i, 8);
            a ^= b;
            memcpy((uint8_t *)acc + 8 * i, &a, 8);
        } else {
            uint16_t a, b;
            memcpy(&a, (uint8_t *)acc + 2 * i, 2);
            memcpy(&b, (const uint8_t *)x + 2 * i, 2);
            if (b < a) memcpy((uint8_t *)acc + 2 * i, &b, 2);
        }
    }
    (void)op;
}

/* Whether member my's dest holds the serial reference of the good call k. */
static int check_result(const call_t *k, int sz, int n, int my)
{
    int c = k->coll;
    size_t s = sizes[sz], es = symm_type_size(k->type), db = dest_bytes(c, sz, n, my);
    if (c == C_BARRIER || c == C_SYNC) return 1;
    if (c == C_REDUCE && my != k->root) return canary_ok(a_dest, db);
    uint8_t *want = malloc(db + 1), *x = malloc(cap);
    CHECK_TRUE(want && x, "malloc");
    size_t off = 0;
    switch (c) {
    case C_BCAST:
        gen(want, s, caseno, k->root);
        break;
    case C_REDUCE:
    case C_ALLREDUCE:
    case C_RSCATTER: {
        size_t blk = k->count * es, at = c == C_RSCATTER ? (size_t)my * blk : 0;
        for (int j = 0; j < n; j++) {
            gen(x, src_bytes(c, sz, n, j), caseno, j);
            if (j == 0)
                memcpy(want, x + at, blk);
            else
                fold(k->type, k->op, want, x + at, k->count);
        }
        break;
    }
    case C_FCOLLECT:
        for (int j = 0; j < n; j++)
            gen(want + (size_t)j * s, s, caseno, j);
        break;
    case C_COLLECT:
        for (int j = 0; j < n; j++) {
            gen(want + off, s + (size_t)j * 5, caseno, j);
            off += s + (size_t)j * 5;
        }
        if (collect_total != db) {
            fprintf(stderr, "  [PE %d] collect total %zu, expected %zu\n", me, collect_total,
                    db);
            db = 0, off = 1;
        }
        break;
    case C_ALLTOALL:
        for (int j = 0; j < n; j++) {
            gen(x, (size_t)n * s, caseno, j);
            memcpy(want + (size_t)j * s, x + (size_t)my * s, s);
        }
        break;
    case C_ALLTOALLV:
        for (int j = 0; j < n; j++) {
            size_t at = 0;
            for (int p = 0; p < my; p++)
                at += a2av_cnt(j, p, s, n) * 4;
            size_t nb = a2av_cnt(j, my, s, n) * 4;
            gen(x, src_bytes(c, sz, n, j), caseno, j);
            memcpy(want + off, x + at, nb);
            if (recv_counts[j] != nb / 4 || recv_displs[j] != off / 4) db = 0;
            off += nb;
        }
        break;
    }
    int ok = db > 0 || off == 0 ? memcmp(want, a_dest, db) == 0 : 0;
    if (!ok) {
        size_t i = test_find_mismatch(a_dest, want, db);
        fprintf(stderr, "  [PE %d] %s (%zu bytes): wrong result at byte %zu\n", me,
                coll_name[c], db, i);
    }
    free(want);
    free(x);
    return ok;
}

/* ---------------------------------------------------------------- one case */
static void repair(tctx_t *t);

/* Outsiders meanwhile: a checked allreduce on their own team. */
static symm_status_t outsider_step(const tctx_t *t, int *ok)
{
    return checked_allreduce(t->other, ok);
}

/* Member k (in turn) passes bad argument `kind` to collective c at size sz; then every
 * member makes the good call, checked. */
static void run_case(tctx_t *t, int c, int kind, int sz)
{
    int n = t->solo ? 1 : t->n, my = t->solo ? 0 : t->my;
    int k = (int)(rot++ % (uint32_t)n);
    int kw = t->solo ? me : t->world[k];
    char what[160];
    snprintf(what, sizeof what, "%s %s (%zu bytes), PE %d bad", coll_name[c], kind_name[kind],
             sizes[sz], k);
    caseno++;
    symm_status_t st;
    int ok = 1;
    if (my >= 0) {
        call_t call;
        make_call(c, sz, n, my, &call);
        if (my == k) make_bad(kind, sz, n, my, &call);
        st = do_call(t->team, &call);
        /* nothing written: the good dest of every member still holds its canary, except
         * where the bad member's dest is checked only once the sizes are known (collect,
         * alltoallv): then the others may have pulled their rows (symm.h) */
        int late = (c == C_COLLECT || c == C_ALLTOALLV) &&
                   (kind == K_NONSYM_DEST || kind == K_NULL_DEST || kind == K_OVERLAP);
        ok = (late && my != k) || canary_ok(a_dest, dest_bytes(c, sz, n, my));
        if (!ok) fprintf(stderr, "  [PE %d] %s: failed call wrote dest\n", me, what);
    } else {
        st = outsider_step(t, &ok);
    }
    if (!judge(t, what, kind_want(kind), kw, k, st, ok)) {
        repair(t);
        return;
    }
    /* the team works right after: the same collective with good arguments, checked */
    snprintf(what, sizeof what, "%s (%zu bytes) after %s", coll_name[c], sizes[sz],
             kind_name[kind]);
    caseno++;
    if (my >= 0) {
        call_t call;
        make_call(c, sz, n, my, &call);
        if (c == C_BARRIER) {
            /* a put before the barrier is visible after it */
            uint64_t v = caseno * 100u + (uint64_t)my;
            st = symm_team_put(t->team, bar_word, &v, 8, (my + 1) % n);
            if (!st) st = do_call(t->team, &call);
            ok = st || *bar_word == caseno * 100u + (uint64_t)((my + n - 1) % n);
            if (!st) st = symm_barrier(t->team); /* before the next case writes again */
        } else {
            st = do_call(t->team, &call);
            ok = st || check_result(&call, sz, n, my);
        }
    } else {
        st = outsider_step(t, &ok);
    }
    if (!judge(t, what, SYMM_SUCCESS, -1, -1, st, ok)) repair(t);
}

/* ---------------------------------------------------------------- teams */
static void make_split(tctx_t *t, const char *name, int start, int stride, int size)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->pool = SYMM_POOL_INVALID;
    t->base = SYMM_TEAM_INVALID;
    t->start = start, t->stride = stride, t->n = size;
    t->my = -1;
    for (int i = 0; i < size; i++) {
        t->world[i] = start + i * stride;
        if (t->world[i] == me) t->my = i;
    }
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, start, stride, size, &t->team));
    CHECK_TRUE((t->team != SYMM_TEAM_INVALID) == (t->my >= 0), "split membership");
    /* the others: every PE not in the team, by rank list (collective over them only) */
    int rest[MAXPES], nr = 0;
    for (int p = 0; p < npes; p++)
        if (!in_team(t, p)) rest[nr++] = p;
    t->other = SYMM_TEAM_INVALID;
    if (t->my < 0 && nr > 0) CHECK_OK(symm_team_create(rest, nr, &t->other));
    t->on = nr;
}

static void make_dup(tctx_t *t, const char *name, int start, int stride, int size)
{
    make_split(t, name, start, stride, size);
    t->is_dup = 1;
    if (t->my >= 0) {
        t->base = t->team;
        CHECK_OK(symm_pool_create(t->base, 3, &t->pool));
        t->team = symm_pool_team(t->pool, 2);
    }
}

static void make_solo(tctx_t *t)
{
    memset(t, 0, sizeof *t);
    t->name = "1-PE team";
    t->solo = 1;
    t->n = 1;
    t->my = 0;
    t->pool = SYMM_POOL_INVALID;
    t->base = SYMM_TEAM_INVALID;
    t->other = SYMM_TEAM_INVALID;
    int one[1] = {me};
    CHECK_OK(symm_team_create(one, 1, &t->team));
}

static void drop(tctx_t *t)
{
    if (t->pool != SYMM_POOL_INVALID) symm_pool_destroy(t->pool);
    if (t->base != SYMM_TEAM_INVALID) symm_team_destroy(t->base);
    if (t->pool == SYMM_POOL_INVALID && t->team != SYMM_TEAM_INVALID)
        symm_team_destroy(t->team);
    if (t->other != SYMM_TEAM_INVALID) symm_team_destroy(t->other);
}

static void destroy_ctx(tctx_t *t)
{
    if (t->pool != SYMM_POOL_INVALID) CHECK_OK(symm_pool_destroy(t->pool));
    if (t->base != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(t->base));
    if (t->pool == SYMM_POOL_INVALID && t->team != SYMM_TEAM_INVALID)
        CHECK_OK(symm_team_destroy(t->team));
    if (t->other != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(t->other));
}

/* After a disagreement (keep-going mode only): a fresh team of the same shape. Statuses
 * of the teardown are not checked: the old team may be in any state. */
static void repair(tctx_t *t)
{
    tctx_t old = *t;
    drop(t);
    /* meet without a team: a PE whose teardown timed out comes late */
    symm_status_t all[MAXPES];
    int fl[MAXPES];
    gather(SYMM_SUCCESS, 0, all, fl);
    if (old.solo)
        make_solo(t);
    else if (old.is_dup)
        make_dup(t, old.name, old.start, old.stride, old.n);
    else
        make_split(t, old.name, old.start, old.stride, old.n);
}

static void run_colls(tctx_t *t, int all_sizes)
{
    for (int c = 0; c < C_NCOLL; c++) {
        if (only && strcmp(only, coll_name[c]) != 0) continue;
        int nsz = c == C_BARRIER || c == C_SYNC ? 1 : 3;
        for (int kind = 0; kind < K_NKIND; kind++) {
            if (!kind_applies(c, kind, t->n)) continue;
            if (all_sizes) {
                for (int sz = 0; sz < nsz; sz++)
                    run_case(t, c, kind, sz);
            } else {
                run_case(t, c, kind, (int)(rot % (uint32_t)nsz));
            }
        }
    }
    /* fcollect in place (every member passes its own block of dest): legal, checked */
    for (int sz = 0; sz < 3 && (!only || !strcmp(only, "fcollect")); sz++) {
        caseno++;
        int n = t->n, my = t->my;
        symm_status_t st = SYMM_SUCCESS;
        int ok = 1;
        if (my >= 0) {
            call_t call;
            make_call(C_FCOLLECT, sz, n, my, &call);
            memcpy(a_dest + (size_t)my * sizes[sz], a_src, sizes[sz]);
            call.src = a_dest + (size_t)my * sizes[sz];
            st = do_call(t->team, &call);
            ok = st || check_result(&call, sz, n, my);
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, "fcollect in place", SYMM_SUCCESS, -1, -1, st, ok)) repair(t);
    }
}

/* ---------------------------------------------------------------- tile and MoE */
static void run_tile_moe(tctx_t *t)
{
    int n = t->n, my = t->my;
    /* tile allreduce: uint32 sum of a 5 x 7 tile with ld 9; member k passes a
     * non-symmetric tile, then a bad type */
    for (int v = 0; v < 2; v++) {
        int k = (int)(rot++ % (uint32_t)n);
        caseno++;
        symm_status_t st = SYMM_SUCCESS;
        int ok = 1;
        symm_tile_t in = {a_src, 5, 7, 9}, out = {a_dest, 5, 7, 7};
        if (my >= 0) {
            gen(a_src, 5 * 9 * 4, caseno, my);
            canary(a_dest, 5 * 7 * 4);
            symm_tile_t bin = in;
            symm_type_t ty = SYMM_UINT32;
            if (my == k && v == 0) bin.base = heapbuf;
            if (my == k && v == 1) ty = SYMM_TYPE_COUNT;
            st = symm_tile_allreduce(t->team, out, bin, ty, SYMM_OP_SUM);
            ok = canary_ok(a_dest, 5 * 7 * 4);
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, v ? "tile_allreduce bad type" : "tile_allreduce non-symmetric in",
                   WANT_SAME, t->world[k], k, st, ok)) {
            repair(t);
            continue;
        }
        caseno++;
        if (my >= 0) {
            gen(a_src, 5 * 9 * 4, caseno, my);
            st = symm_tile_allreduce(t->team, out, in, SYMM_UINT32, SYMM_OP_SUM);
            uint32_t want[5 * 9] = {0}, x[5 * 9];
            for (int j = 0; j < n; j++) {
                gen(x, sizeof x, caseno, j);
                for (int i = 0; i < 5 * 9; i++)
                    want[i] += x[i];
            }
            for (int r = 0; r < 5 && !st; r++)
                ok &= memcmp((uint32_t *)a_dest + r * 7, want + r * 9, 7 * 4) == 0;
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, "tile_allreduce after a bad argument", SYMM_SUCCESS, -1, -1, st, ok))
            repair(t);
    }
    /* MoE dispatch: member k passes ne = 0 */
    {
        int k = (int)(rot++ % (uint32_t)n);
        caseno++;
        symm_status_t st = SYMM_SUCCESS;
        int ok = 1;
        size_t splits[MAXPES * 2];
        for (int i = 0; i < 2 * n; i++)
            splits[i] = 1 + (size_t)(i % 3);
        if (my >= 0) {
            gen(a_src, 6 * (size_t)n * 16, caseno, my);
            st = symm_moe_dispatch(t->team, a_dest, cap / 16, a_src, splits, my == k ? 0 : 2,
                                   16, 4, NULL, NULL, NULL);
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, "moe_dispatch ne = 0", WANT_SAME, t->world[k], k, st, ok)) repair(t);
    }
}

/* ---------------------------------------------------------------- in = NULL */
/* Member z sends no rows and passes in = NULL (symm.h allows it); the others send rows
 * to every member, z included. */
static void run_null_in(tctx_t *t)
{
    int n = t->n, my = t->my, z = n - 1;
    enum { RB = 24, NE = 2, A = 4 };
/* rows member s sends for global expert g (g = j*NE + e): 0..3, none from z */
#define SPLIT(s, g) ((s) == z ? (size_t)0 : (size_t)(((s) + 2 * (g) + 1) % 4))
    for (int v = 0; v < 3; v++) {
        caseno++;
        symm_status_t st = SYMM_SUCCESS;
        int ok = 1;
        const char *what = v == 0   ? "all_to_all_v with in = NULL"
                           : v == 1 ? "moe_dispatch with in = NULL"
                                    : "alltoallv with src = NULL";
        if (my >= 0) {
            size_t sp[MAXPES * NE], total = 0, os[MAXPES * NE], oo[MAXPES * NE], rows = 0;
            int nsp = v == 1 ? n * NE : n;
            for (int i = 0; i < nsp; i++) {
                sp[i] = SPLIT(my, i);
                total += sp[i];
            }
            size_t rb = v == 2 ? 4 : RB;
            gen(a_src, total * rb, caseno, my);
            memset(a_dest, 0xee, 64 * (size_t)n * RB);
            const void *in = my == z ? NULL : a_src;
            if (v == 0)
                st = symm_all_to_all_v(t->team, a_dest, cap / RB, in, sp, RB, os, oo, &rows);
            else if (v == 1)
                st = symm_moe_dispatch(t->team, a_dest, cap / RB, in, sp, NE, RB, A, os, oo,
                                       &rows);
            else
                st = symm_alltoallv(t->team, a_dest, cap / 4, in, sp, NULL, 4, os, oo);
            /* the reference: walk every source's packed input */
            uint8_t *x = malloc(64 * (size_t)n * RB + 64);
            CHECK_TRUE(x != NULL, "malloc");
            size_t at_out = 0;
            for (int e = 0; e < (v == 1 ? NE : 1) && !st; e++) {
                size_t seg = at_out;
                for (int s = 0; s < n; s++) {
                    size_t tot = 0, at = 0, cnt = 0;
                    for (int i = 0; i < nsp; i++) {
                        size_t c = SPLIT(s, i);
                        if (i < (v == 1 ? my * NE + e : my)) at += c;
                        if (i == (v == 1 ? my * NE + e : my)) cnt = c;
                        tot += c;
                    }
                    gen(x, tot * rb, caseno, s);
                    size_t slot = v == 1 ? (size_t)e * (size_t)n + (size_t)s : (size_t)s;
                    ok &= os[slot] == cnt && oo[slot] == at_out;
                    ok &= memcmp((uint8_t *)a_dest + at_out * rb, x + at * rb, cnt * rb) == 0;
                    at_out += cnt;
                }
                if (v == 1) {
                    size_t len = at_out - seg, r = (len + A - 1) / A * A;
                    at_out = seg + (r > A ? r : A);
                }
            }
            if (!st && v < 2) ok &= rows == at_out;
            if (!ok) fprintf(stderr, "  [PE %d] %s: wrong result\n", me, what);
            free(x);
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, what, SYMM_SUCCESS, -1, -1, st, ok)) repair(t);
    }
#undef SPLIT
}

/* ---------------------------------------------------------------- team creation */
/* After a failed creation: no output written, the parent works, a good one succeeds. */
static void after_creation(tctx_t *t, const char *what, int out_ok)
{
    char w[160];
    symm_status_t st = SYMM_SUCCESS;
    int ok = out_ok;
    snprintf(w, sizeof w, "allreduce on the parent after %s", what);
    st = t->my >= 0 ? checked_allreduce(t->team, &ok) : outsider_step(t, &ok);
    ok &= out_ok;
    if (!judge(t, w, SYMM_SUCCESS, -1, -1, st, ok)) repair(t);
}

static void run_creation(tctx_t *t)
{
    int n = t->n, my = t->my;
    if (n < 2) return;
    char what[160];
    symm_status_t st;
    int ok;
    symm_team_t x, y;
    for (int v = 0; v < 2; v++) {
        /* split_strided: k passes another (valid) stride, then an out-of-range start */
        int k = (int)(rot++ % (uint32_t)n);
        snprintf(what, sizeof what, "team_split_strided %s, PE %d bad",
                 v ? "start out of range" : "other stride", k);
        x = SENTINEL, ok = 1;
        if (my >= 0) {
            int start = 0, stride = 1;
            if (my == k) start = v ? n : n - 1, stride = v ? 1 : -1;
            st = symm_team_split_strided(t->team, start, stride, n, &x);
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, what, v ? SYMM_ERR_INVALID_ARG : WANT_SAME, t->world[k], k, st, ok)) {
            if (!st && x != SENTINEL && x != SYMM_TEAM_INVALID) symm_team_destroy(x);
            repair(t);
        }
        after_creation(t, what, x == SENTINEL);
    }
    for (int v = 0; v < 2; v++) {
        /* split_2d: k passes another xrange, then xrange 0 */
        int k = (int)(rot++ % (uint32_t)n);
        snprintf(what, sizeof what, "team_split_2d %s, PE %d bad",
                 v ? "xrange 0" : "other xrange", k);
        x = y = SENTINEL, ok = 1;
        if (my >= 0)
            st = symm_team_split_2d(t->team, my == k ? (v ? 0 : 1) : 2, &x, &y);
        else
            st = outsider_step(t, &ok);
        if (!judge(t, what, v ? SYMM_ERR_INVALID_ARG : WANT_SAME, t->world[k], k, st, ok)) {
            if (!st) symm_team_destroy(x), symm_team_destroy(y);
            repair(t);
        }
        after_creation(t, what, x == SENTINEL && y == SENTINEL);
    }
    for (int v = 0; v < 2; v++) {
        /* pool_create: k passes n = 0, then another n */
        int k = (int)(rot++ % (uint32_t)n);
        snprintf(what, sizeof what, "pool_create %s, PE %d bad", v ? "other n" : "n = 0", k);
        symm_pool_t p = SENTINEL;
        ok = 1;
        if (my >= 0)
            st = symm_pool_create(t->team, my == k ? (v ? 5 : 0) : 4, &p);
        else
            st = outsider_step(t, &ok);
        if (!judge(t, what, v ? WANT_MISMATCH : SYMM_ERR_INVALID_ARG, t->world[k], k, st, ok)) {
            if (!st) symm_pool_destroy(p);
            repair(t);
        }
        after_creation(t, what, p == SENTINEL);
    }
    {
        /* pool_grow: k passes a size past the limit, then another n; then a good grow */
        symm_pool_t p = SYMM_POOL_INVALID;
        ok = 1;
        st = my >= 0 ? symm_pool_create(t->team, 2, &p) : outsider_step(t, &ok);
        judge(t, "pool_create (for pool_grow)", SYMM_SUCCESS, -1, -1, st, ok);
        for (int v = 0; v < 3; v++) {
            int k = (int)(rot++ % (uint32_t)n);
            snprintf(what, sizeof what, "pool_grow %s, PE %d bad",
                     v == 0   ? "n = 2^40"
                     : v == 1 ? "other n"
                              : "(good)",
                     k);
            ok = 1;
            if (my >= 0) {
                size_t want_n = v == 2 ? 6 : my == k ? (v ? 5 : (size_t)1 << 40) : 6;
                st = symm_pool_grow(p, want_n);
                ok = symm_pool_size(p) == (v == 2 && !st ? 6u : 2u);
                if (!st && v == 2) st = symm_barrier(symm_pool_team(p, 5));
            } else {
                st = outsider_step(t, &ok);
            }
            symm_status_t want = v == 0   ? SYMM_ERR_INVALID_ARG
                                 : v == 1 ? WANT_MISMATCH
                                          : SYMM_SUCCESS;
            if (!judge(t, what, want, v < 2 ? t->world[k] : -1, k, st, ok)) break;
            if (v < 2) after_creation(t, what, 1);
        }
        if (my >= 0) symm_pool_destroy(p);
    }
    for (int v = 0; v < 1; v++) {
        /* team_create over the members' world ranks: k passes them in another order;
         * then the right list works, whatever the failed call left behind. Rank-list
         * messages number PEs in the world. (A list that leaves out a member that lists
         * k is not covered: that member hears nothing from k and times out, and its
         * mailbox pair with k stays out of step; see docs/API.md.) */
        int k = (int)(rot++ % (uint32_t)n), list[MAXPES], ln = n;
        for (int i = 0; i < n; i++)
            list[i] = t->world[i];
        if (v == 0 && my == k)
            for (int i = 0; i < n; i++)
                list[i] = t->world[n - 1 - i];
        if (v == 1 && my == k) {
            ln = 0;
            for (int i = 0; i < n; i++)
                if (i != (k + 1) % n) list[ln++] = t->world[i];
        }
        const char *form = v == 0 ? "reversed list" : "list without a member";
        snprintf(what, sizeof what, "team_create %s, PE %d bad", form, k);
        x = SENTINEL, ok = 1;
        st = my >= 0 ? symm_team_create(list, ln, &x) : outsider_step(t, &ok);
        if (!judge(t, what, WANT_SAME, t->world[k], t->world[k], st, ok)) {
            if (!st) symm_team_destroy(x);
            repair(t);
        }
        after_creation(t, what, x == SENTINEL);
        for (int i = 0; i < n; i++)
            list[i] = t->world[i];
        snprintf(what, sizeof what, "team_create after %s", form);
        ok = 1;
        if (my >= 0) {
            st = symm_team_create(list, n, &x);
            if (!st) {
                st = checked_allreduce(x, &ok);
                symm_status_t d = symm_team_destroy(x);
                if (!st) st = d;
            }
        } else {
            st = outsider_step(t, &ok);
        }
        if (!judge(t, what, SYMM_SUCCESS, -1, -1, st, ok)) repair(t);
    }
    /* a correct split of the parent, and the parent, still work */
    ok = 1;
    if (my >= 0) {
        st = symm_team_split_strided(t->team, 0, 1, n, &x);
        if (!st) {
            st = checked_allreduce(x, &ok);
            symm_status_t d = symm_team_destroy(x);
            if (!st) st = d;
        }
    } else {
        st = outsider_step(t, &ok);
    }
    if (!judge(t, "team_split_strided after the failures", SYMM_SUCCESS, -1, -1, st, ok))
        repair(t);
}

int main(void)
{
    /* a call that fails to agree shows up as a timeout in seconds rather than minutes */
    setenv("SYMM_TIMEOUT", "10", 0);
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    CHECK_TRUE(npes <= MAXPES, "at most %d PEs", MAXPES);
    keep_going = (int)test_env_long("SYMM_AGREE_KEEP_GOING", 0);
    only = getenv("SYMM_AGREE_ONLY");
    parts = getenv("SYMM_AGREE_PARTS");
    double t0 = test_now();
    cap = 2 * (size_t)npes * (LARGE + 64) + 4096;
    a_dest = symm_malloc(cap), a_src = symm_malloc(cap);
    b_dest = symm_malloc(cap), b_src = symm_malloc(cap);
    o_dest = symm_malloc(4096), o_src = symm_malloc(4096);
    mbox = symm_calloc(2 * (size_t)npes, sizeof(uint64_t));
    bar_word = symm_calloc(1, sizeof(uint64_t));
    heapbuf = malloc(cap);
    CHECK_TRUE(a_dest && a_src && b_dest && b_src && o_dest && o_src && mbox && bar_word &&
                   heapbuf,
               "allocation");
    CHECK_OK(symm_barrier_all());

    /* a full-size split of WORLD (WORLD itself stays healthy whatever happens) */
    tctx_t full, sub, dup, solo;
    if (part('f')) {
        make_split(&full, "full team", 0, 1, npes);
        if (part('c')) run_colls(&full, 1);
        if (part('t')) run_tile_moe(&full);
        if (part('n')) run_null_in(&full);
        if (part('r')) run_creation(&full);
        destroy_ctx(&full);
        CHECK_OK(symm_barrier_all());
    }

    /* a strided sub-team numbered backwards (team numbers are not world numbers), and a
     * pool duplicate over it, while the other PEs use a team of their own */
    int sstart = npes - 1, sstride = npes == 2 ? -1 : -2;
    int ssize = npes == 2 ? 2 : (npes + 1) / 2;
    if (part('s')) {
        make_split(&sub, "strided sub-team", sstart, sstride, ssize);
        if (part('c')) run_colls(&sub, 0);
        if (part('t')) run_tile_moe(&sub);
        if (part('n')) run_null_in(&sub);
        if (part('r')) run_creation(&sub);
        destroy_ctx(&sub);
        CHECK_OK(symm_barrier_all());
    }
    if (part('d')) {
        make_dup(&dup, "pool duplicate", sstart, sstride, ssize);
        if (part('c')) run_colls(&dup, 0);
        if (part('t')) run_tile_moe(&dup);
        destroy_ctx(&dup);
        CHECK_OK(symm_barrier_all());
    }

    /* every PE alone: a bad argument returns its error and the team works after */
    if (part('1') && part('c')) {
        make_solo(&solo);
        run_colls(&solo, 1);
        destroy_ctx(&solo);
        CHECK_OK(symm_barrier_all());
    }

    CHECK_OK(symm_free(bar_word));
    CHECK_OK(symm_free(mbox));
    CHECK_OK(symm_free(o_src));
    CHECK_OK(symm_free(o_dest));
    CHECK_OK(symm_free(b_src));
    CHECK_OK(symm_free(b_dest));
    CHECK_OK(symm_free(a_src));
    CHECK_OK(symm_free(a_dest));
    free(heapbuf);
    if (failures) TEST_FAIL("%d of %d steps disagreed", failures, ncases);
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf("test_agree: OK (%d PEs, %d steps, %.1f s)\n", npes, ncases, test_now() - t0);
    return 0;
}
