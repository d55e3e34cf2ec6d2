// The streaming frame parser: the same bytes split at every offset, frames
// straddling chunks, views versus copies, holding and resuming, the size
// check before any payload is buffered, and errors that stop it for good.

import { expect } from 'chai';
import { encodeFrameHeader } from '../../lib/mesh/codec';
import { MeshError } from '../../lib/mesh/errors';
import { FrameParser, IN_PLACE_MIN, PLACE_HEAD } from '../../lib/mesh/frame-parser';
import { MAX_FRAME_PAYLOAD } from '../../lib/mesh/limits';
import { FrameHeader, MsgType } from '../../lib/mesh/messages';
import { Be } from './helpers';

function frame(type: number, body: Buffer, seq = 1): Buffer {
  return Buffer.concat([encodeFrameHeader({ type, length: body.length, seq, src: 1, dst: 2 }), body]);
}

class Sink {
  readonly got: { header: FrameHeader; body: Buffer; bodyRef: Buffer }[] = [];
  errors: MeshError[] = [];
  accept = true;
  onFrame(header: FrameHeader, body: Buffer): boolean {
    if (!this.accept) return false;
    this.got.push({ header, body: Buffer.from(body), bodyRef: body });
    return true;
  }
  onError(e: MeshError): void {
    this.errors.push(e);
  }
}

function parserWith(sink: Sink, backlog?: number): FrameParser {
  return new FrameParser({ onFrame: (h, b) => sink.onFrame(h, b), onError: (e) => sink.onError(e) }, backlog);
}

describe('mesh: frame parser', () => {
  const a = frame(MsgType.DATA, Buffer.from('hello, mesh'), 1);
  const b = frame(MsgType.HEARTBEAT, Buffer.alloc(0), 2);
  const c = frame(MsgType.DATA, Buffer.alloc(300, 7), 3);
  const stream = Buffer.concat([a, b, c]);

  it('parses the same stream split at every offset into the same frames', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const sink = new Sink();
      const p = parserWith(sink);
      p.push(stream.subarray(0, cut));
      p.push(stream.subarray(cut));
      expect(sink.errors, `cut ${cut}`).to.deep.equal([]);
      expect(
        sink.got.map((g) => [g.header.seq, g.body.length]),
        `cut ${cut}`,
      ).to.deep.equal([
        [1, 11],
        [2, 0],
        [3, 300],
      ]);
      expect(sink.got[0]!.body.toString()).to.equal('hello, mesh');
      expect(p.bufferedBytes).to.equal(0);
    }
  });

  it('parses a stream fed one byte at a time', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    for (let i = 0; i < stream.length; i++) p.push(stream.subarray(i, i + 1));
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([1, 2, 3]);
    expect(p.frames).to.equal(3);
  });

  it('hands out a view when a frame lies in one chunk, and one copy when it spans chunks', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    p.push(stream);
    expect(sink.got[0]!.bodyRef.buffer).to.equal(stream.buffer);
    const split = parserWith(sink);
    split.push(c.subarray(0, 100));
    split.push(c.subarray(100));
    const last = sink.got[sink.got.length - 1]!;
    expect(last.bodyRef.buffer).to.not.equal(c.buffer);
    expect(last.bodyRef.length).to.equal(300);
  });

  it('refuses an oversized frame from its header, before any payload arrives', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    p.push(encodeFrameHeader({ type: MsgType.IONIC, length: MAX_FRAME_PAYLOAD + 1, seq: 1, src: 1, dst: 2 }));
    expect(sink.errors.map((e) => e.code)).to.deep.equal(['FRAME_TOO_LARGE']);
    expect(p.stopped).to.equal(true);
    expect(p.bufferedBytes).to.equal(0);
  });

  it('stops for good at bad magic, reporting once', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    const broken = Buffer.from(b);
    broken[0] = 0x00;
    p.push(Buffer.concat([a, broken, c]));
    p.push(a);
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([1]);
    expect(sink.errors.map((e) => e.code)).to.deep.equal(['BAD_MAGIC']);
  });

  it('stops at a header split across chunks that turns out bad', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    const h = new Be().u32(0x52444d41).u32(77).u32(0).zeros(20).build();
    p.push(h.subarray(0, 10));
    expect(sink.errors).to.deep.equal([]);
    p.push(h.subarray(10));
    expect(sink.errors.map((e) => e.code)).to.deep.equal(['UNKNOWN_TYPE']);
  });

  it('holds a refused frame, keeps later chunks, and resumes in order', () => {
    const sink = new Sink();
    const p = parserWith(sink);
    sink.accept = false;
    p.push(Buffer.concat([a, b.subarray(0, 5)]));
    expect(p.held).to.equal(true);
    p.push(b.subarray(5));
    p.push(c);
    expect(sink.got).to.deep.equal([]);
    p.resume();
    expect(p.held).to.equal(true);
    sink.accept = true;
    p.resume();
    expect(p.held).to.equal(false);
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([1, 2, 3]);
  });

  it('transient chunks (a socket reading into one reused buffer): bodies, a held tail and the backlog survive the reuse', () => {
    const sink = new Sink();
    const p = new FrameParser(
      { onFrame: (h, b) => sink.onFrame(h, b), onError: (e) => sink.onError(e) },
      undefined,
      true,
    );
    const reused = Buffer.alloc(4096);
    const feed = (bytes: Buffer): void => {
      bytes.copy(reused);
      p.push(reused.subarray(0, bytes.length));
      reused.fill(0xee); // the socket reads the next bytes into the same buffer
    };
    sink.accept = false;
    feed(Buffer.concat([a, b.subarray(0, 5)])); // a is held; b's first 5 bytes are the held chunk's tail
    feed(b.subarray(5));
    feed(c);
    sink.accept = true;
    p.resume();
    expect(sink.errors).to.deep.equal([]);
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([1, 2, 3]);
    expect(sink.got.map((g) => g.bodyRef.equals(g.body))).to.deep.equal([true, true, true]);
    expect(sink.got[0]!.body.toString()).to.equal('hello, mesh');
    expect(sink.got[2]!.body.equals(Buffer.alloc(300, 7))).to.equal(true);
    // A frame inside one chunk is copied out too, not a view of the reused buffer.
    expect(sink.got[0]!.bodyRef.buffer).to.not.equal(reused.buffer);
  });

  it('reads the rest of a large body in place: the target is the unfilled body, and the frame is whole after the last in-place read', () => {
    const sink = new Sink();
    const p = new FrameParser(
      { onFrame: (h, body) => sink.onFrame(h, body), onError: (e) => sink.onError(e) },
      undefined,
      true,
    );
    const body = Buffer.alloc(3 * IN_PLACE_MIN);
    for (let i = 0; i < body.length; i++) body[i] = (i * 13) & 0xff;
    const big = frame(MsgType.DATA, body, 4);
    const small = frame(MsgType.DATA, Buffer.from('after'), 5);
    expect(p.inPlaceTarget(), 'no body under way').to.equal(null);
    // The header and the first 1000 body bytes arrive in the reused buffer.
    p.push(Buffer.from(big.subarray(0, 32 + 1000)));
    let at = 32 + 1000;
    let reads = 0;
    for (let t = p.inPlaceTarget(); t; t = p.inPlaceTarget()) {
      const n = Math.min(t.length, 70_000); // a short read
      big.copy(t, 0, at, at + n);
      at += n;
      reads++;
      p.filledInPlace(n);
    }
    // The tail too (3 x 64 KiB - 1000 in reads of 70,000: the last one 55,608 bytes): the frame ends in place.
    expect(reads).to.equal(3);
    expect(at).to.equal(big.length);
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([4]);
    expect(sink.got[0]!.body.equals(body)).to.equal(true);
    // So the next read takes just a head (header + what placement needs), not a whole read buffer.
    expect(p.headReadLimit()).to.equal(32 + PLACE_HEAD);
    p.push(Buffer.from(small));
    expect(sink.errors).to.deep.equal([]);
    expect(sink.got.map((g) => g.header.seq)).to.deep.equal([4, 5]);
    expect(sink.got[1]!.body.toString()).to.equal('after');
    // A small frame lifts the limit.
    expect(p.headReadLimit()).to.equal(0);
  });

  it('limits the next read to a head only at a clean boundary after a frame read in place; a body under IN_PLACE_MIN is never read in place', () => {
    const sink = new Sink();
    const p = new FrameParser(
      { onFrame: (h, body) => sink.onFrame(h, body), onError: (e) => sink.onError(e) },
      undefined,
      true,
    );
    expect(p.headReadLimit(), 'nothing read in place yet').to.equal(0);
    const mid = frame(MsgType.DATA, Buffer.alloc(IN_PLACE_MIN - 1, 3), 1);
    p.push(Buffer.from(mid.subarray(0, 100)));
    expect(p.inPlaceTarget(), 'under IN_PLACE_MIN').to.equal(null);
    p.push(Buffer.from(mid.subarray(100)));
    expect(sink.got).to.have.length(1);
    expect(p.headReadLimit()).to.equal(0);
    const big = frame(MsgType.DATA, Buffer.alloc(IN_PLACE_MIN, 4), 2);
    p.push(Buffer.from(big.subarray(0, 40)));
    const t = p.inPlaceTarget()!;
    expect(t.length).to.equal(IN_PLACE_MIN - 8);
    big.copy(t, 0, 40);
    // Held: no limit while the frame waits (the parser is not at a boundary).
    sink.accept = false;
    p.filledInPlace(t.length);
    expect(p.held).to.equal(true);
    expect(p.headReadLimit()).to.equal(0);
    sink.accept = true;
    p.resume();
    expect(sink.got).to.have.length(2);
    // Delivered on resume, not by the read in place: no limit either (the next read may bring anything).
    expect(p.headReadLimit()).to.equal(0);
    // A frame that ends in place, then half a header in the reused buffer: no limit until the header is whole.
    p.push(Buffer.from(big.subarray(0, 40)));
    p.filledInPlace(p.inPlaceTarget()!.length);
    expect(sink.got).to.have.length(3);
    expect(p.headReadLimit()).to.equal(32 + PLACE_HEAD);
    p.push(Buffer.from(big.subarray(0, 10)));
    expect(p.headReadLimit()).to.equal(0);
    expect(sink.errors).to.deep.equal([]);
  });

  it('a body completed in place is delivered at once; a refused one is held, and nothing is read in place meanwhile', () => {
    const sink = new Sink();
    const p = new FrameParser(
      { onFrame: (h, body) => sink.onFrame(h, body), onError: (e) => sink.onError(e) },
      undefined,
      true,
    );
    const body = Buffer.alloc(2 * IN_PLACE_MIN, 9);
    const big = frame(MsgType.DATA, body, 6);
    p.push(Buffer.from(big.subarray(0, 40)));
    const t = p.inPlaceTarget()!;
    expect(t.length).to.equal(body.length - 8);
    big.copy(t, 0, 40);
    sink.accept = false;
    p.filledInPlace(t.length);
    expect(p.held).to.equal(true);
    expect(p.inPlaceTarget()).to.equal(null);
    sink.accept = true;
    p.resume();
    expect(sink.got).to.have.length(1);
    expect(sink.got[0]!.body.equals(body)).to.equal(true);
    // A read past the body's end cannot be reported: the parser stops.
    p.push(Buffer.from(big.subarray(0, 40)));
    p.filledInPlace(body.length);
    expect(sink.errors.map((e) => e.code)).to.deep.equal(['OVERFLOW']);
  });

  it('places a large body where the sink says once its head is in: chunks and in-place reads land in the views, the frame arrives with its head', () => {
    const rest = 2 * IN_PLACE_MIN + 1000;
    const body = Buffer.alloc(PLACE_HEAD + rest);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7 + 1) & 0xff;
    const big = frame(MsgType.DATA, body, 8);
    const views = [Buffer.alloc(70_000), Buffer.alloc(rest - 70_000)];
    const got: { head: Buffer; placed: number }[] = [];
    let done = 0;
    let asked = 0;
    const p = new FrameParser(
      {
        onFrame: (_h, b, placed) => {
          got.push({ head: Buffer.from(b), placed });
          return true;
        },
        onError: (e) => {
          throw new Error(e.detail);
        },
        place: (h, head) => {
          asked++;
          expect(h.length).to.equal(body.length);
          expect(head.equals(body.subarray(0, PLACE_HEAD))).to.equal(true);
          return {
            views,
            done: () => {
              done++;
            },
          };
        },
      },
      undefined,
      true,
    );
    // The header and 100 body bytes, in two pieces (the head completes inside the second).
    p.push(Buffer.from(big.subarray(0, 50)));
    expect(p.inPlaceTarget(), 'no target while the head is gathered').to.equal(null);
    p.push(Buffer.from(big.subarray(50, 32 + 100)));
    expect(asked).to.equal(1);
    let at = 32 + 100;
    for (let t = p.inPlaceTarget(); t; t = p.inPlaceTarget()) {
      const n = Math.min(t.length, 50_000);
      big.copy(t, 0, at, at + n);
      at += n;
      p.filledInPlace(n);
    }
    p.push(Buffer.from(big.subarray(at)));
    expect(got).to.have.length(1);
    expect(got[0]!.placed).to.equal(rest);
    expect(got[0]!.head.equals(body.subarray(0, PLACE_HEAD))).to.equal(true);
    expect(Buffer.concat(views).equals(body.subarray(PLACE_HEAD))).to.equal(true);
    expect(done, 'the placement is given back once').to.equal(1);
  });

  it('a refused placement buffers the body whole; a parser destroyed mid-frame gives its placement back', () => {
    const rest = IN_PLACE_MIN + 10;
    const body = Buffer.alloc(PLACE_HEAD + rest, 3);
    const big = frame(MsgType.DATA, body, 9);
    const sink = new Sink();
    const p1 = new FrameParser(
      { onFrame: (h, b) => sink.onFrame(h, b), onError: (e) => sink.onError(e), place: () => null },
      undefined,
      true,
    );
    p1.push(Buffer.from(big.subarray(0, 200)));
    p1.push(Buffer.from(big.subarray(200)));
    expect(sink.got).to.have.length(1);
    expect(sink.got[0]!.body.equals(body)).to.equal(true);
    let done = 0;
    const p2 = new FrameParser(
      {
        onFrame: () => true,
        onError: () => undefined,
        place: () => ({
          views: [Buffer.alloc(rest)],
          done: () => {
            done++;
          },
        }),
      },
      undefined,
      true,
    );
    p2.push(Buffer.from(big.subarray(0, 500)));
    p2.destroy();
    expect(done).to.equal(1);
    // Views that do not add up to the rest are not used.
    let done3 = 0;
    const sink3 = new Sink();
    const p3 = new FrameParser(
      {
        onFrame: (h, b) => sink3.onFrame(h, b),
        onError: (e) => sink3.onError(e),
        place: () => ({
          views: [Buffer.alloc(rest - 1)],
          done: () => {
            done3++;
          },
        }),
      },
      undefined,
      true,
    );
    p3.push(Buffer.from(big.subarray(0, 500)));
    p3.push(Buffer.from(big.subarray(500)));
    expect(done3).to.equal(1);
    expect(sink3.got[0]!.body.equals(body)).to.equal(true);
  });

  it('fails when a held parser keeps receiving past its backlog bound', () => {
    const sink = new Sink();
    const p = parserWith(sink, 1000);
    sink.accept = false;
    p.push(a);
    p.push(Buffer.alloc(600));
    expect(sink.errors).to.deep.equal([]);
    p.push(Buffer.alloc(600));
    expect(sink.errors.map((e) => e.code)).to.deep.equal(['OVERFLOW']);
  });

  it('stops delivering once destroyed from inside onFrame', () => {
    const got: number[] = [];
    const p: FrameParser = new FrameParser({
      onFrame: (h) => {
        got.push(h.seq);
        p.destroy();
        return true;
      },
      onError: () => undefined,
    });
    p.push(stream);
    expect(got).to.deep.equal([1]);
    expect(p.stopped).to.equal(true);
  });
});
