/* boot_stub_log.c — stands in for the library's error recording when src/bootstrap is
 * built into a test program on its own (fault_exit): the message goes straight to
 * stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"

symm_status_t symm_error_set(symm_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One write, so that the lines of several PEs do not interleave. */
    fprintf(stderr, "symm: %s\n", msg);
    return st;
}
