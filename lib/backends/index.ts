// The backends the server offers, composed at the top: what executes the
// RDMA work the guest posts. Each is one file of this folder exporting a
// BackendKind (kind.ts) and the RdmaBackend the ionic device takes
// (lib/rdma/backend.ts); adding one is a file and a line below.

import type { BackendKind } from './kind';
import { loopbackKind } from './loopback';
import { meshKind } from './mesh';
import { noneKind } from './none';
import { nvmeofKind } from './nvmeof';
import { roceKind } from './roce';
import { s3Kind } from './s3';

/** In the order --help lists them. */
const BACKEND_KINDS: readonly BackendKind[] = [loopbackKind, noneKind, meshKind, roceKind, nvmeofKind, s3Kind];

/** The kind that takes `spec`, or undefined. */
export function backendKind(spec: string): BackendKind | undefined {
  return BACKEND_KINDS.find((k) => k.accepts(spec));
}

/** The --backend help, every kind's lines. */
export function backendsHelp(): string {
  return `Backends (--backend):\n${BACKEND_KINDS.map((k) => k.help).join('\n')}`;
}

/** The refusal of a spec no kind takes. */
export function unknownBackend(spec: string): string {
  return `--backend ${spec}: unknown backend (available: ${BACKEND_KINDS.map((k) => k.grammar).join(', ')})`;
}
export { ServedMesh } from './mesh';
