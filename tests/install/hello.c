/* The README's quick start: built against an installed symm by test_install.sh. */
#include <stdio.h>
#include <symm.h>

int main(void)
{
    if (symm_init() != SYMM_SUCCESS) return 1;
    int me = symm_my_pe(), n = symm_n_pes();
    long *x = symm_malloc(sizeof(long)), *sum = symm_malloc(sizeof(long));
    *x = me + 1;
    symm_status_t st = symm_allreduce(SYMM_TEAM_WORLD, sum, x, 1, SYMM_INT64, SYMM_OP_SUM);
    symm_pool_t pool;
    if (!st) st = symm_pool_create(SYMM_TEAM_WORLD, 64, &pool);
    if (!st) st = symm_barrier(symm_pool_team(pool, 17));
    if (!st) st = symm_pool_destroy(pool);
    if (st || *sum != (long)n * (n + 1) / 2) {
        printf("PE %d: FAILED (%s)\n", me, symm_last_error());
        return 1;
    }
    printf("PE %d of %d: sum = %ld\n", me, n, *sum);
    symm_free(sum);
    symm_free(x);
    return symm_finalize();
}
