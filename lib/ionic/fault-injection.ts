// Deterministic fault injection (the server's --inject option).
//
// Chosen events fail on a pattern of event COUNTS, never of time, so the same
// workload gives the same failures run after run.
//
// Grammar
// -------
//   spec     := EVENT '=' PATTERN
//   argument := spec (',' spec)*          (each --inject value; repeat --inject for more)
//   PATTERN  := 'every:' N                events N, 2N, 3N, ... fail (N >= 1)
//             | 'run:' N '-' M            events N through M fail, inclusive (1 <= N <= M)
//             | 'run:' N '-'              every event from N on (N >= 1)
//             | 'burst:' K '/' M          in every window of M consecutive events
//                                         (1..M, M+1..2M, ...) the first K fail (1 <= K <= M)
//             | 'at:' N1 '/' N2 '/' ...   exactly those events fail (N1 >= 1, strictly
//                                         increasing, at most 1000 entries)
//   EVENT    := 'rx-lost' | 'rx-nobuf' | 'tx-drop' | 'stats-vals-error'
//   numbers  := decimal digits only, value at most 2^53-1 (Number.MAX_SAFE_INTEGER)
//
// Events are counted per event name, from 1, since the injector was built
// (that is, since the server started). Several specs for the same event
// combine: an occurrence fails if any of its patterns selects it. Whitespace
// around a comma-separated spec is ignored; anything else not in the grammar
// is an error (InjectSpecError, one line naming the spec and the problem).
//
// Events
// ------
//   rx-lost           a frame received from the host TAP is lost before reaching the guest
//   rx-nobuf          a received frame is dropped as if the guest had posted no RX buffer
//   tx-drop           a frame the guest transmitted is completed to the guest but not sent
//   stats-vals-error  an RDMA admin STATS_VALS (device values) answers BAD_STATE (the host fails the read)
//
// Cost: fail() is O(number of patterns for that event), each O(1) (an `at:`
// pattern walks its sorted list with a cursor), and allocates nothing.

export type FaultEvent = 'rx-lost' | 'rx-nobuf' | 'tx-drop' | 'stats-vals-error';

export const FAULT_EVENTS: readonly FaultEvent[] = ['rx-lost', 'rx-nobuf', 'tx-drop', 'stats-vals-error'];

export function isFaultEvent(name: string): name is FaultEvent {
  return (FAULT_EVENTS as readonly string[]).includes(name);
}

/** Most entries an `at:` pattern may list. */
export const MAX_AT_ENTRIES = 1000;

/** Text for --help. */
export const INJECT_HELP = [
  'Make chosen events fail on a pattern of event counts (never time), so the same',
  'workload gives the same failures. A spec is EVENT=PATTERN; give several by',
  'repeating --inject or separating them with commas.',
  'EVENT:',
  '  rx-lost           frame from the host TAP lost before reaching the guest',
  '  rx-nobuf          received frame dropped as if the guest posted no RX buffer',
  '  tx-drop           guest frame completed to the guest but not sent',
  '  stats-vals-error  admin STATS_VALS command answers with an error',
  'PATTERN (events are counted per event name from 1 since the server started):',
  '  every:N           events N, 2N, 3N, ... fail (N >= 1)',
  '  run:N-M           events N through M fail (inclusive); run:N- every event from N on',
  '  burst:K/M         in every window of M events (1..M, M+1..2M, ...) the first K fail',
  `  at:N1/N2/...      exactly those events fail (strictly increasing, at most ${MAX_AT_ENTRIES})`,
  'Several specs for one event combine (an event fails if any selects it). Numbers are',
  'decimal integers up to 2^53-1. Example: --inject rx-lost=every:100,tx-drop=run:5-9',
].join('\n');

/** A malformed --inject spec. The message is one line naming the spec and the problem. */
export class InjectSpecError extends Error {
  override readonly name = 'InjectSpecError';
  constructor(
    /** The offending spec as given (one comma-separated piece, or the whole argument). */
    readonly spec: string,
    /** The problem alone, without the spec. */
    readonly problem: string,
  ) {
    super(`--inject '${spec}': ${problem}`);
  }
}

// ---------------------------------------------------------------------------
// Patterns

interface Pattern {
  /** Whether occurrence `n` (1-based, called once for each n in order) fails. */
  hit(n: number): boolean;
  describe(): string;
}

function ordinal(n: number): string {
  const mod100 = n % 100;
  if (mod100 >= 11 && mod100 <= 13) return `${n}th`;
  switch (n % 10) {
    case 1:
      return `${n}st`;
    case 2:
      return `${n}nd`;
    case 3:
      return `${n}rd`;
    default:
      return `${n}th`;
  }
}

class Every implements Pattern {
  constructor(private readonly n: number) {}
  hit(n: number): boolean {
    return n % this.n === 0;
  }
  describe(): string {
    return this.n === 1 ? 'every event' : `every ${ordinal(this.n)}`;
  }
}

class Run implements Pattern {
  /** `last` is Infinity for an open run. */
  constructor(
    private readonly first: number,
    private readonly last: number,
  ) {}
  hit(n: number): boolean {
    return n >= this.first && n <= this.last;
  }
  describe(): string {
    if (this.last === Infinity) return `events ${this.first} onward`;
    if (this.first === this.last) return `event ${this.first}`;
    return `events ${this.first}-${this.last}`;
  }
}

class Burst implements Pattern {
  constructor(
    private readonly k: number,
    private readonly m: number,
  ) {}
  hit(n: number): boolean {
    return (n - 1) % this.m < this.k;
  }
  describe(): string {
    return `first ${this.k} of every ${this.m}`;
  }
}

class At implements Pattern {
  #next = 0;
  constructor(private readonly list: readonly number[]) {}
  hit(n: number): boolean {
    // hit() sees every n in order and the list is strictly increasing, so the
    // cursor only ever needs to compare with one entry.
    if (this.#next < this.list.length && this.list[this.#next] === n) {
      this.#next++;
      return true;
    }
    return false;
  }
  describe(): string {
    const shown = 8;
    const l = this.list;
    if (l.length === 1) return `event ${l[0]}`;
    if (l.length <= shown) return `events ${l.join(', ')}`;
    return `events ${l.slice(0, shown).join(', ')}, ... (${l.length} listed)`;
  }
}

// ---------------------------------------------------------------------------
// Parsing

const PATTERN_FORMS = 'every:N, run:N-M, run:N-, burst:K/M, at:N1/N2/...';

/** Parses one decimal number; `what` names it in errors. */
function parseNumber(spec: string, what: string, text: string): number {
  if (!/^[0-9]+$/.test(text)) {
    throw new InjectSpecError(spec, `${what} must be a decimal integer, got '${text}'`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new InjectSpecError(spec, `${what} must be at most ${Number.MAX_SAFE_INTEGER}, got '${text}'`);
  }
  return value;
}

function atLeastOne(spec: string, what: string, value: number): number {
  if (value < 1) throw new InjectSpecError(spec, `${what} must be at least 1`);
  return value;
}

function parsePattern(spec: string, text: string): Pattern {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? text : text.slice(0, colon);
  const arg = colon < 0 ? '' : text.slice(colon + 1);
  switch (kind) {
    case 'every': {
      if (colon < 0) throw new InjectSpecError(spec, 'expected every:N');
      return new Every(atLeastOne(spec, 'N', parseNumber(spec, 'N', arg)));
    }
    case 'run': {
      const dash = arg.indexOf('-');
      if (colon < 0 || dash < 0) throw new InjectSpecError(spec, 'expected run:N-M or run:N-');
      const first = atLeastOne(spec, 'N', parseNumber(spec, 'N', arg.slice(0, dash)));
      const lastText = arg.slice(dash + 1);
      if (lastText === '') return new Run(first, Infinity);
      const last = parseNumber(spec, 'M', lastText);
      if (last < first) throw new InjectSpecError(spec, 'M must not be less than N');
      return new Run(first, last);
    }
    case 'burst': {
      const slash = arg.indexOf('/');
      if (colon < 0 || slash < 0) throw new InjectSpecError(spec, 'expected burst:K/M');
      const k = atLeastOne(spec, 'K', parseNumber(spec, 'K', arg.slice(0, slash)));
      const m = atLeastOne(spec, 'M', parseNumber(spec, 'M', arg.slice(slash + 1)));
      if (k > m) throw new InjectSpecError(spec, 'K must not exceed M');
      return new Burst(k, m);
    }
    case 'at': {
      if (colon < 0 || arg === '') throw new InjectSpecError(spec, 'expected at:N1/N2/...');
      const parts = arg.split('/');
      if (parts.length > MAX_AT_ENTRIES) {
        throw new InjectSpecError(spec, `at most ${MAX_AT_ENTRIES} event numbers, got ${parts.length}`);
      }
      const list: number[] = [];
      for (const part of parts) {
        const n = atLeastOne(spec, 'event number', parseNumber(spec, 'event number', part));
        const prev = list[list.length - 1];
        if (prev !== undefined && n <= prev) {
          throw new InjectSpecError(spec, `event numbers must be strictly increasing (${n} after ${prev})`);
        }
        list.push(n);
      }
      return new At(list);
    }
    default:
      throw new InjectSpecError(spec, `unknown pattern '${text}' (patterns: ${PATTERN_FORMS})`);
  }
}

// ---------------------------------------------------------------------------
// Injector

interface EventState {
  readonly event: FaultEvent;
  seen: number;
  failed: number;
  readonly patterns: Pattern[];
}

export class FaultInjector {
  readonly #states: ReadonlyMap<FaultEvent, EventState>;
  readonly #active: boolean;

  private constructor(patterns: ReadonlyMap<FaultEvent, Pattern[]>) {
    const states = new Map<FaultEvent, EventState>();
    let active = false;
    for (const event of FAULT_EVENTS) {
      const list = patterns.get(event) ?? [];
      if (list.length > 0) active = true;
      states.set(event, { event, seen: 0, failed: 0, patterns: list });
    }
    this.#states = states;
    this.#active = active;
  }

  /**
   * Builds an injector from --inject values; each element may itself be a
   * comma-separated list of specs. Throws InjectSpecError on the first bad spec.
   */
  static parse(specs: readonly string[]): FaultInjector {
    const patterns = new Map<FaultEvent, Pattern[]>();
    for (const argument of specs) {
      for (const raw of argument.split(',')) {
        const spec = raw.trim();
        if (spec === '') throw new InjectSpecError(argument, 'empty spec');
        const eq = spec.indexOf('=');
        if (eq < 0) throw new InjectSpecError(spec, 'expected EVENT=PATTERN');
        const name = spec.slice(0, eq);
        if (!isFaultEvent(name)) {
          throw new InjectSpecError(spec, `unknown event '${name}' (events: ${FAULT_EVENTS.join(', ')})`);
        }
        const pattern = parsePattern(spec, spec.slice(eq + 1));
        const list = patterns.get(name);
        if (list) list.push(pattern);
        else patterns.set(name, [pattern]);
      }
    }
    return new FaultInjector(patterns);
  }

  /** An injector that never fails anything (it still counts events). */
  static none(): FaultInjector {
    return new FaultInjector(new Map());
  }

  /** Counts one occurrence of `event` and says whether this occurrence fails. */
  fail(event: FaultEvent): boolean {
    const state = this.#states.get(event);
    if (state === undefined) throw new TypeError(`unknown fault event '${String(event)}'`);
    const n = ++state.seen;
    const patterns = state.patterns;
    let hit = false;
    // Every pattern sees every occurrence (an `at:` cursor must keep step), so no early exit.
    for (let i = 0; i < patterns.length; i++) {
      if (patterns[i].hit(n)) hit = true;
    }
    if (hit) state.failed++;
    return hit;
  }

  /** True when at least one spec was given. */
  get active(): boolean {
    return this.#active;
  }

  /** Counts so far for every event, in FAULT_EVENTS order. */
  stats(): ReadonlyArray<{ event: FaultEvent; seen: number; failed: number }> {
    const out: { event: FaultEvent; seen: number; failed: number }[] = [];
    for (const state of this.#states.values()) {
      out.push({ event: state.event, seen: state.seen, failed: state.failed });
    }
    return out;
  }

  /** One-line summary, e.g. "rx-lost every 100th; tx-drop events 5-9"; "none" when inactive. */
  describe(): string {
    const parts: string[] = [];
    for (const state of this.#states.values()) {
      if (state.patterns.length === 0) continue;
      parts.push(`${state.event} ${state.patterns.map((p) => p.describe()).join(' or ')}`);
    }
    return parts.length === 0 ? 'none' : parts.join('; ');
  }
}
