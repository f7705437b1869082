/* nvshmem_bench.cu — the NVSHMEM anchor for symm's GPU benchmarks, one PE (unique-id
 * bootstrap): the cost of nvshmem_team_split_strided repeated up to 4096 times (it stops
 * at NVSHMEM_MAX_TEAMS or after a time limit, and says so), and nvshmemx_barrier_block
 * latency with 1..128 blocks each on its own team. Built by scripts/gpu-check. */
#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now_s(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

__global__ void k_barrier(const nvshmem_team_t *teams, int iters)
{
    nvshmem_team_t t = teams[blockIdx.x];
    for (int i = 0; i < iters; i++)
        nvshmemx_barrier_block(t);
}

static const size_t marks[] = {1,   4,   16,  64,  128,  256,  384,
                               512, 640, 768, 896, 1024, 2048, 4096};

/* Splits until the team count reaches upto (or the limit); prints the cumulative cost at
 * the marks. Returns 0 when it stopped early. */
static int split_until(std::vector<nvshmem_team_t> &teams, size_t upto, double deadline,
                       double &total, const char **why)
{
    while (teams.size() < upto) {
        nvshmem_team_t t = NVSHMEM_TEAM_INVALID;
        double a = now_s();
        int rc = nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, 1, NULL, 0, &t);
        total += now_s() - a;
        if (rc != 0 || t == NVSHMEM_TEAM_INVALID) {
            *why = "split failed (NVSHMEM_MAX_TEAMS or memory)";
            return 0;
        }
        teams.push_back(t);
        for (size_t m : marks)
            if (teams.size() == m) {
                printf("%7zu %9.1f %12.2f\n", teams.size(), total * 1e3,
                       total * 1e3 / teams.size());
                fflush(stdout);
            }
        if (now_s() > deadline) {
            *why = "time limit";
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    double limit = argc > 1 ? atof(argv[1]) : 60.0;
    CU(cudaSetDevice(0));
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    nvshmemx_get_uniqueid(&id);
    nvshmemx_set_attr_uniqueid_args(0, 1, &id, &attr);
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
        fprintf(stderr, "nvshmemx_init_attr failed\n");
        return 1;
    }
    printf("# NVSHMEM %d.%d.%d, 1 PE: nvshmem_team_split_strided repeated (cumulative)\n"
           "# teams  total_ms  per_split_ms\n",
           NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
           NVSHMEM_VENDOR_PATCH_VERSION);
    std::vector<nvshmem_team_t> teams;
    double t0 = now_s(), total = 0;
    const char *why = "reached 4096";
    /* The barrier needs 128 teams: make them first, measure, then keep splitting. */
    int more = split_until(teams, 128, t0 + limit, total, &why);

    static const int blocks[] = {1, 2, 4, 8, 16, 32, 64, 128};
    const int iters = 2000;
    nvshmem_team_t *dteams;
    CU(cudaMalloc(&dteams, sizeof(nvshmem_team_t) * std::max<size_t>(teams.size(), 1)));
    CU(cudaMemcpy(dteams, teams.data(), sizeof(nvshmem_team_t) * teams.size(),
                  cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    printf("# NVSHMEM nvshmemx_barrier_block, each block its own team, 1 PE, %d iterations\n"
           "# blocks  latency_us(median of 5)  min_us\n",
           iters);
    for (int b : blocks) {
        if ((size_t)b > teams.size()) break;
        k_barrier<<<b, 128>>>(dteams, 100);
        CU(cudaDeviceSynchronize());
        std::vector<double> lat;
        for (int r = 0; r < 5; r++) {
            CU(cudaEventRecord(e0));
            k_barrier<<<b, 128>>>(dteams, iters);
            CU(cudaEventRecord(e1));
            CU(cudaEventSynchronize(e1));
            float ms;
            CU(cudaEventElapsedTime(&ms, e0, e1));
            lat.push_back(ms * 1000.0 / iters);
        }
        std::sort(lat.begin(), lat.end());
        printf("%7d %16.3f %12.3f\n", b, lat[2], lat[0]);
        fflush(stdout);
    }
    CU(cudaFree(dteams));
    printf("# more splits (cumulative, continued)\n");
    if (more) split_until(teams, 4096, t0 + limit, total, &why);
    printf("# stopped at %zu teams: %s (%.1f s of splitting)\n", teams.size(), why, total);
    fflush(stdout);
    double d0 = now_s();
    for (nvshmem_team_t t : teams)
        nvshmem_team_destroy(t);
    printf("# destroyed %zu teams in %.1f ms\n", teams.size(), (now_s() - d0) * 1e3);
    nvshmem_finalize();
    return 0;
}
