/* boot_stub_log.c — stands in for the library's error recording and logging when
 * src/bootstrap is built into a test program on its own (fault_exit): every message
 * goes straight to stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"

static symm_status_t last_status;
static char last_msg[512];

symm_status_t symm_error_set(symm_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_status = st;
    /* One write, so that the lines of several PEs do not interleave. */
    fprintf(stderr, "symm: %s\n", last_msg);
    return st;
}

symm_status_t symm_last_status(void)
{
    return last_status;
}

const char *symm_last_error(void)
{
    return last_msg;
}

int symm_log_level = SYMM_LOG_WARN;

void symm_log_write(symm_log_level_t level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    (void)level;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "symm: %s\n", msg);
}
