/* log.h — errors and logging. The function that first detects an error records it with
 * context (symm_error_set); callers only propagate the status (CHECK / CHECK_GOTO).
 * Logging writes with one write(2) per line so that it stays usable while the process
 * tears down (atexit handlers, destructors, after symm_finalize). */
#ifndef SYMM_CORE_LOG_H
#define SYMM_CORE_LOG_H

#include "symm.h"

typedef enum {
    SYMM_LOG_NONE = 0,
    SYMM_LOG_ERROR = 1,
    SYMM_LOG_WARN = 2,
    SYMM_LOG_INFO = 3,
    SYMM_LOG_DEBUG = 4,
    SYMM_LOG_TRACE = 5
} symm_log_level_t;

extern int symm_log_level; /* set from SYMM_LOG at init; WARN before */

void symm_log_write(symm_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records status and a message for symm_last_status()/symm_last_error(), logs it at
 * INFO (ERROR for timeouts and failed PEs), and returns status. */
symm_status_t symm_error_set(symm_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
symm_log_level_t symm_log_parse_level(const char *s);

#define symm_log(level, ...)                                                                   \
    do {                                                                                       \
        if ((int)(level) <= symm_log_level) symm_log_write(level, __VA_ARGS__);                \
    } while (0)
#define SYMM_ERROR(...) symm_log(SYMM_LOG_ERROR, __VA_ARGS__)
#define SYMM_WARN(...)  symm_log(SYMM_LOG_WARN, __VA_ARGS__)
#define SYMM_INFO(...)  symm_log(SYMM_LOG_INFO, __VA_ARGS__)
#define SYMM_DEBUG(...) symm_log(SYMM_LOG_DEBUG, __VA_ARGS__)

/* Propagate a failed status. */
#define CHECK(expr)                                                                            \
    do {                                                                                       \
        symm_status_t check_st_ = (expr);                                                      \
        if (check_st_ != SYMM_SUCCESS) return check_st_;                                       \
    } while (0)
#define CHECK_GOTO(expr, st, label)                                                            \
    do {                                                                                       \
        (st) = (expr);                                                                         \
        if ((st) != SYMM_SUCCESS) goto label;                                                  \
    } while (0)

#define SYMM_LIKELY(x)   __builtin_expect(!!(x), 1)
#define SYMM_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
