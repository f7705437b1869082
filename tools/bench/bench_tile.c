/* bench_tile.c — symm-bench tile: placeholder until the tile suite lands. */
#include "symm_bench.h"
int sb_suite_tile(void) { SB_PRINT("# tile: not yet\n"); return 0; }
