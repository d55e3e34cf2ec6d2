// Address text: IPv4 and IPv6 literals (the latter with an optional zone),
// host names, HOST:PORT with IPv6 in brackets, and RoCE GIDs in inet_pton
// form. Pure functions with strict grammars: these read operator input and
// peer-supplied host names, so anything odd is refused rather than guessed.

/** Longest host name (RFC 1035 presentation form, no trailing dot). */
const MAX_HOST_NAME = 253;

/** Longest IPv6 zone (an interface name is at most 15 bytes on Linux; a numeric scope is shorter). */
const MAX_ZONE = 15;

/** Strict dotted-quad: four decimal parts 0..255, no leading zeros, no extra characters. */
function parseIPv4(text: string): [number, number, number, number] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    out.push(v);
  }
  return [out[0]!, out[1]!, out[2]!, out[3]!];
}

/** An IPv6 literal (no zone, no brackets) as 16 bytes; an IPv4 tail is allowed where RFC 4291 allows it. */
export function parseIPv6(text: string): Buffer | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (s: string, allowV4Tail: boolean): number[] | undefined => {
    if (s === '') return [];
    const groups = s.split(':');
    const words: number[] = [];
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i]!;
      if (allowV4Tail && i === groups.length - 1 && g.includes('.')) {
        const v4 = parseIPv4(g);
        if (!v4) return undefined;
        words.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
        continue;
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      words.push(parseInt(g, 16));
    }
    return words;
  };
  let words: number[];
  if (halves.length === 2) {
    const head = parseGroups(halves[0]!, false);
    const tail = parseGroups(halves[1]!, true);
    if (!head || !tail) return undefined;
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return undefined;
    words = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    const all = parseGroups(text, true);
    if (!all || all.length !== 8) return undefined;
    words = all;
  }
  const out = Buffer.alloc(16);
  for (let i = 0; i < 8; i++) out.writeUInt16BE(words[i]!, i * 2);
  return out;
}

/** RFC 1123 host name: dot-separated labels of letters, digits and hyphens, not all-numeric (that is a bad IPv4). */
function isHostName(text: string): boolean {
  if (text.length === 0 || text.length > MAX_HOST_NAME) return false;
  const labels = text.split('.');
  for (const l of labels) {
    if (!/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(l)) return false;
  }
  return !/^[0-9.]+$/.test(text);
}

type HostKind = 'ipv4' | 'ipv6' | 'name';

interface ParsedHost {
  readonly kind: HostKind;
  /** What to hand to connect/listen: the literal (IPv6 with its %zone, no brackets) or the name. */
  readonly host: string;
}

/** Classify a bare host (IPv6 without brackets, optionally with %zone). Undefined when it is none of the three. */
export function parseHost(text: string): ParsedHost | undefined {
  if (parseIPv4(text)) return { kind: 'ipv4', host: text };
  const pct = text.indexOf('%');
  const addr = pct < 0 ? text : text.slice(0, pct);
  if (addr.includes(':')) {
    if (!parseIPv6(addr)) return undefined;
    if (pct >= 0) {
      const zone = text.slice(pct + 1);
      if (!/^[A-Za-z0-9_.-]+$/.test(zone) || zone.length > MAX_ZONE) return undefined;
    }
    return { kind: 'ipv6', host: text };
  }
  if (pct >= 0) return undefined;
  if (isHostName(text)) return { kind: 'name', host: text };
  return undefined;
}

/** A TCP port in decimal, 1..65535, no sign, no leading zeros. */
export function parsePort(text: string): number | undefined {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return undefined;
  const v = Number(text);
  return v <= 65535 ? v : undefined;
}

export interface HostPort extends ParsedHost {
  readonly port: number;
}

/** HOST:PORT, with an IPv6 host in brackets (`[fe80::1%eth0]:7000`). Returns a reason on failure. */
export function parseHostPort(text: string): HostPort | string {
  let hostText: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return `missing ']' after IPv6 address in '${text}'`;
    hostText = text.slice(1, close);
    if (text[close + 1] !== ':') return `expected ':PORT' after ']' in '${text}'`;
    portText = text.slice(close + 2);
    const h = parseHost(hostText);
    if (!h || h.kind !== 'ipv6') return `'${hostText}' is not an IPv6 address`;
    const port = parsePort(portText);
    if (port === undefined) return `bad port '${portText}' (1-65535)`;
    return { ...h, port };
  }
  const colon = text.lastIndexOf(':');
  if (colon < 0) return `expected HOST:PORT, got '${text}'`;
  hostText = text.slice(0, colon);
  portText = text.slice(colon + 1);
  if (hostText.includes(':')) return `an IPv6 address goes in brackets: [${hostText}]:${portText}`;
  if (hostText === '') return `missing host before ':${portText}'`;
  const h = parseHost(hostText);
  if (!h) return `'${hostText}' is not an IPv4 address or host name`;
  const port = parsePort(portText);
  if (port === undefined) return `bad port '${portText}' (1-65535)`;
  return { ...h, port };
}

/** Format host and port for people and for net (brackets around IPv6). */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

// ---------------------------------------------------------------------------
// GIDs

/** A RoCE GID from text: an IPv6 address, or an IPv4 address stored as ::ffff:a.b.c.d. No zones. */
export function gidFromText(text: string): Buffer | undefined {
  const v4 = parseIPv4(text);
  if (v4) {
    const g = Buffer.alloc(16);
    g[10] = 0xff;
    g[11] = 0xff;
    g[12] = v4[0];
    g[13] = v4[1];
    g[14] = v4[2];
    g[15] = v4[3];
    return g;
  }
  if (text.includes('%')) return undefined;
  return parseIPv6(text);
}

/** GID text: IPv4-mapped as ::ffff:a.b.c.d, otherwise IPv6 with the longest zero run compressed (RFC 5952). */
export function gidToText(gid: Buffer): string {
  if (gid.length !== 16) return `<${gid.length}-byte gid>`;
  let mapped = gid[10] === 0xff && gid[11] === 0xff;
  for (let i = 0; i < 10 && mapped; i++) if (gid[i] !== 0) mapped = false;
  if (mapped) return `::ffff:${gid[12]}.${gid[13]}.${gid[14]}.${gid[15]}`;
  const words: number[] = [];
  for (let i = 0; i < 8; i++) words.push(gid.readUInt16BE(i * 2));
  let bestAt = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]): string => ws.map((w) => w.toString(16)).join(':');
  if (bestAt < 0) return hex(words);
  return `${hex(words.slice(0, bestAt))}::${hex(words.slice(bestAt + bestLen))}`;
}

/** A GID as a Map key. */
export function gidKey(gid: Buffer): string {
  return gid.toString('hex');
}

// ---------------------------------------------------------------------------
// Loopback

/**
 * True for an address that never leaves the host: 127.0.0.0/8, ::1, and
 * IPv4-mapped ::ffff:127.x.y.z (what a dual-stack listener reports). Names
 * are not addresses: 'localhost' is false here (resolve it first).
 */
export function isLoopbackAddress(text: string): boolean {
  const v4 = parseIPv4(text);
  if (v4) return v4[0] === 127;
  const pct = text.indexOf('%');
  const b = parseIPv6(pct < 0 ? text : text.slice(0, pct));
  if (!b) return false;
  let zeros = 0;
  while (zeros < 10 && b[zeros] === 0) zeros++;
  if (zeros === 10 && b[10] === 0xff && b[11] === 0xff) return b[12] === 127;
  return b.subarray(0, 15).every((x) => x === 0) && b[15] === 1;
}
