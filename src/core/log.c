/* log.c — the logging facility and the per-thread record of the last error. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/runtime.h"

int symm_log_level = SYMM_LOG_WARN;

static _Thread_local symm_status_t last_status = SYMM_SUCCESS;
static _Thread_local char last_message[512];

static const char *const level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

symm_log_level_t symm_log_parse_level(const char *s)
{
    for (int i = 0; i <= SYMM_LOG_TRACE; i++)
        if (strcasecmp(s, level_names[i]) == 0) return (symm_log_level_t)i;
    return SYMM_LOG_WARN;
}

static void log_vwrite(symm_log_level_t level, const char *fmt, va_list ap)
{
    /* One buffer on the stack and one write(2): no stdio locks, no allocation, so this
     * is safe in atexit handlers and destructors, and lines of PEs do not interleave. */
    char line[768];
    int pe = symm_g.me;
    int n = pe >= 0 ? snprintf(line, sizeof line, "[symm pe %d] %s: ", pe, level_names[level])
                    : snprintf(line, sizeof line, "[symm] %s: ", level_names[level]);
    if (n < 0) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0) return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void symm_log_write(symm_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, fmt, ap);
    va_end(ap);
}

symm_status_t symm_error_set(symm_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    last_status = status;
    symm_log_level_t level = (status == SYMM_ERR_TIMEOUT || status == SYMM_ERR_PE_FAILED)
                                 ? SYMM_LOG_ERROR
                                 : SYMM_LOG_INFO;
    symm_log(level, "%s: %s", symm_strerror(status), last_message);
    return status;
}

symm_status_t symm_last_status(void)
{
    return last_status;
}

const char *symm_last_error(void)
{
    return last_message;
}

const char *symm_strerror(symm_status_t status)
{
    switch (status) {
#define SYMM_STATUS_CASE_(name, value, msg)                                                    \
    case name:                                                                                 \
        return msg;
        SYMM_FOREACH_STATUS(SYMM_STATUS_CASE_)
#undef SYMM_STATUS_CASE_
    }
    return "unknown status";
}
