// A TCP port free on loopback right now, for a server that must be told a
// number (tcp:manager:listen:PORT, s3 listen=HOST:PORT). Another process may
// take it before ours binds; the benchmark then fails with the bind error.

import * as net from 'net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
