// Negotiation: the VERSION exchange that must open every session, and its
// deadline. Until a VERSION succeeds, any refused message ends the connection
// (session.ts); a client that says nothing for negotiationTimeoutMs is closed,
// so a silent client cannot hold the device from QEMU.

import { ProtocolError, protocolError } from '../../protocol/errors';
import { vfio_user_version } from '../../protocol/layouts';
import { DMA_PAGE_SIZE } from '../../protocol/limits';
import type { Version } from '../../protocol/messages';
import { replyFlags } from '../../protocol/serializer';
import {
  Capabilities,
  parseCapabilities,
  PeerLimits,
  peerLimits,
  serverCapabilitiesJson,
} from '../../protocol/version';
import type { SessionState } from './session-state';
import type { RawHeader } from './transport';

/** The highest minor version we answer (libvfio-user's; QEMU proposes 0 and gets 0). */
const SUPPORTED_MINOR = 2;
/** The only major version there is. */
const SUPPORTED_MAJOR = 0;

/** A session's negotiation: done or not, what the client said, and the deadline. */
export class Negotiation {
  negotiated = false;
  peer: PeerLimits | null = null;
  capabilities: Capabilities = {};
  #timer: NodeJS.Timeout | null = null;

  /** Start the deadline: `onTimeout` runs if no VERSION succeeded within `ms`. */
  arm(ms: number, onTimeout: () => void): void {
    this.#timer = setTimeout(() => {
      this.#timer = null;
      if (!this.negotiated) onTimeout();
    }, ms);
    this.#timer.unref();
  }

  disarm(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }
}

/** What a VERSION led to. */
type VersionOutcome =
  | { readonly kind: 'accepted' }
  /** Refuse with an error reply; the session stays (VERSION sent twice). */
  | { readonly kind: 'refused'; readonly error: ProtocolError }
  /** Refuse and close: a proposal we cannot serve. */
  | { readonly kind: 'fatal'; readonly error: ProtocolError };

/** VERSION: check the proposal, record the client's capabilities, answer with ours. */
export function handleVersion(
  s: SessionState,
  n: Negotiation,
  h: RawHeader,
  req: Version,
  noReply: boolean,
): VersionOutcome {
  if (n.negotiated) return { kind: 'refused', error: protocolError('BAD_VERSION', 'VERSION sent twice') };
  if (req.major !== SUPPORTED_MAJOR) {
    return {
      kind: 'fatal',
      error: protocolError('BAD_VERSION', `client proposes major ${req.major}; only ${SUPPORTED_MAJOR} is supported`),
    };
  }
  const caps = parseCapabilities(req.json);
  if (!caps.ok) return { kind: 'fatal', error: caps.error };
  n.capabilities = caps.value;
  n.peer = peerLimits(caps.value);
  n.negotiated = true;
  n.disarm();
  const minor = Math.min(req.minor, SUPPORTED_MINOR);
  if (!noReply) {
    const json = serverCapabilitiesJson({
      maxMsgFds: s.limits.maxMsgFds,
      maxDataXferSize: s.limits.maxDataXferSize,
      maxDmaMaps: s.limits.maxDmaRegions,
      pgsizes: DMA_PAGE_SIZE,
    });
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_user_version.SIZE);
    w.field(at, vfio_user_version.major, SUPPORTED_MAJOR).field(at, vfio_user_version.minor, minor);
    w.bytes(Buffer.from(json + '\0', 'utf8'));
    w.end();
  }
  s.log.info('vfio-user: client negotiated', { minor, capabilities: caps.value });
  return { kind: 'accepted' };
}
