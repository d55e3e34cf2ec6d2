// --backend s3[:...]: an S3 store at an address of the guest's segment
// (lib/targets/s3), with data by RDMA token through the MR table or in the
// HTTP body. The executor runs the guest's QPs; the store is the first host
// on the segment to see the guest's frames (before any P4 segment).

import type { GuestSegment, RdmaBackend } from '../rdma/backend';
import type { DataPathEngine } from '../rdma/executor';
import { installWqeExecutor } from '../rdma/executor';
import { s3CredentialsFromEnv } from '../targets/s3/credentials';
import { S3Endpoint } from '../targets/s3/endpoint';
import { MrTableDma } from '../targets/s3/guest-dma';
import { hostListenerRefusal, parseS3Backend } from '../targets/s3/options';
import type { S3Options } from '../targets/s3/options';
import type { Credentials, ObjectStore } from '../targets/s3/store';
import type { BackendKind, Checked, ServedBackend } from './kind';

interface S3BackendOptions {
  readonly options: S3Options;
  /** An opened store (S3Endpoint.openStore). */
  readonly store: ObjectStore;
  /** SigV4 credentials, when requests must be signed. */
  readonly credentials?: readonly Credentials[];
}

export class S3Backend implements RdmaBackend, ServedBackend {
  readonly name = 's3';
  /** The store's endpoint on the segment, once attached. */
  endpoint: S3Endpoint | null = null;

  constructor(readonly s3: S3BackendOptions) {}

  attach(engine: DataPathEngine | null, segment: GuestSegment): void {
    if (engine) installWqeExecutor(engine);
    // Token requests reach guest memory through the MR table (no RDMA profile: they answer 501).
    this.endpoint = S3Endpoint.create(this.s3.options, this.s3.store, {
      send: (frame, l3Sum) => segment.send(frame, l3Sum),
      ...(engine ? { dma: new MrTableDma(engine) } : {}),
      ...(this.s3.credentials ? { credentials: this.s3.credentials } : {}),
    });
    segment.addEndpoint(this.endpoint);
  }

  /** The VM is gone: so are its TCP connections to the store (a device reset keeps them: the guest's sockets outlive a driver reload). */
  consumerPresent(present: boolean): void {
    if (!present) this.endpoint?.dropGuestConnections();
  }

  async serve(): Promise<Checked<string | null>> {
    const ep = this.endpoint;
    if (!ep) return { ok: true, value: null };
    const o = this.s3.options;
    try {
      await ep.listenHost(o);
    } catch (e) {
      return { ok: false, error: `cannot listen on ${o.listen!.host}:${o.listen!.port}: ${(e as Error).message}` };
    }
    const where = ep.hostAddress;
    const host =
      where && typeof where === 'object'
        ? `, also http://${where.family === 'IPv6' ? `[${where.address}]` : where.address}:${where.port}`
        : '';
    return {
      ok: true,
      value: `rocm-ernic: S3 store bucket ${o.bucket} at http://${o.ip}:${o.port}${host}: ${ep.store.count} objects, ${o.size} bytes in ${o.dir ?? 'RAM'}${this.s3.credentials ? ', SigV4 required' : ''}`,
    };
  }

  async close(): Promise<void> {
    await this.endpoint?.close();
  }
}

export const s3Kind: BackendKind = {
  help: `  s3[:KEY=VALUE,...]        an S3 store on the guest's segment, data by x-amz-rdma-token or in
                            the body (docs/s3.md); keys and defaults:
                              bucket=ernic size=256M objects=256 ip=192.168.200.1 port=9000
                              maxpart=256M listen=[HOST:]PORT dir=DIR
                            ERNIC_S3_ACCESS_KEY and ERNIC_S3_SECRET_KEY turn on SigV4. listen=PORT
                            binds 127.0.0.1; another address needs the credentials, and the
                            token path on the host listener takes only signed tokens.`,
  grammar: 's3[:key=value,...]',
  accepts: (spec) => spec === 's3' || spec.startsWith('s3:'),
  prepare(spec, env) {
    const parsed = parseS3Backend(spec);
    if (!parsed.ok) return parsed;
    const creds = s3CredentialsFromEnv(env);
    if (!creds.ok) return creds;
    const options = parsed.value;
    const credentials = creds.value ? [creds.value] : null;
    if (options.listen) {
      const refusal = hostListenerRefusal(options.listen, credentials !== null);
      if (refusal) return { ok: false, error: refusal };
    }
    return {
      ok: true,
      value: {
        // The store loaded from dir= (or empty in RAM) before QEMU can connect.
        async open() {
          try {
            const store = await S3Endpoint.openStore(options);
            return { ok: true, value: new S3Backend({ options, store, ...(credentials ? { credentials } : {}) }) };
          } catch (e) {
            return { ok: false, error: `--backend ${spec}: cannot open the store: ${(e as Error).message}` };
          }
        },
      },
    };
  },
};
