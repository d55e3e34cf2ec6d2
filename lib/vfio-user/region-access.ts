// Region access, the hot path: REGION_READ and REGION_WRITE are decoded in
// place from the payload through the vfio_user_region_access table (no request
// object, no garbage per access), checked (region exists, size, count within
// maxDataXferSize, offset + count inside the region, direction allowed), and
// handed to the device's region handler. REGION_WRITE_MULTI checks every entry
// before applying any. A handler that throws or returns a bad errno is our bug:
// it goes through the last-resort guard (an error line with the stack, rate
// limited, and the contained-bug counter the stats file and /metrics show),
// the access answers EIO and the session keeps serving.

import { Errno, errnoName } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { getField, U64_UNSAFE, vfio_user_region_access, vfio_user_write_multi } from '../../protocol/layouts';
import type { RegionWriteMulti } from '../../protocol/messages';
import { replyFlags } from '../../protocol/serializer';
import { reportBug } from '../guard';
import { warnLimited } from '../log';
import { PCI_NUM_REGIONS, RegionHandler } from './device';
import { NO_FDS, SessionState } from './session-state';
import type { RawHeader } from './transport';

/** Region, bounds and direction checks shared by every region access; the handler when they pass. */
function regionCheck(
  s: SessionState,
  region: number,
  offset: number,
  count: number,
  write: boolean,
): ProtocolError | RegionHandler {
  if (offset === U64_UNSAFE) return protocolError('OUT_OF_RANGE', 'region offset above 2^53-1');
  const r = region < PCI_NUM_REGIONS ? s.regions[region] : undefined;
  if (!r || r.size === 0) return protocolError('BAD_INDEX', `region ${region} does not exist`);
  if (count > s.limits.maxDataXferSize)
    return protocolError('COUNT_TOO_LARGE', `region access of ${count} bytes (limit ${s.limits.maxDataXferSize})`);
  if (offset > r.size || count > r.size - offset)
    return protocolError(
      'OUT_OF_RANGE',
      `region ${region} access 0x${offset.toString(16)}+${count} outside its 0x${r.size.toString(16)} bytes`,
    );
  if (write ? !r.writable : !r.readable)
    return protocolError('NOT_SUPPORTED', `region ${region} is not ${write ? 'writable' : 'readable'}`, Errno.EINVAL);
  return r;
}

/** REGION_READ, decoded in place (hot path: no request object). */
export function regionRead(s: SessionState, h: RawHeader, p: Buffer, noReply: boolean): void {
  if (p.length < vfio_user_region_access.SIZE) {
    s.reject(
      h,
      NO_FDS,
      protocolError('SHORT_PAYLOAD', `REGION_READ payload ${p.length} < ${vfio_user_region_access.SIZE}`),
    );
    return;
  }
  const offset = getField(p, 0, vfio_user_region_access.offset);
  const region = getField(p, 0, vfio_user_region_access.region);
  const count = getField(p, 0, vfio_user_region_access.count);
  const r = regionCheck(s, region, offset, count, false);
  if (!('read' in r)) {
    s.reject(h, NO_FDS, r);
    return;
  }
  s.stats.regionReads++;
  const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
  const at = w.reserve(vfio_user_region_access.SIZE + count);
  w.field(at, vfio_user_region_access.offset, offset)
    .field(at, vfio_user_region_access.region, region)
    .field(at, vfio_user_region_access.count, count);
  const errno = count ? safeRead(s, region, r, offset, w.view(at + vfio_user_region_access.SIZE, count)) : 0;
  if (errno !== 0 || noReply) {
    w.abort();
    if (errno !== 0)
      s.reject(
        h,
        NO_FDS,
        protocolError(
          'DEVICE_ERROR',
          `region ${region} read at 0x${offset.toString(16)} failed: ${errnoName(errno)}`,
          errno,
        ),
      );
    return;
  }
  w.end();
}

/** REGION_WRITE, decoded in place (hot path: no request object). */
export function regionWrite(s: SessionState, h: RawHeader, p: Buffer, noReply: boolean): void {
  if (p.length < vfio_user_region_access.SIZE) {
    s.reject(
      h,
      NO_FDS,
      protocolError('SHORT_PAYLOAD', `REGION_WRITE payload ${p.length} < ${vfio_user_region_access.SIZE}`),
    );
    return;
  }
  const offset = getField(p, 0, vfio_user_region_access.offset);
  const region = getField(p, 0, vfio_user_region_access.region);
  const count = getField(p, 0, vfio_user_region_access.count);
  if (p.length - vfio_user_region_access.SIZE !== count) {
    s.reject(
      h,
      NO_FDS,
      protocolError(
        'PAYLOAD_MISMATCH',
        `REGION_WRITE count ${count} but ${p.length - vfio_user_region_access.SIZE} data bytes`,
      ),
    );
    return;
  }
  const r = regionCheck(s, region, offset, count, true);
  if (!('write' in r)) {
    s.reject(h, NO_FDS, r);
    return;
  }
  s.stats.regionWrites++;
  const errno = count ? safeWrite(s, region, r, offset, s.writeData.get(p, vfio_user_region_access.SIZE, count)) : 0;
  if (errno !== 0) {
    s.reject(
      h,
      NO_FDS,
      protocolError(
        'DEVICE_ERROR',
        `region ${region} write at 0x${offset.toString(16)} failed: ${errnoName(errno)}`,
        errno,
      ),
    );
    return;
  }
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_user_region_access.SIZE);
    w.field(at, vfio_user_region_access.offset, offset)
      .field(at, vfio_user_region_access.region, region)
      .field(at, vfio_user_region_access.count, count);
    w.end();
  }
}

export function writeMulti(
  s: SessionState,
  h: RawHeader,
  req: RegionWriteMulti,
  noReply: boolean,
): ProtocolError | null {
  // Validate every entry before applying any, so a bad batch changes nothing.
  const handlers: RegionHandler[] = [];
  for (const e of req.entries) {
    const r = regionCheck(s, e.region, e.offset, e.count, true);
    if (!('write' in r)) return r;
    handlers.push(r);
  }
  req.entries.forEach((e, i) => {
    s.stats.regionWrites++;
    const errno = safeWrite(s, e.region, handlers[i]!, e.offset, e.data.subarray(0, e.count));
    if (errno !== 0)
      warnLimited(s.log, s.limiter, 'write-multi', `REGION_WRITE_MULTI entry ${i} failed: ${errnoName(errno)}`);
  });
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    w.field(w.reserve(vfio_user_write_multi.SIZE), vfio_user_write_multi.wr_cnt, req.entries.length);
    w.end();
  }
  return null;
}

// The region hot paths call the handler without a closure per access
// (garbage: see transport.ts); only the error path builds anything.

function safeRead(s: SessionState, region: number, r: RegionHandler, offset: number, dst: Buffer): number {
  try {
    const e = r.read(offset, dst);
    return Number.isInteger(e) && e >= 0 ? e : badErrno(s, region, 'read', e);
  } catch (err) {
    reportBug(s.log, `region ${region} read handler (offset 0x${offset.toString(16)})`, err);
    return Errno.EIO;
  }
}

function safeWrite(s: SessionState, region: number, r: RegionHandler, offset: number, src: Buffer): number {
  try {
    const e = r.write(offset, src);
    return Number.isInteger(e) && e >= 0 ? e : badErrno(s, region, 'write', e);
  } catch (err) {
    reportBug(s.log, `region ${region} write handler (offset 0x${offset.toString(16)})`, err);
    return Errno.EIO;
  }
}

/** A handler returned something that is not an errno: our bug too. */
function badErrno(s: SessionState, region: number, op: string, e: unknown): number {
  reportBug(s.log, `region ${region} ${op} handler`, new Error(`returned ${String(e)}, not an errno`));
  return Errno.EIO;
}
