// Compiling a bmv2 JSON program once into closures, and running frames
// through it. P4Engine.load validates (../program/load.ts), lays out the headers
// (../program/layout.ts), compiles parser, actions, pipelines, checksums and deparser;
// any refusal throws before an engine exists, so a program never half-runs.
//
// Per frame (simple_switch's order): reset state, set standard_metadata
// (ingress_port, packet_length), parse (bounded), verify checksums (marks
// only), ingress; drop if the program dropped or egress_spec is the drop
// port (511); egress_port := egress_spec when the program ever writes
// egress_spec (P4_14 programs such as l2_switch set egress_port directly);
// egress; drop again if asked; update checksums; deparse valid headers in
// the deparser's order followed by the unparsed payload.

import { ActionEnv, compileActions, CompiledAction, DROP_PORT } from '../compile/actions';
import { compileEmit, HeaderEmit } from '../frame/header-bits';
import { GeneratedRun, GenMode } from '../codegen/context';
import { generateProgram } from '../codegen/generate';
import { compileCsum16Num, NumCalc } from '../compile/csum16';
import { compileValue, ExprContext, Value } from '../compile/expr';
import { Calc, compileCalculation } from '../compile/calculations';
import { Externs } from '../compile/externs';
import { checkFrameCost } from '../compile/cost';
import { ChecksumStep, compileChecksums } from '../compile/checksums';
import { writtenFields } from '../compile/written-fields';
import { refuse, validateProgram } from '../program/load';
import { ACCEPT, BUDGET, compileParser, CompiledParser, ParseVsets } from '../compile/parser';
import { CompiledPipeline, compilePipeline } from '../compile/pipeline';
import { Program } from '../program/schema';
import { NO_DIGESTS, PacketState, ParserError } from '../frame/packet-state';
import type { DropReason, EngineStats, P4Result } from '../frame/result';
import { FieldInfo, Layout } from '../program/layout';
import { MatchTable } from '../compile/tables/match-table';
import { ActionProfile } from '../compile/action-profiles';

/** What processReused() may do with the frame it is given. */
export const enum OutputMode {
  /** The output goes into the engine's own buffer; the input is never written. */
  ENGINE_BUFFER = 0,
  /**
   * When the deparsed frame has the input's length and every header sits
   * where it was extracted, the windows the program may write are written
   * into the input frame itself and `r.frame` is the input; otherwise as
   * ENGINE_BUFFER. Only for a caller that owns the input and no longer needs
   * its original bytes.
   */
  IN_PLACE = 1,
}

/** Distinct output lengths whose views of the engine's output buffer are kept (cleared when full). */
const MAX_OUTPUT_VIEWS = 64;

export interface EngineOptions {
  /** Microsecond clock for meters (default: performance.now()*1000). */
  now?: () => number;
  /** Largest frame accepted (default MAX_FRAME_BYTES). */
  maxFrame?: number;
  /**
   * Emit every field of every header in process() (as deparse() does), not
   * only the windows of the fields the program may write (for specs that
   * compare the two).
   */
  fullEmit?: boolean;
  /**
   * Run the program as one generated function (../codegen/) when it is in
   * the generator's subset (default true); false: always the closures (the
   * reference the specs compare the generated function with).
   */
  codegen?: boolean;
}

const MAX_FRAME_BYTES = 65535 + 14;

function optField(layout: Layout, header: string, field: string): FieldInfo | undefined {
  return layout.headerByName.get(header)?.byName.get(field);
}

export class P4Engine {
  readonly program: Program;
  readonly layout: Layout;
  readonly externs: Externs;
  readonly actions = new Map<string, CompiledAction>();
  readonly tables = new Map<string, MatchTable>();
  readonly profiles = new Map<string, ActionProfile>();
  readonly vsets: ParseVsets = { sets: new Map() };
  readonly stats: EngineStats = { frames: 0, dropped: 0, parserErrors: 0, budgetDrops: 0, faults: 0 };
  readonly #parser: CompiledParser;
  readonly #ingress: CompiledPipeline | undefined;
  readonly #egress: CompiledPipeline | undefined;
  readonly #emit: { header: number; bytes: number; emit: HeaderEmit; written: HeaderEmit }[];
  readonly #verify: readonly ChecksumStep[];
  readonly #update: readonly ChecksumStep[];
  readonly #st: PacketState;
  readonly #maxFrame: number;
  readonly #f: {
    ingressPort?: FieldInfo;
    packetLength?: FieldInfo;
    egressSpec?: FieldInfo;
    egressPort?: FieldInfo;
    mgid?: FieldInfo;
    mcastGrp?: FieldInfo;
  };
  readonly #specWritten: boolean;
  /** processReused()'s result (one object, rewritten per call) and output buffer with its views by length. */
  readonly #result: P4Result = {
    frame: undefined,
    dropped: false,
    reason: undefined,
    egressPort: 0,
    multicastGroup: 0,
    parserError: ParserError.None,
    checksumError: false,
    digests: NO_DIGESTS,
  };
  #out: Buffer = Buffer.allocUnsafeSlow(2048);
  readonly #views = new Map<number, Buffer>();
  #last: Buffer = this.#out.subarray(0, 0);
  /** Slots of the standard fields process() sets and reads (-1: the program has none). */
  readonly #slots: {
    ingressPort: number;
    packetLength: number;
    egressSpec: number;
    egressPort: number;
    mgid: number;
    mcastGrp: number;
  };
  /** The program as one generated function (../codegen/); undefined: the closures run it. */
  readonly #gen: GeneratedRun | undefined;
  /** The load's estimate of the most a frame may cost (../compile/cost.ts; at most MAX_FRAME_COST). */
  readonly frameCost: number;
  /** What the last frame that threw inside the program threw (stats.faults counts them). */
  lastFault: string | undefined;
  /** Why the program is not generated (undefined when it is, or codegen is off). */
  readonly codegenRefused: string | undefined;
  /** The generated function's source (for specs and reading; integers and fixed shapes only). */
  readonly codegenSource: string | undefined;

  /** Validates and compiles; throws P4LoadError naming the JSON path of what it refuses. */
  static load(program: string | unknown, opts: EngineOptions = {}): P4Engine {
    return new P4Engine(validateProgram(program), opts);
  }

  private constructor(p: Program, opts: EngineOptions) {
    this.program = p;
    this.#maxFrame = opts.maxFrame ?? MAX_FRAME_BYTES;
    const now = opts.now ?? (() => performance.now() * 1000);
    this.layout = new Layout(p);
    this.externs = new Externs(p, now);
    const ctx: ExprContext = { layout: this.layout, runtimeData: 0, parser: false, registers: this.externs.registers };
    this.#f = {
      ingressPort: optField(this.layout, 'standard_metadata', 'ingress_port'),
      packetLength: optField(this.layout, 'standard_metadata', 'packet_length'),
      egressSpec: optField(this.layout, 'standard_metadata', 'egress_spec'),
      egressPort: optField(this.layout, 'standard_metadata', 'egress_port'),
      mgid: optField(this.layout, 'intrinsic_metadata', 'mgid'),
      mcastGrp: optField(this.layout, 'standard_metadata', 'mcast_grp'),
    };
    this.#parser = compileParser(p, this.layout, this.vsets);

    const calcs = new Map<string, Calc>();
    const numCalcs = new Map<string, NumCalc>();
    p.calculations.forEach((c, ci) => {
      calcs.set(c.name, compileCalculation(c, ['calculations', ci], ctx));
      const n = compileCsum16Num(c, ctx);
      if (n) numCalcs.set(c.name, n);
    });
    const learnLists = new Map<number, Value[]>();
    p.learn_lists.forEach((l, li) => {
      learnLists.set(
        l.id,
        l.elements.map((e, ei) => compileValue(e, ctx, ['learn_lists', li, 'elements', ei])),
      );
    });
    const env: ActionEnv = { externs: this.externs, calcs, learnLists, egressSpec: this.#f.egressSpec };
    for (const a of compileActions(p, ctx, env)) this.actions.set(a.name, a);
    this.#specWritten = p.actions.some((a) =>
      a.primitives.some(
        (pr) =>
          pr.parameters[0]?.type === 'field' &&
          JSON.stringify(pr.parameters[0].value) === '["standard_metadata","egress_spec"]',
      ),
    );

    if (p.pipelines.length > 2)
      refuse(['pipelines', 2], 'at most two pipelines (ingress, egress)', p.pipelines[2]!.name);
    const compiled = p.pipelines.map((pl, i) =>
      compilePipeline(pl, i, ctx, this.actions, this.tables, this.profiles, this.externs.meters),
    );
    this.#ingress = compiled.find((c) => c.name === 'ingress') ?? compiled[0];
    this.#egress =
      compiled.find((c) => c.name === 'egress') ?? (compiled[1] !== this.#ingress ? compiled[1] : undefined);
    const ingressIndex = this.#ingress ? compiled.indexOf(this.#ingress) : -1;
    const egressIndex = this.#egress ? compiled.indexOf(this.#egress) : -1;

    if (p.deparsers.length > 1) refuse(['deparsers', 1], 'only one deparser is supported');
    const order = p.deparsers[0]?.order ?? [];
    const written = writtenFields(p, this.layout);
    this.#emit = order.map((n, i) => {
      const h = this.layout.header(n, ['deparsers', 0, 'order', i]);
      if (h.metadata) refuse(['deparsers', 0, 'order', i], 'cannot emit a metadata header', n);
      const emit = compileEmit(h);
      return { header: h.index, bytes: h.bytes, emit, written: opts.fullEmit ? emit : compileEmit(h, written) };
    });

    const sums = compileChecksums(p, ctx, this.layout, calcs, numCalcs);
    this.#verify = sums.verify;
    this.#update = sums.update;
    // the compile accepted every part: now what a frame may cost it, refused past MAX_FRAME_COST
    this.frameCost = checkFrameCost(p, this.layout, this.#maxFrame);
    this.#st = new PacketState(this.layout);
    const f = this.#f;
    this.#slots = {
      ingressPort: f.ingressPort?.slot ?? -1,
      packetLength: f.packetLength?.slot ?? -1,
      egressSpec: f.egressSpec?.slot ?? -1,
      egressPort: f.egressPort?.slot ?? -1,
      mgid: f.mgid?.slot ?? -1,
      mcastGrp: f.mcastGrp?.slot ?? -1,
    };
    const gen =
      opts.codegen === false
        ? undefined
        : generateProgram({
            program: p,
            layout: this.layout,
            tables: this.tables,
            actions: this.actions,
            ingress: ingressIndex,
            egress: egressIndex,
            slots: this.#slots,
            specWritten: this.#specWritten,
            maxFrame: this.#maxFrame,
            written: opts.fullEmit ? undefined : written,
            stats: this.stats,
            view: (len) => this.#outView(len),
          });
    this.#gen = gen && 'run' in gen ? gen.run : undefined;
    this.codegenRefused = gen && 'refused' in gen ? gen.refused : undefined;
    this.codegenSource = gen && 'run' in gen ? gen.source : undefined;
  }

  /** Whether frames run through the generated function (../codegen/) rather than the closures. */
  get generated(): boolean {
    return this.#gen !== undefined;
  }

  /**
   * Runs one frame through parser, ingress, egress and deparser; a new
   * result and a new output Buffer. Never throws: a frame that throws inside
   * the program is dropped with reason 'fault' and counted (stats.faults).
   */
  process(frame: Buffer, ingressPort = 0): P4Result {
    try {
      return this.#process(frame, ingressPort);
    } catch (e) {
      this.#fault(e);
      return this.#drop('fault', ParserError.None);
    }
  }

  #process(frame: Buffer, ingressPort: number): P4Result {
    const g = this.#gen;
    if (g !== undefined) {
      // the generated run fills the reused result; process() still hands out its own object
      const q = this.#result;
      g(frame, ingressPort, GenMode.NEW_BUFFER, q);
      return {
        frame: q.frame,
        dropped: q.dropped,
        reason: q.reason,
        egressPort: q.egressPort,
        multicastGroup: q.multicastGroup,
        parserError: q.parserError,
        checksumError: q.checksumError,
        digests: q.digests,
      };
    }
    const reason = this.#run(frame, ingressPort);
    const st = this.#st;
    if (reason !== undefined) return this.#drop(reason, reason === 'too-long' ? ParserError.None : st.parserError);
    const sl = this.#slots;
    const num = st.num;
    return {
      frame: this.#deparse(st, false),
      dropped: false,
      reason: undefined,
      egressPort: sl.egressPort >= 0 ? num[sl.egressPort]! : 0,
      multicastGroup: (sl.mgid >= 0 ? num[sl.mgid]! : 0) || (sl.mcastGrp >= 0 ? num[sl.mcastGrp]! : 0),
      parserError: st.parserError,
      checksumError: st.checksumError,
      digests: st.digests,
    };
  }

  /**
   * process() for a caller that reads the result before the next call on
   * this engine (the segment, the WQE filter): the result is one object the
   * engine rewrites per call, and `r.frame` is a view of the engine's own
   * output buffer (or, with OutputMode.IN_PLACE, possibly the input itself),
   * valid until the next call. Nothing is allocated per frame (digests
   * aside, as in process()).
   */
  processReused(frame: Buffer, ingressPort = 0, mode: OutputMode = OutputMode.ENGINE_BUFFER): P4Result {
    try {
      return this.#processReused(frame, ingressPort, mode);
    } catch (e) {
      // the frame boundary: whatever the program threw, the device sees a dropped frame
      this.#fault(e);
      this.stats.dropped++;
      const r = this.#result;
      r.frame = undefined;
      r.dropped = true;
      r.reason = 'fault';
      r.egressPort = 0;
      r.multicastGroup = 0;
      r.parserError = ParserError.None;
      r.checksumError = false;
      r.digests = NO_DIGESTS;
      return r;
    }
  }

  #processReused(frame: Buffer, ingressPort: number, mode: OutputMode): P4Result {
    const r = this.#result;
    const g = this.#gen;
    if (g !== undefined) {
      g(frame, ingressPort, mode === OutputMode.IN_PLACE ? GenMode.IN_PLACE : GenMode.ENGINE_BUFFER, r);
      return r;
    }
    const reason = this.#run(frame, ingressPort);
    const st = this.#st;
    r.digests = st.digests;
    if (reason !== undefined) {
      this.stats.dropped++;
      r.frame = undefined;
      r.dropped = true;
      r.reason = reason;
      r.egressPort = 0;
      r.multicastGroup = 0;
      r.parserError = reason === 'too-long' ? ParserError.None : st.parserError;
      r.checksumError = false;
      return r;
    }
    const sl = this.#slots;
    const num = st.num;
    r.frame = mode === OutputMode.IN_PLACE && this.#inPlace(st) ? frame : this.#deparse(st, true);
    r.dropped = false;
    r.reason = undefined;
    r.egressPort = sl.egressPort >= 0 ? num[sl.egressPort]! : 0;
    r.multicastGroup = (sl.mgid >= 0 ? num[sl.mgid]! : 0) || (sl.mcastGrp >= 0 ? num[sl.mcastGrp]! : 0);
    r.parserError = st.parserError;
    r.checksumError = st.checksumError;
    return r;
  }

  /** Everything before the deparse; the drop reason, undefined when the frame goes on. */
  #run(frame: Buffer, ingressPort: number): DropReason | undefined {
    const st = this.#st;
    const sl = this.#slots;
    this.stats.frames++;
    if (frame.length > this.#maxFrame) {
      st.digests = NO_DIGESTS;
      return 'too-long';
    }
    st.reset(frame);
    const num = st.num;
    if (sl.ingressPort >= 0) num[sl.ingressPort] = ingressPort & 0x1ff;
    if (sl.packetLength >= 0) num[sl.packetLength] = frame.length;
    const pr = this.#parser(st);
    if (pr === BUDGET) {
      this.stats.budgetDrops++;
      return 'parser-budget';
    }
    if (pr !== ACCEPT) this.stats.parserErrors++;
    const verify = this.#verify;
    for (let i = 0; i < verify.length; i++) verify[i]!(st);
    this.#ingress?.run(st);
    if (st.dropped || (sl.egressSpec >= 0 && num[sl.egressSpec] === DROP_PORT)) return 'program';
    if (sl.egressPort >= 0 && sl.egressSpec >= 0 && this.#specWritten) num[sl.egressPort] = num[sl.egressSpec]!;
    st.exited = false;
    this.#egress?.run(st);
    if (st.dropped) return 'program';
    const update = this.#update;
    for (let i = 0; i < update.length; i++) update[i]!(st);
    return undefined;
  }

  /** Parses only (for tests and tools); the returned state is reused by the next call. */
  parse(frame: Buffer): PacketState {
    const st = this.#st;
    st.reset(frame);
    this.#parser(st);
    return st;
  }

  /** Valid headers in deparser order, then the bytes the parser did not consume. */
  deparse(st: PacketState): Buffer {
    const emit = this.#emit;
    const valid = st.valid;
    const frame = st.frame;
    let headers = 0;
    for (let i = 0; i < emit.length; i++) if (valid[emit[i]!.header]) headers += emit[i]!.bytes;
    const out = Buffer.allocUnsafe(frame.length - st.offset + headers);
    // Headers as long as the parsed ones (none added or removed): the whole frame copied first and the
    // headers written over it, since a copy from offset 0 is one native call while one from the
    // middle builds a view first (Node's Buffer.copy).
    const same = headers === st.offset;
    if (same) frame.copy(out, 0);
    let at = 0;
    for (let i = 0; i < emit.length; i++) {
      const e = emit[i]!;
      if (!valid[e.header]) continue;
      e.emit(st, out, at);
      at += e.bytes;
    }
    if (!same) frame.copy(out, at, st.offset);
    return out;
  }

  /**
   * deparse() for process() and processReused(): when the headers are as
   * long as the parsed ones the whole frame is copied first, so a header
   * emitted where it was extracted already holds its bytes there and only
   * the windows of the fields the program may write are written over them.
   * Into a new Buffer, or (`reuse`) a view of the engine's output buffer.
   */
  #deparse(st: PacketState, reuse: boolean): Buffer {
    const emit = this.#emit;
    const valid = st.valid;
    const frame = st.frame;
    let headers = 0;
    for (let i = 0; i < emit.length; i++) if (valid[emit[i]!.header]) headers += emit[i]!.bytes;
    const len = frame.length - st.offset + headers;
    const out = reuse ? this.#outView(len) : Buffer.allocUnsafe(len);
    const same = headers === st.offset;
    if (same) frame.copy(out, 0);
    const ho = st.hdrOffset;
    let at = 0;
    for (let i = 0; i < emit.length; i++) {
      const e = emit[i]!;
      if (!valid[e.header]) continue;
      if (same && ho[e.header] === at) e.written(st, out, at);
      else e.emit(st, out, at);
      at += e.bytes;
    }
    if (!same) frame.copy(out, at, st.offset);
    return out;
  }

  /**
   * The deparse written into the input frame (OutputMode.IN_PLACE) when the
   * valid headers are as long as the parsed ones and each sits where it was
   * extracted: only the windows the program may write; false (nothing
   * written) otherwise.
   */
  #inPlace(st: PacketState): boolean {
    const emit = this.#emit;
    const valid = st.valid;
    const ho = st.hdrOffset;
    let at = 0;
    for (let i = 0; i < emit.length; i++) {
      const e = emit[i]!;
      if (!valid[e.header]) continue;
      if (ho[e.header] !== at) return false;
      at += e.bytes;
    }
    if (at !== st.offset) return false;
    const frame = st.frame;
    for (let i = 0; i < emit.length; i++) {
      const e = emit[i]!;
      if (valid[e.header]) e.written(st, frame, ho[e.header]!);
    }
    return true;
  }

  /** A view of the first `len` bytes of the engine's output buffer (grown when short; views kept by length). */
  #outView(len: number): Buffer {
    if (this.#last.length === len) return this.#last;
    let v = this.#views.get(len);
    if (v !== undefined) return (this.#last = v);
    if (len > this.#out.length) {
      this.#out = Buffer.allocUnsafeSlow(Math.max(len, this.#out.length * 2));
      this.#views.clear();
      this.#last = this.#out.subarray(0, 0);
    }
    if (this.#views.size >= MAX_OUTPUT_VIEWS) this.#views.clear();
    v = this.#out.subarray(0, len);
    this.#views.set(len, v);
    return (this.#last = v);
  }

  #drop(reason: DropReason, parserError: ParserError): P4Result {
    this.stats.dropped++;
    return {
      frame: undefined,
      dropped: true,
      reason,
      egressPort: 0,
      multicastGroup: 0,
      parserError,
      checksumError: false,
      digests: reason === 'fault' ? NO_DIGESTS : this.#st.digests,
    };
  }

  /** Counts a frame that threw inside the program and keeps what it threw (for logs and the fuzz target). */
  #fault(e: unknown): void {
    this.stats.faults++;
    this.lastFault = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }

  /**
   * What the control plane has added, in the guest budget's units: table
   * entries, action profile members, groups and group memberships, parse
   * value set values (./commands.ts refuses a guest's add past its budget).
   */
  held(): number {
    let n = 0;
    for (const t of this.tables.values()) n += t.entries.size;
    for (const ap of this.profiles.values()) n += ap.held;
    for (const v of this.vsets.sets.values()) n += v.size;
    return n;
  }
}
