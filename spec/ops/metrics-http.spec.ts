// The /metrics listener (lib/ops/metrics-http.ts) of the server and the
// exporter is bounded: connections past the cap are closed as they arrive,
// an idle connection is closed after its timeout, and a scrape still works
// once room is made.

import { expect } from 'chai';
import * as net from 'net';
import { METRICS_MAX_CONNECTIONS, MetricsHttpServer } from '../../lib/ops/metrics-http';

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** Resolves when the peer closes `s` (or with 'open' after `ms`). */
function closedWithin(s: net.Socket, ms: number): Promise<'closed' | 'open'> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve('open'), ms);
    s.once('close', () => {
      clearTimeout(t);
      resolve('closed');
    });
    s.on('error', () => {});
    s.resume();
  });
}

describe('ops: the metrics HTTP listener is bounded', function () {
  this.timeout(20000);

  it('caps connections at 64 by default', function () {
    expect(METRICS_MAX_CONNECTIONS).to.equal(64);
  });

  it('closes connections past the cap, and serves again once there is room', async () => {
    const http = new MetricsHttpServer({
      host: '127.0.0.1',
      port: 0,
      title: 't',
      maxConnections: 4,
      render: async () => ({ contentType: 'text/plain', body: 'x 1\n' }),
    });
    const { port } = await http.listen();
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 4; i++) held.push(await connect(port));
      const extra = await connect(port);
      expect(await closedWithin(extra, 3000), 'the fifth connection').to.equal('closed');
      for (const s of held) expect(s.destroyed, 'the first four stay').to.equal(false);
      const gone = closedWithin(held[0]!, 3000);
      held[0]!.destroy();
      await gone;
      // Let the server see the close before the next connection arrives.
      await new Promise((r) => setTimeout(r, 100));
      const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(body).to.equal('x 1\n');
    } finally {
      for (const s of held) s.destroy();
      await http.close();
    }
  });

  it('closes a connection that sends nothing once its idle time is up', async () => {
    const http = new MetricsHttpServer({
      host: '127.0.0.1',
      port: 0,
      title: 't',
      idleTimeoutMs: 300,
      render: async () => ({ contentType: 'text/plain', body: '' }),
    });
    const { port } = await http.listen();
    try {
      const s = await connect(port);
      s.write('GET /metrics HTTP/1.1\r\nHost: x\r\n'); // headers never finished
      const t0 = Date.now();
      expect(await closedWithin(s, 5000)).to.equal('closed');
      expect(Date.now() - t0).to.be.within(200, 5000);
    } finally {
      await http.close();
    }
  });
});
