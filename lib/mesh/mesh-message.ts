// A data message from a peer, as the Mesh's 'message' event hands it over:
// its addressing, the type's fixed header and the payload, both views into
// the received bytes, and its room in the node-wide inbound queue, given back
// when the event is over unless a listener retains it.

export class MeshMessage {
  #release: (() => void) | undefined;
  #retained = false;

  constructor(
    readonly from: number,
    readonly type: number,
    readonly seq: number,
    readonly srcQpn: number,
    readonly dstQpn: number,
    /** The type's fixed header (60 bytes for IONIC). */
    readonly header: Buffer,
    /** What follows it. */
    readonly payload: Buffer,
    release: () => void,
    /** Payload bytes already written where the placer said (`payload` is then empty). */
    readonly placed = 0,
  ) {
    this.#release = release;
  }

  /**
   * Keep this message (and its room in the inbound queue) past the event:
   * a SEND waiting for a receive does. Call the returned function when done;
   * until then the bytes stay valid and count against the queue.
   */
  retain(): () => void {
    this.#retained = true;
    return () => {
      const r = this.#release;
      this.#release = undefined;
      r?.();
    };
  }

  /** @internal The event is over: let go unless retained. */
  settle(): void {
    if (!this.#retained) {
      const r = this.#release;
      this.#release = undefined;
      r?.();
    }
  }
}
