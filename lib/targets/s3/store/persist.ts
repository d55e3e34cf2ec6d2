// Optional persistence of the S3 store (`dir=`): one file per object and per
// uploaded part, so that nothing the store acknowledged is lost on restart.
// A file is written to `tmp/`, fsynced, renamed into place and its directory
// fsynced before the request is answered; removals fsync the directory too.
// Files are named by the SHA-256 of the key (keys can be longer than a file
// name may be) and carry the key and metadata in a small header:
//   magic "ERS3" | u32 BE header length | header JSON | data

import { createHash, randomBytes } from 'crypto';
import { promises as fs } from 'fs';
import * as path from 'path';

const MAGIC = Buffer.from('ERS3');
const HDR_LEN = 4;
/** Largest header JSON accepted when loading. */
const MAX_META = 64 * 1024;
/** Upload ids are 16 random bytes in hex (objects.ts). */
const UPLOAD_ID = /^[0-9a-f]{32}$/;

export interface FileMeta {
  readonly key: string;
  readonly etag: string;
  readonly contentType: string;
  readonly lastModified: number;
  readonly metadata: Readonly<Record<string, string>>;
  /** For a part: its upload and number. */
  readonly uploadId?: string;
  readonly partNumber?: number;
}

function nameOf(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Deepest directory chain dir= may ask us to create. */
const MAX_DIR_DEPTH = 64;

/**
 * mkdir -p, one component at a time. Node 20's recursive fs.mkdir never
 * settles for some unmakeable paths (a missing parent under /proc: it keeps
 * retrying), which would hang the start-up instead of refusing dir=.
 */
async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  let p = path.resolve(dir);
  for (let depth = 0; ; depth++) {
    if (depth >= MAX_DIR_DEPTH) throw new Error(`${dir}: more than ${MAX_DIR_DEPTH} directories to create`);
    try {
      if (!(await fs.stat(p)).isDirectory()) throw new Error(`${p} is not a directory`);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      missing.push(p);
      const up = path.dirname(p);
      if (up === p) break;
      p = up;
    }
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    try {
      await fs.mkdir(missing[i]!);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const h = await fs.open(dir, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

export class DirStore {
  readonly #root: string;
  readonly #objects: string;
  readonly #uploads: string;
  readonly #tmp: string;

  private constructor(root: string) {
    this.#root = root;
    this.#objects = path.join(root, 'objects');
    this.#uploads = path.join(root, 'uploads');
    this.#tmp = path.join(root, 'tmp');
  }

  static async open(root: string): Promise<DirStore> {
    const d = new DirStore(root);
    for (const p of [d.#root, d.#objects, d.#uploads, d.#tmp]) await makeDirs(p);
    // Leftovers of writes that never finished were never acknowledged.
    for (const f of await fs.readdir(d.#tmp)) await fs.rm(path.join(d.#tmp, f), { force: true });
    return d;
  }

  async #writeAtomic(dir: string, name: string, meta: FileMeta, data: Buffer): Promise<void> {
    const json = Buffer.from(JSON.stringify(meta), 'utf8');
    const len = Buffer.alloc(HDR_LEN);
    len.writeUInt32BE(json.length, 0);
    const tmp = path.join(this.#tmp, `${name}.${randomBytes(6).toString('hex')}`);
    const h = await fs.open(tmp, 'w', 0o600);
    try {
      await h.writev([MAGIC, len, json, data]);
      await h.sync();
    } finally {
      await h.close();
    }
    await fs.rename(tmp, path.join(dir, name));
    await fsyncDir(dir);
  }

  async writeObject(meta: FileMeta, data: Buffer): Promise<void> {
    await this.#writeAtomic(this.#objects, nameOf(meta.key), meta, data);
  }

  async removeObject(key: string): Promise<void> {
    await fs.rm(path.join(this.#objects, nameOf(key)), { force: true });
    await fsyncDir(this.#objects);
  }

  async writePart(meta: FileMeta, data: Buffer): Promise<void> {
    const dir = path.join(this.#uploads, meta.uploadId!);
    await fs.mkdir(dir, { recursive: true });
    await this.#writeAtomic(dir, String(meta.partNumber), meta, data);
  }

  /** An upload's marker file (key, content type) so an upload with no parts yet survives a restart. */
  async writeUpload(meta: FileMeta): Promise<void> {
    const dir = path.join(this.#uploads, meta.uploadId!);
    await fs.mkdir(dir, { recursive: true });
    await fsyncDir(this.#uploads);
    await this.#writeAtomic(dir, 'upload', meta, Buffer.alloc(0));
  }

  async removeUpload(uploadId: string): Promise<void> {
    await fs.rm(path.join(this.#uploads, uploadId), { recursive: true, force: true });
    await fsyncDir(this.#uploads);
  }

  static #decode(buf: Buffer): { meta: FileMeta; data: Buffer } | null {
    if (buf.length < MAGIC.length + HDR_LEN || !buf.subarray(0, MAGIC.length).equals(MAGIC)) return null;
    const n = buf.readUInt32BE(MAGIC.length);
    const at = MAGIC.length + HDR_LEN;
    if (n > MAX_META || at + n > buf.length) return null;
    try {
      const meta = JSON.parse(buf.toString('utf8', at, at + n)) as FileMeta;
      if (typeof meta.key !== 'string' || typeof meta.etag !== 'string') return null;
      return { meta, data: buf.subarray(at + n) };
    } catch {
      return null;
    }
  }

  /** Every object, then every upload with its parts; unreadable files are skipped. */
  async load(): Promise<{
    objects: { meta: FileMeta; data: Buffer }[];
    uploads: { meta: FileMeta; parts: { meta: FileMeta; data: Buffer }[] }[];
  }> {
    const objects: { meta: FileMeta; data: Buffer }[] = [];
    for (const f of await fs.readdir(this.#objects)) {
      const rec = DirStore.#decode(await fs.readFile(path.join(this.#objects, f)));
      if (rec && nameOf(rec.meta.key) === f) objects.push(rec);
    }
    const uploads: { meta: FileMeta; parts: { meta: FileMeta; data: Buffer }[] }[] = [];
    for (const id of await fs.readdir(this.#uploads)) {
      if (!UPLOAD_ID.test(id)) continue;
      const dir = path.join(this.#uploads, id);
      const files = await fs.readdir(dir);
      if (!files.includes('upload')) continue;
      const marker = DirStore.#decode(await fs.readFile(path.join(dir, 'upload')));
      if (!marker || marker.meta.uploadId !== id) continue;
      const parts: { meta: FileMeta; data: Buffer }[] = [];
      for (const f of files) {
        if (f === 'upload') continue;
        const rec = DirStore.#decode(await fs.readFile(path.join(dir, f)));
        if (rec && rec.meta.uploadId === id && String(rec.meta.partNumber) === f) parts.push(rec);
      }
      uploads.push({ meta: marker.meta, parts });
    }
    return { objects, uploads };
  }
}
