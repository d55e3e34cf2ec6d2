// Shared pieces of the S3 specs: a store behind an http.Server on
// 127.0.0.1:0, and an AWS SDK v3 client pointed at it (path style).

import { S3Client } from '@aws-sdk/client-s3';
import * as http from 'http';
import type { AddressInfo } from 'net';
import { createS3Server, ObjectStore, S3ServerOptions } from '../../../lib/targets/s3/store';

export const CREDS = { accessKeyId: 'ERNICKEY', secretAccessKey: 'ernic-secret-key' };
export const MiB = 1024 * 1024;

export interface Served {
  store: ObjectStore;
  server: http.Server;
  endpoint: string;
  client: S3Client;
  close(): Promise<void>;
}

export async function serve(
  opts: {
    limits?: Partial<ObjectStore['limits']>;
    dir?: string;
    auth?: boolean;
    extra?: Partial<S3ServerOptions>;
  } = {},
): Promise<Served> {
  const store = await ObjectStore.open(
    'ernic',
    { size: 64 * MiB, objects: 256, maxpart: 16 * MiB, ...opts.limits },
    opts.dir,
  );
  const server = createS3Server({ store, ...(opts.auth ? { credentials: [CREDS] } : {}), ...opts.extra });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: CREDS,
    maxAttempts: 1,
  });
  return {
    store,
    server,
    endpoint,
    client,
    close: async () => {
      client.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
