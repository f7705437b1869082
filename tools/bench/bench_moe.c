/* bench_moe.c — symm-bench moe: placeholder until the moe suite lands. */
#include "symm_bench.h"
int sb_suite_moe(void) { SB_PRINT("# moe: not yet\n"); return 0; }
