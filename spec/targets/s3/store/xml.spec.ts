// The S3 store's XML: the reader of DeleteObjects and CompleteMultipartUpload
// bodies (what clients send is taken, anything else is refused, S3's limits
// hold, big documents take several turns) and the writer (escapes that read
// back as the text written). Documents are written by hand here; the
// differential case checks the reader against fast-xml-parser on random
// well-formed documents.

import { expect } from 'chai';
import { XMLParser } from 'fast-xml-parser';
import { Pacer } from '../../../../lib/targets/pace';
import { decodeText } from '../../../../lib/targets/s3/store/xml-reader';
import {
  MAX_COMPLETE_BODY,
  MAX_DELETE_BODY,
  parseCompleteMultipart,
  parseDeleteObjects,
} from '../../../../lib/targets/s3/store/xml-requests';
import { escapeXml, xmlDocument, xmlDocumentPaced } from '../../../../lib/targets/s3/store/xml-writer';
import { uriEncode } from '../../../../lib/targets/s3/store/sigv4';
import { Prng } from '../../../support/ionic/rig';

const keysOf = async (xml: string | Buffer): Promise<string[] | null> => {
  const r = await parseDeleteObjects(Buffer.isBuffer(xml) ? xml : Buffer.from(xml));
  return r ? r.keys.map((k) => k.toString('utf8')) : null;
};

describe('s3 xml: request documents', () => {
  it('takes what SDKs send: declaration, xmlns, whitespace, entities, character references, CDATA, comments, a BOM, Quiet', async () => {
    const doc =
      '\ufeff<?xml version="1.0" encoding="UTF-8"?>\n<!-- a comment -->\n<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">\n' +
      '  <Quiet>true</Quiet>\n  <Object><Key>a&amp;b&lt;c&gt;d&quot;e&apos;f</Key><VersionId>null</VersionId></Object>\n' +
      '  <Object>\n    <Key>&#x1F600;&#233;x</Key>\n  </Object>\n  <Object><Key><![CDATA[<raw> & ]]>tail</Key></Object>\n' +
      '  <Object><Key> spaced </Key></Object>\n</Delete>\n<?pi after?>\n';
    const r = await parseDeleteObjects(Buffer.from(doc));
    expect(r!.quiet).to.equal(true);
    expect(r!.keys.map((k) => k.toString('utf8'))).to.deep.equal([
      'a&b<c>d"e\'f',
      '\u{1F600}\u00e9x',
      '<raw> & tail',
      ' spaced ',
    ]);
  });

  it('line ends are normalized as XML reads them (CR LF and CR are LF; &#xD; stays a CR)', async () => {
    expect(await keysOf('<Delete><Object><Key>a\r\nb\rc&#xD;d</Key></Object></Delete>')).to.deep.equal(['a\nb\nc\rd']);
    expect(decodeText(Buffer.from('x&#13;\r\ny'))).to.equal('x\r\ny');
  });

  for (const [what, doc] of [
    [
      'a DOCTYPE (no entity definitions at all)',
      '<!DOCTYPE d [<!ENTITY x "y">]><Delete><Object><Key>&x;</Key></Object></Delete>',
    ],
    ['an unknown entity', '<Delete><Object><Key>&nbsp;</Key></Object></Delete>'],
    ['a bare &', '<Delete><Object><Key>a & b</Key></Object></Delete>'],
    ['&#0;', '<Delete><Object><Key>&#0;</Key></Object></Delete>'],
    ['a surrogate reference', '<Delete><Object><Key>&#xD800;</Key></Object></Delete>'],
    ['a reference past U+10FFFF', '<Delete><Object><Key>&#x110000;</Key></Object></Delete>'],
    ['a mismatched end tag', '<Delete><Object><Key>k</Object></Key></Delete>'],
    ['an unclosed root', '<Delete><Object><Key>k</Key></Object>'],
    ['two roots', '<Delete><Object><Key>k</Key></Object></Delete><Delete/>'],
    ['text outside the root', 'x<Delete><Object><Key>k</Key></Object></Delete>'],
    ['another root element', '<Remove><Object><Key>k</Key></Object></Remove>'],
    ['an element S3 does not define', '<Delete><a/><Object><Key>k</Key></Object></Delete>'],
    ['a field S3 does not define in Object', '<Delete><Object><Key>k</Key><Colour>red</Colour></Object></Delete>'],
    ['two Keys in one Object', '<Delete><Object><Key>k</Key><Key>l</Key></Object></Delete>'],
    ['an element inside Key', '<Delete><Object><Key><b>k</b></Key></Object></Delete>'],
    ['an Object without a Key', '<Delete><Object><VersionId>1</VersionId></Object></Delete>'],
    ['an empty Key', '<Delete><Object><Key></Key></Object></Delete>'],
    ['no Object', '<Delete><Quiet>true</Quiet></Delete>'],
    ['a key of 1,025 bytes', `<Delete><Object><Key>${'k'.repeat(1025)}</Key></Object></Delete>`],
    ['an attribute without quotes', '<Delete a=b><Object><Key>k</Key></Object></Delete>'],
    ['< in an attribute', '<Delete a="<"><Object><Key>k</Key></Object></Delete>'],
    ['an unterminated comment', '<Delete><!-- <Object><Key>k</Key></Object></Delete>'],
    ['a text run past 64 KiB', `<Delete><Object><Key>${' '.repeat(70_000)}</Key></Object></Delete>`],
    ['an empty body', ''],
  ] as const) {
    it(`refuses ${what}`, async () => {
      expect(await keysOf(doc)).to.equal(null);
    });
  }

  it("S3's limits: 1,000 keys pass, 1,001 are refused; a body past the cap is refused before it is read", async () => {
    const objs = (n: number): string =>
      Array.from({ length: n }, (_, i) => `<Object><Key>k${i}</Key></Object>`).join('');
    expect((await keysOf(`<Delete>${objs(1000)}</Delete>`))!.length).to.equal(1000);
    expect(await keysOf(`<Delete>${objs(1001)}</Delete>`)).to.equal(null);
    expect(await keysOf(Buffer.alloc(MAX_DELETE_BODY + 1, 0x20))).to.equal(null);
    expect(await parseCompleteMultipart(Buffer.alloc(MAX_COMPLETE_BODY + 1, 0x20))).to.equal(null);
  });

  it('CompleteMultipartUpload: numbers and ETags (quotes dropped), checksums read past; 10,001 parts and bad parts refused', async () => {
    const part = (n: number | string, etag = '"abc"'): string =>
      `<Part><ChecksumCRC32>AAAAAA==</ChecksumCRC32><PartNumber> ${n} </PartNumber><ETag>${etag.replace(/"/g, '&quot;')}</ETag></Part>`;
    expect(
      await parseCompleteMultipart(
        Buffer.from(`<CompleteMultipartUpload>${part(1)}${part(2, 'def')}</CompleteMultipartUpload>`),
      ),
    ).to.deep.equal([
      { partNumber: 1, etag: 'abc' },
      { partNumber: 2, etag: 'def' },
    ]);
    const many = (n: number): Buffer =>
      Buffer.from(
        `<CompleteMultipartUpload>${Array.from({ length: n }, (_, i) => part(i + 1)).join('')}</CompleteMultipartUpload>`,
      );
    expect((await parseCompleteMultipart(many(10_000)))!.length).to.equal(10_000);
    expect(await parseCompleteMultipart(many(10_001))).to.equal(null);
    for (const bad of [
      part('x'),
      part('1.5'),
      part(''),
      '<Part><PartNumber>1</PartNumber></Part>',
      '<Part><ETag>a</ETag></Part>',
      '<Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber><ETag>a</ETag></Part>',
      '<Other/>',
    ]) {
      expect(
        await parseCompleteMultipart(Buffer.from(`<CompleteMultipartUpload>${bad}</CompleteMultipartUpload>`)),
        bad,
      ).to.equal(null);
    }
  });

  it('a big document is read over several turns of the loop', async () => {
    const p = new Pacer(1);
    const doc = Buffer.from(
      `<Delete>${Array.from({ length: 1000 }, (_, i) => `<Object><Key>${'&amp;'.repeat(200)}${i}</Key></Object>`).join('')}</Delete>`,
    );
    let turnsSeen = 0;
    const ticker = setInterval(() => {
      turnsSeen++;
    }, 0);
    const r = await parseDeleteObjects(doc, p);
    clearInterval(ticker);
    expect(r!.keys.length).to.equal(1000);
    expect(p.counts.steps).to.be.greaterThan(10);
    expect(p.counts.turns).to.be.greaterThan(1);
    expect(turnsSeen, 'timers ran while it was read').to.be.greaterThan(0);
  });

  it('reads what fast-xml-parser reads, on random well-formed documents', async () => {
    const fxp = new XMLParser({
      ignoreAttributes: true,
      parseTagValue: false,
      trimValues: false,
      processEntities: true,
      isArray: (n) => n === 'Object',
    });
    const rnd = new Prng(0xd1ff);
    const alphabet = ['a', 'Z', '0', '/', '-', ' ', 'é', '€', '\u{1F600}', '&', '<', '>', '"', "'"];
    for (let doc = 0; doc < 200; doc++) {
      const keys = Array.from({ length: 1 + rnd.below(20) }, () => {
        let k = alphabet[rnd.below(3)]!; // not whitespace at either end: fast-xml-parser trims those
        for (let i = rnd.below(30); i > 0; i--) k += alphabet[rnd.below(alphabet.length)];
        return k + alphabet[rnd.below(3)]!;
      });
      const xml = xmlDocument('Delete', { Object: keys.map((k) => ({ Key: k })) });
      const ours = await keysOf(xml);
      const theirs = (fxp.parse(xml.toString('utf8')) as { Delete: { Object: { Key: string }[] } }).Delete.Object.map(
        (o) => String(o.Key),
      );
      expect(ours, xml.toString('utf8')).to.deep.equal(keys);
      expect(theirs).to.deep.equal(keys);
    }
  });
});

describe('s3 xml: documents out', () => {
  it('escapes the markup characters and CR; what is written reads back as it was', async () => {
    expect(escapeXml('a&b<c>d"e\'f\rg')).to.equal('a&amp;b&lt;c&gt;d&quot;e&apos;f&#xD;g');
    const keys = ['plain', 'a&b', '<tag>', 'quote"s', "it's", 'cr\r\nlf', 'é€\u{1F600}'];
    const doc = xmlDocument('Delete', { Object: keys.map((k) => ({ Key: k })) });
    expect(await keysOf(doc)).to.deep.equal(keys);
    expect(doc.toString('utf8')).to.match(
      /^<\?xml version="1.0" encoding="UTF-8"\?><Delete xmlns="http:\/\/s3.amazonaws.com\/doc\/2006-03-01\/"><Object><Key>plain<\/Key><\/Object>/,
    );
  });

  it('a document of many 64 KiB pieces is the document written by hand, whatever crosses a piece boundary', async () => {
    // Keys of every length around the boundary: markup, text, escaped text and bytes each land across one.
    const entries = Array.from({ length: 4000 }, (_, i) => ({
      Key: `k${i}-${'x'.repeat(i % 97)}`,
      Size: i,
      Tag: i % 3 === 0 ? `a&b${i}` : Buffer.from(`b${i}`),
    }));
    const byHand =
      '<?xml version="1.0" encoding="UTF-8"?><L xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      entries
        .map(
          (e) =>
            `<C><Key>${e.Key}</Key><Size>${e.Size}</Size><Tag>${typeof e.Tag === 'string' ? e.Tag.replace('&', '&amp;') : e.Tag.toString()}</Tag></C>`,
        )
        .join('') +
      '</L>';
    const pieces = await xmlDocumentPaced('L', { C: entries }, new Pacer(1));
    expect(pieces.length).to.be.greaterThan(4);
    expect(Buffer.concat(pieces).toString('utf8')).to.equal(byHand);
    expect(xmlDocument('L', { C: entries }).toString('utf8')).to.equal(byHand);
  });

  it('lists, nested elements, empty elements, numbers, booleans and byte values; the paced writer gives the same bytes in pieces', async () => {
    const body = {
      Name: 'b',
      IsTruncated: false,
      MaxKeys: 1000,
      Empty: {},
      Contents: [
        { Key: Buffer.from('k&1'), Size: 3 },
        { Key: 'k2', Size: 4 },
      ],
      Nothing: [],
    };
    const whole = xmlDocument('R', body).toString('utf8');
    expect(whole).to.equal(
      '<?xml version="1.0" encoding="UTF-8"?><R xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>false</IsTruncated>' +
        '<MaxKeys>1000</MaxKeys><Empty></Empty><Contents><Key>k&amp;1</Key><Size>3</Size></Contents><Contents><Key>k2</Key><Size>4</Size></Contents></R>',
    );
    const big = { Deleted: Array.from({ length: 3000 }, (_, i) => ({ Key: `key-${i}-&-${'x'.repeat(i % 50)}` })) };
    const pieces = await xmlDocumentPaced('DeleteResult', big, new Pacer(1));
    expect(pieces.length).to.be.greaterThan(1);
    expect(Buffer.concat(pieces).equals(xmlDocument('DeleteResult', big))).to.equal(true);
  });
});

describe('s3 url encoding (SigV4 and encoding-type=url)', () => {
  /** RFC 3986 as SigV4 has it, byte by byte from the definition: unreserved kept, the rest %XX. */
  function byHand(text: string, keepSlash: boolean): string {
    let out = '';
    for (const b of Buffer.from(text, 'utf8')) {
      const c = String.fromCharCode(b);
      out +=
        /[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === '/')
          ? c
          : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
    }
    return out;
  }

  it("matches the definition on random strings: ASCII, BMP, astral, lone surrogates, !'()*", () => {
    const rnd = new Prng(0x0e1c);
    for (let i = 0; i < 5000; i++) {
      let s = '';
      for (let n = rnd.below(20); n > 0; n--) {
        const r = rnd.below(10);
        s +=
          r < 5
            ? String.fromCharCode(0x20 + rnd.below(95))
            : r < 8
              ? String.fromCharCode(rnd.below(0x800))
              : r < 9
                ? String.fromCharCode(0xd800 + rnd.below(0x800))
                : String.fromCodePoint(0x10000 + rnd.below(0x1000));
      }
      for (const keep of [true, false]) expect(uriEncode(s, keep), JSON.stringify(s)).to.equal(byHand(s, keep));
    }
  });
});
