/* barrier.c — barrier and sync on a team (the synchronisation itself is the episode
 * machinery of team/sync.c). */
#include "team/team.h"
#include "transport/shm/shm.h"

symm_status_t symm_sync(symm_team_t team)
{
    symm_coll_t c;
    CHECK(symm_coll_enter(team, "symm_sync", 0, &c));
    symm_status_t st = symm_coll_sync(&c);
    symm_coll_leave(&c);
    return st;
}

symm_status_t symm_barrier(symm_team_t team)
{
    symm_coll_t c;
    CHECK(symm_coll_enter(team, "symm_barrier", 0, &c));
    symm_shm_fence(); /* quiet: earlier puts are visible before anyone leaves */
    symm_status_t st = symm_coll_sync(&c);
    symm_coll_leave(&c);
    return st;
}

symm_status_t symm_barrier_all(void)
{
    return symm_barrier(SYMM_TEAM_WORLD);
}
