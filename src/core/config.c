/* config.c — parses the SYMM_* environment from the table in config.h. */
#include "core/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return -1;
    v *= mul;
    if (v > (double)(SIZE_MAX / 2)) return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_SIZE(const char *s, size_t *out) { return symm_parse_size(s, out); }

static int parse_DOUBLE(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno) return -1;
    *out = v;
    return 0;
}

static int parse_INT(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < -2147483647L || v > 2147483647L) return -1;
    *out = (int)v;
    return 0;
}

static int parse_STRING(const char *s, const char **out)
{
    *out = s;
    return 0;
}

int symm_config_load(void)
{
#define SYMM_CONFIG_LOAD_(NAME, kind, field, def, help)                                  \
    {                                                                                    \
        const char *v = getenv("SYMM_" #NAME);                                           \
        if (parse_##kind(def, &symm_config.field) != 0) return -1;                       \
        if (v && *v && parse_##kind(v, &symm_config.field) != 0) {                       \
            symm_error_set(SYMM_ERR_INVALID_ARG, "SYMM_" #NAME "='%s' is not a valid %s", \
                           v, #kind);                                                    \
            return -1;                                                                   \
        }                                                                                \
    }
    SYMM_FOREACH_ENV(SYMM_CONFIG_LOAD_)
#undef SYMM_CONFIG_LOAD_
    return 0;
}

void symm_config_print(int fd, int markdown)
{
    FILE *f = fdopen(dup(fd), "w");
    if (!f) return;
    if (markdown)
        fprintf(f, "| Variable | Default | Meaning |\n| --- | --- | --- |\n");
#define SYMM_CONFIG_PRINT_(NAME, kind, field, def, help)                                 \
    if (markdown)                                                                        \
        fprintf(f, "| `SYMM_" #NAME "` | `%s` | %s |\n", def, help);                     \
    else {                                                                               \
        const char *v = getenv("SYMM_" #NAME);                                           \
        fprintf(f, "  %-22s %-10s (default %s)\n      %s\n", "SYMM_" #NAME,              \
                v ? v : def, def, help);                                                 \
    }
    SYMM_FOREACH_ENV(SYMM_CONFIG_PRINT_)
#undef SYMM_CONFIG_PRINT_
    fclose(f);
}
