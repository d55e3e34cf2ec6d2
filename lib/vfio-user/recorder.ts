// Recording proxy: sits between a vfio-user client and a server, forwards
// bytes and fds exactly, and writes each message to a capture (FORMAT.md).
//
// Each direction reads at most up to the end of the current message (header
// first, then exactly the body), so the fds of one recvmsg always belong to
// the message being read, and every chunk is passed on in one sendmsg with the
// same fds: a receiver that collects fds at its header read (QEMU) sees them
// exactly where the sender put them. Our copies of the fds are closed once
// forwarded. A header whose msg_size is below 16 or above 64 MiB turns that
// direction to raw mode: chunks are forwarded and recorded as they come.

import * as fs from 'fs';
import { commandName, HeaderFlag } from '../../protocol/constants';
import { getField, vfio_user_header } from '../../protocol/layouts';
import { HEADER_SIZE } from '../../protocol/limits';
import { Logger, nullLogger } from '../log';
import * as native from '../native';
import { CaptureWriter, describeFd, PacketComment, CapturedFd } from './pcapng';
import { formatCaptureLine } from './capture-text';
import { prepareSocketPath } from './server';

const RAW_LIMIT = 64 << 20;

interface RecorderOptions {
  readonly listenPath: string;
  readonly connectPath: string;
  readonly outPath: string;
  /** Stop after the first connection ends. */
  readonly once?: boolean;
  readonly log?: Logger;
}

function nowUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** One direction of one connection. */
class Pipe {
  #buf = Buffer.alloc(64 * 1024);
  #have = 0;
  #need = HEADER_SIZE;
  #inBody = false;
  #raw = false;
  #fds: CapturedFd[] = [];
  /** Chunks the destination could not take yet (each with the fds of its first byte). */
  readonly pending: { data: Buffer; fds: number[] }[] = [];
  ended = false;
  readonly #fdsOut = new Int32Array(native.FDS_OUT_LENGTH);

  constructor(
    readonly src: number,
    readonly dst: number,
    readonly dir: 'c2s' | 's2c',
    readonly conn: number,
    readonly rec: Recorder,
    readonly onEnd: (why: string) => void,
  ) {}

  /** Read while the destination keeps up; stop at EAGAIN or when output is queued. */
  pump(): void {
    while (!this.ended && this.pending.length === 0) {
      if (this.#buf.length < this.#need) {
        const next = Buffer.alloc(this.#need);
        this.#buf.copy(next, 0, 0, this.#have);
        this.#buf = next;
      }
      const want = this.#raw ? this.#buf.length : this.#need - this.#have;
      const at = this.#raw ? 0 : this.#have;
      let n: number;
      try {
        n = native.recvmsg(this.src, this.#buf, at, want, this.#fdsOut);
      } catch (e) {
        this.#finish(`read error: ${(e as Error).message}`);
        return;
      }
      if (n < 0) return;
      if (n === 0) {
        this.#finish('EOF');
        return;
      }
      const fds: number[] = [];
      for (let k = 1; k <= this.#fdsOut[0]!; k++) fds.push(this.#fdsOut[k]!);
      for (const fd of fds) this.#fds.push(describeFd(fd));
      const t = nowUs();
      if (this.#raw) {
        this.rec.record(this.#comment('RAW', null, n, { raw: true }), this.#buf.subarray(0, n), t);
        this.#fds = [];
        this.#forward(at, n, fds);
        continue;
      }
      this.#have += n;
      const complete = this.#advance();
      // Record before passing the last byte on (FORMAT.md: a reply always follows its request).
      if (complete) this.rec.record(this.#messageComment(), this.#buf.subarray(0, this.#have), t);
      this.#forward(at, n, fds);
      if (complete) {
        this.#have = 0;
        this.#need = HEADER_SIZE;
        this.#inBody = false;
        this.#fds = [];
      }
    }
  }

  /** After a read: move from header to body; true when a whole message is buffered. */
  #advance(): boolean {
    if (!this.#inBody && this.#have >= HEADER_SIZE) {
      const size = getField(this.#buf, 0, vfio_user_header.msg_size);
      if (size < HEADER_SIZE || size > RAW_LIMIT) {
        this.rec.record(
          this.#comment('RAW', null, this.#have, { raw: true }),
          this.#buf.subarray(0, this.#have),
          nowUs(),
        );
        this.#raw = true;
        this.#have = 0;
        return false;
      }
      this.#inBody = true;
      this.#need = size;
    }
    return this.#inBody && this.#have === this.#need;
  }

  #forward(at: number, n: number, fds: number[]): void {
    this.pending.push({ data: Buffer.from(this.#buf.subarray(at, at + n)), fds });
    this.flush();
  }

  /** Send queued chunks; each chunk's fds ride on its first byte, then our copies are closed. */
  flush(): void {
    while (this.pending.length > 0) {
      const head = this.pending[0]!;
      let sent: number;
      try {
        sent = native.sendmsg(this.dst, head.data, 0, head.data.length, head.fds.length ? head.fds : null);
      } catch (e) {
        this.#finish(`write error: ${(e as Error).message}`);
        return;
      }
      if (sent < 0) return;
      for (const fd of head.fds) {
        try {
          fs.closeSync(fd);
        } catch {
          /* already closed */
        }
      }
      if (sent === head.data.length) this.pending.shift();
      else {
        this.pending[0] = { data: head.data.subarray(sent), fds: [] };
        return;
      }
    }
  }

  /** Close fds of chunks never sent. */
  drop(): void {
    for (const p of this.pending)
      for (const fd of p.fds) {
        try {
          fs.closeSync(fd);
        } catch {
          /* closed */
        }
      }
    this.pending.length = 0;
  }

  #messageComment(): PacketComment {
    const b = this.#buf;
    const flags = getField(b, 0, vfio_user_header.flags);
    const cmd = getField(b, 0, vfio_user_header.command);
    return {
      dir: this.dir,
      conn: this.conn,
      id: getField(b, 0, vfio_user_header.msg_id),
      cmd,
      name: commandName(cmd),
      type: (flags & HeaderFlag.TYPE_MASK) === HeaderFlag.TYPE_REPLY ? 'reply' : 'command',
      size: this.#need,
      flags,
      error: getField(b, 0, vfio_user_header.error),
      fds: this.#fds,
    };
  }

  #comment(name: string, cmd: number | null, size: number, extra: { raw?: true; incomplete?: true }): PacketComment {
    const b = this.#buf;
    const haveHeader = this.#have >= HEADER_SIZE && !extra.raw;
    return {
      dir: this.dir,
      conn: this.conn,
      id: haveHeader ? getField(b, 0, vfio_user_header.msg_id) : 0,
      cmd,
      name,
      type: 'command',
      size,
      flags: haveHeader ? getField(b, 0, vfio_user_header.flags) : 0,
      error: 0,
      fds: this.#fds,
      ...extra,
    };
  }

  #finish(why: string): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.#raw && this.#have > 0) {
      const cmd =
        this.#have >= vfio_user_header.command.off + vfio_user_header.command.size
          ? getField(this.#buf, 0, vfio_user_header.command)
          : null;
      this.rec.record(
        this.#comment(cmd === null ? 'RAW' : commandName(cmd), cmd, this.#have, { incomplete: true }),
        this.#buf.subarray(0, this.#have),
        nowUs(),
      );
    }
    this.onEnd(why);
  }
}

export class Recorder {
  readonly #opts: RecorderOptions;
  readonly #log: Logger;
  readonly #writer: CaptureWriter;
  readonly #text: number;
  readonly #t0 = nowUs();
  #listenFd = -1;
  #watcher: native.Watcher | null = null;
  #conns = 0;
  #messages = 0;
  #done: (() => void) | null = null;

  constructor(opts: RecorderOptions) {
    this.#opts = opts;
    this.#log = opts.log ?? nullLogger;
    this.#writer = new CaptureWriter(opts.outPath, `vfio-user ${opts.listenPath} -> ${opts.connectPath}`);
    this.#text = fs.openSync(opts.outPath.replace(/\.pcapng$/, '') + '.txt', 'w');
    fs.writeSync(
      this.#text,
      `# ernic-vfu record listen=${opts.listenPath} connect=${opts.connectPath} started ${new Date().toISOString()}; time = seconds since start\n`,
    );
  }

  get messages(): number {
    return this.#messages;
  }

  async listen(): Promise<void> {
    await prepareSocketPath(this.#opts.listenPath);
    this.#listenFd = native.listen(this.#opts.listenPath, 4);
    const self = this;
    this.#watcher = native.watch(this.#listenFd, native.READABLE, function onRecorderAccept() {
      self.#accept();
    });
  }

  /** Resolves when recording stops (after the first connection with `once`). */
  finished(): Promise<void> {
    return new Promise((resolve) => {
      this.#done = resolve;
    });
  }

  record(comment: PacketComment, bytes: Buffer, t: number): void {
    this.#writer.writeMessage(comment, bytes, t);
    this.#messages++;
    fs.writeSync(
      this.#text,
      formatCaptureLine(
        this.#writer.packets - Math.max(1, Math.ceil(bytes.length / 65000)) + 1,
        (t - this.#t0) / 1e6,
        comment,
        bytes,
      ) + '\n',
    );
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = null;
    if (this.#listenFd >= 0) {
      try {
        fs.closeSync(this.#listenFd);
      } catch {
        /* closed */
      }
      this.#listenFd = -1;
      try {
        fs.unlinkSync(this.#opts.listenPath);
      } catch {
        /* gone */
      }
    }
    this.#writer.close();
    fs.closeSync(this.#text);
    this.#done?.();
  }

  #event(text: string): void {
    fs.writeSync(this.#text, `# ${((nowUs() - this.#t0) / 1e6).toFixed(6)} ${text}\n`);
    this.#log.info(`record: ${text}`);
  }

  #accept(): void {
    const client = native.accept(this.#listenFd);
    if (client < 0) return;
    let server: number;
    try {
      server = native.connect(this.#opts.connectPath);
    } catch (e) {
      this.#log.error(`record: cannot connect to ${this.#opts.connectPath}: ${(e as Error).message}`);
      fs.closeSync(client);
      return;
    }
    const n = this.#conns++;
    this.#event(`c${n} opened (client port ${40000 + n})`);
    let closed = false;
    const end = (dir: string, why: string): void => {
      if (closed) return;
      closed = true;
      this.#event(`c${n} ${dir} ended: ${why}`);
      // One side gone: the conversation is over. Pass on what is queued, then close both ends.
      c2s.flush();
      s2c.flush();
      c2s.ended = s2c.ended = true;
      c2s.drop();
      s2c.drop();
      wc.close();
      ws.close();
      try {
        fs.closeSync(client);
      } catch {
        /* closed */
      }
      try {
        fs.closeSync(server);
      } catch {
        /* closed */
      }
      this.#event(`c${n} closed`);
      if (this.#opts.once) this.close();
    };
    const c2s: Pipe = new Pipe(client, server, 'c2s', n, this, (why) => end('c2s', why));
    const s2c: Pipe = new Pipe(server, client, 's2c', n, this, (why) => end('s2c', why));
    // One watcher per socket serves both directions: reading for one pipe,
    // writing for the other pipe's queued output (libuv allows one poll per fd).
    const update = (): void => {
      if (closed) return;
      wc.update((c2s.pending.length ? 0 : native.READABLE) | (s2c.pending.length ? native.WRITABLE : 0));
      ws.update((s2c.pending.length ? 0 : native.READABLE) | (c2s.pending.length ? native.WRITABLE : 0));
    };
    const onReady =
      (mine: Pipe, other: Pipe) =>
      (status: number, events: number): void => {
        if (status < 0) {
          mine.onEnd(`poll error ${status}`);
          return;
        }
        if (events & native.WRITABLE) other.flush();
        if (events & (native.READABLE | native.DISCONNECT)) mine.pump();
        update();
      };
    const wc = native.watch(client, native.READABLE, onReady(c2s, s2c));
    const ws = native.watch(server, native.READABLE, onReady(s2c, c2s));
  }
}
