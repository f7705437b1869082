/* test_util.h — helpers shared by symm's tests: CHECK_* macros that print file:line,
 * the PE and symm_last_error() and exit non-zero; a seeded xorshift RNG; buffer fill and
 * compare helpers. Header-only (static inline) so any test program can include it; it
 * compiles as C++ too, for the GPU tests' gpu_test.h. */
#ifndef SYMM_TEST_UTIL_H
#define SYMM_TEST_UTIL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symm.h"

/* ---------------------------------------------------------------- failure reporting */
static inline int test_pe_(void)
{
    return symm_initialized() ? symm_my_pe() : -1;
}

/* Prints the failure (with symm_last_error() if last_error) and exits 1. */
static inline void test_failv_(const char *file, int line, int last_error, const char *fmt,
                               va_list ap) __attribute__((noreturn));
static inline void test_failv_(const char *file, int line, int last_error, const char *fmt,
                               va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (last_error)
        fprintf(stderr, "FAIL %s:%d [PE %d]: %s (last error: %s)\n", file, line, test_pe_(),
                msg, symm_last_error());
    else
        fprintf(stderr, "FAIL %s:%d [PE %d]: %s\n", file, line, test_pe_(), msg);
    fflush(stderr);
    fflush(stdout);
    exit(1);
}

static inline void test_fail_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static inline void test_fail_(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    test_failv_(file, line, 0, fmt, ap);
}
#define TEST_FAIL(...) test_fail_(__FILE__, __LINE__, __VA_ARGS__)

/* TEST_FAIL with symm_last_error() appended (the GPU tests' GT_FAIL). */
static inline void test_fail_last_(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn));
static inline void test_fail_last_(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    test_failv_(file, line, 1, fmt, ap);
}

/* expr must return SYMM_SUCCESS. */
#define CHECK_OK(expr)                                                                         \
    do {                                                                                       \
        symm_status_t cst_ = (expr);                                                           \
        if (cst_ != SYMM_SUCCESS)                                                              \
            TEST_FAIL("%s returned %d (%s); last error: %s", #expr, (int)cst_,                 \
                      symm_strerror(cst_), symm_last_error());                                 \
    } while (0)

/* expr must return exactly the status want. */
#define CHECK_STATUS(expr, want)                                                               \
    do {                                                                                       \
        symm_status_t cst_ = (expr), cwant_ = (want);                                          \
        if (cst_ != cwant_)                                                                    \
            TEST_FAIL("%s returned %d (%s), expected %d (%s); last error: %s", #expr,          \
                      (int)cst_, symm_strerror(cst_), (int)cwant_, symm_strerror(cwant_),      \
                      symm_last_error());                                                      \
    } while (0)

#define CHECK_TRUE(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            char cmsg_[768];                                                                   \
            /* truncating a long message is fine: using the result says so to gcc */           \
            if (snprintf(cmsg_, sizeof cmsg_, __VA_ARGS__) < 0) cmsg_[0] = '\0';               \
            TEST_FAIL("%s is false: %s (last error: %s)", #cond, cmsg_, symm_last_error());    \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                                     \
    do {                                                                                       \
        long long ca_ = (long long)(a), cb_ = (long long)(b);                                  \
        if (ca_ != cb_) TEST_FAIL("%s == %lld, expected %s == %lld", #a, ca_, #b, cb_);        \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                     \
    do {                                                                                       \
        unsigned long long ca_ = (unsigned long long)(a), cb_ = (unsigned long long)(b);       \
        if (ca_ != cb_)                                                                        \
            TEST_FAIL("%s == %llu (0x%llx), expected %s == %llu (0x%llx)", #a, ca_, ca_, #b,   \
                      cb_, cb_);                                                               \
    } while (0)

/* A NULL-returning call must have failed with status want. */
#define CHECK_NULL_STATUS(expr, want)                                                          \
    do {                                                                                       \
        void *cp_ = (void *)(expr);                                                            \
        if (cp_ != NULL) TEST_FAIL("%s returned %p, expected NULL", #expr, cp_);               \
        if (symm_last_status() != (want))                                                      \
            TEST_FAIL("%s: last status %d (%s), expected %d (%s); last error: %s", #expr,      \
                      (int)symm_last_status(), symm_strerror(symm_last_status()), (int)(want), \
                      symm_strerror(want), symm_last_error());                                 \
    } while (0)

/* ---------------------------------------------------------------- RNG (xorshift64*) */
typedef struct {
    uint64_t s;
} test_rng_t;

static inline void test_rng_seed(test_rng_t *r, uint64_t seed)
{
    /* splitmix64 of the seed, so that nearby seeds give unrelated streams */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545f4914f6cdd1dull;
}

static inline uint64_t test_rng_next(test_rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, n) (n > 0; the bias is negligible for test purposes). */
static inline uint64_t test_rng_below(test_rng_t *r, uint64_t n)
{
    return test_rng_next(r) % n;
}

/* A 64-bit hash of two words: data that any PE can recompute for any (PE, index). */
static inline uint64_t test_mix(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 32);
}

/* The base seed of a test: SYMM_TEST_SEED if set, else a fixed value (reproducible). */
static inline uint64_t test_seed(void)
{
    const char *s = getenv("SYMM_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : 0x5eed1234ull;
}

/* ---------------------------------------------------------------- buffers */
/* Deterministic pattern: byte i of the buffer tagged (tag) — any PE can recompute what
 * another PE wrote. Never all zeros. */
static inline uint8_t test_pattern_byte(uint64_t tag, size_t i)
{
    uint64_t x = tag * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    return (uint8_t)(x | ((i & 7) == 0 ? 1 : 0)); /* a zero byte at most 7 of 8 times */
}

static inline void test_fill_pattern(void *buf, size_t n, uint64_t tag)
{
    uint8_t *b = (uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        b[i] = test_pattern_byte(tag, i);
}

/* Index of the first byte that differs from the pattern, or (size_t)-1. */
static inline size_t test_find_pattern_mismatch(const void *buf, size_t n, uint64_t tag)
{
    const uint8_t *b = (const uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != test_pattern_byte(tag, i)) return i;
    return (size_t)-1;
}

static inline void test_fill_random(test_rng_t *r, void *buf, size_t n)
{
    uint8_t *b = (uint8_t *)buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = test_rng_next(r);
        memcpy(b + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = test_rng_next(r);
        memcpy(b + i, &v, n - i);
    }
}

static inline void test_fill_byte(void *buf, size_t n, uint8_t v)
{
    memset(buf, v, n);
}

/* Index of the first differing byte, or (size_t)-1. */
static inline size_t test_find_mismatch(const void *a, const void *b, size_t n)
{
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return i;
    return (size_t)-1;
}

/* Index of the first byte != v, or (size_t)-1. */
static inline size_t test_find_not_byte(const void *a, size_t n, uint8_t v)
{
    const uint8_t *x = (const uint8_t *)a;
    for (size_t i = 0; i < n; i++)
        if (x[i] != v) return i;
    return (size_t)-1;
}

#define CHECK_BYTES(got, want, n, ...)                                                         \
    do {                                                                                       \
        size_t cbn_ = (n);                                                                     \
        size_t cbi_ = test_find_mismatch((got), (want), cbn_);                                 \
        if (cbi_ != (size_t)-1) {                                                              \
            char cbm_[512];                                                                    \
            snprintf(cbm_, sizeof cbm_, __VA_ARGS__);                                          \
            TEST_FAIL("%s: byte %zu of %zu differs: got 0x%02x, expected 0x%02x", cbm_, cbi_,  \
                      cbn_, ((const uint8_t *)(got))[cbi_], ((const uint8_t *)(want))[cbi_]);  \
        }                                                                                      \
    } while (0)

#define CHECK_ALL_BYTES(got, v, n, ...)                                                        \
    do {                                                                                       \
        size_t cbn_ = (n);                                                                     \
        size_t cbi_ = test_find_not_byte((got), cbn_, (uint8_t)(v));                           \
        if (cbi_ != (size_t)-1) {                                                              \
            char cbm_[512];                                                                    \
            snprintf(cbm_, sizeof cbm_, __VA_ARGS__);                                          \
            TEST_FAIL("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", cbm_, cbi_, cbn_,      \
                      ((const uint8_t *)(got))[cbi_], (unsigned)(uint8_t)(v));                 \
        }                                                                                      \
    } while (0)

/* ---------------------------------------------------------------- misc */
static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An integer from the environment, or def. */
static inline long test_env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 0) : def;
}

/* This PE's rank and the job's size before symm_init, as the launcher tells them:
 * symmrun's SYMM_RANK and SYMM_NPES, or Open MPI's or PMI's variables under mpirun; 0 of
 * 1 when run directly. For tests that must set something per PE before symm_init. */
static inline void test_launch_rank(int *rank, int *npes)
{
    static const char *const vars[][2] = {{"SYMM_RANK", "SYMM_NPES"},
                                          {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"}};
    *rank = 0;
    *npes = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i][0]) && getenv(vars[i][1])) {
            *rank = (int)test_env_long(vars[i][0], 0);
            *npes = (int)test_env_long(vars[i][1], 1);
            return;
        }
}

/* The world ranks that symm puts in SYMM_TEAM_NODE with me, for a job on one machine:
 * every PE under symmrun; under an MPI launcher, the block of consecutive ranks that
 * SYMM_HOSTS = k cuts the host into (rank p is in block p * k / npes). Returns how many. */
static inline int test_node_group(int me, int npes, int *ranks)
{
    long k = getenv("SYMM_RANK") ? 1 : test_env_long("SYMM_HOSTS", 1), n = 0;
    for (int p = 0; p < npes; p++)
        if ((int64_t)p * k / npes == (int64_t)me * k / npes) ranks[n++] = p;
    return (int)n;
}

/* 1 when running under valgrind (its preload library is in LD_PRELOAD): stress tests
 * scale their iteration counts down there. */
static inline int test_under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && (strstr(p, "vgpreload") || strstr(p, "valgrind"));
}

/* Iteration count of a stress test: SYMM_STRESS_ITERS if set, else def, or def/50 (at
 * least 20) under valgrind. */
static inline long test_stress_iters(long def)
{
    long v = test_env_long("SYMM_STRESS_ITERS", 0);
    if (v > 0) return v;
    if (test_under_valgrind()) return def / 50 > 20 ? def / 50 : 20;
    return def;
}

/* Resident set size in bytes (from /proc/self/statm), 0 if unknown. */
static inline size_t test_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, rss = 0;
    int n = fscanf(f, "%lu %lu", &size, &rss);
    fclose(f);
    return n == 2 ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* symm_init that must succeed, and a matching finalize. */
/* Runs fn on nw threads (at most 8), each on its own copy of proto, a struct of type
 * type with fields worker (set to 0..nw-1), nworkers (set to nw) and st, which must hold
 * SYMM_SUCCESS once the thread is done. */
#define TEST_RUN_WORKERS(type, proto, nw, fn)                                                  \
    do {                                                                                       \
        pthread_t th_[8];                                                                      \
        type jobs_[8];                                                                         \
        int nw_ = (nw);                                                                        \
        CHECK_TRUE(nw_ >= 1 && nw_ <= 8, "%d workers", nw_);                                   \
        for (int w_ = 0; w_ < nw_; w_++) {                                                     \
            jobs_[w_] = (proto);                                                               \
            jobs_[w_].worker = w_;                                                             \
            jobs_[w_].nworkers = nw_;                                                          \
            CHECK_TRUE(pthread_create(&th_[w_], NULL, (fn), &jobs_[w_]) == 0,                  \
                       "pthread_create");                                                      \
        }                                                                                      \
        for (int w_ = 0; w_ < nw_; w_++) {                                                     \
            pthread_join(th_[w_], NULL);                                                       \
            CHECK_TRUE(jobs_[w_].st == SYMM_SUCCESS, "worker %d of %d: %s", w_, nw_,           \
                       symm_strerror(jobs_[w_].st));                                           \
        }                                                                                      \
    } while (0)

#define TEST_INIT()     CHECK_OK(symm_init())
#define TEST_FINALIZE() CHECK_OK(symm_finalize())

#endif
