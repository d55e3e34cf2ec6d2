// The NVMe-oF controller's limits, in one place (the C rocm-ernic's published options
// 1.7: ioccsz 4, mdts 5 (128 KiB), maxcmd 128). Each is checked where input
// arrives, and each has a negative test.

/** Entries per queue (CAP.MQES + 1, Identify MAXCMD). */
export const QUEUE_ENTRIES = 128;
/** Smallest admin queue a Connect may ask for (fabrics: 32 entries). */
export const ADMIN_QUEUE_MIN_ENTRIES = 32;
/** Memory page size (CAP.MPSMIN 0: 4 KiB). */
const PAGE_SIZE = 4096;
/** Maximum data transfer: 2^MDTS pages. */
export const MDTS_LOG2 = 5;
export const MAX_TRANSFER_BYTES = PAGE_SIZE * 2 ** MDTS_LOG2;
/** Asynchronous Event Requests held at once (Identify AERL + 1). */
export const ASYNC_EVENT_LIMIT = 4;
/** Events waiting for an AER (older ones of the same kind are merged). */
export const MAX_PENDING_EVENTS = 16;
/** Abort commands outstanding at once (Identify ACL + 1). */
export const ABORT_LIMIT = 4;
/** Error information log entries kept (Identify ELPE + 1). */
export const ERROR_LOG_ENTRIES = 64;
/** Keep Alive granularity (Identify KAS, in 100 ms units): KATO is rounded up to whole seconds. */
export const KAS_100MS = 10;
export const KATO_GRANULARITY_MS = KAS_100MS * 100;
/** Longest keep-alive timeout a timer can hold (setTimeout's limit). */
export const MAX_KATO_MS = 0x7fffffff;
/** CAP.TO: worst-case time to ready, in 500 ms units. */
export const CAP_TIMEOUT_500MS = 15;
