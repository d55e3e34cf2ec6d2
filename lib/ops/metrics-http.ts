// /metrics over Node's http.Server, for the server (--metrics-port) and
// ernic-exporter. GET or HEAD /metrics renders on the spot; / says where the
// metrics are; anything else is 404 (405 for another method). A failure to
// render is a 500 with the reason, logged, and the server stays up.

import * as http from 'http';
import type { AddressInfo } from 'net';
import { Logger, nullLogger, RateLimiter, warnLimited } from '../log';

interface MetricsHttpOptions {
  readonly host: string;
  /** 0 picks a free port (tests). */
  readonly port: number;
  /** The exposition text and its content type. */
  readonly render: () => Promise<{ readonly contentType: string; readonly body: string }>;
  /** What GET / answers besides the link (one line). */
  readonly title: string;
  readonly log?: Logger;
  /** Connections open at once; more are closed as they arrive (default METRICS_MAX_CONNECTIONS). */
  readonly maxConnections?: number;
  /** A connection with nothing sent or received for this long is closed (default METRICS_IDLE_TIMEOUT_MS). */
  readonly idleTimeoutMs?: number;
}

/** Prometheus holds one connection per target; a few people with curl add some. */
export const METRICS_MAX_CONNECTIONS = 64;
/** Scrapes are short: a client that sends nothing is not kept. */
const METRICS_IDLE_TIMEOUT_MS = 10_000;

export class MetricsHttpServer {
  readonly #server: http.Server;
  readonly #opts: MetricsHttpOptions;
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  /** Scrapes answered. */
  scrapes = 0;

  constructor(opts: MetricsHttpOptions) {
    this.#opts = opts;
    this.#log = opts.log ?? nullLogger;
    this.#server = http.createServer((req, res) => {
      void this.#handle(req, res);
    });
    // Bounded: so many connections at once, each closed when idle (the socket's own timer,
    // armed by its traffic) and a request that takes longer than the limit to arrive refused.
    const idle = opts.idleTimeoutMs ?? METRICS_IDLE_TIMEOUT_MS;
    this.#server.maxConnections = opts.maxConnections ?? METRICS_MAX_CONNECTIONS;
    this.#server.timeout = idle;
    this.#server.requestTimeout = idle;
    this.#server.headersTimeout = idle;
    this.#server.keepAliveTimeout = Math.min(5_000, idle);
  }

  /** Listen; rejects with the socket error (EADDRINUSE, EACCES, ...). */
  listen(): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error): void => reject(e);
      this.#server.once('error', onError);
      this.#server.listen(this.#opts.port, this.#opts.host, () => {
        this.#server.off('error', onError);
        this.#server.on('error', (e) => warnLimited(this.#log, this.#limiter, 'metrics-http', `metrics: ${e.message}`));
        resolve(this.#server.address() as AddressInfo);
      });
    });
  }

  get address(): AddressInfo | null {
    return (this.#server.address() as AddressInfo | null) ?? null;
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    if (url === '/') {
      res
        .writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`${this.#opts.title}\nmetrics: /metrics\n`);
      return;
    }
    if (url !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
      return;
    }
    try {
      const { contentType, body } = await this.#opts.render();
      this.scrapes++;
      res.writeHead(200, { 'content-type': contentType });
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (e) {
      warnLimited(
        this.#log,
        this.#limiter,
        'metrics-render',
        `metrics: cannot render /metrics: ${(e as Error).message}`,
      );
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`cannot render metrics: ${(e as Error).message}\n`);
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
