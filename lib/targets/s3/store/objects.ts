// The S3 store's contents: one bucket of objects in RAM, multipart uploads
// in progress, and the limits (total bytes, object count, largest single
// transfer or part). Every mutation is applied to RAM only after the
// persistence layer (persist.ts, when `dir=` is set) has made it durable,
// so an acknowledged PUT, part, completion or DELETE survives a restart.
// Results are values (S3Result), never exceptions, for anything a client sends.

import { createHash, randomBytes } from 'crypto';
import { concatPaced, digestPaced } from '../../pace';
import { DirStore, FileMeta } from './persist';
import { fail, ok, S3Result } from './errors';

interface StoreLimits {
  /** RAM capacity in bytes: objects plus parts of uploads in progress. */
  readonly size: number;
  /** Objects the bucket may hold. */
  readonly objects: number;
  /** Largest single PUT, part, or RDMA transfer. */
  readonly maxpart: number;
}

/** S3's limits on multipart uploads and keys. */
export const MAX_PART_NUMBER = 10_000;
export const MAX_KEY_BYTES = 1024;
const MAX_UPLOADS = 64;
export const MAX_LIST_KEYS = 1000;
export const MAX_METADATA_BYTES = 2048;

export interface StoredObject {
  readonly key: string;
  readonly data: Buffer;
  /** Hex digest, without quotes (multipart: digest of part digests, then -N). */
  readonly etag: string;
  readonly contentType: string;
  readonly lastModified: Date;
  readonly metadata: Readonly<Record<string, string>>;
}

interface StoredPart {
  readonly partNumber: number;
  readonly data: Buffer;
  readonly etag: string;
  readonly lastModified: Date;
}

interface Upload {
  readonly id: string;
  readonly key: string;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly initiated: Date;
  readonly parts: Map<number, StoredPart>;
}

interface ListQuery {
  readonly prefix: string;
  readonly delimiter: string;
  readonly maxKeys: number;
  /** List keys strictly after this one. */
  readonly after: string;
}

interface ListPage {
  readonly contents: StoredObject[];
  readonly commonPrefixes: string[];
  readonly truncated: boolean;
  /** The last key or prefix this page covered (the next page starts after it). */
  readonly lastKey: string;
}

/** md5hex a slice per step (an object may be gigabytes). */
async function md5hexPaced(data: Buffer): Promise<string> {
  const h = createHash('md5');
  await digestPaced(data, [h]);
  return h.digest('hex');
}

/** In sorted `keys`, the first index whose key is > `k` (`strictly`) or >= `k`. */
function firstAfter(keys: readonly string[], k: string, strictly: boolean): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const m = keys[mid]!;
    if (m < k || (strictly && m === k)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** In sorted `keys`, from `from` on, the first index whose key does not start with `prefix` (those that do are contiguous). */
function firstPast(keys: readonly string[], prefix: string, from: number): number {
  let lo = from;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]!.startsWith(prefix)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function validKey(key: string): boolean {
  return key.length > 0 && Buffer.byteLength(key, 'utf8') <= MAX_KEY_BYTES;
}

export class ObjectStore {
  readonly bucket: string;
  readonly limits: StoreLimits;
  readonly created = new Date();
  readonly #objects = new Map<string, StoredObject>();
  /** The keys in order, kept as objects come and go: a listing reads one page of it, never sorts them all. */
  readonly #sorted: string[] = [];
  readonly #uploads = new Map<string, Upload>();
  readonly #dir: DirStore | null;
  #used = 0;
  /**
   * Bytes and new keys promised to writes in flight: with dir= a write
   * awaits the disk between its check and its charge, and without the
   * promise every concurrent PUT would pass the same check (120 PUTs of
   * 2 MiB once left 38 MiB under size=8M).
   */
  #reservedBytes = 0;
  #reservedKeys = 0;

  private constructor(bucket: string, limits: StoreLimits, dir: DirStore | null) {
    this.bucket = bucket;
    this.limits = limits;
    this.#dir = dir;
  }

  /** A store in RAM, or one backed by `dir` (created if absent, loaded if present). */
  static async open(bucket: string, limits: StoreLimits, dir?: string): Promise<ObjectStore> {
    const d = dir ? await DirStore.open(dir) : null;
    const s = new ObjectStore(bucket, limits, d);
    if (d) {
      const { objects, uploads } = await d.load();
      for (const { meta, data } of objects) {
        s.#objects.set(meta.key, {
          key: meta.key,
          data,
          etag: meta.etag,
          contentType: meta.contentType,
          lastModified: new Date(meta.lastModified),
          metadata: meta.metadata ?? {},
        });
        s.#used += data.length;
      }
      s.#sorted.push(...[...s.#objects.keys()].sort());
      for (const { meta, parts } of uploads) {
        const u: Upload = {
          id: meta.uploadId!,
          key: meta.key,
          contentType: meta.contentType,
          metadata: meta.metadata ?? {},
          initiated: new Date(meta.lastModified),
          parts: new Map(),
        };
        for (const p of parts) {
          u.parts.set(p.meta.partNumber!, {
            partNumber: p.meta.partNumber!,
            data: p.data,
            etag: p.meta.etag,
            lastModified: new Date(p.meta.lastModified),
          });
          s.#used += p.data.length;
        }
        s.#uploads.set(u.id, u);
      }
    }
    return s;
  }

  get used(): number {
    return this.#used;
  }
  get count(): number {
    return this.#objects.size;
  }

  get(key: string): StoredObject | undefined {
    return this.#objects.get(key);
  }

  /** Could an object of `bytes` be stored under `key` now? (A check before a body is read; the store checks again.) */
  roomFor(key: string, bytes: number): boolean {
    return this.#room(bytes, this.#objects.get(key)?.data.length ?? 0);
  }

  /** Can `bytes` more be stored in place of `replacing` bytes? */
  #room(bytes: number, replacing: number): boolean {
    return this.#used + this.#reservedBytes - replacing + bytes <= this.limits.size;
  }

  /** `etag`: the data's hex MD5 when the caller computed it already (the server, while checking the body). */
  async put(
    key: string,
    data: Buffer,
    contentType: string,
    metadata: Record<string, string> = {},
    etag?: string,
  ): Promise<S3Result<StoredObject>> {
    if (!validKey(key)) return fail('InvalidArgument', 'bad key');
    if (data.length > this.limits.maxpart) return fail('EntityTooLarge');
    return this.#store(key, data, etag ?? (await md5hexPaced(data)), contentType, metadata);
  }

  async #store(
    key: string,
    data: Buffer,
    etag: string,
    contentType: string,
    metadata: Record<string, string>,
    freed = 0,
  ): Promise<S3Result<StoredObject>> {
    const old = this.#objects.get(key);
    if (!old && this.#objects.size + this.#reservedKeys >= this.limits.objects) return fail('TooManyObjects');
    if (!this.#room(data.length, (old?.data.length ?? 0) + freed)) return fail('InsufficientStorage');
    const obj: StoredObject = { key, data, etag, contentType, lastModified: new Date(), metadata };
    if (this.#dir) {
      const meta: FileMeta = { key, etag, contentType, lastModified: obj.lastModified.getTime(), metadata };
      const newKeys = old ? 0 : 1;
      this.#reservedBytes += data.length;
      this.#reservedKeys += newKeys;
      try {
        await this.#dir.writeObject(meta, data);
      } finally {
        this.#reservedBytes -= data.length;
        this.#reservedKeys -= newKeys;
      }
    }
    // Re-read after the await: another request may have changed the key meanwhile.
    const now = this.#objects.get(key);
    this.#used += data.length - (now?.data.length ?? 0);
    if (!now) this.#sorted.splice(firstAfter(this.#sorted, key, false), 0, key);
    this.#objects.set(key, obj);
    return ok(obj);
  }

  /** Idempotent: deleting a missing key succeeds. */
  async delete(key: string): Promise<void> {
    if (!this.#objects.has(key)) return;
    if (this.#dir) await this.#dir.removeObject(key);
    const obj = this.#objects.get(key);
    if (obj) {
      this.#used -= obj.data.length;
      this.#objects.delete(key);
      const i = firstAfter(this.#sorted, key, false);
      if (this.#sorted[i] === key) this.#sorted.splice(i, 1);
    }
  }

  list(q: ListQuery): ListPage {
    const keys = this.#sorted;
    const contents: StoredObject[] = [];
    const prefixes: string[] = [];
    let last = '';
    let truncated = false;
    // From the first key past both the marker and the start of the prefix, while keys have the prefix.
    let i = Math.max(firstAfter(keys, q.after, true), firstAfter(keys, q.prefix, false));
    while (i < keys.length) {
      const k = keys[i]!;
      if (!k.startsWith(q.prefix)) break;
      if (q.delimiter) {
        const at = k.indexOf(q.delimiter, q.prefix.length);
        if (at >= 0) {
          const cp = k.slice(0, at + q.delimiter.length);
          // Every key under this prefix is one entry: go past them all at once.
          const next = firstPast(keys, cp, i);
          if (cp <= q.after) {
            i = next;
            continue;
          } // covered by an earlier page (its prefix was the page's last entry)
          if (contents.length + prefixes.length >= q.maxKeys) {
            truncated = true;
            break;
          }
          prefixes.push(cp);
          last = cp;
          i = next;
          continue;
        }
      }
      if (contents.length + prefixes.length >= q.maxKeys) {
        truncated = true;
        break;
      }
      contents.push(this.#objects.get(k)!);
      last = k;
      i++;
    }
    return { contents, commonPrefixes: prefixes, truncated, lastKey: last };
  }

  // Multipart uploads.

  async createUpload(
    key: string,
    contentType: string,
    metadata: Record<string, string> = {},
  ): Promise<S3Result<string>> {
    if (!validKey(key)) return fail('InvalidArgument', 'bad key');
    if (this.#uploads.size >= MAX_UPLOADS) return fail('SlowDown', 'too many uploads in progress');
    const id = randomBytes(16).toString('hex');
    const u: Upload = { id, key, contentType, metadata, initiated: new Date(), parts: new Map() };
    if (this.#dir)
      await this.#dir.writeUpload({
        key,
        etag: '',
        contentType,
        lastModified: u.initiated.getTime(),
        metadata,
        uploadId: id,
      });
    this.#uploads.set(id, u);
    return ok(id);
  }

  upload(id: string, key: string): Upload | undefined {
    const u = this.#uploads.get(id);
    return u && u.key === key ? u : undefined;
  }

  async uploadPart(
    id: string,
    key: string,
    partNumber: number,
    data: Buffer,
    etag?: string,
  ): Promise<S3Result<StoredPart>> {
    const u = this.upload(id, key);
    if (!u) return fail('NoSuchUpload');
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER)
      return fail('InvalidArgument', 'partNumber must be 1..10000');
    if (data.length > this.limits.maxpart) return fail('EntityTooLarge');
    const tag = etag ?? (await md5hexPaced(data));
    if (this.#uploads.get(id) !== u) return fail('NoSuchUpload'); // aborted meanwhile
    const old = u.parts.get(partNumber);
    if (!this.#room(data.length, old?.data.length ?? 0)) return fail('InsufficientStorage');
    const part: StoredPart = { partNumber, data, etag: tag, lastModified: new Date() };
    if (this.#dir) {
      this.#reservedBytes += data.length;
      try {
        await this.#dir.writePart(
          {
            key,
            etag: part.etag,
            contentType: '',
            lastModified: part.lastModified.getTime(),
            metadata: {},
            uploadId: id,
            partNumber,
          },
          data,
        );
      } finally {
        this.#reservedBytes -= data.length;
      }
    }
    if (this.#uploads.get(id) !== u) return fail('NoSuchUpload'); // aborted meanwhile
    this.#used += data.length - (u.parts.get(partNumber)?.data.length ?? 0);
    u.parts.set(partNumber, part);
    return ok(part);
  }

  listParts(id: string, key: string): S3Result<{ upload: Upload; parts: StoredPart[] }> {
    const u = this.upload(id, key);
    if (!u) return fail('NoSuchUpload');
    return ok({ upload: u, parts: [...u.parts.values()].sort((a, b) => a.partNumber - b.partNumber) });
  }

  async complete(
    id: string,
    key: string,
    list: readonly { partNumber: number; etag: string }[],
  ): Promise<S3Result<StoredObject>> {
    const u = this.upload(id, key);
    if (!u) return fail('NoSuchUpload');
    const chosen: StoredPart[] = [];
    let prev = 0;
    for (const p of list) {
      if (p.partNumber <= prev) return fail('InvalidPartOrder');
      prev = p.partNumber;
      const have = u.parts.get(p.partNumber);
      if (!have || have.etag !== p.etag) return fail('InvalidPart', `part ${p.partNumber}`);
      chosen.push(have);
    }
    const data = await concatPaced(chosen.map((p) => p.data));
    if (this.upload(id, key) !== u) return fail('NoSuchUpload'); // completed or aborted meanwhile
    const digest = createHash('md5');
    for (const p of chosen) digest.update(Buffer.from(p.etag, 'hex'));
    const etag = `${digest.digest('hex')}-${chosen.length}`;
    // The parts' bytes are freed as the object takes their place.
    let partBytes = 0;
    for (const p of u.parts.values()) partBytes += p.data.length;
    const r = await this.#store(key, data, etag, u.contentType, { ...u.metadata }, partBytes);
    if (!r.ok) return r;
    await this.#dropUpload(u);
    return r;
  }

  async abort(id: string, key: string): Promise<S3Result<void>> {
    const u = this.upload(id, key);
    if (!u) return fail('NoSuchUpload');
    await this.#dropUpload(u);
    return ok(undefined);
  }

  async #dropUpload(u: Upload): Promise<void> {
    if (this.#dir) await this.#dir.removeUpload(u.id);
    if (this.#uploads.get(u.id) !== u) return;
    this.#uploads.delete(u.id);
    for (const p of u.parts.values()) this.#used -= p.data.length;
  }
}
