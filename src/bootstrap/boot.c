/* boot.c — which launcher started this PE, and the 1-PE job of a program run directly.
 * The rendezvous itself is symmrun.c's. */
#include "bootstrap/boot.h"

#include <stdlib.h>
#include <string.h>

#include "bootstrap/protocol.h"
#include "core/log.h"

static symm_status_t boot_init_single(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    int *seg_fd = malloc(sizeof *seg_fd);
    if (seg_fd == NULL)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE 0: cannot allocate the segment table");
    seg_fd[0] = my_seg_fd;
    *out = (symm_boot_t){.via = SYMM_BOOT_VIA_NONE,
                         .rank = 0,
                         .npes = 1,
                         .sock = -1,
                         .seg_fd = seg_fd,
                         .seg_size = seg_size,
                         .ctrl_fd = -1};
    return SYMM_SUCCESS;
}

symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    if (out == NULL || my_seg_fd < 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "symm_boot_init: bad arguments (segment fd %d, out %p)",
                              my_seg_fd, (void *)out);
    if (getenv(SYMM_BOOT_ENV_FD) != NULL)
        return symm_boot_symmrun_init(my_seg_fd, seg_size, out);
    return boot_init_single(my_seg_fd, seg_size, out);
}

void symm_boot_finalize(symm_boot_t *boot)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_finalize(boot);
    boot->via = SYMM_BOOT_VIA_NONE;
}

void symm_boot_close(symm_boot_t *boot)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_close(boot);
    boot->via = SYMM_BOOT_VIA_NONE;
}

void symm_boot_abort(symm_boot_t *boot, int code, const char *why)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_abort(boot, code, why);
}

const char *symm_boot_via_name(symm_boot_via_t via)
{
    return via == SYMM_BOOT_VIA_SYMMRUN ? "symmrun" : "none";
}
