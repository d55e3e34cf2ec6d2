// XML in and out of the S3 store. Request bodies (DeleteObjects,
// CompleteMultipartUpload) are read by a small strict reader written for
// them, and documents out are written here too, both in steps through the
// shared pacer (../../pace.ts): a client sizes them (1,000 keys of 1 KiB,
// 10,000 parts), and fast-xml-parser took 0.1 to 0.5 s of one loop turn for
// a megabyte, holding every guest vCPU's MMIO read meanwhile.
//
// The reader takes what S3 clients send: a UTF-8 document, an optional XML
// declaration, elements with attributes (xmlns), character data with the five
// predefined entities and character references, CDATA, comments and
// processing instructions. A DOCTYPE is refused (no entity definitions at
// all). Every token is at most MAX_TOKEN bytes, nesting at most MAX_DEPTH, and
// the schema handlers refuse a document as soon as it has more entries than
// S3 allows, so no body costs more than a read of its bytes.

import { pacer as sharedPacer, Pacer, Serial } from '../../pace';
import { MAX_KEY_BYTES, MAX_PART_NUMBER } from './objects';

export const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';

// ---- limits of the request documents ------------------------------------------------------

/** S3's own limits: keys per DeleteObjects, parts per CompleteMultipartUpload. */
export const MAX_DELETE_OBJECTS = 1000;
export const MAX_COMPLETE_PARTS = MAX_PART_NUMBER;
/**
 * One <Object> at most: a key of MAX_KEY_BYTES bytes, every byte escaped
 * (&apos; is 6 bytes), and 256 bytes of markup, VersionId and whitespace.
 */
const DELETE_ENTRY_BYTES = 6 * MAX_KEY_BYTES + 256;
/**
 * One <Part> at most: PartNumber (5 digits), a quoted ETag (&quot; twice),
 * the five checksum elements S3 defines (CRC32, CRC32C, CRC64NVME, SHA1,
 * SHA256: 265 bytes with their tags) and indentation: ~430, rounded up.
 */
const PART_ENTRY_BYTES = 512;
/** Declaration, root element, Quiet, whitespace. */
const ENVELOPE_BYTES = 4096;
/** The largest bodies read: anything bigger cannot be a document S3 accepts (MalformedXML). */
export const MAX_DELETE_BODY = MAX_DELETE_OBJECTS * DELETE_ENTRY_BYTES + ENVELOPE_BYTES;
export const MAX_COMPLETE_BODY = MAX_COMPLETE_PARTS * PART_ENTRY_BYTES + ENVELOPE_BYTES;

/** Longest single token (a run of text, a tag, a comment). */
const MAX_TOKEN = 64 * 1024;
const MAX_DEPTH = 8;
/** What S3's schema lets an <Object> or a <Part> hold (each once); anything else is MalformedXML. */
const OBJECT_FIELDS: ReadonlySet<string> = new Set(['Key', 'VersionId', 'ETag', 'LastModifiedTime', 'Size']);
const PART_FIELDS: ReadonlySet<string> = new Set([
  'PartNumber', 'ETag', 'ChecksumCRC32', 'ChecksumCRC32C', 'ChecksumCRC64NVME', 'ChecksumSHA1', 'ChecksumSHA256',
]);
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
  if (c1 === 0x23) { // '#': a character reference
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
  if (n === 2 && c2 === 0x74 && (c1 === 0x6c || c1 === 0x67)) { refEnd = semi; return c1 === 0x6c ? 0x3c : 0x3e; } // lt gt
  if (n === 3 && c1 === 0x61 && c2 === 0x6d && c3 === 0x70) { refEnd = semi; return AMP; } // amp
  if (n === 4 && c1 === 0x71 && c2 === 0x75 && c3 === 0x6f && c4 === 0x74) { refEnd = semi; return 0x22; } // quot
  if (n === 4 && c1 === 0x61 && c2 === 0x70 && c3 === 0x6f && c4 === 0x73) { refEnd = semi; return 0x27; } // apos
  return -1;
}

/** A buffer reused for decoding and escaping: its contents are copied out at once (no buffer per token). */
let scratchBuf = Buffer.allocUnsafe(64 * 1024);

function scratch(n: number): Buffer {
  if (n > scratchBuf.length) scratchBuf = Buffer.allocUnsafe(Math.max(n, scratchBuf.length * 2));
  return scratchBuf;
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
  return n < 0 ? null : scratchBuf.toString('utf8', 0, n);
}

/** What a schema does with the reader's events; false from any refuses the document. */
interface XmlHandler {
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
  'Delete', 'Quiet', 'Object', 'Key', 'VersionId', 'ETag', 'LastModifiedTime', 'Size', 'CompleteMultipartUpload', 'Part', 'PartNumber',
  'ChecksumCRC32', 'ChecksumCRC32C', 'ChecksumCRC64NVME', 'ChecksumSHA1', 'ChecksumSHA256',
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
      if (!ok) { this.#result = false; return true; }
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
    return this.#at + prefix.length <= buf.length && buf.compare(prefix, 0, prefix.length, this.#at, this.#at + prefix.length) === 0;
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
    return n >= 0 && this.#h.text(scratchBuf, 0, n);
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
      if (buf[i] === GT) { i++; break; }
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

/**
 * Documents larger than a step are read and written one at a time: the
 * pacer's share of each turn goes to one until it is done, so only one
 * document's strings (1,000 keys of up to 1 KiB) are alive at once, and the
 * young generation's scavenges, which copy what is alive, stay short.
 */
const bigDocuments = new Serial();

/** `step` once now; what remains, after the big documents before it, through the pacer. */
async function paced(step: () => boolean, p: Pacer): Promise<void> {
  if (step()) return;
  await bigDocuments.run(() => p.run(step));
}

async function read(body: Buffer, h: XmlHandler, p: Pacer): Promise<boolean> {
  const r = new XmlReader(body, h);
  await paced(() => r.step(), p);
  return r.ok;
}

/** A text value gathered from its pieces (UTF-8 bytes), bounded. */
class Value {
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

// ---- CompleteMultipartUpload ------------------------------------------------------------

export interface CompletePart {
  readonly partNumber: number;
  readonly etag: string;
}

/** <CompleteMultipartUpload><Part><PartNumber/><ETag/></Part>...: each Part's number and ETag (quotes dropped). */
class CompleteDoc implements XmlHandler {
  readonly parts: CompletePart[] = [];
  readonly #value = new Value();
  #field: 'none' | 'number' | 'etag' = 'none';
  readonly #seen = new Set<string>();
  #number: string | null = null;
  #etag: string | null = null;

  open(name: string, depth: number): boolean {
    if (depth === 0) return name === 'CompleteMultipartUpload';
    if (depth === 1) {
      if (name !== 'Part' || this.parts.length >= MAX_COMPLETE_PARTS) return false;
      this.#seen.clear();
      this.#number = null;
      this.#etag = null;
      return true;
    }
    if (depth !== 2 || !PART_FIELDS.has(name) || this.#seen.has(name)) return false;
    this.#seen.add(name);
    this.#field = name === 'PartNumber' ? 'number' : name === 'ETag' ? 'etag' : 'none';
    if (this.#field !== 'none') this.#value.begin();
    return true;
  }

  get collecting(): boolean {
    return this.#value.collecting;
  }

  text(b: Buffer, from: number, to: number): boolean {
    return this.#value.add(b, from, to);
  }

  close(depth: number): boolean {
    if (depth === 2 && this.#value.collecting) {
      const v = this.#value.string().trim();
      if (this.#field === 'number') this.#number = v;
      else this.#etag = v;
      this.#field = 'none';
      return true;
    }
    if (depth === 1) {
      const n = Number(this.#number);
      if (this.#number === null || this.#number === '' || !Number.isInteger(n) || this.#etag === null) return false;
      this.parts.push({ partNumber: n, etag: this.#etag.replace(/"/g, '') });
    }
    return true;
  }

  end(): boolean {
    return this.parts.length > 0;
  }
}

/** The parts of a CompleteMultipartUpload body; null when malformed or past S3's limits. */
export async function parseCompleteMultipart(body: Buffer, p: Pacer = sharedPacer): Promise<CompletePart[] | null> {
  if (body.length > MAX_COMPLETE_BODY) return null;
  const doc = new CompleteDoc();
  return (await read(body, doc, p)) ? doc.parts : null;
}

// ---- DeleteObjects ------------------------------------------------------------------------

/**
 * <Delete><Quiet/><Object><Key/></Object>...: the keys (non-empty, at most
 * MAX_KEY_BYTES) and Quiet. Keys stay UTF-8 bytes until used: a thousand
 * strings of a kilobyte alive across turns are what slows the young
 * generation's scavenges.
 */
class DeleteDoc implements XmlHandler {
  readonly keys: Buffer[] = [];
  quiet = false;
  readonly #value = new Value();
  #inObject = false;
  #inQuiet = false;
  readonly #seen = new Set<string>();
  #key: Buffer | null = null;

  open(name: string, depth: number): boolean {
    if (depth === 0) return name === 'Delete';
    if (depth === 1) {
      this.#inObject = name === 'Object';
      this.#inQuiet = name === 'Quiet';
      if (this.#inQuiet) {
        this.#value.begin();
        return true;
      }
      if (!this.#inObject || this.keys.length >= MAX_DELETE_OBJECTS) return false;
      this.#seen.clear();
      this.#key = null;
      return true;
    }
    if (depth !== 2 || !this.#inObject || !OBJECT_FIELDS.has(name) || this.#seen.has(name)) return false;
    this.#seen.add(name);
    if (name === 'Key') this.#value.begin();
    return true;
  }

  get collecting(): boolean {
    return this.#value.collecting;
  }

  text(b: Buffer, from: number, to: number): boolean {
    return this.#value.add(b, from, to);
  }

  close(depth: number): boolean {
    if (depth === 2 && this.#value.collecting) {
      this.#key = this.#value.bytes();
      return true;
    }
    if (depth === 1 && this.#inQuiet) {
      this.#inQuiet = false;
      this.quiet = this.#value.string().trim().toLowerCase() === 'true';
      return true;
    }
    if (depth === 1 && this.#inObject) {
      this.#inObject = false;
      const k = this.#key;
      if (k === null || k.length === 0 || k.length > MAX_KEY_BYTES) return false;
      this.keys.push(k);
    }
    return true;
  }

  end(): boolean {
    return this.keys.length > 0;
  }
}

/** The keys of a DeleteObjects body (UTF-8) and its Quiet flag; null when malformed or past S3's limits. */
export async function parseDeleteObjects(body: Buffer, p: Pacer = sharedPacer): Promise<{ keys: Buffer[]; quiet: boolean } | null> {
  if (body.length > MAX_DELETE_BODY) return null;
  const doc = new DeleteDoc();
  return (await read(body, doc, p)) ? { keys: doc.keys, quiet: doc.quiet } : null;
}

// ---- documents out ----------------------------------------------------------------------

/**
 * An element's content: text (string, number, boolean, or UTF-8 bytes), text made when it is written (a
 * function: a key's url-encoding, done in the step that writes it), child elements by name, or a list (the
 * element repeated).
 */
export type XmlNode = string | number | boolean | Buffer | (() => string) | undefined | XmlBody | readonly XmlNode[];
export interface XmlBody {
  readonly [name: string]: XmlNode;
}

/** The escape of each byte that needs one in XML content (CR too: kept raw, it would be read back as LF), by byte value. */
const ESCAPES: readonly (Buffer | undefined)[] = (() => {
  const t: (Buffer | undefined)[] = new Array<Buffer | undefined>(256).fill(undefined);
  t[AMP] = Buffer.from('&amp;');
  t[LT] = Buffer.from('&lt;');
  t[GT] = Buffer.from('&gt;');
  t[DQUOTE] = Buffer.from('&quot;');
  t[SQUOTE] = Buffer.from('&apos;');
  t[CR] = Buffer.from('&#xD;');
  return t;
})();

const NEEDS_ESCAPE = /[&<>"'\r]/;

/** Bytes of each piece a document is written in. */
const PIECE = 64 * 1024;

/** A document being written, in pieces of PIECE bytes (sent one after the other, never joined). */
class XmlWriter {
  readonly #done: Buffer[] = [];
  #buf = Buffer.allocUnsafe(PIECE);
  #len = 0;
  #total = 0;

  get length(): number {
    return this.#total + this.#len;
  }

  /** Room for `n` more bytes in the current piece (a new piece when it lacks it). */
  #room(n: number): Buffer {
    if (this.#len + n > this.#buf.length) {
      if (this.#len > 0) {
        this.#done.push(this.#buf.subarray(0, this.#len));
        this.#total += this.#len;
      }
      this.#buf = Buffer.allocUnsafe(Math.max(PIECE, n));
      this.#len = 0;
    }
    return this.#buf;
  }

  /** Markup (ASCII names we chose). */
  markup(s: string): void {
    const b = this.#room(s.length); // first: a new piece starts at 0
    this.#len += b.write(s, this.#len, 'latin1');
  }

  /** Content: UTF-8, the markup characters escaped. */
  text(s: string): void {
    const n = Buffer.byteLength(s, 'utf8');
    if (!NEEDS_ESCAPE.test(s)) {
      const b = this.#room(n); // first: a new piece starts at 0
      this.#len += b.write(s, this.#len, 'utf8');
      return;
    }
    const raw = scratch(n);
    raw.write(s, 0, 'utf8');
    this.bytes(raw.subarray(0, n));
  }

  /** Content given as UTF-8 bytes, the markup characters escaped. */
  bytes(raw: Buffer): void {
    const n = raw.length;
    const out = this.#room(n * 6); // '&apos;' is the longest escape
    let o = this.#len;
    for (let i = 0; i < n; i++) {
      const c = raw[i]!;
      const e = ESCAPES[c];
      if (e === undefined) out[o++] = c;
      else for (let j = 0; j < e.length; j++) out[o++] = e[j]!;
    }
    this.#len = o;
  }

  /** The pieces, in order. */
  pieces(): Buffer[] {
    return this.#len > 0 ? [...this.#done, this.#buf.subarray(0, this.#len)] : this.#done;
  }
}

/** Text for XML content, as a string (tests, and anything written by hand). */
export function escapeXml(s: string): string {
  const w = new XmlWriter();
  w.text(s);
  return Buffer.concat(w.pieces()).toString('utf8');
}

/** Writes `name` with content `v`; yields after each entry of a list (a place to stop). */
function* emit(w: XmlWriter, name: string, v: XmlNode): Generator<undefined, void, undefined> {
  if (v === undefined) return;
  if (Array.isArray(v)) {
    for (const item of v as readonly XmlNode[]) {
      yield* emit(w, name, item);
      yield;
    }
    return;
  }
  w.markup(`<${name}>`);
  if (typeof v === 'function') w.text(v());
  else if (Buffer.isBuffer(v)) w.bytes(v);
  else if (typeof v === 'object') {
    for (const [k, c] of Object.entries(v as XmlBody)) yield* emit(w, k, c);
  } else {
    w.text(String(v));
  }
  w.markup(`</${name}>`);
}

const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';
/** Output bytes one step writes at most (past it, the step ends after the entry in hand). */
const STEP_OUTPUT = 32 * 1024;

function* document(w: XmlWriter, root: string, body: XmlBody, ns: boolean): Generator<undefined, void, undefined> {
  w.markup(DECLARATION);
  w.markup(ns ? `<${root} xmlns="${S3_XMLNS}">` : `<${root}>`);
  for (const [k, v] of Object.entries(body)) yield* emit(w, k, v);
  w.markup(`</${root}>`);
}

function whole(root: string, body: XmlBody, ns: boolean): Buffer {
  const w = new XmlWriter();
  const g = document(w, root, body, ns);
  while (!g.next().done) { /* all of it now */ }
  const p = w.pieces();
  return p.length === 1 ? p[0]! : Buffer.concat(p);
}

/** A whole document at once, with the S3 namespace: for small, fixed documents. */
export function xmlDocument(root: string, body: XmlBody): Buffer {
  return whole(root, body, true);
}

/** A document without the namespace attribute (Error documents carry none). */
export function xmlPlain(root: string, body: XmlBody): Buffer {
  return whole(root, body, false);
}

/** A document with lists a client sizes (1,000 keys of 1 KiB), written about 32 KiB per step; its pieces, in order. */
export async function xmlDocumentPaced(root: string, body: XmlBody, p: Pacer = sharedPacer): Promise<Buffer[]> {
  const w = new XmlWriter();
  const g = document(w, root, body, true);
  await paced(() => {
    const stop = w.length + STEP_OUTPUT;
    while (w.length < stop) if (g.next().done) return true;
    return false;
  }, p);
  return w.pieces();
}
