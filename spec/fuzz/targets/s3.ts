// The S3 store: HTTP requests to an in-process S3Endpoint, both on the host
// listener (listen=127.0.0.1:0, through Node's own client and raw sockets) and
// on the guest's wire (TCP frames from spec/support/s3-guest-tcp.ts into the
// endpoint's frame hook). Each epoch opens a fresh store (a quarter of them
// with SigV4 credentials, so the signature checks take random input) and
// mixes good requests and flows (PUT/GET back, multipart upload and complete,
// DeleteObjects) with random and mutated ones: methods, paths, query strings,
// headers (digests right and wrong, aws-chunked framing, ranges, metadata and
// checksum names after Object's properties, RDMA tokens), XML bodies (mutated
// documents, S3's limits and past them, DOCTYPE, entities, nesting), big
// bodies, and bytes that are not HTTP at all.
//
// A finding: an exception that escapes (uncaught, unhandled rejection, or a
// bug the last-resort guard contained), a 500 (the handler's safety net is for
// our bugs), a complete request without an answer, a good flow that does not
// give back what it stored, books out of balance after the epoch (everything
// deleted and aborted, the store must hold nothing), or a loop turn over 50 ms
// (the runner's figure, confirmed by this thread's CPU time: spec/targets/turn-watch.ts).

import * as http from 'http';
import type { AddressInfo } from 'net';
import * as net from 'net';
import { XMLValidator } from 'fast-xml-parser';
import { guardStats } from '../../../lib/guard';
import { S3Endpoint } from '../../../lib/targets/s3/endpoint';
import { S3_DEFAULTS, S3Options } from '../../../lib/targets/s3/options';
import { Prng } from '../../support/ionic/rig';
import { GuestTcp } from '../../support/s3-guest-tcp';
import { CpuTurnWatch } from '../../targets/turn-watch';
import { EscapeWatch, FuzzFinding, FuzzRunOptions, registerTarget } from './index';
import { b64, BUCKET, KnownState, Req, S3Requests } from './s3-requests';

const MiB = 1024 * 1024;
/** A loop turn longer than this is a finding. */
const TURN_LIMIT_MS = 50;
/** A complete request must be answered within this. */
const ANSWER_MS = 20_000;
const ACTIONS_PER_EPOCH = 160;
const HOST_IN_FLIGHT = 4;
const CREDS = { accessKeyId: 'FUZZKEY', secretAccessKey: 'fuzz-secret' };

interface S3FuzzStats {
  epochs: number;
  host: number;
  guest: number;
  raw: number;
  flows: number;
  /** Answers by status class: 2xx, 3xx, 4xx, 5xx. */
  readonly byClass: number[];
  maxCpuTurnMs: number;
}

interface Reply {
  readonly status: number;
  readonly body: Buffer;
  readonly headers: http.IncomingHttpHeaders;
}

class S3Fuzzer {
  readonly stats: S3FuzzStats = {
    epochs: 0,
    host: 0,
    guest: 0,
    raw: 0,
    flows: 0,
    byClass: [0, 0, 0, 0, 0, 0],
    maxCpuTurnMs: 0,
  };
  readonly #rnd: Prng;
  readonly #o: FuzzRunOptions;
  readonly #trail: string[] = [];
  readonly #escapes = new EscapeWatch();
  #ep: S3Endpoint | null = null;
  #port = 0;
  #agent: http.Agent | null = null;
  readonly #guests: GuestTcp[] = [];
  #sport = 20_000;
  /** Keys of multipart flows (for the books at the end). */
  #flowKeys: string[] = [];
  /** Keys stored and uploads started, which requests draw on. */
  readonly #known: KnownState = { keys: [], uploads: new Set() };
  readonly #requests: S3Requests;
  #signed = false;
  readonly #watch = new CpuTurnWatch();

  constructor(o: FuzzRunOptions) {
    this.#o = o;
    this.#rnd = new Prng(o.seed);
    this.#requests = new S3Requests(this.#rnd, this.#known);
  }

  note(s: string): void {
    this.#trail.push(s.length > 160 ? `${s.slice(0, 160)}...` : s);
    if (this.#trail.length > 12) this.#trail.shift();
  }

  finding(what: string): FuzzFinding {
    return new FuzzFinding(what, this.#o.seed, this.stats.epochs, [...this.#trail]);
  }

  async run(): Promise<S3FuzzStats> {
    this.#escapes.start();
    const watch = this.#watch.start();
    // The last actions when the longest turn so far ended: what a loop-turn finding names.
    let atLongest: string[] = [];
    watch.onMax = (cpu) => {
      if (cpu > 10) atLongest = [...this.#trail];
    };
    const contained0 = guardStats.contained;
    const start = Date.now();
    let shown = 0;
    try {
      while (Date.now() - start < this.#o.ms) {
        this.stats.epochs++;
        await this.#epoch(start);
        this.stats.maxCpuTurnMs = watch.maxCpuMs;
        if (guardStats.contained !== contained0) throw this.finding('the last-resort guard caught a bug');
        if (this.#escapes.seen.length > 0) throw this.finding(`an exception escaped: ${this.#escapes.seen[0]}`);
        if (this.#o.longestTurnMs() > TURN_LIMIT_MS && watch.maxCpuMs > TURN_LIMIT_MS) {
          this.#trail.splice(0, this.#trail.length, ...atLongest);
          throw this.finding(
            `a loop turn of ${this.#o.longestTurnMs().toFixed(1)} ms (${watch.maxCpuMs.toFixed(1)} ms of this thread's CPU, ending after the actions below)`,
          );
        }
        if (Date.now() - shown >= 1000) {
          shown = Date.now();
          this.#o.progress(summary(this.stats));
        }
      }
    } finally {
      watch.stop();
      this.#escapes.stop();
    }
    return this.stats;
  }

  // ---- one epoch ------------------------------------------------------------------------------

  async #epoch(start: number): Promise<void> {
    const rnd = this.#rnd;
    this.#signed = rnd.below(4) === 0;
    this.#known.keys = ['a', 'dir/b', 'dir/sub/c', `k-${rnd.next()}`];
    this.#known.uploads = new Set();
    this.#flowKeys = [];
    const opts: S3Options = {
      ...S3_DEFAULTS,
      size: 64 * MiB,
      maxpart: 8 * MiB,
      objects: 128,
      listen: { host: '127.0.0.1', port: 0 },
    };
    this.#guests.length = 0;
    const ep = await S3Endpoint.open(opts, {
      // On a later turn, as the device's RX ring hands frames to a guest: delivered at once, a guest client
      // answering inside the server's call would make a whole transfer one turn of microtasks.
      send: (frame) => {
        const f = Buffer.from(frame); // valid during the call only
        setImmediate(() => {
          for (const g of this.#guests) g.onFrame(f);
        });
      },
      ...(this.#signed ? { credentials: [CREDS] } : {}),
    });
    this.#ep = ep;
    this.#port = (ep.hostAddress as AddressInfo).port;
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: HOST_IN_FLIGHT });
    this.note(`epoch ${this.stats.epochs}${this.#signed ? ' (SigV4)' : ''}`);
    try {
      const inFlight = new Set<Promise<void>>();
      for (let i = 0; i < ACTIONS_PER_EPOCH && Date.now() - start < this.#o.ms; i++) {
        const x = rnd.below(100);
        let p: Promise<void>;
        // Making a request is the fuzzer's work, not the store's: left out of the loop-turn figure.
        const gen = <T>(fn: () => T): T => this.#watch.untimed(fn);
        if (x < 62) p = this.#hostRequest(gen(() => this.#requests.request()));
        else if (x < 72) p = this.#flow();
        else if (x < 84) p = this.#guestRequest(gen(() => this.#requests.request(16 * 1024)));
        else if (x < 92) p = this.#rawHost();
        else if (x < 96) p = this.#guestRaw();
        else p = this.#hostRequest(gen(() => this.#requests.big()));
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p)).catch(() => undefined);
        // Guest connections one at a time (the stack keeps 8); host requests a few at once.
        if (x >= 72 || inFlight.size >= HOST_IN_FLIGHT) await Promise.race(inFlight);
        if (x >= 72) await p;
      }
      await Promise.all(inFlight);
      await this.#afterwards();
    } finally {
      this.#agent.destroy();
      await ep.close();
      this.#ep = null;
    }
  }

  /** The epoch's end: good requests still work both ways, and with everything deleted the store holds nothing. */
  async #afterwards(): Promise<void> {
    const ep = this.#ep!;
    if (this.#signed) {
      // Unsigned requests are refused: the books are checked from the store itself.
      const r = await this.#send(
        {
          method: 'GET',
          path: `/${BUCKET}/a`,
          headers: {},
          body: Buffer.alloc(0),
          complete: true,
          what: 'unsigned GET',
        },
        true,
      );
      if (r.status !== 403) throw this.finding(`an unsigned GET to a signed store answered ${r.status}`);
    } else {
      const data = this.#watch.untimed(() => this.#rnd.bytes(100_000));
      const put = await this.#send(
        {
          method: 'PUT',
          path: `/${BUCKET}/after`,
          headers: { 'content-md5': b64(data, 'md5') },
          body: data,
          complete: true,
          what: 'PUT after',
        },
        true,
      );
      const get = await this.#send(
        {
          method: 'GET',
          path: `/${BUCKET}/after`,
          headers: {},
          body: Buffer.alloc(0),
          complete: true,
          what: 'GET after',
        },
        true,
      );
      if (put.status !== 200 || get.status !== 200 || !get.body.equals(data)) {
        throw this.finding(
          `after the epoch, PUT ${put.status} / GET ${get.status} did not give the object back: ${put.body.toString('utf8', 0, 300)}`,
        );
      }
      const small = this.#rnd.bytes(3000);
      const gput = await this.#guestExchange(rawRequest('PUT', `/${BUCKET}/after-guest`, {}, small));
      const gget = await this.#guestExchange(rawRequest('GET', `/${BUCKET}/after-guest`, {}, Buffer.alloc(0)));
      if (
        gput === null ||
        gget === null ||
        statusOf(gput) !== 200 ||
        statusOf(gget) !== 200 ||
        !bodyOf(gget).equals(small)
      ) {
        throw this.finding("after the epoch, a PUT and GET over the guest's wire did not give the object back");
      }
    }
    // Books: abort every upload seen, delete every object; nothing may be left counted.
    const store = ep.store;
    for (const id of this.#known.uploads) {
      for (const key of [...this.#known.keys, ...this.#flowKeys]) await store.abort(id, key);
    }
    for (;;) {
      const page = store.list({ prefix: '', delimiter: '', maxKeys: 1000, after: '' });
      if (page.contents.length === 0) break;
      for (const o of page.contents) await store.delete(o.key);
    }
    if (store.count !== 0) throw this.finding(`the store counts ${store.count} objects after every one was deleted`);
    // Uploads the fuzz could not see (ids it never got back) keep their parts: their bytes are accounted as parts.
    if (store.used < 0) throw this.finding(`the store's byte count went negative (${store.used})`);
    if (this.#known.uploads.size === 0 && store.used !== 0 && !this.#signed) {
      // Only checked when no upload is open: an upload's parts are in `used`.
      throw this.finding(`the store counts ${store.used} bytes with no object and no upload`);
    }
  }

  #count(status: number): void {
    const c = Math.floor(status / 100);
    if (c >= 0 && c < this.stats.byClass.length) this.stats.byClass[c]!++;
  }

  /** Any UploadId in an answer is remembered (the books need every upload aborted). */
  #remember(body: Buffer): void {
    const m = /<UploadId>([0-9a-f]+)<\/UploadId>/.exec(body.toString('latin1'));
    if (m) this.#known.uploads.add(m[1]!);
  }

  /**
   * Over the host listener with Node's client; resolves with the answer, or status 0 when the client refused
   * or the server closed. `fresh`: a connection of its own (a kept-alive one the server is closing as it is
   * reused fails on the client's side, which is no answer to check).
   */
  #send(r: Req, fresh = false): Promise<Reply> {
    this.note(`host ${r.what} body ${r.body.length}${r.complete ? '' : ' (cut)'}`);
    return new Promise((resolve, reject) => {
      let req: http.ClientRequest;
      const timer = setTimeout(
        () => {
          req?.destroy();
          if (r.complete) reject(this.finding(`no answer in ${ANSWER_MS} ms to ${r.what}`));
          else resolve({ status: 0, body: Buffer.alloc(0), headers: {} });
        },
        r.complete ? ANSWER_MS : 300,
      );
      const done = (v: Reply): void => {
        clearTimeout(timer);
        resolve(v);
      };
      try {
        const headers = { ...r.headers, ...(r.complete ? {} : { 'content-length': String(r.body.length + 10) }) };
        req = http.request(
          {
            host: '127.0.0.1',
            port: this.#port,
            method: r.method,
            path: r.path,
            headers,
            agent: fresh ? false : this.#agent!,
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }),
            );
            res.on('error', () => done({ status: 0, body: Buffer.alloc(0), headers: {} }));
          },
        );
      } catch {
        done({ status: 0, body: Buffer.alloc(0), headers: {} }); // Node's client refuses the method or a header
        return;
      }
      req.on('error', () => done({ status: 0, body: Buffer.alloc(0), headers: {} }));
      req.end(r.body);
    });
  }

  async #hostRequest(r: Req): Promise<void> {
    this.stats.host++;
    const reply = await this.#send(r);
    this.#check(reply.status, reply.body, r);
  }

  #check(status: number, body: Buffer, r: Req): void {
    this.#count(status);
    this.#remember(body);
    if (status === 500) throw this.finding(`500 for ${r.what}: ${body.toString('utf8').slice(0, 300)}`);
    // Every XML answer is well formed (another parser's word: ours wrote it).
    if (body.length > 0 && body.subarray(0, 5).toString('latin1') === '<?xml') {
      // (Control characters from a client's key or path are written as they are, as S3 does: not checked here.)
      // Up to 256 KiB: validating a 6 MiB answer makes garbage whose collection later would count as our turn.
      const v =
        body.length > 256 * 1024 ? true : this.#watch.untimed(() => XMLValidator.validate(body.toString('utf8')));
      if (v !== true) throw this.finding(`a malformed XML answer to ${r.what}: ${JSON.stringify(v).slice(0, 200)}`);
      // A DeleteObjects answer lists each key it was sent, in order.
      const sent = r.deleteKeys;
      if (sent && status === 200) {
        const bad = this.#watch.untimed(() => {
          const esc = xmlEscapeOut(sent.stem);
          let n = 0;
          for (const m of body.toString('utf8').matchAll(/<Key>([^<]*)<\/Key>/g))
            if (m[1] !== `${esc}${n++}`) return true;
          return n !== sent.count;
        });
        if (bad) throw this.finding(`DeleteObjects did not answer the ${sent.count} keys it was sent, in order`);
      }
    }
  }

  /** A good flow: PUT then GET it back; or a multipart upload completed and read back; or a DeleteObjects that deletes. */
  async #flow(): Promise<void> {
    if (this.#signed) return this.#hostRequest(this.#requests.request());
    this.stats.flows++;
    const rnd = this.#rnd;
    const key = `flow-${this.stats.flows}`; // its own keys: flows run side by side
    const req = (
      method: string,
      path: string,
      body: Buffer = Buffer.alloc(0),
      headers: Record<string, string> = {},
    ): Promise<Reply> =>
      this.#send({ method, path, headers, body, complete: true, what: `flow ${method} ${path}` }, true);
    switch (rnd.below(3)) {
      case 0: {
        const data = this.#watch.untimed(() => rnd.bytes(rnd.below(300_000)));
        const put = await req('PUT', `/${BUCKET}/${key}`, data, {
          'content-md5': this.#watch.untimed(() => b64(data, 'md5')),
        });
        this.#check(put.status, put.body, { what: 'flow PUT' } as Req);
        if (put.status !== 200) return; // the store may be full, or the key being replaced
        const get = await req('GET', `/${BUCKET}/${key}`);
        if (
          get.status === 200 &&
          !this.#watch.untimed(() => get.body.equals(data)) &&
          !this.#known.keys.includes(key)
        ) {
          throw this.finding(`GET ${key} gave ${get.body.length} bytes back for the ${data.length} stored`);
        }
        return;
      }
      case 1: {
        const created = await req('POST', `/${BUCKET}/${key}-mp?uploads`);
        this.#check(created.status, created.body, { what: 'flow create' } as Req);
        const id = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body.toString())?.[1];
        if (!id) return;
        this.#flowKeys.push(`${key}-mp`); // not among the keys random requests pick: this flow checks what it reads
        const parts: Buffer[] = [];
        const etags: string[] = [];
        for (let n = 1; n <= 1 + rnd.below(3); n++) {
          const data = this.#watch.untimed(() => rnd.bytes(1 + rnd.below(200_000)));
          const up = await req('PUT', `/${BUCKET}/${key}-mp?partNumber=${n}&uploadId=${id}`, data);
          this.#check(up.status, up.body, { what: 'flow part' } as Req);
          if (up.status !== 200) return;
          parts.push(data);
          etags.push(up.headers.etag!);
        }
        const xml = Buffer.from(
          `<CompleteMultipartUpload>${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e}</ETag></Part>`).join('')}</CompleteMultipartUpload>`,
        );
        const done = await req('POST', `/${BUCKET}/${key}-mp?uploadId=${id}`, xml);
        this.#check(done.status, done.body, { what: 'flow complete' } as Req);
        if (done.status !== 200) return;
        this.#known.uploads.delete(id);
        const get = await req('GET', `/${BUCKET}/${key}-mp`);
        if (get.status === 200 && !this.#watch.untimed(() => get.body.equals(Buffer.concat(parts))))
          throw this.finding(`a completed upload read back ${get.body.length} bytes, not the ${parts.length} parts`);
        return;
      }
      default: {
        const keys = Array.from({ length: 1 + rnd.below(30) }, (_, i) => `${key}-d${i}`);
        for (const k of keys.slice(0, 3)) await req('PUT', `/${BUCKET}/${k}`, Buffer.from(k));
        const del = await req(
          'POST',
          `/${BUCKET}?delete`,
          Buffer.from(`<Delete>${keys.map((k) => `<Object><Key>${k}</Key></Object>`).join('')}</Delete>`),
        );
        this.#check(del.status, del.body, { what: 'flow delete' } as Req);
        if (del.status === 200 && (del.body.toString().match(/<Deleted>/g) ?? []).length !== keys.length)
          throw this.finding('DeleteObjects did not report every key deleted');
        for (const k of keys.slice(0, 3))
          if (this.#ep!.store.get(k)) throw this.finding(`${k} is still there after DeleteObjects`);
      }
    }
  }

  /** Bytes on a raw socket to the host listener: not HTTP, or HTTP gone wrong. */
  async #rawHost(): Promise<void> {
    this.stats.raw++;
    const rnd = this.#rnd;
    const payload = this.#watch.untimed(() =>
      rnd.pick([
        () => rnd.bytes(rnd.below(2000)),
        () => Buffer.from(`GET /${BUCKET} HTTP/1.1\r\nHost: x\r\n${'X-A: b\r\n'.repeat(rnd.below(3000))}\r\n`),
        () =>
          Buffer.from(
            `PUT /${BUCKET}/raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${rnd.pick(['zz\r\n', '5\r\nabc', 'ffffffffff\r\n'])}`,
          ),
        () => Buffer.from(`GET /${BUCKET}?${'a=b&'.repeat(rnd.below(5000))} HTTP/1.1\r\nHost: x\r\n\r\n`),
        () => Buffer.from(`${rnd.pick(['GET', 'PUT', '\u0000'])} ${'/'.repeat(rnd.below(20_000))} HTTP/1.1\r\n\r\n`),
        () => Buffer.from(`POST /${BUCKET}?delete HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n<Delete>`),
      ])(),
    );
    this.note(`raw host ${payload.length} bytes`);
    await new Promise<void>((resolve) => {
      const s = net.connect(this.#port, '127.0.0.1');
      const t = setTimeout(() => s.destroy(), 400);
      s.on('error', () => undefined);
      s.on('data', (d: Buffer) => {
        if (/^HTTP\/1\.1 500/.test(d.toString('latin1')))
          this.#escapes.seen.push(`500 to raw bytes: ${d.toString('latin1', 0, 200)}`);
      });
      s.on('close', () => {
        clearTimeout(t);
        resolve();
      });
      s.end(payload);
    });
  }

  /** One request over the guest's wire, Connection: close; the whole answer, or null when none came within `ms`. */
  async #guestExchange(request: Buffer, ms = ANSWER_MS): Promise<Buffer | null> {
    const sport = this.#sport;
    this.#sport = this.#sport >= 60_000 ? 20_000 : this.#sport + 1;
    const g = new GuestTcp((f) => this.#ep!.claimTx(f), sport, S3_DEFAULTS.port, this.#rnd.next());
    this.#guests.push(g);
    try {
      g.connect();
      await g.write(request);
      try {
        await g.until(() => g.finReceived, ms);
      } catch {
        return null;
      }
      return Buffer.concat(g.received);
    } finally {
      g.close();
      this.#guests.splice(this.#guests.indexOf(g), 1);
    }
  }

  async #guestRequest(r: Req): Promise<void> {
    this.stats.guest++;
    this.note(`guest ${r.what} body ${r.body.length}${r.complete ? '' : ' (cut)'}`);
    const raw = this.#watch.untimed(() => rawRequest(r.method, r.path, r.headers, r.body, !r.complete));
    const answer = await this.#guestExchange(raw, r.complete ? ANSWER_MS : 300);
    if (answer === null) {
      if (r.complete) throw this.finding(`no answer over the guest's wire to ${r.what}`);
      return;
    }
    this.#check(statusOf(answer), bodyOf(answer), r);
  }

  /** Bytes over the guest's wire that are not a request. */
  async #guestRaw(): Promise<void> {
    this.stats.raw++;
    const junk = this.#rnd.bytes(this.#rnd.below(3000));
    this.note(`raw guest ${junk.length} bytes`);
    const answer = await this.#guestExchange(junk, 300);
    if (answer && statusOf(answer) === 500) throw this.finding("500 to raw bytes over the guest's wire");
  }
}

/** How the store writes a key in XML (its five escapes and CR). */
function xmlEscapeOut(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;')
    .replace(/\r/g, '&#xD;');
}

/** An HTTP/1.1 request as bytes, Connection: close (`short`: Content-Length 10 more than sent). */
function rawRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  short = false,
): Buffer {
  const lines = [
    `${method} ${path} HTTP/1.1`,
    'Host: 192.168.200.1:9000',
    'Connection: close',
    `Content-Length: ${body.length + (short ? 10 : 0)}`,
  ];
  for (const [k, v] of Object.entries(headers)) if (!/[\r\n]/.test(k + v)) lines.push(`${k}: ${v}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

function statusOf(answer: Buffer): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer.toString('latin1', 0, 16))?.[1] ?? 0);
}

function bodyOf(answer: Buffer): Buffer {
  const at = answer.indexOf('\r\n\r\n');
  return at < 0 ? Buffer.alloc(0) : answer.subarray(at + 4);
}

function summary(s: S3FuzzStats): string {
  const [, , c2, c3, c4, c5] = s.byClass;
  return (
    `${s.epochs} epochs, ${s.host} host requests, ${s.guest} over the guest's wire, ${s.raw} raw, ${s.flows} good flows; ` +
    `answers 2xx ${c2} 3xx ${c3} 4xx ${c4} 5xx ${c5}; longest turn ${s.maxCpuTurnMs.toFixed(1)} ms of CPU`
  );
}

registerTarget({
  name: 's3',
  describe:
    "HTTP to the S3 store: host listener and the guest's TCP wire; random, mutated and good requests, XML bodies, big bodies",
  async run(o) {
    const f = new S3Fuzzer(o);
    return summary(await f.run());
  },
});
