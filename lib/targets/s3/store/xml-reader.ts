// The S3 store's XML reader: a small strict reader written for the request
// bodies clients send (DeleteObjects, CompleteMultipartUpload), run in steps
// through the shared pacer: a client sizes them (1,000 keys of 1 KiB, 10,000
// parts), and fast-xml-parser took 0.1 to 0.5 s of one loop turn for a
// megabyte, holding every guest vCPU's MMIO read meanwhile.
//
// It takes a UTF-8 document, an optional XML declaration, elements with
// attributes (xmlns), character data with the five predefined entities and
// character references, CDATA, comments and processing instructions. A
// DOCTYPE is refused (no entity definitions at all). Every token is at most
// MAX_TOKEN bytes and nesting at most MAX_DEPTH; the schema handlers
// (xml-requests.ts) refuse a document as soon as it has more entries than S3
// allows, so no body costs more than a read of its bytes.

import type { Pacer } from '../../pace';
import { MAX_KEY_BYTES } from './objects';
import { paced, scratch } from './xml-shared';

/** Longest single token (a run of text, a tag, a comment). */
const MAX_TOKEN = 64 * 1024;
const MAX_DEPTH = 8;
/** Input bytes one step reads (well under a millisecond). */
const STEP_BYTES = 32 * 1024;
/** Bytes of one value kept at most (a key is at most 1,024 bytes: past this, no need to read on). */
const MAX_VALUE_BYTES = 4 * MAX_KEY_BYTES;

const LT = 0x3c;
const GT = 0x3e;
const SLASH = 0x2f;
const BANG = 0x21;
const QMARK = 0x3f;
const EQ = 0x3d;
const DQUOTE = 0x22;
const SQUOTE = 0x27;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

function isNameStart(b: number): boolean {
  return (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x5f || b === 0x3a;
}

function isNameChar(b: number): boolean {
  return isNameStart(b) || (b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x2e;
}

const CDATA_OPEN = Buffer.from('<![CDATA[');
const COMMENT_OPEN = Buffer.from('<!--');
const COMMENT_CLOSE = Buffer.from('-->');
const CDATA_CLOSE = Buffer.from(']]>');
const PI_CLOSE = Buffer.from('?>');

const AMP = 0x26;
const SEMI = 0x3b;
const CR = 0x0d;
const LF = 0x0a;

/** Where the last reference() ended (its ';'): kept here so no object is made per reference. */
let refEnd = 0;

/** The code point of the reference at v[amp] ('&', before `to`), its end in refEnd; -1 when it is not one XML allows. */
function reference(v: Buffer, amp: number, to: number): number {
  const lim = Math.min(to, amp + 12); // '&#x10FFFF;' is the longest
  let semi = amp + 1;
  while (semi < lim && v[semi] !== SEMI) semi++;
  if (semi >= lim) return -1;
  const n = semi - amp - 1;
  const c1 = v[amp + 1];
  if (c1 === 0x23) {
    // '#': a character reference
    let i = amp + 2;
    const hex = v[i] === 0x78;
    if (hex) i++;
    if (i >= semi) return -1;
    let cp = 0;
    for (; i < semi; i++) {
      const c = v[i]!;
      let d: number;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (hex && c >= 0x61 && c <= 0x66) d = c - 0x57;
      else if (hex && c >= 0x41 && c <= 0x46) d = c - 0x37;
      else return -1;
      cp = cp * (hex ? 16 : 10) + d;
      if (cp > 0x10ffff) return -1;
    }
    if (cp === 0 || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
    refEnd = semi;
    return cp;
  }
  const c2 = v[amp + 2];
  const c3 = v[amp + 3];
  const c4 = v[amp + 4];
  if (n === 2 && c2 === 0x74 && (c1 === 0x6c || c1 === 0x67)) {
    refEnd = semi;
    return c1 === 0x6c ? 0x3c : 0x3e;
  } // lt gt
  if (n === 3 && c1 === 0x61 && c2 === 0x6d && c3 === 0x70) {
    refEnd = semi;
    return AMP;
  } // amp
  if (n === 4 && c1 === 0x71 && c2 === 0x75 && c3 === 0x6f && c4 === 0x74) {
    refEnd = semi;
    return 0x22;
  } // quot
  if (n === 4 && c1 === 0x61 && c2 === 0x70 && c3 === 0x6f && c4 === 0x73) {
    refEnd = semi;
    return 0x27;
  } // apos
  return -1;
}

/**
 * Character data buf[from, to) (UTF-8) with its references replaced and line
 * ends normalized (XML 1.0 2.11), into the scratch buffer: its length there,
 * or -1 when a reference is bad. A reference never grows when decoded, so the
 * result fits in to - from.
 */
function decodeInto(buf: Buffer, from: number, to: number): number {
  const out = scratch(to - from);
  let o = 0;
  for (let i = from; i < to;) {
    const c = buf[i]!;
    if (c === AMP) {
      const cp = reference(buf, i, to);
      if (cp < 0) return -1;
      if (cp < 0x80) out[o++] = cp;
      else o += out.write(String.fromCodePoint(cp), o, 'utf8');
      i = refEnd + 1;
    } else if (c === CR) {
      out[o++] = LF;
      i += buf[i + 1] === LF && i + 1 < to ? 2 : 1; // CR LF is one LF
    } else {
      out[o++] = c;
      i++;
    }
  }
  return o;
}

/** decodeInto as a string (tests); null when a reference is bad. */
export function decodeText(v: Buffer): string | null {
  const n = decodeInto(v, 0, v.length);
  return n < 0 ? null : scratch(0).toString('utf8', 0, n);
}

/** What a schema does with the reader's events; false from any refuses the document. */
export interface XmlHandler {
  /** An element opened; `depth` 0 is the root. */
  open(name: string, depth: number): boolean;
  /** Whether character data is wanted now (else the reader only checks it). */
  readonly collecting: boolean;
  /** Character data of the innermost open element: UTF-8 bytes b[from, to), valid during the call only (it may come in several pieces). */
  text(b: Buffer, from: number, to: number): boolean;
  close(depth: number): boolean;
  /** The document ended well formed: the final verdict. */
  end(): boolean;
}

/** Element names of S3's request documents, kept as strings once (no string made per tag). */
const KNOWN_NAMES: readonly string[] = [
  'Delete',
  'Quiet',
  'Object',
  'Key',
  'VersionId',
  'ETag',
  'LastModifiedTime',
  'Size',
  'CompleteMultipartUpload',
  'Part',
  'PartNumber',
  'ChecksumCRC32',
  'ChecksumCRC32C',
  'ChecksumCRC64NVME',
  'ChecksumSHA1',
  'ChecksumSHA256',
];

/** Does buf[from, to) hold the ASCII `name`? */
function sameName(buf: Buffer, from: number, to: number, name: string): boolean {
  if (to - from !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[from + i] !== name.charCodeAt(i)) return false;
  return true;
}

function nameAt(buf: Buffer, from: number, to: number): string {
  for (const n of KNOWN_NAMES) if (sameName(buf, from, to, n)) return n;
  return buf.toString('latin1', from, to);
}

/** The reader: one document, fed to a handler a step at a time. */
class XmlReader {
  readonly #buf: Buffer;
  readonly #h: XmlHandler;
  #at = 0;
  readonly #stack: string[] = [];
  #rootSeen = false;
  #result: boolean | null = null;

  constructor(buf: Buffer, h: XmlHandler) {
    this.#buf = buf;
    this.#h = h;
    if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) this.#at = 3; // a UTF-8 BOM
  }

  /** True once the document was accepted; false when it was refused or is unfinished. */
  get ok(): boolean {
    return this.#result === true;
  }

  /** Read up to STEP_BYTES more; true when the document is decided. */
  step(): boolean {
    if (this.#result !== null) return true;
    const stop = this.#at + STEP_BYTES;
    const buf = this.#buf;
    while (this.#at < buf.length && this.#at < stop) {
      const ok = buf[this.#at] === LT ? this.#markup() : this.#text();
      if (!ok) {
        this.#result = false;
        return true;
      }
    }
    if (this.#at < buf.length) return false;
    this.#result = this.#rootSeen && this.#stack.length === 0 && this.#h.end();
    return true;
  }

  /** Where the byte `c` is, looking at most MAX_TOKEN bytes from `from`; -1 when not there. */
  #findByte(c: number, from: number): number {
    const buf = this.#buf;
    const end = Math.min(buf.length, from + MAX_TOKEN + 1);
    for (let i = from; i < end; i++) if (buf[i] === c) return i;
    return -1;
  }

  /** Where `needle` starts, looking at most MAX_TOKEN bytes from `from`; -1 when not there (comments, CDATA, PIs). */
  #find(needle: Buffer, from: number): number {
    const end = Math.min(this.#buf.length, from + MAX_TOKEN + needle.length);
    const i = this.#buf.subarray(from, end).indexOf(needle);
    return i < 0 ? -1 : from + i;
  }

  #startsWith(prefix: Buffer): boolean {
    const buf = this.#buf;
    return (
      this.#at + prefix.length <= buf.length &&
      buf.compare(prefix, 0, prefix.length, this.#at, this.#at + prefix.length) === 0
    );
  }

  #text(): boolean {
    const buf = this.#buf;
    const from = this.#at;
    const lim = Math.min(buf.length, from + MAX_TOKEN + 1);
    let end = from;
    let plain = true;
    let space = true;
    for (; end < lim; end++) {
      const c = buf[end]!;
      if (c === LT) break;
      if (c === AMP || c === CR) plain = false;
      if (space && !isSpace(c)) space = false;
    }
    if (end === lim && end < buf.length) return false; // a run longer than MAX_TOKEN
    this.#at = end;
    if (this.#stack.length === 0) return space; // only whitespace around the root
    if (plain) return !this.#h.collecting || this.#h.text(buf, from, end);
    const n = decodeInto(buf, from, end);
    return n >= 0 && this.#h.text(scratch(0), 0, n);
  }

  #markup(): boolean {
    const buf = this.#buf;
    const next = buf[this.#at + 1];
    if (next === QMARK) return this.#skipPast(PI_CLOSE, 2);
    if (next === BANG) {
      if (this.#startsWith(COMMENT_OPEN)) return this.#skipPast(COMMENT_CLOSE, COMMENT_OPEN.length);
      if (this.#stack.length > 0 && this.#startsWith(CDATA_OPEN)) {
        const from = this.#at + CDATA_OPEN.length;
        const end = this.#find(CDATA_CLOSE, from);
        if (end < 0) return false;
        this.#at = end + CDATA_CLOSE.length;
        // Line ends are normalized in CDATA too; references are not read there.
        const out = scratch(end - from);
        let o = 0;
        for (let i = from; i < end; i++) {
          const c = buf[i]!;
          if (c !== CR) out[o++] = c;
          else if (!(i + 1 < end && buf[i + 1] === LF)) out[o++] = LF;
        }
        return this.#h.text(out, 0, o);
      }
      return false; // DOCTYPE and anything else
    }
    if (next === SLASH) return this.#endTag();
    return this.#startTag();
  }

  #skipPast(close: Buffer, openLen: number): boolean {
    const end = this.#find(close, this.#at + openLen);
    if (end < 0) return false;
    this.#at = end + close.length;
    return true;
  }

  /** A name at `at`: its end, or -1. */
  #nameEnd(at: number): number {
    const buf = this.#buf;
    if (at >= buf.length || !isNameStart(buf[at]!)) return -1;
    let i = at + 1;
    while (i < buf.length && isNameChar(buf[i]!)) i++;
    return i - at > MAX_TOKEN ? -1 : i;
  }

  #skipSpace(at: number): number {
    const buf = this.#buf;
    while (at < buf.length && isSpace(buf[at]!)) at++;
    return at;
  }

  #startTag(): boolean {
    const buf = this.#buf;
    const limit = this.#at + MAX_TOKEN;
    const from = this.#at + 1;
    const nameEnd = this.#nameEnd(from);
    if (nameEnd < 0) return false;
    let i = nameEnd;
    let selfClosing = false;
    for (;;) {
      const before = i;
      i = this.#skipSpace(i);
      if (i >= buf.length || i > limit) return false;
      if (buf[i] === GT) {
        i++;
        break;
      }
      if (buf[i] === SLASH) {
        if (buf[i + 1] !== GT) return false;
        selfClosing = true;
        i += 2;
        break;
      }
      // An attribute: whitespace before it, name, '=', a quoted value without '<' whose references are good.
      if (i === before) return false;
      const attrEnd = this.#nameEnd(i);
      if (attrEnd < 0) return false;
      i = this.#skipSpace(attrEnd);
      if (buf[i] !== EQ) return false;
      i = this.#skipSpace(i + 1);
      const q = buf[i]!;
      if (q !== DQUOTE && q !== SQUOTE) return false;
      const close = this.#findByte(q, i + 1);
      if (close < 0 || close > limit) return false;
      for (let j = i + 1; j < close; j++) if (buf[j] === LT) return false;
      if (decodeInto(buf, i + 1, close) < 0) return false;
      i = close + 1;
    }
    this.#at = i;
    if (this.#stack.length === 0) {
      if (this.#rootSeen) return false; // one root only
      this.#rootSeen = true;
    }
    const depth = this.#stack.length;
    if (depth >= MAX_DEPTH) return false;
    const name = nameAt(buf, from, nameEnd);
    if (!this.#h.open(name, depth)) return false;
    if (selfClosing) return this.#h.close(depth);
    this.#stack.push(name);
    return true;
  }

  #endTag(): boolean {
    const buf = this.#buf;
    const from = this.#at + 2;
    const nameEnd = this.#nameEnd(from);
    if (nameEnd < 0) return false;
    const i = this.#skipSpace(nameEnd);
    if (buf[i] !== GT) return false;
    const open = this.#stack.pop();
    if (open === undefined || !sameName(buf, from, nameEnd, open)) return false;
    this.#at = i + 1;
    return this.#h.close(this.#stack.length);
  }
}

/** Read `body`, feeding `h`, a step at a time; true when the document is well formed and `h` took it. */
export async function readXml(body: Buffer, h: XmlHandler, p: Pacer): Promise<boolean> {
  const r = new XmlReader(body, h);
  await paced(() => r.step(), p);
  return r.ok;
}

/** A text value gathered from its pieces (UTF-8 bytes), bounded. */
export class Value {
  #buf = Buffer.allocUnsafe(256);
  #len = 0;
  #on = false;

  begin(): void {
    this.#len = 0;
    this.#on = true;
  }

  add(b: Buffer, from: number, to: number): boolean {
    if (!this.#on) return true;
    const n = to - from;
    if (this.#len + n > MAX_VALUE_BYTES) return false;
    if (this.#len + n > this.#buf.length) {
      const next = Buffer.allocUnsafe(MAX_VALUE_BYTES);
      this.#buf.copy(next, 0, 0, this.#len);
      this.#buf = next;
    }
    if (n < 64) for (let i = from; i < to; i++) this.#buf[this.#len++] = b[i]!;
    else this.#len += b.copy(this.#buf, this.#len, from, to);
    return true;
  }

  /** The value's own copy of its bytes. */
  bytes(): Buffer {
    this.#on = false;
    return Buffer.from(this.#buf.subarray(0, this.#len));
  }

  string(): string {
    this.#on = false;
    return this.#buf.toString('utf8', 0, this.#len);
  }

  get collecting(): boolean {
    return this.#on;
  }
}
