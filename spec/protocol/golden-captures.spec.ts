// Every message of every recorded session decodes and re-encodes to the same bytes.
import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import { commandName, decodeMessage, encodeMessage, isReply, parseCapabilities } from '../../protocol';
import { readCapture } from '../../lib/vfio-user/pcapng';

const FIXTURES = path.join(__dirname, '..', '..', '..', 'fixtures', 'vfio-user');

describe('protocol: golden captures', () => {
  const files = fs
    .readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.pcapng'))
    .sort();

  it('finds the three recorded sessions', () => {
    expect(files).to.include.members([
      'client-lvu-sample.pcapng',
      'qemu-boot-lvu-gpio.pcapng',
      'qemu-boot-lvu-sample.pcapng',
    ]);
  });

  for (const file of files) {
    describe(file, () => {
      const messages = readCapture(path.join(FIXTURES, file));

      it('has messages whose headers match the capture comments', () => {
        expect(messages.length).to.be.greaterThan(100);
        for (const m of messages) {
          expect(m.bytes.length, `frame ${m.frame}`).to.equal(m.comment.size);
          expect(m.bytes.readUInt16LE(0), `frame ${m.frame} id`).to.equal(m.comment.id);
          expect(m.bytes.readUInt16LE(2), `frame ${m.frame} cmd`).to.equal(m.comment.cmd);
          expect(commandName(m.bytes.readUInt16LE(2))).to.equal(m.comment.name);
        }
      });

      it('decodes every message and re-encodes it to identical bytes', () => {
        let n = 0;
        for (const m of messages) {
          const d = decodeMessage(m.bytes);
          if (!d.ok)
            throw new Error(
              `frame ${m.frame} (${m.comment.name} ${m.comment.type}): ${d.error.code} ${d.error.detail}`,
            );
          expect(isReply(d.value.header)).to.equal(m.comment.type === 'reply');
          const again = encodeMessage(d.value.header, d.value.body);
          expect(again.toString('hex'), `frame ${m.frame} ${m.comment.name} ${m.comment.type}`).to.equal(
            m.bytes.toString('hex'),
          );
          n++;
        }
        expect(n).to.equal(messages.length);
      });

      it('has VERSION capabilities that validate', () => {
        const versions = messages.filter((m) => m.comment.name === 'VERSION');
        expect(versions.length).to.equal(2);
        for (const v of versions) {
          const d = decodeMessage(v.bytes);
          if (!d.ok || (d.value.body.kind !== 'version' && d.value.body.kind !== 'versionReply'))
            throw new Error('VERSION did not decode');
          const caps = parseCapabilities(d.value.body.json);
          expect(caps.ok, JSON.stringify(caps)).to.equal(true);
        }
      });
    });
  }
});
