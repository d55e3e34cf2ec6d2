// Errors as values. Bad input from a peer never throws: decoders and validators
// return a ProtocolError that says which rule failed (a stable code for tests
// and logs), the errno to put in the error reply, and a detail for people.

import { Errno } from './constants';

export interface ProtocolError {
  readonly code: ProtocolErrorCode;
  readonly errno: number;
  readonly detail: string;
}

export type ProtocolErrorCode =
  // framing
  | 'HEADER_TOO_SMALL'
  | 'MESSAGE_TOO_LARGE'
  | 'UNSOLICITED_REPLY'
  | 'UNKNOWN_COMMAND'
  | 'HEADER_ONLY'
  | 'TOO_MANY_FDS'
  | 'UNEXPECTED_FDS'
  | 'FIRST_NOT_VERSION'
  // payload shape
  | 'SHORT_PAYLOAD'
  | 'PAYLOAD_MISMATCH'
  | 'U64_RANGE'
  | 'ERROR_WITH_BODY'
  | 'BAD_CAP_CHAIN'
  | 'BAD_JSON'
  | 'BAD_CAPABILITIES'
  | 'BAD_VERSION'
  // request rules
  | 'ARGSZ_TOO_SMALL'
  | 'ARGSZ_TOO_LARGE'
  | 'BAD_FLAGS'
  | 'BAD_INDEX'
  | 'OUT_OF_RANGE'
  | 'COUNT_TOO_LARGE'
  | 'FD_COUNT'
  | 'OVERLAP'
  | 'NOT_FOUND'
  | 'TABLE_FULL'
  | 'TOO_BIG'
  | 'BAD_ALIGNMENT'
  | 'BAD_FD'
  | 'NOT_SUPPORTED'
  | 'DEVICE_ERROR';

export function protocolError(code: ProtocolErrorCode, detail: string, errno: number = Errno.EINVAL): ProtocolError {
  return { code, errno, detail };
}

/** A decode result: the value, or the rule it broke. */
export type Decoded<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: ProtocolError };

export function ok<T>(value: T): Decoded<T> {
  return { ok: true, value };
}

export function fail<T>(code: ProtocolErrorCode, detail: string, errno: number = Errno.EINVAL): Decoded<T> {
  return { ok: false, error: protocolError(code, detail, errno) };
}
