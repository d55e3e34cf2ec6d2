// How the server's CLI knows a backend: the --backend grammar it takes, a
// check made before anything is created, and the opening (a mesh started, a
// namespace or a store loaded) made before QEMU can connect. A backend is a
// file of lib/backends/ exporting one BackendKind, listed once in index.ts.

import type { Logger } from '../log';
import type { MeshCliSecurity } from '../mesh';
import type { RdmaBackend } from '../rdma/backend';

/** A value, or one line naming the problem (the CLI prints it and exits 2). */
export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

interface BackendContext {
  readonly log: Logger;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The mesh's security options (--mesh-psk, --mesh-cert, ...), as typed. */
  readonly mesh: MeshCliSecurity;
}

/** A backend as the CLI runs it: the device's RdmaBackend, plus what the process does around it. */
export interface ServedBackend extends RdmaBackend {
  /** After the device is built: start serving what faces the host (S3's listen=); one line for the log, or the refusal. */
  serve?(): Promise<Checked<string | null>>;
  /** On shutdown. */
  close?(): Promise<void>;
}

interface PreparedBackend {
  /** Opens the backend; the refusal is the whole line. */
  open(ctx: BackendContext): Promise<Checked<ServedBackend>>;
}

export interface BackendKind {
  /** Lines of the --backend help, laid out by hand so that no value is broken across lines. */
  readonly help: string;
  /** The grammar, for the refusal of an unknown backend. */
  readonly grammar: string;
  accepts(spec: string): boolean;
  /** Checks the spec (and the environment) before anything is created. */
  prepare(spec: string, env: Readonly<Record<string, string | undefined>>): Checked<PreparedBackend>;
}
