/* test_config.c — size parsing and the SYMM_* environment: valid values take effect, both
 * edges of every variable's range are accepted, and a value that does not parse or lies
 * outside the range makes symm_init fail with SYMM_ERR_INVALID_ARG, a message naming the
 * variable, the value and the range, and symm uninitialized (a later init with a good
 * environment works). */
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
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
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
    CHECK_TRUE(strstr(symm_last_error(), name) != NULL, "the error does not name %s: %s", name,
               symm_last_error());
    CHECK_TRUE(!symm_initialized() && symm_my_pe() == -1 && symm_n_pes() == -1,
               "symm looks initialized after a failed init");
    set(name, NULL);
}

/* Every variable of the table with its range written out by hand (the reference the
 * table is checked against), both edges as set and as loaded, and values to reject. */
typedef struct {
    const char *name;
    const char *range;
    const char *lo, *lo_loaded, *hi, *hi_loaded;
    const char *bad[12];
} env_case_t;

static const env_case_t env_cases[] = {
    {"SYMM_BOOTSTRAP",
     "one of auto, symmrun, mpi, none",
     "auto",
     "auto",
     "NONE",
     "none",
     {"mpirun", "yes", "1", NULL}},
    {"SYMM_HEAP_SIZE",
     "1..64T",
     "1",
     "1",
     "64T",
     "70368744177664",
     {"0", "0.4", "70368744177665", "64.001T", "-1", "-1M", "lots", "1e300", "nan", NULL}},
    {"SYMM_HEAP_PREFAULT", "0 or 1", "0", "0", "1", "1", {"-1", "2", "yes", "0.5", NULL}},
    {"SYMM_TEAM_HEAP_SIZE",
     "1..64T",
     "1",
     "1",
     "64T",
     "70368744177664",
     {"0", "12Q", "70368744177665", "-5K", NULL}},
    {"SYMM_TIMEOUT",
     "0.001..10000000",
     "0.001",
     "0.001",
     "1e7",
     "1e+07",
     {"0", "-0", "-1", "0.000999", "10000000.01", "nan", "-nan", "inf", "-inf", "soon", "5s",
      NULL}},
    {"SYMM_LOG",
     "one of none, error, warn, info, debug, trace",
     "none",
     "none",
     "TRACE",
     "trace",
     {"loud", "warning", "3", "debug ", NULL}},
    {"SYMM_SPIN",
     "1..1000000000",
     "1",
     "1",
     "1000000000",
     "1000000000",
     {"0", "-1", "1000000001", "4294967297", "99999999999", "12x", "2.5", NULL}},
    {"SYMM_YIELD_US",
     "0..1000000000",
     "0",
     "0",
     "1000000000",
     "1000000000",
     {"-1", "1000000001", "1.5", NULL}},
    {"SYMM_SLEEP_US",
     "0..999999",
     "0",
     "0",
     "999999",
     "999999",
     {"-1", "1000000", "ten", NULL}},
    {"SYMM_BARRIER_FANIN",
     "1..1000000000",
     "1",
     "1",
     "1000000000",
     "1000000000",
     {"0", "-3", "4 ", "1000000001", NULL}},
    {"SYMM_COLL_SMALL",
     "0..64T",
     "0",
     "0",
     "64T",
     "70368744177664",
     {"-1", "70368744177665", "16Kb2", NULL}},
    {"SYMM_NODE_CPUS",
     "0..1048576",
     "0",
     "0",
     "1048576",
     "1048576",
     {"-1", "1048577", "all", NULL}},
    {"SYMM_HOSTS",
     "1..1048576",
     "1",
     "1",
     "1048576",
     "1048576",
     {"0", "-2", "two", "1048577", NULL}},
    {"SYMM_GPU",
     "one of auto, on, off",
     "auto",
     "auto",
     "OFF",
     "off",
     {"yes", "1", "gpu", NULL}},
    {"SYMM_GPU_HEAP_SIZE",
     "1..64T",
     "1",
     "1",
     "64T",
     "70368744177664",
     {"0", "big", "70368744177665", NULL}},
    {"SYMM_GPU_DEVICE", "-1..4095", "-1", "-1", "4095", "4095", {"-2", "4096", "first", NULL}},
    {"SYMM_GPU_COLL_BLOCKS", "0..65536", "0", "0", "65536", "65536", {"-1", "65537", NULL}},
    {"SYMM_GPU_SYNC_SYS", "0 or 1", "0", "0", "1", "1", {"-1", "2", NULL}},
    {"SYMM_GPU_PDL", "0 or 1", "0", "0", "1", "1", {"2", "on", NULL}},
};
#define N_ENV_CASES (int)(sizeof env_cases / sizeof env_cases[0])

/* The loaded value of variable name, as text. */
static void loaded_text(const char *name, char *buf, size_t len)
{
#define T_SIZE(f)   snprintf(buf, len, "%zu", symm_config.f)
#define T_INT(f)    snprintf(buf, len, "%d", symm_config.f)
#define T_DOUBLE(f) snprintf(buf, len, "%g", symm_config.f)
#define T_CHOICE(f) snprintf(buf, len, "%s", symm_config.f)
#define T_(NAME, kind, field, def, lo, hi, help)                                               \
    if (strcmp(name, "SYMM_" #NAME) == 0) {                                                    \
        T_##kind(field);                                                                       \
        return;                                                                                \
    }
    SYMM_FOREACH_ENV(T_)
#undef T_
    TEST_FAIL("%s is not in the table", name);
}

/* The table and the cases list the same variables. */
static void test_cases_cover_table(void)
{
    int in_table = 0;
#define COUNT_(NAME, kind, field, def, lo, hi, help)                                           \
    {                                                                                          \
        int found = 0;                                                                         \
        for (int i = 0; i < N_ENV_CASES; i++)                                                  \
            found += strcmp(env_cases[i].name, "SYMM_" #NAME) == 0;                            \
        CHECK_TRUE(found == 1, "SYMM_" #NAME " has %d test cases, expected 1", found);         \
        in_table++;                                                                            \
        set("SYMM_" #NAME, NULL);                                                              \
    }
    SYMM_FOREACH_ENV(COUNT_)
#undef COUNT_
    CHECK_TRUE(in_table == N_ENV_CASES, "%d variables in the table, %d test cases", in_table,
               N_ENV_CASES);
}

/* Both edges of every range load and take effect; symm_init works with them too. */
static void test_range_edges(void)
{
    char buf[200];
    for (int i = 0; i < N_ENV_CASES; i++) {
        const env_case_t *c = &env_cases[i];
        CHECK_TRUE(symm_config_range(c->name, buf, sizeof buf) == 0, "no range for %s",
                   c->name);
        CHECK_TRUE(strcmp(buf, c->range) == 0, "%s: range '%s', expected '%s'", c->name, buf,
                   c->range);
        const char *in[2] = {c->lo, c->hi}, *want[2] = {c->lo_loaded, c->hi_loaded};
        for (int e = 0; e < 2; e++) {
            set(c->name, in[e]);
            CHECK_TRUE(symm_config_load() == 0, "%s='%s' rejected: %s", c->name, in[e],
                       symm_last_error());
            loaded_text(c->name, buf, sizeof buf);
            CHECK_TRUE(strcmp(buf, want[e]) == 0, "%s='%s' loaded as '%s', expected '%s'",
                       c->name, in[e], buf, want[e]);
        }
        set(c->name, NULL);
    }
    /* The edges that shape every wait, in a real init (1 PE: nothing waits long). */
    set("SYMM_SPIN", "1");
    set("SYMM_TIMEOUT", "0.001");
    set("SYMM_SLEEP_US", "999999");
    set("SYMM_YIELD_US", "0");
    CHECK_OK(symm_init());
    CHECK_OK(symm_barrier_all());
    CHECK_TRUE(symm_config.spin == 1 && symm_config.sleep_us == 999999, "edges not loaded");
    CHECK_OK(symm_finalize());
    set("SYMM_SPIN", NULL);
    set("SYMM_TIMEOUT", NULL);
    set("SYMM_SLEEP_US", NULL);
    set("SYMM_YIELD_US", NULL);
}

/* Every bad value: symm_init fails naming the variable, the value and the range, and the
 * loaded configuration stays as it was. */
static void test_bad_values(void)
{
    CHECK_TRUE(symm_config_load() == 0, "defaults rejected: %s", symm_last_error());
    symm_config_t before = symm_config;
    int n = 0;
    for (int i = 0; i < N_ENV_CASES; i++) {
        const env_case_t *c = &env_cases[i];
        for (int b = 0; c->bad[b]; b++, n++) {
            init_rejects(c->name, c->bad[b]);
            char want[256];
            snprintf(want, sizeof want, "%s='%s' is ", c->name, c->bad[b]);
            CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "message lacks \"%s\": %s",
                       want, symm_last_error());
            snprintf(want, sizeof want, ": must be %s (", c->range);
            CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "message lacks \"%s\": %s",
                       want, symm_last_error());
            set(c->name, c->bad[b]);
            CHECK_TRUE(symm_config_load() != 0, "%s='%s' loaded", c->name, c->bad[b]);
            CHECK_TRUE(memcmp(&before, &symm_config, sizeof before) == 0,
                       "%s='%s' was rejected but changed the configuration", c->name,
                       c->bad[b]);
            set(c->name, NULL);
        }
    }
    CHECK_TRUE(n > 3 * N_ENV_CASES, "only %d bad values tried", n);
    /* The report that started it: SPIN=-1 must not switch off the timeout. */
    init_rejects("SYMM_SPIN", "-1");
    CHECK_TRUE(strstr(symm_last_error(), "SYMM_SPIN='-1' is out of range: must be "
                                         "1..1000000000 (busy-poll") != NULL,
               "message: %s", symm_last_error());
}

int main(void)
{
    test_parse_size();
    test_cases_cover_table();
    test_range_edges();
    test_bad_values();

    /* the smallest team region is one page: it holds the predefined teams, and a pool
     * that needs more fails naming SYMM_TEAM_HEAP_SIZE, leaving symm usable */
    set("SYMM_TEAM_HEAP_SIZE", "1");
    CHECK_OK(symm_init());
    symm_info_t small;
    CHECK_OK(symm_get_info(&small));
    CHECK_EQ_U64(small.team_heap_size, 4096);
    symm_pool_t pool;
    CHECK_STATUS(symm_pool_create(SYMM_TEAM_WORLD, 4096, &pool), SYMM_ERR_NO_MEMORY);
    CHECK_TRUE(strstr(symm_last_error(), "SYMM_TEAM_HEAP_SIZE") != NULL, "message: %s",
               symm_last_error());
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_finalize());
    set("SYMM_TEAM_HEAP_SIZE", NULL);

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
