/* protocol.h — the messages between symmrun and a PE over their SOCK_SEQPACKET socket;
 * under MPI, between the node's first PE and each other PE (src/bootstrap/node.c).
 * Shared by tools/symmrun.c and src/bootstrap; nothing else includes it. */
#ifndef SYMM_BOOT_PROTOCOL_H
#define SYMM_BOOT_PROTOCOL_H

#include <stdint.h>

/* Environment symmrun gives each PE. */
#define SYMM_BOOT_ENV_FD   "SYMM_BOOT_FD" /* fd number of the PE's socket */
#define SYMM_BOOT_ENV_RANK "SYMM_RANK"
#define SYMM_BOOT_ENV_NPES "SYMM_NPES"

enum symm_boot_msg_type {
    SYMM_BOOT_HELLO = 1, /* PE -> symmrun: rank, seg_size; carries the segment memfd */
    SYMM_BOOT_SEG = 2,   /* symmrun -> PE: rank, seg_size; carries that PE's memfd */
    SYMM_BOOT_CTRL = 3,  /* symmrun -> PE: ctrl size; carries the control page memfd */
    SYMM_BOOT_ERROR = 4, /* symmrun -> PE: rendezvous failed; text says why */
    SYMM_BOOT_BYE = 5,   /* PE -> symmrun: finalized cleanly */
    SYMM_BOOT_ABORT = 6, /* PE -> symmrun: stop the job; code and text say why */
    SYMM_BOOT_SEGS = 7,  /* symmrun -> PE: SEG for the code PEs rank..rank+code-1 at once;
                          * carries their memfds in rank order. One fd per message made a
                          * 1024-PE rendezvous a million messages and ~250k context
                          * switches on 2 cores; batches of 64 need a few thousand. */
};

/* Most memfds one SEGS message carries (the kernel allows 253 per message). */
#define SYMM_BOOT_SEGS_MAX 64

typedef struct symm_boot_msg {
    uint32_t type;
    int32_t rank;
    int32_t code;
    uint32_t pad;
    uint64_t size;
    char text[200];
} symm_boot_msg_t;

#endif
