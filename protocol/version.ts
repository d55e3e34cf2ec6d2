// VERSION negotiation: the capabilities JSON, validated with zod.
//
// Rules from docs/vfio-user-protocol.md 2.1, 3.3 and 4.1: the JSON is an object
// {"capabilities": {...}}; known keys must be well typed; unknown keys are
// ignored. The reply's major equals the client's, its minor is at most the
// client's, and its capabilities are a subset of what the spec defines.

import { z } from 'zod';
import { Decoded, fail, ok } from './errors';
import { MAX_VERSION_JSON } from './limits';

const uint = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const migrationCapSchema = z
  .object({
    pgsize: uint.optional(),
    max_bitmap_size: uint.optional(),
  })
  .passthrough();

export const twinSocketCapSchema = z
  .object({
    supported: z.boolean(),
    fd_index: uint.optional(),
  })
  .passthrough();

export const capabilitiesSchema = z
  .object({
    max_msg_fds: uint.max(1024).optional(),
    max_data_xfer_size: uint.optional(),
    max_dma_maps: uint.optional(),
    pgsizes: uint.optional(),
    migration: migrationCapSchema.optional(),
    twin_socket: twinSocketCapSchema.optional(),
    write_multiple: z.boolean().optional(),
  })
  .passthrough();

export const versionJsonSchema = z
  .object({
    capabilities: capabilitiesSchema.optional(),
  })
  .passthrough();

export type Capabilities = z.infer<typeof capabilitiesSchema>;

/** Capability values a peer gets when it sends no JSON (spec defaults). */
export const DEFAULT_PEER_CAPABILITIES = {
  max_msg_fds: 1,
  max_data_xfer_size: 1 << 20,
  max_dma_maps: 65535,
  pgsizes: 4096,
} as const;

/** The effective limits of a peer after negotiation. */
export interface PeerLimits {
  readonly maxMsgFds: number;
  readonly maxDataXferSize: number;
  readonly maxDmaMaps: number;
  readonly pgsizes: number;
  readonly twinSocket: boolean;
  readonly writeMultiple: boolean;
}

/** Parse and validate a VERSION JSON text (without its NUL); undefined means no JSON. */
export function parseCapabilities(json: string | undefined): Decoded<Capabilities> {
  if (json === undefined) return ok({});
  if (json.length > MAX_VERSION_JSON)
    return fail('BAD_JSON', `VERSION JSON is ${json.length} bytes (limit ${MAX_VERSION_JSON})`);
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (e) {
    return fail('BAD_JSON', `VERSION JSON does not parse: ${(e as Error).message}`);
  }
  const parsed = versionJsonSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue ? issue.path.join('.') || '(root)' : '(root)';
    return fail('BAD_CAPABILITIES', `VERSION capabilities: ${where}: ${issue?.message ?? 'invalid'}`);
  }
  return ok(parsed.data.capabilities ?? {});
}

/** The peer's limits, filling in spec defaults for what it left out. */
export function peerLimits(caps: Capabilities): PeerLimits {
  return {
    maxMsgFds: caps.max_msg_fds ?? DEFAULT_PEER_CAPABILITIES.max_msg_fds,
    maxDataXferSize: caps.max_data_xfer_size ?? DEFAULT_PEER_CAPABILITIES.max_data_xfer_size,
    maxDmaMaps: caps.max_dma_maps ?? DEFAULT_PEER_CAPABILITIES.max_dma_maps,
    pgsizes: caps.pgsizes ?? DEFAULT_PEER_CAPABILITIES.pgsizes,
    twinSocket: caps.twin_socket?.supported === true,
    writeMultiple: caps.write_multiple === true,
  };
}

/**
 * Build the JSON a server sends back. Kept short on purpose: QEMU's reply
 * buffer is the size of its own request (docs/vfio-user-protocol.md 3.2).
 */
export function serverCapabilitiesJson(caps: {
  maxMsgFds: number;
  maxDataXferSize: number;
  maxDmaMaps: number;
  pgsizes: number;
}): string {
  return JSON.stringify({
    capabilities: {
      max_msg_fds: caps.maxMsgFds,
      max_data_xfer_size: caps.maxDataXferSize,
      max_dma_maps: caps.maxDmaMaps,
      pgsizes: caps.pgsizes,
    },
  });
}

/** Check a server's VERSION reply against what the client proposed (the client's side of the rules). */
export function checkVersionReply(
  proposedMajor: number,
  proposedMinor: number,
  major: number,
  minor: number,
): string | null {
  if (major !== proposedMajor) return `server answered major ${major}, client proposed ${proposedMajor}`;
  if (minor > proposedMinor) return `server answered minor ${minor}, above the proposed ${proposedMinor}`;
  return null;
}
