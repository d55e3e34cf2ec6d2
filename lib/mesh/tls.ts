// Mesh links over TLS 1.3, with node:tls doing all of the cryptography: the
// credentials an operator gives (a pre-shared key, or a certificate with its
// key and the mesh's CA), the options both ends use, the check made once a
// handshake is done and before the link carries a frame, and each way a
// handshake fails put in words for the one log line each side writes.
//
// Pre-shared key: TLS 1.3 external PSK (RFC 8446 4.2.11) through Node's
// pskCallback, with an (EC)DHE exchange on top (OpenSSL offers psk_dhe_ke
// only), so a key that leaks later does not open recorded traffic. The
// identity both sides send is a fingerprint of the key: a server holding
// another key says so by name instead of failing on a binder.
// Certificates: both ends present one and verify the other's against the
// mesh's CA alone (never the system's roots). Host names are not checked:
// the mesh dials addresses the manager hands out, so membership is "holds a
// certificate of this CA" (docs/mesh.md, "Trust model").

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tls from 'node:tls';
import type * as net from 'node:net';
import type { ConfigResult } from './config';
import type { OnRead } from './dial';

/** Shortest pre-shared key file (ernicctl writes 32 random bytes). */
const PSK_MIN_BYTES = 32;
/** Longest: OpenSSL takes at most 512 bytes of PSK; we stop well short. */
const PSK_MAX_BYTES = 256;
/** Largest certificate, key or CA bundle file we read. */
const PEM_MAX_BYTES = 256 * 1024;
/** The systemd credential the key may come as ($CREDENTIALS_DIRECTORY/mesh-psk). */
const PSK_CREDENTIAL = 'mesh-psk';

/**
 * TLS 1.3 suites, most wanted first. The PSK handshake runs on a SHA-256
 * suite (Node's PSK callback makes a SHA-256 session), so one must be listed;
 * AES-GCM first as it runs on the CPU's AES instructions.
 */
const MESH_TLS_CIPHERS = 'TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384';

/** What to say whenever the mesh wants credentials it does not have. */
export const CREDENTIALS_HINT =
  'give it a key (--mesh-psk FILE, ERNIC_MESH_PSK_FILE=FILE or the systemd credential mesh-psk) ' +
  'or certificates (--mesh-cert, --mesh-key and --mesh-ca); docs/mesh.md, "Trust model"';

export type MeshCredentials =
  | {
      readonly kind: 'psk';
      readonly key: Buffer;
      /** Fingerprint of the key: the PSK identity on the wire, and what logs name. */
      readonly keyId: string;
      /** Where the key came from (a file, the environment's file, the systemd credential). */
      readonly source: string;
    }
  | {
      readonly kind: 'cert';
      readonly cert: Buffer;
      readonly key: Buffer;
      readonly ca: Buffer;
      /** Our certificate's subject, for logs. */
      readonly subject: string;
      readonly source: string;
    };

/** The operator's options naming credential files (each absent when not given). */
export interface CredentialFiles {
  readonly psk?: string | undefined;
  readonly cert?: string | undefined;
  readonly key?: string | undefined;
  readonly ca?: string | undefined;
}

/** The key's fingerprint: 16 hex digits of SHA-256 over a label and the key. */
export function pskKeyId(key: Buffer): string {
  return crypto.createHash('sha256').update('rocm-ernic mesh psk id\n').update(key).digest('hex').slice(0, 16);
}

const PSK_IDENTITY_PREFIX = 'rocm-ernic-mesh/';

type Read = { ok: true; bytes: Buffer } | { ok: false; error: string };

/**
 * A whole small file, checked before it is read: a regular file, at most
 * `max` bytes, and (`secret`) neither readable nor writable by group or
 * others, as ssh insists for private keys.
 */
function readSmallFile(label: string, file: string, max: number, secret: boolean): Read {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      ok: false,
      error: `${label} ${file}: cannot open: ${code === 'ELOOP' ? 'a symbolic link (give the file itself)' : (code ?? (e as Error).message)}`,
    };
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return { ok: false, error: `${label} ${file}: not a regular file` };
    if (st.size > max) return { ok: false, error: `${label} ${file}: ${st.size} bytes, at most ${max}` };
    if (secret && (st.mode & 0o077) !== 0) {
      return {
        ok: false,
        error: `${label} ${file}: open to group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 ${file}`,
      };
    }
    const bytes = Buffer.alloc(st.size);
    let got = 0;
    while (got < bytes.length) {
      const n = fs.readSync(fd, bytes, got, bytes.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return { ok: true, bytes: bytes.subarray(0, got) };
  } catch (e) {
    return {
      ok: false,
      error: `${label} ${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    };
  } finally {
    fs.closeSync(fd);
  }
}

/** Every certificate of a PEM bundle (the CA file may hold several). */
function pemCertificates(pem: Buffer): crypto.X509Certificate[] {
  const out: crypto.X509Certificate[] = [];
  const text = pem.toString('latin1');
  const re = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
  for (let m = re.exec(text); m && out.length < 64; m = re.exec(text)) out.push(new crypto.X509Certificate(m[0]));
  return out;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ', ').trim();
}

function loadPsk(label: string, file: string, secret: boolean): ConfigResult<MeshCredentials> {
  const r = readSmallFile(label, file, PSK_MAX_BYTES, secret);
  if (!r.ok)
    return r.error.includes(' bytes, at most ')
      ? { ok: false, error: `${r.error} (a key is ${PSK_MIN_BYTES}-${PSK_MAX_BYTES} bytes)` }
      : { ok: false, error: r.error };
  const key = r.bytes;
  if (key.length < PSK_MIN_BYTES) {
    return {
      ok: false,
      error: `${label} ${file}: ${key.length} bytes, a key is at least ${PSK_MIN_BYTES} (make one: head -c 32 /dev/urandom > ${file})`,
    };
  }
  return { ok: true, value: { kind: 'psk', key: Buffer.from(key), keyId: pskKeyId(key), source: `${label} ${file}` } };
}

function loadCertificates(cert: string, key: string, ca: string): ConfigResult<MeshCredentials> {
  const c = readSmallFile('--mesh-cert', cert, PEM_MAX_BYTES, false);
  if (!c.ok) return c;
  const k = readSmallFile('--mesh-key', key, PEM_MAX_BYTES, true);
  if (!k.ok) return k;
  const a = readSmallFile('--mesh-ca', ca, PEM_MAX_BYTES, false);
  if (!a.ok) return a;
  let own: crypto.X509Certificate;
  try {
    own = new crypto.X509Certificate(c.bytes);
  } catch (e) {
    return { ok: false, error: `--mesh-cert ${cert}: not a PEM certificate: ${(e as Error).message}` };
  }
  let authorities: crypto.X509Certificate[];
  try {
    authorities = pemCertificates(a.bytes);
  } catch (e) {
    return { ok: false, error: `--mesh-ca ${ca}: not PEM certificates: ${(e as Error).message}` };
  }
  if (authorities.length === 0) return { ok: false, error: `--mesh-ca ${ca}: no PEM certificate in it` };
  let privateKey: crypto.KeyObject;
  try {
    privateKey = crypto.createPrivateKey(k.bytes);
  } catch (e) {
    return {
      ok: false,
      error: `--mesh-key ${key}: not a PEM private key (or one with a passphrase): ${(e as Error).message}`,
    };
  }
  if (!own.checkPrivateKey(privateKey))
    return { ok: false, error: `--mesh-key ${key}: not the key of --mesh-cert ${cert}` };
  const now = Date.now();
  if (Date.parse(own.validTo) < now) return { ok: false, error: `--mesh-cert ${cert}: expired on ${own.validTo}` };
  if (Date.parse(own.validFrom) > now)
    return { ok: false, error: `--mesh-cert ${cert}: not valid before ${own.validFrom}` };
  // Our peers check our certificate against the same CA: one it did not issue would be refused by all of them.
  if (!authorities.some((x) => own.checkIssued(x) && own.verify(x.publicKey))) {
    return {
      ok: false,
      error: `--mesh-cert ${cert}: not issued by any certificate in --mesh-ca ${ca} (peers would refuse it)`,
    };
  }
  try {
    tls.createSecureContext({ cert: c.bytes, key: k.bytes, ca: a.bytes, minVersion: 'TLSv1.3' });
  } catch (e) {
    return { ok: false, error: `--mesh-cert ${cert}: unusable for TLS: ${oneLine((e as Error).message)}` };
  }
  return {
    ok: true,
    value: {
      kind: 'cert',
      cert: c.bytes,
      key: k.bytes,
      ca: a.bytes,
      subject: oneLine(own.subject),
      source: `--mesh-cert ${cert}`,
    },
  };
}

/**
 * The mesh's credentials from the operator's options and environment, or
 * null when none were given. A key comes from --mesh-psk FILE, else
 * ERNIC_MESH_PSK_FILE, else the systemd credential mesh-psk (when
 * $CREDENTIALS_DIRECTORY holds one); certificates from all three of
 * --mesh-cert, --mesh-key and --mesh-ca. A key and certificates together are
 * refused: TLS 1.3 authenticates a handshake by one or the other, so taking
 * both would let in whoever holds either.
 */
export function loadMeshCredentials(
  files: CredentialFiles,
  env: Readonly<Record<string, string | undefined>>,
): ConfigResult<MeshCredentials | null> {
  const given = (v: string | undefined): v is string => v !== undefined && v !== '';
  const certParts = [files.cert, files.key, files.ca].filter(given).length;
  if (certParts > 0 && certParts < 3)
    return { ok: false, error: '--mesh-cert, --mesh-key and --mesh-ca go together (all three, or none)' };
  const envFile = env['ERNIC_MESH_PSK_FILE'];
  const credDir = env['CREDENTIALS_DIRECTORY'];
  if (certParts === 3) {
    if (given(files.psk))
      return { ok: false, error: '--mesh-psk and --mesh-cert: give a key or certificates, not both' };
    return loadCertificates(files.cert!, files.key!, files.ca!);
  }
  if (given(files.psk)) return loadPsk('--mesh-psk', files.psk, true);
  if (given(envFile)) return loadPsk('ERNIC_MESH_PSK_FILE', envFile, true);
  if (given(credDir)) {
    const file = path.join(credDir, PSK_CREDENTIAL);
    if (fs.existsSync(file)) {
      // systemd makes a credential readable by the unit's user alone, whatever its mode bits say.
      return loadPsk('the systemd credential', file, false);
    }
  }
  return { ok: true, value: null };
}

// ---------------------------------------------------------------------------
// Handshakes

type TlsSide = 'client' | 'server';

/** TLS for one mesh: contexts built once, the server's options, dialled sockets wrapped, handshakes judged. */
export class MeshTls {
  readonly #creds: MeshCredentials;
  readonly #context: tls.SecureContext;
  readonly #identity: string;
  /** PSK identities servers saw that were not ours (for the refusal's wording). */
  readonly #strangers = new WeakMap<tls.TLSSocket, string>();

  constructor(creds: MeshCredentials) {
    this.#creds = creds;
    this.#identity = creds.kind === 'psk' ? `${PSK_IDENTITY_PREFIX}${creds.keyId}` : '';
    const common = { minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3', ciphers: MESH_TLS_CIPHERS } as const;
    this.#context =
      creds.kind === 'psk'
        ? tls.createSecureContext(common)
        : tls.createSecureContext({ ...common, cert: creds.cert, key: creds.key, ca: creds.ca });
  }

  get kind(): MeshCredentials['kind'] {
    return this.#creds.kind;
  }

  /** "pre-shared key 0123456789abcdef (--mesh-psk FILE)" or "certificate CN=... (--mesh-cert FILE)". */
  describe(): string {
    const c = this.#creds;
    return c.kind === 'psk' ? `pre-shared key ${c.keyId} (${c.source})` : `certificate ${c.subject} (${c.source})`;
  }

  /**
   * A TLS server that never listens: accepted sockets are handed to it
   * (`emit('connection')`) once the mesh has let them in. `handshakeTimeoutMs`
   * bounds a handshake that stalls.
   */
  createServer(handshakeTimeoutMs: number): tls.Server {
    const c = this.#creds;
    const common: tls.TlsOptions = {
      minVersion: 'TLSv1.3',
      maxVersion: 'TLSv1.3',
      ciphers: MESH_TLS_CIPHERS,
      handshakeTimeout: handshakeTimeoutMs,
    };
    if (c.kind === 'psk') {
      return tls.createServer({
        ...common,
        pskCallback: (socket: tls.TLSSocket, identity: string): Buffer | null => {
          if (identity === this.#identity) return c.key;
          // The peer's text, bound and made printable before it can reach a log line.
          this.#strangers.set(socket, printable(identity.slice(0, 80)));
          return null;
        },
      });
    }
    // rejectUnauthorized stays off here only so that a refusal can be logged
    // with the peer's address and the reason: verify() refuses every peer
    // whose certificate this CA did not sign before its link is adopted.
    return tls.createServer({
      ...common,
      cert: c.cert,
      key: c.key,
      ca: c.ca,
      requestCert: true,
      rejectUnauthorized: false,
    });
  }

  /**
   * Dial address:port and start the client side of a handshake on it. The
   * TLS socket makes its own TCP connection (not one handed to it): only then
   * does Node deliver its decrypted bytes through `onread`.
   */
  connect(address: string, port: number, onread: OnRead): tls.TLSSocket {
    return tls.connect({ ...this.#clientOptions(), host: address, port, onread } as tls.ConnectionOptions);
  }

  /** Start the client side of a handshake on a socket already connected (its reads come as 'data'). */
  secure(raw: net.Socket): tls.TLSSocket {
    return tls.connect({ ...this.#clientOptions(), socket: raw });
  }

  #clientOptions(): tls.ConnectionOptions {
    const opts: tls.ConnectionOptions = {
      secureContext: this.#context,
      minVersion: 'TLSv1.3',
      maxVersion: 'TLSv1.3',
      ciphers: MESH_TLS_CIPHERS,
      rejectUnauthorized: true,
      // Membership is "signed by the mesh's CA" (or "holds the key"); peers are dialled by the addresses the manager hands out.
      checkServerIdentity: () => undefined,
    };
    const c = this.#creds;
    if (c.kind === 'psk') opts.pskCallback = () => ({ psk: c.key, identity: this.#identity });
    return opts;
  }

  /**
   * Once a handshake completed: null when the peer authenticated the way this
   * mesh requires, else why not. With a key, the handshake must have used it
   * (a server that answered with a certificate instead, even one the system
   * trusts, is no member); with certificates, the peer's must be signed by
   * our CA.
   */
  verify(socket: tls.TLSSocket): string | null {
    if (socket.getProtocol() !== 'TLSv1.3') return `negotiated ${socket.getProtocol() ?? 'no protocol'}, not TLS 1.3`;
    if (this.#creds.kind === 'psk') {
      return socket.isSessionReused()
        ? null
        : "the peer authenticated with a certificate, not with the mesh's pre-shared key";
    }
    const peer = socket.getPeerCertificate();
    if (!peer || Object.keys(peer).length === 0) return 'the peer sent no certificate';
    if (!socket.authorized) {
      const code = String(socket.authorizationError ?? 'not authorized');
      return `the peer's certificate (${subjectText(peer.subject)}) is not accepted: ${certificateProblem(code)}`;
    }
    return null;
  }

  /** A failed handshake in words (`side`: which end we were). */
  failure(err: Error, socket: tls.TLSSocket | undefined, side: TlsSide): string {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const psk = this.#creds.kind === 'psk';
    const stranger = socket ? this.#strangers.get(socket) : undefined;
    if (stranger !== undefined) {
      const id = stranger.startsWith(PSK_IDENTITY_PREFIX)
        ? `key ${stranger.slice(PSK_IDENTITY_PREFIX.length)}`
        : `identity '${stranger}'`;
      return `wrong pre-shared key: the peer holds ${id}, we hold key ${(this.#creds as { keyId: string }).keyId}`;
    }
    switch (code) {
      case 'ERR_SSL_BINDER_DOES_NOT_VERIFY':
        return 'wrong pre-shared key (the same key id, other bytes)';
      case 'ERR_SSL_SSLV3_ALERT_ILLEGAL_PARAMETER':
      case 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE':
      case 'ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR':
        return psk
          ? 'the peer refused our pre-shared key (it holds another key, or uses certificates)'
          : 'the peer refused the handshake (it uses a pre-shared key, or another CA)';
      case 'ERR_SSL_NO_SUITABLE_SIGNATURE_ALGORITHM':
      case 'ERR_SSL_NO_SHARED_CIPHER':
        return psk
          ? 'the peer offered no pre-shared key (it uses certificates?)'
          : 'no common ground for the handshake (the peer uses a pre-shared key?)';
      case 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA':
      case 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE':
      case 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN':
        return 'the peer does not accept our certificate (another CA)';
      case 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED':
        return 'the peer wants a certificate and we have none (it uses certificates, we a pre-shared key)';
      case 'ERR_SSL_WRONG_VERSION_NUMBER':
      case 'ERR_SSL_PACKET_LENGTH_TOO_LONG':
      case 'ERR_SSL_HTTP_REQUEST':
        return 'the peer does not speak TLS (it runs without credentials?)';
      case 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION':
      case 'ERR_SSL_UNSUPPORTED_PROTOCOL':
        return 'the peer does not speak TLS 1.3';
      case 'ERR_TLS_HANDSHAKE_TIMEOUT':
        return 'no TLS handshake in time';
      case 'ECONNRESET':
      case 'EPIPE':
      case 'ERR_SOCKET_CLOSED':
      case 'ERR_STREAM_PREMATURE_CLOSE':
        return side === 'client'
          ? 'the peer closed the connection during the TLS handshake (it holds other credentials, or none, or is full)'
          : 'the peer hung up during the TLS handshake (it does not accept our credentials)';
      default:
        if (code && !code.startsWith('ERR_')) {
          if (side === 'client') return `the peer's certificate is not accepted: ${certificateProblem(code)}`;
        }
        return `TLS handshake failed: ${code || 'error'}: ${oneLine(err.message).slice(0, 160)}`;
    }
  }
}

/** Peer-supplied text for a log line: printable ASCII only. */
function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}

/** A certificate subject as "CN=x, O=y" (fields cut short: they come from the peer). */
function subjectText(subject: tls.Certificate | undefined): string {
  if (!subject) return 'no subject';
  const parts: string[] = [];
  for (const [k, v] of Object.entries(subject)) {
    if (parts.length >= 6) break;
    const value = Array.isArray(v) ? v.join('+') : String(v);
    parts.push(`${printable(k.slice(0, 16))}=${printable(value.slice(0, 64))}`);
  }
  return parts.join(', ') || 'no subject';
}

/** An X.509 verification code (OpenSSL's names, as Node reports them) in words. */
function certificateProblem(code: string): string {
  switch (code) {
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
      return `not signed by the mesh's CA (${code})`;
    case 'CERT_HAS_EXPIRED':
      return 'expired (CERT_HAS_EXPIRED)';
    case 'CERT_NOT_YET_VALID':
      return 'not valid yet (CERT_NOT_YET_VALID)';
    case 'CERT_REVOKED':
      return 'revoked (CERT_REVOKED)';
    default:
      return code;
  }
}

/** Whether the first byte a peer sent can open a TLS handshake (a handshake record, 22). */
export function looksLikeTls(firstByte: number): boolean {
  return firstByte === 0x16;
}
