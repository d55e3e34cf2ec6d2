// XML in and out of the S3 store, through fast-xml-parser only: documents are
// plain objects handed to the builder (text is escaped by it), and request
// bodies (CompleteMultipartUpload, Delete) are parsed into records and
// checked before use.

import { XMLBuilder, XMLParser } from 'fast-xml-parser';

export const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: false, processEntities: true });
const parser = new XMLParser({
  ignoreAttributes: true, parseTagValue: false, trimValues: true, processEntities: true,
  isArray: (name) => name === 'Part' || name === 'Object',
});

/** A whole document: the declaration and one root element with the S3 namespace. */
export function xmlDocument(root: string, body: Record<string, unknown>): string {
  return builder.build({
    '?xml': { '@_version': '1.0', '@_encoding': 'UTF-8' },
    [root]: { '@_xmlns': S3_XMLNS, ...body },
  }) as string;
}

/** A document without the namespace attribute (Error documents carry none). */
export function xmlPlain(root: string, body: Record<string, unknown>): string {
  return builder.build({ '?xml': { '@_version': '1.0', '@_encoding': 'UTF-8' }, [root]: body }) as string;
}

/** Largest request document parsed. */
export const MAX_XML_BODY = 1024 * 1024;

function parse(text: string): Record<string, unknown> | null {
  try {
    const v = parser.parse(text, true) as unknown;
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export interface CompletePart {
  readonly partNumber: number;
  readonly etag: string;
}

/** <CompleteMultipartUpload><Part><PartNumber/><ETag/></Part>...; null when malformed. */
export function parseCompleteMultipart(body: Buffer): CompletePart[] | null {
  if (body.length > MAX_XML_BODY) return null;
  const doc = parse(body.toString('utf8'));
  const root = doc?.['CompleteMultipartUpload'];
  if (root === undefined || root === null || typeof root !== 'object') return null;
  const parts = (root as Record<string, unknown>)['Part'];
  if (!Array.isArray(parts) || parts.length === 0) return null;
  const out: CompletePart[] = [];
  for (const p of parts) {
    if (p === null || typeof p !== 'object') return null;
    const n = Number((p as Record<string, unknown>)['PartNumber']);
    const etag = (p as Record<string, unknown>)['ETag'];
    if (!Number.isInteger(n) || typeof etag !== 'string') return null;
    out.push({ partNumber: n, etag: etag.replace(/"/g, '') });
  }
  return out;
}

/** <Delete><Quiet/><Object><Key/></Object>...; null when malformed. */
export function parseDeleteObjects(body: Buffer): { keys: string[]; quiet: boolean } | null {
  if (body.length > MAX_XML_BODY) return null;
  const doc = parse(body.toString('utf8'));
  const root = doc?.['Delete'];
  if (root === undefined || root === null || typeof root !== 'object') return null;
  const objs = (root as Record<string, unknown>)['Object'];
  if (!Array.isArray(objs) || objs.length === 0 || objs.length > 1000) return null;
  const keys: string[] = [];
  for (const o of objs) {
    const k = o !== null && typeof o === 'object' ? (o as Record<string, unknown>)['Key'] : undefined;
    if (typeof k !== 'string' || k.length === 0) return null;
    keys.push(k);
  }
  return { keys, quiet: String((root as Record<string, unknown>)['Quiet'] ?? '').toLowerCase() === 'true' };
}
