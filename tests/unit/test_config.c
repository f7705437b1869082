/* test_config.c — size parsing and the SYMM_* environment: valid values take effect,
 * an invalid one makes symm_init fail with SYMM_ERR_INVALID_ARG and leaves symm
 * uninitialized (a later init with a good environment works). */
#include "common/test_util.h"
#include "core/config.h"

static void size_ok(const char *s, size_t want)
{
    size_t v = 777;
    CHECK_TRUE(symm_parse_size(s, &v) == 0, "symm_parse_size(\"%s\") failed", s);
    CHECK_TRUE(v == want, "symm_parse_size(\"%s\") = %zu, expected %zu", s, v, want);
}

static void size_bad(const char *s)
{
    size_t v = 777;
    CHECK_TRUE(symm_parse_size(s, &v) != 0, "symm_parse_size(\"%s\") accepted (%zu)", s, v);
    CHECK_TRUE(v == 777, "symm_parse_size(\"%s\") failed but wrote %zu", s, v);
}

static void test_parse_size(void)
{
    size_ok("0", 0);
    size_ok("1", 1);
    size_ok("4096", 4096);
    size_ok("64K", 64 * 1024);
    size_ok("64k", 64 * 1024);
    size_ok("64KB", 64 * 1024);
    size_ok("3M", 3 * 1024 * 1024);
    size_ok("1G", (size_t)1 << 30);
    size_ok("1g", (size_t)1 << 30);
    size_ok("2T", (size_t)2 << 40);
    size_ok("1.5K", 1536);
    size_ok("0.5M", 512 * 1024);
    size_ok("123B", 123);
    size_bad("");
    size_bad("K");
    size_bad("abc");
    size_bad("-1");
    size_bad("-5M");
    size_bad("12X");
    size_bad("12KK");
    size_bad("12K B");
    size_bad("1e300");
    size_bad("inf");
    size_bad("nan");
    size_bad("-nan");
    size_bad("100000000000T");
}

static void set(const char *name, const char *value)
{
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

/* symm_init must fail with INVALID_ARG for name=value, naming the variable, and leave
 * symm uninitialized. */
static void init_rejects(const char *name, const char *value)
{
    set(name, value);
    symm_status_t st = symm_init();
    if (st == SYMM_SUCCESS) {
        symm_finalize();
        TEST_FAIL("symm_init accepted %s='%s'", name, value);
    }
    CHECK_TRUE(st == SYMM_ERR_INVALID_ARG, "symm_init with %s='%s' returned %d (%s)", name,
               value, (int)st, symm_strerror(st));
    CHECK_TRUE(strstr(symm_last_error(), name) != NULL, "the error does not name %s: %s",
               name, symm_last_error());
    CHECK_TRUE(!symm_initialized() && symm_my_pe() == -1 && symm_n_pes() == -1,
               "symm looks initialized after a failed init");
    set(name, NULL);
}

int main(void)
{
    test_parse_size();

    init_rejects("SYMM_HEAP_SIZE", "lots");
    init_rejects("SYMM_HEAP_SIZE", "-1M");
    init_rejects("SYMM_TEAM_HEAP_SIZE", "12Q");
    init_rejects("SYMM_TIMEOUT", "soon");
    init_rejects("SYMM_TIMEOUT", "5s");
    init_rejects("SYMM_SPIN", "12x");
    init_rejects("SYMM_SPIN", "99999999999");
    init_rejects("SYMM_YIELD_US", "1.5");
    init_rejects("SYMM_SLEEP_US", "ten");
    init_rejects("SYMM_BARRIER_FANIN", "4 ");
    init_rejects("SYMM_COLL_SMALL", "16Kb2");
    init_rejects("SYMM_GPU_HEAP_SIZE", "big");
    init_rejects("SYMM_GPU_DEVICE", "first");

    /* a team region too small for the predefined teams: init fails cleanly, and a
     * later init with room works */
    set("SYMM_TEAM_HEAP_SIZE", "0");
    CHECK_STATUS(symm_init(), SYMM_ERR_NO_MEMORY);
    CHECK_TRUE(strstr(symm_last_error(), "SYMM_TEAM_HEAP_SIZE") != NULL, "message: %s",
               symm_last_error());
    CHECK_TRUE(!symm_initialized(), "initialized after a failed init");
    set("SYMM_TEAM_HEAP_SIZE", NULL);
    CHECK_OK(symm_init());
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_finalize());

    /* valid values take effect */
    set("SYMM_HEAP_SIZE", "3M");
    set("SYMM_TEAM_HEAP_SIZE", "1M");
    set("SYMM_TIMEOUT", "30");
    CHECK_OK(symm_init());
    symm_info_t info;
    CHECK_OK(symm_get_info(&info));
    CHECK_EQ_U64(info.heap_size, 3u << 20);
    CHECK_EQ_U64(info.team_heap_size, 1u << 20);
    CHECK_TRUE(info.heap_used == 0, "heap_used %zu at start", info.heap_used);
    CHECK_TRUE(info.transport && strcmp(info.transport, "shm") == 0, "transport %s",
               info.transport ? info.transport : "(null)");
    CHECK_EQ_U64(symm_config.timeout, 30);
    /* the heap really is 3M: 2M fits, a further 2M does not */
    void *p = symm_malloc(2u << 20);
    CHECK_TRUE(p != NULL, "2M in a 3M heap");
    CHECK_NULL_STATUS(symm_malloc(2u << 20), SYMM_ERR_NO_MEMORY);
    CHECK_OK(symm_free(p));
    CHECK_STATUS(symm_get_info(NULL), SYMM_ERR_INVALID_ARG);
    CHECK_OK(symm_finalize());

    /* an empty value means the default */
    set("SYMM_HEAP_SIZE", "");
    set("SYMM_TEAM_HEAP_SIZE", NULL);
    set("SYMM_TIMEOUT", NULL);
    CHECK_OK(symm_init());
    CHECK_OK(symm_get_info(&info));
    size_t def;
    CHECK_TRUE(symm_parse_size("1G", &def) == 0, "parse");
    CHECK_EQ_U64(info.heap_size, def);
    CHECK_OK(symm_finalize());
    printf("test_config: OK\n");
    return 0;
}
