// S3's response documents, written in steps through the shared pacer when a
// client sizes them (a listing of 1,000 keys of 1 KiB): text escaped so it
// reads back as written, the S3 namespace on all but Error documents.

import { pacer as sharedPacer, Pacer } from '../../pace';
import { paced, scratch } from './xml-shared';

const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';

// ---- documents out ----------------------------------------------------------------------

/**
 * An element's content: text (string, number, boolean, or UTF-8 bytes), text made when it is written (a
 * function: a key's url-encoding, done in the step that writes it), child elements by name, or a list (the
 * element repeated).
 */
export type XmlNode = string | number | boolean | Buffer | (() => string) | undefined | XmlBody | readonly XmlNode[];
interface XmlBody {
  readonly [name: string]: XmlNode;
}

/** The bytes XML content escapes: & < > " ' and CR. */
const AMP = 0x26;
const LT = 0x3c;
const GT = 0x3e;
const DQUOTE = 0x22;
const SQUOTE = 0x27;
const CR = 0x0d;

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
  while (!g.next().done) {
    /* all of it now */
  }
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
