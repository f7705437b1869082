/* mbox.c — the mailboxes of rank-list team creation, in every PE's segment header:
 * PE s writes slot s of the receiver's header, the receiver acknowledges in its slot of
 * the sender's. Every word has one writer and is read only by the PE whose header holds
 * it. A PE of another group (not mapped here) gets its words by the transport's store64,
 * small messages that land when it next makes progress: an RMA put would be complete at
 * its target on return, but MPICH completes one only once the target enters MPI, so a
 * member that is late (or never comes) would hold the others inside MPI_Win_flush past
 * SYMM_TIMEOUT. With messages every wait of a creation stays bounded by SYMM_TIMEOUT. */
#include "core/wait.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

/* pe's copy of the word at my address w = v. Where pe is mapped here: a store and a full
 * fence, so the word is in place before this PE's next load; take and withdraw below
 * each store one word and then load the other's, so at least one of the two sees the
 * other's store. Elsewhere a message, which lands when pe next drains its messages (as it
 * does before it loads a word that another group writes, word_get): a take and a
 * withdrawal crossing each other may then both go unseen, and the late member keeps the
 * team that the one who gave up on it does not have (as when it takes the message just
 * before that member times out); its first collective on it times out naming the other. */
static symm_status_t word_put(volatile uint64_t *w, uint64_t v, int pe)
{
    if (symm_g.seg[pe]) {
        __atomic_store_n((volatile uint64_t *)symm_shm_ptr((const void *)w, pe), v,
                         __ATOMIC_SEQ_CST);
        symm_shm_fence();
        return SYMM_SUCCESS;
    }
    uint64_t *dest = (uint64_t *)(uintptr_t)w;
    return symm_transport_remote()->store64(&dest, &v, 1, pe);
}

/* A word of my own header, as its writer last stored it. */
static uint64_t word_get(const volatile uint64_t *w, int writer)
{
    /* what another group's PE stored lands here in the transport's flush */
    if (!symm_g.seg[writer]) symm_transport_remote()->flush();
    return __atomic_load_n(w, __ATOMIC_SEQ_CST);
}

symm_status_t symm_mbox_send(int pe, const uint64_t *data, int nwords)
{
    symm_mbox_t *box = &symm_g.mbox[symm_g.me]; /* my slot, in pe's header */
    /* The slot may be reused only once pe consumed the previous message. */
    symm_wait_t w = SYMM_WAIT_INIT;
    while (word_get(&symm_g.mbox_ack[pe].acked, pe) >> 1 < symm_g.mbox_sent[pe]) {
        symm_status_t st = symm_wait_pause(&w);
        if (st == SYMM_ERR_TIMEOUT)
            return symm_error_set(st,
                                  "team creation: PE %d never took this PE's previous "
                                  "message (%.0f s)",
                                  pe, symm_wait_elapsed(&w));
        if (st) return st;
    }
    uint64_t seq = symm_g.mbox_sent[pe] + 1;
    if (!symm_g.seg[pe]) {
        /* one message: the data words, then the number, which lands last */
        uint64_t *dest[SYMM_MBOX_WORDS + 1], value[SYMM_MBOX_WORDS + 1];
        for (int i = 0; i < nwords; i++) {
            dest[i] = &box->data[i];
            value[i] = data[i];
        }
        dest[nwords] = (uint64_t *)(uintptr_t)&box->seq;
        value[nwords] = seq;
        CHECK(symm_transport_remote()->store64(dest, value, nwords + 1, pe));
        symm_g.mbox_sent[pe] = seq;
        return SYMM_SUCCESS;
    }
    symm_mbox_t *at = symm_shm_ptr(box, pe);
    for (int i = 0; i < nwords; i++)
        at->data[i] = data[i];
    symm_g.mbox_sent[pe] = seq;
    /* after the data: a store that lands once the data has */
    return word_put(&box->seq, seq, pe);
}

/* The sender stores the message's number into the receiver's withdrawn word, then looks
 * whether the receiver said it takes it; the receiver says so, then looks at the
 * withdrawn word. Whichever looks second sees the other's store: a withdrawal that finds
 * no take is seen by the receiver, which then drops the message. (Both may see each
 * other's: then both fail the creation, as the sender has already.) Across groups the
 * stores are messages, which both may miss (word_put). */
int symm_mbox_withdraw(int pe)
{
    uint64_t k = symm_g.mbox_sent[pe];
    if (!k || word_get(&symm_g.mbox_ack[pe].acked, pe) >> 1 >= k) return 0;
    if (word_put(&symm_g.mbox[symm_g.me].withdrawn, k, pe)) return 0;
    return word_get(&symm_g.mbox_ack[pe].acked, pe) != (k << 1 | 1);
}

void symm_mbox_abandon(int pe)
{
    symm_g.mbox_discard[pe]++;
}

int symm_mbox_poll(int pe, uint64_t *data, int nwords)
{
    symm_mbox_t *box = &symm_g.mbox[pe];
    /* my slot in pe's header, where pe reads what I did with its messages */
    volatile uint64_t *ack = &symm_g.mbox_ack[symm_g.me].acked;
    for (;;) {
        uint64_t want = symm_g.mbox_recvd[pe] + 1;
        if (word_get(&box->seq, pe) < want) return SYMM_MBOX_NONE;
        int got = SYMM_MBOX_WITHDRAWN;
        if (word_get(&box->withdrawn, pe) < want) {
            /* Read before the take is said: from then on pe may post its next message
             * into this slot. */
            for (int i = 0; i < nwords; i++)
                data[i] = box->data[i];
            if (word_put(ack, want << 1 | 1, pe)) return SYMM_MBOX_NONE;
            if (word_get(&box->withdrawn, pe) < want) got = SYMM_MBOX_MESSAGE;
        } else if (word_put(ack, want << 1, pe)) {
            return SYMM_MBOX_NONE;
        }
        symm_g.mbox_recvd[pe] = want;
        if (symm_g.mbox_discard[pe]) { /* an attempt this PE gave up on: not for this one */
            symm_g.mbox_discard[pe]--;
            continue;
        }
        return got;
    }
}
