/* config.c — parses and checks the SYMM_* environment against the table in config.h, and
 * prints the table for symm-info and docs/ENVIRONMENT.md. */
#include "core/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/log.h"

symm_config_t symm_config;

int symm_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1; /* !(v >= 0) also rejects NaN */
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return -1;
    v *= mul;
    if (v > (double)(SIZE_MAX / 2)) return -1;
    *out = (size_t)v;
    return 0;
}

/* The parsers return 0, or -1 for text that is not a value of the kind at all. */
static int parse_SIZE(const char *s, size_t *out)
{
    return symm_parse_size(s, out);
}

static int parse_DOUBLE(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE on underflow still gives a usable (tiny) value: the range check judges it */
    if (end == s || *end || (errno && errno != ERANGE)) return -1;
    *out = v;
    return 0;
}

static int parse_INT(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return -1;
    *out = v;
    return 0;
}

/* A size as the table writes its bounds: "64T" rather than 70368744177664. */
static void size_text(size_t v, char *buf, size_t len)
{
    static const char suffix[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        size_t unit = (size_t)1 << (10 * (4 - i));
        if (v && v % unit == 0) {
            snprintf(buf, len, "%zu%c", v / unit, suffix[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

static void range_SIZE(char *buf, size_t len, size_t lo, size_t hi)
{
    char a[32], b[32];
    size_text(lo, a, sizeof a);
    size_text(hi, b, sizeof b);
    snprintf(buf, len, "%s..%s", a, b);
}

static void range_DOUBLE(char *buf, size_t len, double lo, double hi)
{
    snprintf(buf, len, "%.15g..%.15g", lo, hi); /* 1e7 as 10000000 */
}

static void range_INT(char *buf, size_t len, long long lo, long long hi)
{
    if (lo == 0 && hi == 1)
        snprintf(buf, len, "0 or 1");
    else
        snprintf(buf, len, "%lld..%lld", lo, hi);
}

static void range_CHOICE(char *buf, size_t len, const char *const *names, int unused)
{
    (void)unused;
    size_t n = (size_t)snprintf(buf, len, "one of");
    for (int i = 0; names[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s %s", i ? "," : "", names[i]);
}

/* take_<kind>: the value of variable name (def when unset or empty) into *out, if it
 * parses and lies in the range; else an error naming the variable, the value and the
 * range. */
static int take_fail(const char *name, const char *v, const char *what, const char *range,
                     const char *help, int is_default)
{
    if (is_default) /* a table whose default is not valid: a bug of symm, not the user's */
        symm_error_set(SYMM_ERR_INVALID_ARG, "the default %s='%s' %s: must be %s", name, v,
                       what, range);
    else
        symm_error_set(SYMM_ERR_INVALID_ARG, "%s='%s' %s: must be %s (%s)", name, v, what,
                       range, help);
    return -1;
}

static const char *env_or(const char *name, const char *def, int *is_default)
{
    const char *v = getenv(name);
    *is_default = !v || !*v;
    return *is_default ? def : v;
}

/* take_SIZE, take_DOUBLE and take_INT: parse_<kind> into a value of type vt, bounds of
 * type bt, the result stored as type ot. The bounds test is written so that NaN fails
 * too. */
#define SYMM_TAKE_NUMBER_(kind, vt, bt, ot, not_a)                                             \
    static int take_##kind(const char *name, const char *def, bt lo, bt hi, const char *help,  \
                           ot *out)                                                            \
    {                                                                                          \
        int is_def;                                                                            \
        const char *s = env_or(name, def, &is_def);                                            \
        char range[160];                                                                       \
        range_##kind(range, sizeof range, lo, hi);                                             \
        vt v;                                                                                  \
        if (parse_##kind(s, &v) != 0)                                                          \
            return take_fail(name, s, "is not " not_a, range, help, is_def);                   \
        if (!(v >= lo && v <= hi))                                                             \
            return take_fail(name, s, "is out of range", range, help, is_def);                 \
        *out = (ot)v;                                                                          \
        return 0;                                                                              \
    }
SYMM_TAKE_NUMBER_(SIZE, size_t, size_t, size_t, "a size in bytes")
SYMM_TAKE_NUMBER_(DOUBLE, double, double, double, "a number")
SYMM_TAKE_NUMBER_(INT, long long, long long, int, "an integer")
#undef SYMM_TAKE_NUMBER_

static int take_CHOICE(const char *name, const char *def, const char *const *names, int unused,
                       const char *help, const char **out)
{
    int is_def;
    const char *s = env_or(name, def, &is_def);
    /* The table's own spelling is kept, so users of the field compare with strcmp. */
    for (int i = 0; names[i]; i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = names[i];
            return 0;
        }
    char range[160];
    range_CHOICE(range, sizeof range, names, unused);
    return take_fail(name, s, "is not a valid choice", range, help, is_def);
}

int symm_config_load(void)
{
    /* Into a copy: a rejected environment leaves the configuration as it was. */
    symm_config_t c;
    memset(&c, 0, sizeof c);
#define SYMM_CONFIG_LOAD_(NAME, kind, field, def, lo, hi, help)                                \
    if (take_##kind("SYMM_" #NAME, def, lo, hi, help, &c.field) != 0) return -1;
    SYMM_FOREACH_ENV(SYMM_CONFIG_LOAD_)
#undef SYMM_CONFIG_LOAD_
    symm_config = c;
    return 0;
}

int symm_config_range(const char *name, char *buf, size_t len)
{
#define SYMM_CONFIG_RANGE_(NAME, kind, field, def, lo, hi, help)                               \
    if (strcmp(name, #NAME) == 0 || strcmp(name, "SYMM_" #NAME) == 0) {                        \
        range_##kind(buf, len, lo, hi);                                                        \
        return 0;                                                                              \
    }
    SYMM_FOREACH_ENV(SYMM_CONFIG_RANGE_)
#undef SYMM_CONFIG_RANGE_
    return -1;
}

void symm_config_print(int fd, int markdown)
{
    FILE *f = fdopen(dup(fd), "w");
    if (!f) return;
    char range[160];
    if (markdown)
        fprintf(f, "| Variable | Default | Valid values | Meaning |\n"
                   "| --- | --- | --- | --- |\n");
#define SYMM_CONFIG_PRINT_(NAME, kind, field, def, lo, hi, help)                               \
    range_##kind(range, sizeof range, lo, hi);                                                 \
    if (markdown)                                                                              \
        fprintf(f, "| `SYMM_" #NAME "` | `%s` | %s | %s |\n", def, range, help);               \
    else {                                                                                     \
        const char *v = getenv("SYMM_" #NAME);                                                 \
        fprintf(f, "  %-22s %-10s (default %s; valid: %s)\n      %s\n", "SYMM_" #NAME,         \
                v ? v : def, def, range, help);                                                \
    }
    SYMM_FOREACH_ENV(SYMM_CONFIG_PRINT_)
#undef SYMM_CONFIG_PRINT_
    fclose(f);
}
