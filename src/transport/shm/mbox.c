/* mbox.c — the mailboxes of rank-list team creation, in every PE's segment header:
 * PE s writes slot s of the receiver's header, the receiver acknowledges in its slot of
 * the sender's. */
#include "core/wait.h"
#include "transport/shm/shm.h"

/* A message's state word: the sender's message count << 2 | POSTED, TAKEN or WITHDRAWN.
 * The receiver takes a posted message and the sender withdraws it with one
 * compare-and-swap each, so exactly one of them wins: a member that gave up on a team
 * creation never has its message paired by a late peer. */
#define MBOX_POSTED    0u
#define MBOX_TAKEN     1u
#define MBOX_WITHDRAWN 2u

symm_status_t symm_mbox_send(int pe, const uint64_t *data, int nwords)
{
    symm_mbox_t *box = (symm_mbox_t *)symm_shm_ptr(&symm_g.mbox[symm_g.me], pe);
    /* The slot may be reused only once pe consumed the previous message. */
    symm_wait_t w = SYMM_WAIT_INIT;
    while (__atomic_load_n(&symm_g.mbox_ack[pe].acked, __ATOMIC_ACQUIRE) <
           symm_g.mbox_sent[pe]) {
        symm_status_t st = symm_wait_pause(&w);
        if (st == SYMM_ERR_TIMEOUT)
            return symm_error_set(st,
                                  "team creation: PE %d never took this PE's previous "
                                  "message (%.0f s)",
                                  pe, symm_wait_elapsed(&w));
        if (st) return st;
    }
    for (int i = 0; i < nwords; i++)
        box->data[i] = data[i];
    __atomic_store_n(&box->seq, ++symm_g.mbox_sent[pe] << 2 | MBOX_POSTED, __ATOMIC_RELEASE);
    return SYMM_SUCCESS;
}

int symm_mbox_withdraw(int pe)
{
    symm_mbox_t *box = (symm_mbox_t *)symm_shm_ptr(&symm_g.mbox[symm_g.me], pe);
    uint64_t want = symm_g.mbox_sent[pe] << 2 | MBOX_POSTED;
    return symm_g.mbox_sent[pe] &&
           __atomic_compare_exchange_n(&box->seq, &want, want | MBOX_WITHDRAWN, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void symm_mbox_abandon(int pe)
{
    symm_g.mbox_discard[pe]++;
}

int symm_mbox_poll(int pe, uint64_t *data, int nwords)
{
    symm_mbox_t *box = &symm_g.mbox[pe];
    for (;;) {
        uint64_t want = symm_g.mbox_recvd[pe] + 1;
        uint64_t seq = __atomic_load_n(&box->seq, __ATOMIC_ACQUIRE);
        if (seq >> 2 < want) return SYMM_MBOX_NONE;
        int got = SYMM_MBOX_WITHDRAWN;
        if ((seq & 3) == MBOX_POSTED) {
            uint64_t expect = seq;
            if (__atomic_compare_exchange_n(&box->seq, &expect, seq | MBOX_TAKEN, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                got = SYMM_MBOX_MESSAGE;
            else if ((expect & 3) != MBOX_WITHDRAWN)
                continue;
        }
        if (got == SYMM_MBOX_MESSAGE)
            for (int i = 0; i < nwords; i++)
                data[i] = box->data[i];
        symm_g.mbox_recvd[pe] = want;
        symm_mbox_ack_t *ack = (symm_mbox_ack_t *)symm_shm_ptr(&symm_g.mbox_ack[symm_g.me], pe);
        __atomic_store_n(&ack->acked, want, __ATOMIC_RELEASE);
        if (symm_g.mbox_discard[pe]) { /* an attempt this PE gave up on: not for this one */
            symm_g.mbox_discard[pe]--;
            continue;
        }
        return got;
    }
}
