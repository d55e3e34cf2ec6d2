// l2_switch.json: MAC learning through digests. With smac's default
// mac_learn and dmac's default broadcast, an unknown source produces a
// digest (srcAddr, ingress_port) and a flood (mgid 1); once the control plane
// installs what it learned, frames are forwarded to the learned port and no
// more digests come.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { ethernet, fixtureText } from '../../support/p4';

const A = '00:00:00:00:00:0a';
const B = '00:00:00:00:00:0b';

describe('p4: l2_switch learning', () => {
  let engine: P4Engine;
  beforeEach(() => {
    engine = P4Engine.load(fixtureText('l2_switch.json'));
    for (const c of ['table_set_default smac mac_learn', 'table_set_default dmac broadcast'])
      expect(runCommand(engine, c).ok, c).to.equal(true);
  });

  const frame = (dst: string, src: string) => Buffer.concat([ethernet(dst, src, 0x88b5), Buffer.alloc(50, 0x5a)]);

  /** What a control plane does with the digests: learn the source on its port. */
  function learn(digests: { list: number; values: bigint[] }[]): void {
    for (const d of digests) {
      expect(d.list).to.equal(1);
      const [srcMac, port] = d.values;
      const m = srcMac!.toString(16).padStart(12, '0').match(/../g)!.join(':');
      expect(runCommand(engine, `table_add smac _nop ${m}`).ok).to.equal(true);
      expect(runCommand(engine, `table_add dmac forward ${m} => ${port}`).ok).to.equal(true);
    }
  }

  it('floods an unknown destination and reports the unknown source', () => {
    const r = engine.process(frame(B, A), 1);
    expect(r.dropped).to.equal(false);
    expect(r.multicastGroup).to.equal(1);
    expect(r.digests).to.deep.equal([{ list: 1, values: [0x0an, 1n] }]);
    expect(r.frame!.equals(frame(B, A))).to.equal(true);
  });

  it('forwards to the learned port after the control plane installs the digest', () => {
    learn(engine.process(frame(B, A), 1).digests);
    const r = engine.process(frame(A, B), 2);
    expect(r.multicastGroup).to.equal(0);
    expect(r.egressPort).to.equal(1);
    expect(r.digests).to.have.length(1); // B is new
    learn(r.digests);
    const back = engine.process(frame(B, A), 1);
    expect(back.egressPort).to.equal(2);
    expect(back.digests).to.have.length(0);
    expect(back.multicastGroup).to.equal(0);
  });

  it('refuses a second entry for the same key', () => {
    expect(runCommand(engine, `table_add smac _nop ${A}`).ok).to.equal(true);
    const r = runCommand(engine, `table_add smac _nop ${A}`);
    expect(r.ok).to.equal(false);
  });
});
