/* bench_util.c — helpers shared by symm-bench and the MPI anchor: see bench_util.h. */
#include "bench_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stat_t bench_stats(const double *v, int n)
{
    bench_stat_t s = {0, 0, 0};
    if (n <= 0) return s;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return s;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s.min = t[0];
    s.max = t[n - 1];
    s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return s;
}

double bench_nan(void)
{
    return NAN;
}

int bench_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end) return -1;
    *out = (size_t)v;
    return 0;
}

int bench_iters_for(size_t size, int quick)
{
    if (quick) return size <= 4096 ? 20 : 2;
    /* ~64 MiB moved per repetition, at least 2 and at most 1000 operations */
    size_t it = ((size_t)64 << 20) / (size ? size : 1);
    if (it < 2) it = 2;
    if (it > 1000) it = 1000;
    return (int)it;
}

int bench_conc_iters(int quick, double trial_us)
{
    if (quick) return 20;
    double it = 0.3e6 / (trial_us > 0.01 ? trial_us : 0.01);
    if (it < 20) it = 20;
    if (it > 20000) it = 20000;
    return (int)it;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s teams|coll|tile|moe%s [options]\n"
            "  --quick            tiny sizes and counts (smoke test, a few seconds)\n"
            "  --reps N           repetitions per point; median and spread over them (7)\n"
            "  --min SIZE         smallest message (8)\n"
            "  --max SIZE         largest message (64M)\n"
            "  --rotate SIZE      footprint of the rotating buffers (256M)\n"
            "                     symm-bench halves --rotate, then --max, until its buffers\n"
            "                     fit in the symmetric heap (SYMM_HEAP_SIZE), and says so\n"
            "  --rotate-min SIZE  rotate buffers from this size up (256K)\n"
            "  --max-pool N       largest pool of the teams suite (65536)\n"
            "  --max-conc N       most concurrent duplicates in the barrier test (64)\n"
            "  --dup-limit S      MPI_Comm_dup count limit: stop after S seconds (60)\n"
            "  --dup-limit-max N  ... or at N communicators (65536; 0 = skip the test)\n"
            "  --workers N        workers per PE of the _par rows of tile and moe (0: the\n"
            "                     automatic count of nworkers == 0, the default)\n"
            "  --ops a,b,c        only these operations\n"
            "  --tsv FILE         append machine-readable rows to FILE\n"
            "  --anchor FILE      rows of the anchor (the MPI program) for the ratio column\n"
            "  -h, --help         this text\n",
            prog, strcmp(prog, "symm-bench") ? "" : "|topk (symm-bench only)");
    if (!strcmp(prog, "symm-bench"))
        fprintf(f,
                "or:    %s gpu-coll|gpu-tile-moe|gpu-topk [their options]\n"
                "  the GPU tables (symm-gpu-bench [pool|barrier|coll], "
                "symm-gpu-tile-moe-bench: the\n"
                "  programs next to this one, built with the CUDA part; gpu-tile-moe takes "
                "--quick,\n"
                "  --tokens N, --prof)\n",
                prog);
}

int bench_parse_opts(int argc, char **argv, bench_opts_t *o, const char *prog)
{
    memset(o, 0, sizeof *o);
    o->reps = 7;
    o->min_size = 8;
    o->max_size = (size_t)64 << 20;
    o->rotate = (size_t)256 << 20;
    o->rotate_min = (size_t)256 << 10;
    o->max_pool = 65536;
    o->max_conc = 64;
    o->dup_limit_s = 60;
    o->dup_limit_max = 65536;
    if (argc < 2) {
        usage(stderr, prog);
        return -1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout, prog);
        return 1;
    }
    o->suite = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
            continue;
        }
        if (!v) {
            usage(stderr, prog);
            return -1;
        }
        if (!strcmp(a, "--reps"))
            o->reps = atoi(v);
        else if (!strcmp(a, "--min"))
            bad = bench_parse_size(v, &o->min_size);
        else if (!strcmp(a, "--max"))
            bad = bench_parse_size(v, &o->max_size);
        else if (!strcmp(a, "--rotate"))
            bad = bench_parse_size(v, &o->rotate);
        else if (!strcmp(a, "--rotate-min"))
            bad = bench_parse_size(v, &o->rotate_min);
        else if (!strcmp(a, "--max-pool"))
            bad = bench_parse_size(v, &o->max_pool);
        else if (!strcmp(a, "--max-conc"))
            o->max_conc = atoi(v);
        else if (!strcmp(a, "--dup-limit"))
            o->dup_limit_s = atof(v);
        else if (!strcmp(a, "--dup-limit-max"))
            bad = bench_parse_size(v, &o->dup_limit_max);
        else if (!strcmp(a, "--workers"))
            bad = (o->workers = atoi(v)) < 0;
        else if (!strcmp(a, "--ops"))
            o->ops = v;
        else if (!strcmp(a, "--tsv"))
            o->tsv = v;
        else if (!strcmp(a, "--anchor"))
            o->anchor = v;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "%s: bad option %s %s\n", prog, a, v);
            usage(stderr, prog);
            return -1;
        }
        i++;
    }
    if (o->quick) {
        if (o->reps == 7) o->reps = 3;
        if (o->max_size == (size_t)64 << 20) o->max_size = 64 << 10;
        if (o->max_pool == 65536) o->max_pool = 256;
        if (o->max_conc == 64) o->max_conc = 4;
        if (o->dup_limit_max == 65536) o->dup_limit_max = 0;
        o->rotate = (size_t)1 << 20;
        o->rotate_min = 16 << 10;
    }
    if (o->reps < 1) o->reps = 1;
    if (o->min_size < 1) o->min_size = 1;
    if (o->max_conc < 1) o->max_conc = 1;
    if (o->max_pool < 1) o->max_pool = 1;
    return 0;
}

int bench_op_selected(const bench_opts_t *o, const char *op)
{
    if (!o->ops) return 1;
    size_t n = strlen(op);
    for (const char *p = o->ops; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, op, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int bench_anchor_load(const char *path, bench_anchor_t *a)
{
    a->rows = NULL;
    a->n = 0;
    if (!path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t cap = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        bench_row_t r;
        long long size;
        if (line[0] == '#') continue;
        if (sscanf(line, "%15s %31s %lld %lf %lf %lf %lf", r.suite, r.op, &size, &r.median_us,
                   &r.min_us, &r.max_us, &r.extra) != 7)
            continue;
        r.size = size;
        if (a->n == cap) {
            cap = cap ? 2 * cap : 64;
            bench_row_t *nr = realloc(a->rows, cap * sizeof *nr);
            if (!nr) break;
            a->rows = nr;
        }
        a->rows[a->n++] = r; /* a later row for the same key wins (see find) */
    }
    fclose(f);
    return 0;
}

const bench_row_t *bench_anchor_find(const bench_anchor_t *a, const char *suite, const char *op,
                                     int64_t size)
{
    for (size_t i = a->n; i-- > 0;)
        if (a->rows[i].size == size && !strcmp(a->rows[i].op, op) &&
            !strcmp(a->rows[i].suite, suite))
            return &a->rows[i];
    return NULL;
}

void bench_anchor_free(bench_anchor_t *a)
{
    free(a->rows);
    a->rows = NULL;
    a->n = 0;
}

void bench_tsv_note(const bench_opts_t *o, const char *fmt, ...)
{
    if (!o->tsv) return;
    FILE *f = fopen(o->tsv, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    va_end(ap);
    fclose(f);
}

void bench_tsv_row(const bench_opts_t *o, const char *suite, const char *op, int64_t size,
                   bench_stat_t us, double extra, double anchor_us, double ratio)
{
    if (!o->tsv) return;
    FILE *f = fopen(o->tsv, "a");
    if (!f) return;
    fprintf(f, "%s\t%s\t%lld\t%.4f\t%.4f\t%.4f\t%.6g\t%.4f\t%.4g\n", suite, op, (long long)size,
            us.median, us.min, us.max, extra, anchor_us, ratio);
    fclose(f);
}
