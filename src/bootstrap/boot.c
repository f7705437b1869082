/* boot.c — which launcher started this PE (SYMM_BOOTSTRAP), and the 1-PE job of a program
 * run directly. The rendezvous themselves are symmrun.c's and mpi.c's. */
#include "bootstrap/boot.h"

#include <stdlib.h>
#include <string.h>

#include "bootstrap/protocol.h"
#include "core/config.h"
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

/* A caller's exchange (symm_init_exchange) first: the call itself names it. Then
 * SYMM_BOOTSTRAP; with auto, symmrun first, since symmrun may itself run under an MPI
 * launcher and then hands its PEs the launcher's environment too. A program that
 * initialized MPI without a launcher we know still gets MPI's ranks. */
static symm_boot_via_t boot_choose(void)
{
    if (symm_boot_exchange_pending()) return SYMM_BOOT_VIA_EXCHANGE;
    const char *want = symm_config.bootstrap;
    if (strcmp(want, "symmrun") == 0) return SYMM_BOOT_VIA_SYMMRUN;
    if (strcmp(want, "mpi") == 0) return SYMM_BOOT_VIA_MPI;
    if (strcmp(want, "none") == 0) return SYMM_BOOT_VIA_NONE;
    if (getenv(SYMM_BOOT_ENV_FD) != NULL) return SYMM_BOOT_VIA_SYMMRUN;
    if (symm_boot_mpi_launcher() != NULL || symm_boot_mpi_initialized())
        return SYMM_BOOT_VIA_MPI;
    return SYMM_BOOT_VIA_NONE;
}

symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    if (out == NULL || my_seg_fd < 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "symm_boot_init: bad arguments (segment fd %d, out %p)",
                              my_seg_fd, (void *)out);
    switch (boot_choose()) {
    case SYMM_BOOT_VIA_SYMMRUN:
        return symm_boot_symmrun_init(my_seg_fd, seg_size, out);
    case SYMM_BOOT_VIA_MPI:
        return symm_boot_mpi_init(my_seg_fd, seg_size, out);
    case SYMM_BOOT_VIA_EXCHANGE:
        return symm_boot_exchange_init(my_seg_fd, seg_size, out);
    case SYMM_BOOT_VIA_NONE:
        break;
    }
    return boot_init_single(my_seg_fd, seg_size, out);
}

void symm_boot_finalize(symm_boot_t *boot)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_finalize(boot);
    if (boot->via == SYMM_BOOT_VIA_MPI) symm_boot_mpi_finalize();
    boot->via = SYMM_BOOT_VIA_NONE;
}

void symm_boot_close(symm_boot_t *boot)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_close(boot);
    if (boot->via == SYMM_BOOT_VIA_MPI) symm_boot_mpi_close();
    boot->via = SYMM_BOOT_VIA_NONE;
}

void symm_boot_abort(symm_boot_t *boot, int code, const char *why)
{
    if (boot->via == SYMM_BOOT_VIA_SYMMRUN) symm_boot_symmrun_abort(boot, code, why);
    if (boot->via == SYMM_BOOT_VIA_MPI) symm_boot_mpi_abort(code);
}

symm_status_t symm_boot_allgather(const symm_boot_t *boot, const void *mine, size_t n,
                                  void *all)
{
    if (boot->via == SYMM_BOOT_VIA_MPI) return symm_boot_mpi_allgather(mine, n, all);
    if (boot->npes == 1) {
        memcpy(all, mine, n);
        return SYMM_SUCCESS;
    }
    return symm_error_set(SYMM_ERR_UNSUPPORTED, "an exchange through the %s launcher",
                          symm_boot_via_name(boot->via));
}

const char *symm_boot_via_name(symm_boot_via_t via)
{
    return via == SYMM_BOOT_VIA_SYMMRUN    ? "symmrun"
           : via == SYMM_BOOT_VIA_MPI      ? "mpi"
           : via == SYMM_BOOT_VIA_EXCHANGE ? "exchange"
                                           : "none";
}
