// hw_counters (ionic RDMA R7): the STATS_* and QP_STATS_* admin commands write
// counter names, or their values, into a driver buffer.
//
// - Header buffer: 32-byte records {BE32 type << 28 | value offset, 28-byte
//   NUL-terminated name}, ended by a record of type 0 (we zero the rest of
//   the buffer, so the end is there even if the host did not clear it).
// - Values buffer: one LE64 per counter at offset 8 * i (naturally aligned,
//   inside the page, as the host checks).
// The device counters are lib/rdma/counters.ts DEVICE_COUNTER_NAMES, the
// per-QP ones QP_COUNTER_NAMES (QP_STATS_VALS names the QP in id_ver).

import { COUNTER_NAME_MAX } from '../../rdma/counters';
import { STAT_TYPE_SHIFT, STATS_BUF_MAX, StatType } from './constants';
import { ionic_v1_stat, ionic_v1_stat_value } from './layouts';
import { setField, viewRaw } from '../../../protocol/field';

/** Bytes of values for `n` counters. */
export function valuesSize(n: number): number {
  return ionic_v1_stat_value.SIZE * n;
}

/** The header records for `names` (LE64 values, counter i at i * ionic_v1_stat_value.SIZE), padded with zeros to `size` bytes. */
export function buildStatHeaders(names: readonly string[], size: number): Buffer {
  const b = Buffer.alloc(Math.min(size, STATS_BUF_MAX));
  names.forEach((name, i) => {
    const at = i * ionic_v1_stat.SIZE;
    if (at + ionic_v1_stat.SIZE > b.length) return;
    setField(
      b,
      at,
      ionic_v1_stat.type_off,
      ((StatType.LE64 << STAT_TYPE_SHIFT) | (i * ionic_v1_stat_value.SIZE)) >>> 0,
    );
    viewRaw(b, at, ionic_v1_stat.name).write(
      name.slice(0, Math.min(COUNTER_NAME_MAX, ionic_v1_stat.name.size - 1)),
      'latin1',
    );
  });
  return b;
}

/** The values image: LE64 per counter (doubles are exact below 2^53), padded with zeros to `size` bytes. */
export function buildStatValues(values: Float64Array, size: number): Buffer {
  const b = Buffer.alloc(Math.min(size, STATS_BUF_MAX));
  for (let i = 0; i < values.length && (i + 1) * ionic_v1_stat_value.SIZE <= b.length; i++) {
    const v = Math.max(0, Math.min(values[i]!, Number.MAX_SAFE_INTEGER));
    setField(b, i * ionic_v1_stat_value.SIZE, ionic_v1_stat_value.value, Math.floor(v));
  }
  return b;
}

/** The smallest buffer that holds every header record and the terminator. */
export function headersNeeded(n: number): number {
  return (n + 1) * ionic_v1_stat.SIZE;
}
