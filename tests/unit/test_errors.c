/* test_errors.c — symm_strerror for every status; every entry point before symm_init
 * and after symm_finalize fails with SYMM_ERR_NOT_INITIALIZED (or its documented
 * "invalid" value) without touching its outputs; double init; init again after
 * finalize. A 1-PE job: run directly, without symmrun. */
#include "common/test_util.h"

static void test_strerror(void)
{
    static const struct {
        symm_status_t st;
        const char *name;
    } all[] = {
#define ENTRY_(name, value, msg) {name, #name},
        SYMM_FOREACH_STATUS(ENTRY_)
#undef ENTRY_
    };
    size_t n = sizeof all / sizeof all[0];
    CHECK_TRUE(n == 24, "%zu statuses", n);
    for (size_t i = 0; i < n; i++) {
        const char *m = symm_strerror(all[i].st);
        CHECK_TRUE(m && *m, "%s has no message", all[i].name);
        CHECK_TRUE(strcmp(m, "unknown status") != 0, "%s is unknown", all[i].name);
        CHECK_TRUE((all[i].st == 0) == (i == 0) && (all[i].st <= 0),
                   "%s = %d: 0 is success, errors are negative", all[i].name, (int)all[i].st);
        for (size_t j = 0; j < i; j++) {
            CHECK_TRUE(all[i].st != all[j].st, "%s and %s share a value", all[i].name,
                       all[j].name);
            CHECK_TRUE(strcmp(m, symm_strerror(all[j].st)) != 0, "%s and %s share a message",
                       all[i].name, all[j].name);
        }
    }
    CHECK_TRUE(strcmp(symm_strerror((symm_status_t)1), "unknown status") == 0, "status 1");
    CHECK_TRUE(strcmp(symm_strerror((symm_status_t)-999), "unknown status") == 0, "-999");
    CHECK_TRUE(strstr(symm_strerror(SYMM_ERR_NOT_INITIALIZED), "symm_init"), "hint");
}

#define NI             SYMM_ERR_NOT_INITIALIZED
#define CHECK_NI(expr) CHECK_STATUS(expr, NI)

/* when: "before init" or "after finalize". buf stands for a symmetric address (there is
 * none without init), and every output starts with a sentinel that must survive. */
static void test_not_initialized(const char *when)
{
    printf("  entry points %s\n", when);
    CHECK_TRUE(!symm_initialized(), "initialized %s", when);
    CHECK_EQ_I64(symm_my_pe(), -1);
    CHECK_EQ_I64(symm_n_pes(), -1);
    static uint64_t buf[64];
    uint64_t out64 = 0xabcdef;
    uint32_t out32 = 0xabcdef;
    int res = 77;
    symm_team_t t = 12345;
    symm_pool_t pl = 12345;
    symm_info_t info;
    memset(&info, 0x5a, sizeof info);
    symm_info_t info0 = info;

    CHECK_NI(symm_finalize());
    CHECK_NULL_STATUS(symm_malloc(64), NI);
    CHECK_NULL_STATUS(symm_malloc(0), NI);
    CHECK_NULL_STATUS(symm_calloc(4, 16), NI);
    CHECK_NULL_STATUS(symm_align(128, 64), NI);
    CHECK_NI(symm_free(buf));
    CHECK_NI(symm_free(NULL));
    CHECK_TRUE(symm_ptr(buf, 0) == NULL, "symm_ptr %s", when);
    CHECK_TRUE(!symm_addr_accessible(buf, 8), "symm_addr_accessible %s", when);
    CHECK_NI(symm_put(buf, buf + 8, 8, 0));
    CHECK_NI(symm_get(buf, buf + 8, 8, 0));
    CHECK_NI(symm_put_nbi(buf, buf + 8, 8, 0));
    CHECK_NI(symm_get_nbi(buf, buf + 8, 8, 0));
    CHECK_NI(symm_put_typed(buf, buf + 8, 1, SYMM_INT64, 0));
    CHECK_NI(symm_get_typed(buf, buf + 8, 1, SYMM_INT64, 0));
    CHECK_NI(symm_put_int32((int32_t *)buf, (int32_t *)buf + 8, 1, 0));
    CHECK_NI(symm_get_double((double *)buf, (double *)buf + 8, 1, 0));
    CHECK_NI(symm_fence());
    CHECK_NI(symm_quiet());
    CHECK_NI(symm_atomic32(SYMM_AMO_FETCH_ADD, (uint32_t *)buf, 1, 0, 0, &out32));
    CHECK_NI(symm_atomic64(SYMM_AMO_FETCH_ADD, buf, 1, 0, 0, &out64));
    CHECK_NI(symm_put_signal(buf, buf + 8, 8, buf + 16, 1, SYMM_SIGNAL_SET, 0));
    CHECK_NI(symm_put_signal_nbi(buf, buf + 8, 8, buf + 16, 1, SYMM_SIGNAL_ADD, 0));
    CHECK_NI(symm_signal_fetch(buf, &out64));
    CHECK_NI(symm_signal_wait_until(buf, SYMM_CMP_EQ, 0, &out64));
    CHECK_NI(symm_wait_until_int32((int32_t *)buf, SYMM_CMP_EQ, 0));
    CHECK_NI(symm_wait_until_int64((int64_t *)buf, SYMM_CMP_EQ, 0));
    CHECK_NI(symm_wait_until_uint32((uint32_t *)buf, SYMM_CMP_EQ, 0));
    CHECK_NI(symm_wait_until_uint64(buf, SYMM_CMP_EQ, 0));
    CHECK_NI(symm_test_int32((int32_t *)buf, SYMM_CMP_EQ, 0, &res));
    CHECK_NI(symm_test_int64((int64_t *)buf, SYMM_CMP_EQ, 0, &res));
    CHECK_NI(symm_test_uint32((uint32_t *)buf, SYMM_CMP_EQ, 0, &res));
    CHECK_NI(symm_test_uint64(buf, SYMM_CMP_EQ, 0, &res));
    CHECK_TRUE(out32 == 0xabcdef && out64 == 0xabcdef && res == 77, "outputs written %s", when);

    CHECK_EQ_I64(symm_team_my_pe(SYMM_TEAM_WORLD), -1);
    CHECK_EQ_I64(symm_team_n_pes(SYMM_TEAM_WORLD), -1);
    CHECK_EQ_I64(symm_team_n_pes(SYMM_TEAM_NODE), -1);
    CHECK_EQ_I64(symm_team_translate_pe(SYMM_TEAM_WORLD, 0, SYMM_TEAM_WORLD), -1);
    CHECK_EQ_I64(symm_team_world_pe(SYMM_TEAM_WORLD, 0), -1);
    CHECK_NI(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, 1, &t));
    symm_team_t t2 = 12345;
    CHECK_NI(symm_team_split_2d(SYMM_TEAM_WORLD, 1, &t, &t2));
    int ranks[1] = {0};
    CHECK_NI(symm_team_create(ranks, 1, &t));
    CHECK_NI(symm_team_destroy(SYMM_TEAM_WORLD));
    char d[64];
    CHECK_TRUE(symm_team_describe(SYMM_TEAM_WORLD, d, sizeof d) != NULL, "describe");
    CHECK_NI(symm_pool_create(SYMM_TEAM_WORLD, 4, &pl));
    CHECK_NI(symm_pool_grow(pl, 8));
    CHECK_EQ_U64(symm_pool_size(pl), 0);
    CHECK_EQ_I64(symm_pool_auto_workers(pl, SIZE_MAX), 0);
    CHECK_EQ_I64(symm_pool_team(pl, 0), SYMM_TEAM_INVALID);
    CHECK_NI(symm_pool_destroy(pl));
    CHECK_NI(symm_pool_get("x", ranks, 1, 1, &pl));
    CHECK_NI(symm_pool_release("x"));
    CHECK_TRUE(t == 12345 && t2 == 12345 && pl == 12345, "team outputs written %s", when);
    CHECK_TRUE(symm_team_ptr(SYMM_TEAM_WORLD, buf, 0) == NULL, "symm_team_ptr %s", when);
    CHECK_NI(symm_team_put(SYMM_TEAM_WORLD, buf, buf + 8, 8, 0));
    CHECK_NI(symm_team_get(SYMM_TEAM_WORLD, buf, buf + 8, 8, 0));
    CHECK_NI(symm_team_put_signal(SYMM_TEAM_WORLD, buf, buf + 8, 8, buf + 16, 1,
                                  SYMM_SIGNAL_SET, 0));
    CHECK_NI(symm_team_atomic32(SYMM_TEAM_WORLD, SYMM_AMO_ADD, (uint32_t *)buf, 1, 0, 0, NULL));
    CHECK_NI(symm_team_atomic64(SYMM_TEAM_WORLD, SYMM_AMO_ADD, buf, 1, 0, 0, NULL));
    CHECK_NI(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_NI(symm_barrier_all());
    CHECK_NI(symm_sync(SYMM_TEAM_WORLD));
    CHECK_NI(symm_get_info(&info));
    CHECK_TRUE(memcmp(&info, &info0, sizeof info) == 0, "symm_get_info wrote its output %s",
               when);

    /* collectives */
    size_t cnt[1] = {1}, tot = 99;
    symm_tile_t tile = {buf, 1, 1, 1};
    int roots[1] = {0};
    CHECK_NI(symm_broadcast(SYMM_TEAM_WORLD, buf, buf + 8, 8, 0));
    CHECK_NI(symm_reduce(SYMM_TEAM_WORLD, buf, buf + 8, 1, SYMM_INT64, SYMM_OP_SUM, 0));
    CHECK_NI(symm_allreduce(SYMM_TEAM_WORLD, buf, buf + 8, 1, SYMM_INT64, SYMM_OP_SUM));
    CHECK_NI(symm_reduce_scatter(SYMM_TEAM_WORLD, buf, buf + 8, 1, SYMM_INT64, SYMM_OP_SUM));
    CHECK_NI(symm_fcollect(SYMM_TEAM_WORLD, buf, buf + 8, 8));
    CHECK_NI(symm_collect(SYMM_TEAM_WORLD, buf, buf + 8, 8, &tot));
    CHECK_TRUE(tot == 99, "symm_collect wrote total %s", when);
    CHECK_NI(symm_alltoall(SYMM_TEAM_WORLD, buf, buf + 8, 8));
    CHECK_NI(symm_alltoallv(SYMM_TEAM_WORLD, buf, 8, buf + 8, cnt, NULL, 8, NULL, NULL));
    CHECK_NI(symm_tile_reduce(SYMM_TEAM_WORLD, tile, tile, SYMM_INT64, SYMM_OP_SUM, 0));
    CHECK_NI(symm_tile_allreduce(SYMM_TEAM_WORLD, tile, tile, SYMM_INT64, SYMM_OP_SUM));
    CHECK_NI(symm_tile_reduce_multi(SYMM_TEAM_WORLD, tile, &tile, roots, 1, SYMM_INT64,
                                    SYMM_OP_SUM));
    CHECK_NI(symm_tile_reduce_worker(12345, 0, 1, tile, tile, SYMM_INT64, SYMM_OP_SUM, 0));
    CHECK_NI(symm_tile_allreduce_worker(12345, 0, 1, tile, tile, SYMM_INT64, SYMM_OP_SUM));
    CHECK_NI(symm_tile_reduce_multi_worker(12345, 0, 1, tile, &tile, roots, 1, SYMM_INT64,
                                           SYMM_OP_SUM));
    CHECK_NI(symm_tile_reduce_parallel(12345, 1, tile, tile, SYMM_INT64, SYMM_OP_SUM, 0));
    CHECK_NI(symm_tile_allreduce_parallel(12345, 1, tile, tile, SYMM_INT64, SYMM_OP_SUM));
    CHECK_NI(symm_tile_reduce_multi_parallel(12345, 1, tile, &tile, roots, 1, SYMM_INT64,
                                             SYMM_OP_SUM));
    /* the automatic worker count before init: still not initialized, not a crash */
    CHECK_NI(symm_tile_allreduce_parallel(12345, 0, tile, tile, SYMM_INT64, SYMM_OP_SUM));
    size_t osp[8] = {0}, ooff[8] = {0}, orows = 4242;
    CHECK_NI(symm_all_to_all_v(SYMM_TEAM_WORLD, buf, 8, buf + 8, cnt, 8, osp, ooff, &orows));
    CHECK_NI(
        symm_moe_dispatch(SYMM_TEAM_WORLD, buf, 8, buf + 8, cnt, 1, 8, 1, osp, ooff, &orows));
    CHECK_NI(
        symm_moe_combine(SYMM_TEAM_WORLD, buf, 8, buf + 8, cnt, cnt, 1, 8, osp, ooff, &orows));
    CHECK_NI(symm_all_to_all_v_worker(12345, 0, 1, buf, 8, buf + 8, cnt, 8, osp, ooff, &orows));
    CHECK_NI(symm_moe_dispatch_worker(12345, 0, 1, buf, 8, buf + 8, cnt, 1, 8, 1, osp, ooff,
                                      &orows));
    CHECK_NI(symm_moe_combine_worker(12345, 0, 1, buf, 8, buf + 8, cnt, cnt, 1, 8, osp, ooff,
                                     &orows));
    CHECK_NI(symm_all_to_all_v_parallel(12345, 1, buf, 8, buf + 8, cnt, 8, osp, ooff, &orows));
    CHECK_NI(
        symm_moe_dispatch_parallel(12345, 1, buf, 8, buf + 8, cnt, 1, 8, 1, osp, ooff, &orows));
    CHECK_NI(symm_moe_combine_parallel(12345, 1, buf, 8, buf + 8, cnt, cnt, 1, 8, osp, ooff,
                                       &orows));
    /* the automatic worker count before init */
    CHECK_NI(
        symm_moe_dispatch_parallel(12345, 0, buf, 8, buf + 8, cnt, 1, 8, 1, osp, ooff, &orows));
    CHECK_TRUE(orows == 4242 && osp[0] == 0 && ooff[0] == 0, "all-to-all-v wrote outputs %s",
               when);
    CHECK_TRUE(symm_last_status() == NI, "last status %d", (int)symm_last_status());
}

int main(void)
{
    test_strerror();
    test_not_initialized("before init");
    CHECK_OK(symm_init());
    CHECK_TRUE(symm_initialized() && symm_my_pe() == 0 && symm_n_pes() == 1,
               "a run without symmrun is a 1-PE job (pe %d of %d)", symm_my_pe(), symm_n_pes());
    CHECK_STATUS(symm_init(), SYMM_ERR_ALREADY_INITIALIZED);
    CHECK_TRUE(symm_initialized() && symm_n_pes() == 1, "double init broke the first");
    /* the first init still works */
    int *p = symm_malloc(sizeof(int) * 4);
    CHECK_TRUE(p != NULL, "malloc after a double init");
    p[0] = 42;
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_free(p));
    CHECK_OK(symm_finalize());
    test_not_initialized("after finalize");
    CHECK_STATUS(symm_finalize(), NI);
    /* and again: init after finalize gives a working runtime */
    CHECK_OK(symm_init());
    symm_team_t t;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, 1, &t));
    CHECK_OK(symm_barrier(t));
    CHECK_OK(symm_team_destroy(t));
    p = symm_malloc(64);
    CHECK_TRUE(p != NULL, "malloc after re-init");
    CHECK_OK(symm_free(p));
    CHECK_OK(symm_finalize());
    test_not_initialized("after the second finalize");
    printf("test_errors: OK\n");
    return 0;
}
