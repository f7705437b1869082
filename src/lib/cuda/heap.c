/* heap.c — collective allocation on the GPU symmetric heap, as src/lib/heap.c does on the
 * CPU heap: every PE runs the same allocator (the transport's heap arena) with the same
 * calls, and an agreement on the internal world team checks that the calls were the same
 * and succeeded everywhere, so a failure changes nothing anywhere. */
#include <stdio.h>

#include "core/log.h"
#include "core/runtime.h"
#include "team/team.h"
#include "transport/cuda/cuda_transport.h"

void *symm_gpu_malloc(size_t size)
{
    static const char fn[] = "symm_gpu_malloc";
    if (symm_cuda_require(fn)) return NULL;
    uint64_t off = 0;
    int ok = 1;
    char why[512] = "";
    pthread_mutex_lock(&symm_cuda.lock);
    if (size && symm_arena_alloc(&symm_cuda.heap_arena, size, 256, &off)) {
        symm_error_set(SYMM_ERR_NO_MEMORY,
                       "%s: %zu bytes do not fit in the GPU heap (%zu of "
                       "%zu in use; raise SYMM_GPU_HEAP_SIZE)",
                       fn, size, (size_t)symm_cuda.heap_arena.used, symm_cuda.heap_size);
        snprintf(why, sizeof why, "%s", symm_last_error());
        ok = 0;
    }
    symm_status_t st =
        symm_agree(fn, symm_hash64(SYMM_HASH_INIT, size), ok, SYMM_ERR_NO_MEMORY);
    if (st && ok && size) symm_arena_free(&symm_cuda.heap_arena, off);
    pthread_mutex_unlock(&symm_cuda.lock);
    if (!ok) symm_error_set(SYMM_ERR_NO_MEMORY, "%s", why);
    if (st || !ok || !size) return NULL;
    return symm_cuda.base + off;
}

symm_status_t symm_gpu_free(void *ptr)
{
    static const char fn[] = "symm_gpu_free";
    CHECK(symm_cuda_require(fn));
    if (!ptr) return SYMM_SUCCESS;
    int ok =
        symm_cuda_in_heap(ptr, 1) &&
        symm_arena_find(&symm_cuda.heap_arena, (uint64_t)((uint8_t *)ptr - symm_cuda.base), 1);
    cudaDeviceSynchronize(); /* no kernel of this PE still uses it */
    pthread_mutex_lock(&symm_cuda.lock);
    symm_status_t st =
        symm_agree(fn, symm_hash64(SYMM_HASH_INIT, (uint64_t)((uint8_t *)ptr - symm_cuda.base)),
                   ok, SYMM_ERR_NO_MEMORY);
    if (!st)
        symm_arena_free(&symm_cuda.heap_arena, (uint64_t)((uint8_t *)ptr - symm_cuda.base));
    pthread_mutex_unlock(&symm_cuda.lock);
    if (!ok)
        return symm_error_set(SYMM_ERR_DOUBLE_FREE, "%s: %p is not a live GPU symmetric object",
                              fn, ptr);
    return st;
}
