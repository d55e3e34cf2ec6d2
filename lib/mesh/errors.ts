// Errors as values. Nothing a peer sends makes the mesh throw: decoders and
// the frame parser return a MeshError naming the rule that failed (a stable
// code for tests and logs) and a detail for people. The connection that
// carried it is closed with that reason; the process carries on.

type MeshErrorCode =
  // framing
  | 'BAD_MAGIC'
  | 'UNKNOWN_TYPE'
  | 'UNSUPPORTED_TYPE'
  | 'FRAME_TOO_LARGE'
  | 'BAD_LENGTH'
  // payload rules
  | 'BAD_VERSION'
  | 'BAD_FIELD'
  | 'BAD_HOST'
  | 'BAD_NODE_ID'
  | 'TOO_MANY'
  | 'DUPLICATE'
  // connection rules
  | 'PROTOCOL'
  | 'OVERFLOW';

export interface MeshError {
  readonly code: MeshErrorCode;
  readonly detail: string;
}

export function meshError(code: MeshErrorCode, detail: string): MeshError {
  return { code, detail };
}

/** A decode result: the value, or the rule it broke. */
export type Decoded<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: MeshError };

export function ok<T>(value: T): Decoded<T> {
  return { ok: true, value };
}

export function fail<T>(code: MeshErrorCode, detail: string): Decoded<T> {
  return { ok: false, error: meshError(code, detail) };
}
