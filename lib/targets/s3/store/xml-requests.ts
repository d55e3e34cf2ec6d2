// S3's request documents: DeleteObjects (the keys and Quiet) and
// CompleteMultipartUpload (each part's number and ETag), as handlers of the
// strict reader (xml-reader.ts), with S3's limits on entries and body size.

import { pacer as sharedPacer, Pacer } from '../../pace';
import { MAX_KEY_BYTES, MAX_PART_NUMBER } from './objects';
import { readXml, Value, XmlHandler } from './xml-reader';

// ---- limits of the request documents ------------------------------------------------------

/** S3's own limits: keys per DeleteObjects, parts per CompleteMultipartUpload. */
const MAX_DELETE_OBJECTS = 1000;
const MAX_COMPLETE_PARTS = MAX_PART_NUMBER;
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
/** What S3's schema lets an <Object> or a <Part> hold (each once); anything else is MalformedXML. */
const OBJECT_FIELDS: ReadonlySet<string> = new Set(['Key', 'VersionId', 'ETag', 'LastModifiedTime', 'Size']);
const PART_FIELDS: ReadonlySet<string> = new Set([
  'PartNumber',
  'ETag',
  'ChecksumCRC32',
  'ChecksumCRC32C',
  'ChecksumCRC64NVME',
  'ChecksumSHA1',
  'ChecksumSHA256',
]);

/** What both documents do with text: gather the value an element opened, bounded (Value). */
abstract class ValueDoc implements XmlHandler {
  protected readonly value = new Value();

  get collecting(): boolean {
    return this.value.collecting;
  }

  text(b: Buffer, from: number, to: number): boolean {
    return this.value.add(b, from, to);
  }

  abstract open(name: string, depth: number): boolean;
  abstract close(depth: number): boolean;
  abstract end(): boolean;
}

// ---- CompleteMultipartUpload ------------------------------------------------------------

interface CompletePart {
  readonly partNumber: number;
  readonly etag: string;
}

/** <CompleteMultipartUpload><Part><PartNumber/><ETag/></Part>...: each Part's number and ETag (quotes dropped). */
class CompleteDoc extends ValueDoc {
  readonly parts: CompletePart[] = [];
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
    if (this.#field !== 'none') this.value.begin();
    return true;
  }

  close(depth: number): boolean {
    if (depth === 2 && this.value.collecting) {
      const v = this.value.string().trim();
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
  return (await readXml(body, doc, p)) ? doc.parts : null;
}

// ---- DeleteObjects ------------------------------------------------------------------------

/**
 * <Delete><Quiet/><Object><Key/></Object>...: the keys (non-empty, at most
 * MAX_KEY_BYTES) and Quiet. Keys stay UTF-8 bytes until used: a thousand
 * strings of a kilobyte alive across turns are what slows the young
 * generation's scavenges.
 */
class DeleteDoc extends ValueDoc {
  readonly keys: Buffer[] = [];
  quiet = false;
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
        this.value.begin();
        return true;
      }
      if (!this.#inObject || this.keys.length >= MAX_DELETE_OBJECTS) return false;
      this.#seen.clear();
      this.#key = null;
      return true;
    }
    if (depth !== 2 || !this.#inObject || !OBJECT_FIELDS.has(name) || this.#seen.has(name)) return false;
    this.#seen.add(name);
    if (name === 'Key') this.value.begin();
    return true;
  }

  close(depth: number): boolean {
    if (depth === 2 && this.value.collecting) {
      this.#key = this.value.bytes();
      return true;
    }
    if (depth === 1 && this.#inQuiet) {
      this.#inQuiet = false;
      this.quiet = this.value.string().trim().toLowerCase() === 'true';
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
export async function parseDeleteObjects(
  body: Buffer,
  p: Pacer = sharedPacer,
): Promise<{ keys: Buffer[]; quiet: boolean } | null> {
  if (body.length > MAX_DELETE_BODY) return null;
  const doc = new DeleteDoc();
  return (await readXml(body, doc, p)) ? { keys: doc.keys, quiet: doc.quiet } : null;
}
