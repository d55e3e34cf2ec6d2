// SigV4 credentials for the S3 store, from the environment rather than the
// command line (where every user on the host could read the secret in ps):
// ERNIC_S3_ACCESS_KEY and ERNIC_S3_SECRET_KEY, both or neither. With them,
// every request must be signed by that key (store/sigv4.ts); without them,
// the store answers unsigned requests (curl from the guest).

import type { Credentials } from './store';

const S3_ACCESS_KEY_ENV = 'ERNIC_S3_ACCESS_KEY';
const S3_SECRET_KEY_ENV = 'ERNIC_S3_SECRET_KEY';

/** Longest access key id and secret accepted (AWS's are 20 and 40 characters). */
const MAX_KEY_CHARS = 128;

type CredentialsResult =
  { readonly ok: true; readonly value: Credentials | null } | { readonly ok: false; readonly error: string };

/** The credentials in `env`, null when neither variable is set; one line naming the mistake otherwise. */
export function s3CredentialsFromEnv(env: Readonly<Record<string, string | undefined>>): CredentialsResult {
  const id = env[S3_ACCESS_KEY_ENV];
  const secret = env[S3_SECRET_KEY_ENV];
  if (id === undefined && secret === undefined) return { ok: true, value: null };
  if (id === undefined || secret === undefined) {
    return {
      ok: false,
      error: `s3 backend: ${S3_ACCESS_KEY_ENV} and ${S3_SECRET_KEY_ENV} go together (only ${id === undefined ? S3_SECRET_KEY_ENV : S3_ACCESS_KEY_ENV} is set)`,
    };
  }
  if (!/^[A-Za-z0-9]{1,128}$/.test(id))
    return { ok: false, error: `s3 backend: ${S3_ACCESS_KEY_ENV}: expected 1 to ${MAX_KEY_CHARS} letters and digits` };
  if (secret.length < 1 || secret.length > MAX_KEY_CHARS || !/^[\x21-\x7e]+$/.test(secret)) {
    return {
      ok: false,
      error: `s3 backend: ${S3_SECRET_KEY_ENV}: expected 1 to ${MAX_KEY_CHARS} printable characters, no spaces`,
    };
  }
  return { ok: true, value: { accessKeyId: id, secretAccessKey: secret } };
}
