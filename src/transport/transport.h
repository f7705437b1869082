/* transport.h — how bytes move between PEs. A transport is an ops table chosen at init.
 * Algorithms reach a member by load/store where its team's reach bit is set (a peer
 * pointer; for the CPU the shm inline functions of shm/shm.h, so collectives pay no
 * indirect call per transfer), and through this table's put/get/atomics/signal for
 * the rest. The operations here take validated arguments: the public calls check them
 * first (transport/shm/rma.c). */
#ifndef SYMM_TRANSPORT_H
#define SYMM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"

typedef struct symm_transport_ops {
    size_t size; /* sizeof(struct symm_transport_ops): lets the table grow */
    const char *name;
    symm_status_t (*init)(void); /* maps every PE's segment */
    /* Before finalize's last barrier: this PE stops touching peers' memory (a GPU
     * transport waits for its kernels). NULL where there is nothing to wait for. */
    void (*quiesce)(void);
    void (*finalize)(void);
    /* pe's segment made reachable from this process, and released again */
    symm_status_t (*map)(int pe);
    void (*unmap)(int pe);
    /* Where load/store reaches pe's copy of my symmetric address addr; NULL where it
     * does not (pe is remote: use put/get/atomics/signal). */
    void *(*ptr)(const void *addr, int pe);
    /* Data path for any PE, load/store reachable or not. Completion: put and
     * put_signal are complete at the source when they return (src may be reused);
     * fence orders them per target, quiet completes them at every target, flush makes
     * this PE's stores to its own heap visible to the transport's remote readers, and
     * what peers' operations brought visible to this PE's loads. */
    symm_status_t (*put)(void *dest, const void *src, size_t n, int pe);
    symm_status_t (*get)(void *dest, const void *src, size_t n, int pe);
    /* 64-bit atomics on pe's copy of dest; the fetching forms write the old value */
    symm_status_t (*fetch_op64)(symm_amo_t op, uint64_t *dest, uint64_t value, int pe,
                                uint64_t *old_out);
    symm_status_t (*cswap64)(uint64_t *dest, uint64_t cond, uint64_t value, int pe,
                             uint64_t *old_out);
    symm_status_t (*swap64)(uint64_t *dest, uint64_t value, int pe, uint64_t *old_out);
    /* dest[i] = value[i] for i < n, the last landing after the others: the words of a
     * sync slot, flag last. Each lands after what this PE's earlier operations brought
     * to pe, but possibly only once pe makes progress (its waits, symm_wait_progress,
     * and flush): for words with one writer that only their owner reads, inside such a
     * wait or after a flush. Not for words that atomics touch. */
    symm_status_t (*store64)(uint64_t *const *dest, const uint64_t *value, int n, int pe);
    /* put of n bytes, then sig updated (set or add) with release order: whoever sees
     * the signal sees the data. signal alone is put_signal with n = 0. */
    symm_status_t (*put_signal)(void *dest, const void *src, size_t n, uint64_t *sig,
                                uint64_t value, symm_sigop_t op, int pe);
    symm_status_t (*signal)(uint64_t *sig, uint64_t value, symm_sigop_t op, int pe);
    symm_status_t (*fence)(void);
    symm_status_t (*quiet)(void);
    symm_status_t (*flush)(void);
    /* 32-bit atomics, as fetch_op64 and cswap64 */
    symm_status_t (*fetch_op32)(symm_amo_t op, uint32_t *dest, uint32_t value, int pe,
                                uint32_t *old_out);
    symm_status_t (*cswap32)(uint32_t *dest, uint32_t cond, uint32_t value, int pe,
                             uint32_t *old_out);
    /* rows rows of rb bytes: from pe's copy of src (rows src_ld bytes apart) into local
     * dest (dest_ld apart), and from local src into pe's copy of dest; complete on
     * return, as get and put. */
    symm_status_t (*get_rows)(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                              size_t rb, size_t rows, int pe);
    symm_status_t (*put_rows)(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                              size_t rb, size_t rows, int pe);
    /* Messages between PEs that load/store does not reach, on numbered channels (NULL in
     * a transport without them). msg_send queues n bytes for pe on channel chan and
     * returns at once (buf may be reused); msg_recv takes the oldest message that pe sent
     * on chan, if one has come: 1 with its bytes in buf and its size in *n (a message
     * longer than cap is taken and dropped: SYMM_ERR_SYSTEM in *st), 0 if none has
     * come yet (or a failure in *st). Messages of one pair and channel arrive in the order
     * sent. msg_chans: channels run from 0 to this (0 before init). */
    symm_status_t (*msg_send)(const void *buf, size_t n, int pe, uint64_t chan);
    int (*msg_recv)(void *buf, size_t cap, size_t *n, int pe, uint64_t chan, symm_status_t *st);
    uint64_t (*msg_chans)(void);
} symm_transport_ops_t;

/* The CPU transport of one host (transport/shm/shm.c). */
extern const symm_transport_ops_t symm_shm_transport;
/* The transport to PEs whose segment is not mapped here (transport/mpi/mpi.c): MPI-3 RMA
 * on one window over every PE's team region and heap. Its init is collective over every
 * PE; SYMM_ERR_UNSUPPORTED in a symm built without MPI. */
extern const symm_transport_ops_t symm_mpi_transport;
symm_status_t symm_mpi_transport_init(void);

symm_status_t symm_transport_init(void);
/* quiesce of every transport (before finalize's last barrier), then finalize of every
 * transport once the teams are gone: the registered ones newest first, then the one
 * chosen at init. */
void symm_transport_quiesce(void);
void symm_transport_finalize(void);
/* A transport beside the one chosen at init, for memory of its own (the CUDA
 * transport's device heap, registered by symm_cuda_init once it is set up): finalized by
 * symm_finalize. SYMM_ERR_NO_MEMORY if SYMM_TRANSPORT_MAX are registered. */
#define SYMM_TRANSPORT_MAX 4
symm_status_t symm_transport_register(const symm_transport_ops_t *t);
const char *symm_transport_name(void);
/* The transport chosen at init (NULL before). */
const symm_transport_ops_t *symm_transport(void);
/* The table that reaches PEs without load/store: MPI's where some PE's segment is not
 * mapped here (symm_g.remote_pes > 0: another host or SYMM_HOSTS group), set up at init;
 * else the one chosen at init, which reaches every PE (NULL before init). In a job with
 * remote PEs its atomics and signals serve every PE, mapped or not, so that a word that
 * atomics touch is only ever touched by one kind of operation. */
const symm_transport_ops_t *symm_transport_remote(void);

/* 1 if world PE pe is reachable by load/store (a peer pointer exists for it): the bit
 * every team keeps per member. */
int symm_transport_reachable(int pe);

#endif
