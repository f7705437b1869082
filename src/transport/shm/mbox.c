/* mbox.c — the mailboxes of rank-list team creation, in every PE's segment header:
 * PE s writes slot s of the receiver's header, the receiver acknowledges in its slot of
 * the sender's. Every word has one writer and is read only by the PE whose header holds
 * it, so a PE of another group (not mapped here) is reached by plain puts: none waits
 * for its target to enter MPI, and every wait of a creation stays bounded by
 * SYMM_TIMEOUT. */
#include "core/wait.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

/* pe's copy of the word at my address w = v, complete there on return, and ordered
 * before this PE's next load: a store and a full fence where pe is mapped here, a put
 * (complete at pe on return) elsewhere. Take and withdraw below each store one word and
 * then load the other's, so at least one of the two sees the other's store; the
 * transport's store64 would not do: its words land when their owner next makes
 * progress, so both could load before either store landed. */
static symm_status_t word_put(volatile uint64_t *w, uint64_t v, int pe)
{
    if (symm_g.seg[pe]) {
        __atomic_store_n((volatile uint64_t *)symm_shm_ptr((const void *)w, pe), v,
                         __ATOMIC_SEQ_CST);
        symm_shm_fence();
        return SYMM_SUCCESS;
    }
    return symm_transport_remote()->put((void *)(uintptr_t)w, &v, sizeof v, pe);
}

/* A word of my own header, as its writer last stored it. */
static uint64_t word_get(const volatile uint64_t *w, int writer)
{
    /* what a put brought is visible to this PE's loads after the transport's flush */
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
    if (symm_g.seg[pe]) {
        symm_mbox_t *at = symm_shm_ptr(box, pe);
        for (int i = 0; i < nwords; i++)
            at->data[i] = data[i];
    } else {
        CHECK(symm_transport_remote()->put(box->data, data, (size_t)nwords * sizeof *data, pe));
    }
    /* after the data: a store or put that lands once the data has */
    return word_put(&box->seq, ++symm_g.mbox_sent[pe], pe);
}

/* The sender stores the message's number into the receiver's withdrawn word, then looks
 * whether the receiver said it takes it; the receiver says so, then looks at the
 * withdrawn word. Whichever looks second sees the other's store: a withdrawal that finds
 * no take is seen by the receiver, which then drops the message. (Both may see each
 * other's: then both fail the creation, as the sender has already.) */
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
