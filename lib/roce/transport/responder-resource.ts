// An entry of the responder resource cache (./responder.ts; IBTA Vol 1 9.7.4): a READ or an atomic the responder
// accepted, kept so that a duplicate of it is answered again (a READ replayed, an atomic's original value returned)
// rather than done again.

/** What a resource holds: a READ, or an atomic. */
export const RES_READ = 1;
export const RES_ATOMIC = 2;

/** One responder resource: a READ or atomic accepted, kept to answer a duplicate of it. */
export class Resource {
  kind = 0;
  firstPsn = 0;
  npkts = 0;
  /** READ: the responses still to send (next packet index, and where that stream started). */
  next = 0;
  start = 0;
  va = 0;
  rkey = 0;
  len = 0;
  /** Atomic: the original value, returned again to a duplicate. */
  origHi = 0;
  origLo = 0;
}
