// The mesh's buffer pool: large frames reuse slabs, small ones do not touch
// the pool, a slab is never handed to two users, and the free list is bounded.

import { expect } from 'chai';
import { BufferPool, MIN_POOLED } from '../../lib/mesh/buffer-pool';

describe('mesh: buffer pool', () => {
  it('serves a large buffer from a slab and reuses the slab once it is given back', () => {
    const pool = new BufferPool(8 * MIN_POOLED);
    const a = pool.take(MIN_POOLED + 60);
    expect(a.length).to.equal(MIN_POOLED + 60);
    expect(pool.allocated).to.equal(1);
    pool.give(a.subarray(60)); // a view of it is enough to name the slab
    const b = pool.take(MIN_POOLED + 1);
    expect(b.buffer).to.equal(a.buffer);
    expect(pool.allocated).to.equal(1);
  });

  it('a slab given twice is handed out once; a buffer not from the pool is ignored', () => {
    const pool = new BufferPool(8 * MIN_POOLED);
    const a = pool.take(2 * MIN_POOLED);
    pool.give(a);
    pool.give(a);
    pool.give(Buffer.alloc(3 * MIN_POOLED));
    expect(pool.freeBytes).to.equal(2 * MIN_POOLED);
    const b = pool.take(2 * MIN_POOLED);
    const c = pool.take(2 * MIN_POOLED);
    expect(b.buffer).to.equal(a.buffer);
    expect(c.buffer).to.not.equal(a.buffer);
  });

  it('small buffers bypass the pool; free slabs beyond the cap are left to the GC', () => {
    const pool = new BufferPool(2 * MIN_POOLED);
    const s = pool.take(100);
    pool.give(s);
    expect(pool.allocated).to.equal(0);
    const x = pool.take(MIN_POOLED);
    const y = pool.take(MIN_POOLED);
    const z = pool.take(MIN_POOLED);
    for (const b of [x, y, z]) pool.give(b);
    expect(pool.freeBytes).to.equal(2 * MIN_POOLED);
  });
});
