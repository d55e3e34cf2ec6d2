// Loading a bmv2 JSON program: JSON text -> schema check (./schema.ts) ->
// one compile pass (../engine/engine.ts) that resolves every name and refuses every
// construct it cannot run. Either the whole program is ready or nothing runs:
// a P4LoadError names the JSON path of the first offending value, e.g.
//   pipelines[0].tables[2].match_type "foo": unsupported match type

import { ZodError } from 'zod';
import { Program, programSchema } from './schema';

export type JsonPath = readonly (string | number)[];

/** Renders ['pipelines', 0, 'tables', 2, 'match_type'] as `pipelines[0].tables[2].match_type`. */
function formatPath(path: JsonPath): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? p : `.${p}`;
  }
  return out === '' ? '(root)' : out;
}

function short(value: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? String(value);
  } catch {
    s = String(value);
  }
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** A program (or a runtime command) the engine refuses; `path` is where, `code` is stable for tests. */
export class P4LoadError extends Error {
  readonly code = 'P4_LOAD';
  constructor(
    readonly path: string,
    readonly detail: string,
    value?: unknown,
  ) {
    super(value === undefined ? `${path}: ${detail}` : `${path} ${short(value)}: ${detail}`);
    this.name = 'P4LoadError';
  }
}

/** Throws a P4LoadError for `path` (a helper for the compile modules). */
export function refuse(path: JsonPath, detail: string, value?: unknown): never {
  throw new P4LoadError(formatPath(path), detail, value);
}

function valueAt(root: unknown, path: JsonPath): unknown {
  let v: unknown = root;
  for (const p of path) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, p)) return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

/** Limits on what a program may declare (the loader refuses more). */
const MAX_PROGRAM_BYTES = 16 * 1024 * 1024;

/** Parses and schema-checks a program (text or an already parsed object). */
export function validateProgram(input: string | unknown): Program {
  let raw: unknown = input;
  if (typeof input === 'string') {
    if (input.length > MAX_PROGRAM_BYTES)
      throw new P4LoadError('(root)', `program larger than ${MAX_PROGRAM_BYTES} bytes`);
    try {
      raw = JSON.parse(input);
    } catch (e) {
      throw new P4LoadError('(root)', `not JSON: ${(e as Error).message}`);
    }
  }
  const r = programSchema.safeParse(raw);
  if (!r.success) {
    const issue = (r.error as ZodError).issues[0]!;
    const v = valueAt(raw, issue.path);
    throw new P4LoadError(formatPath(issue.path), issue.message, v === undefined ? undefined : v);
  }
  const p = r.data as Program & Record<string, unknown>;
  const version = p.__meta__?.version;
  if (version && version[0] !== 2)
    refuse(['__meta__', 'version'], 'only bmv2 JSON format version 2.x is supported', version);
  // Top-level sections we read; those listed in IGNORED carry only names for logs and tools.
  for (const [k, v] of Object.entries(p)) {
    if (KNOWN.has(k) || IGNORED.has(k)) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    refuse([k], 'unsupported section', Array.isArray(v) ? v[0] : v);
  }
  return p;
}

const KNOWN = new Set([
  '__meta__',
  'header_types',
  'headers',
  'header_stacks',
  'parsers',
  'parse_vsets',
  'deparsers',
  'meter_arrays',
  'counter_arrays',
  'register_arrays',
  'actions',
  'pipelines',
  'calculations',
  'checksums',
  'learn_lists',
  'field_lists',
  'force_arith',
]);
/** Sections that do not change what a frame goes through (names, aliases, source info). */
const IGNORED = new Set(['errors', 'enums', 'field_aliases', 'program']);
