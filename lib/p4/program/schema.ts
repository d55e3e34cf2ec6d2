// The bmv2 JSON program format (version 2.x, JSON_format.md in the P4
// fixtures), as zod schemas. Covers what the compiled programs we take use:
// header types/instances/stacks, parsers (states, ops, transition keys,
// value sets), deparsers, actions and their primitive calls, pipelines
// (tables, action profiles, conditionals), counters, meters, registers,
// calculations, checksums, field and learn lists. Objects are passthrough:
// attributes we do not read are kept but never acted on. Whether a construct
// the schema accepts can also be run is decided by ./load.ts, which refuses
// the unsupported ones with their JSON path.

import { z } from 'zod';

/**
 * Widest field, action parameter, value set or hash input a program may
 * declare (bmv2 has no limit; real programs stay far below): every mask
 * and value the engine builds from a width is then small.
 */
export const MAX_FIELD_BITS = 4096;
const width = z.number().int().positive().max(MAX_FIELD_BITS);

/** A type-value object (`{type, value}`); the value's shape depends on the type, checked by the loader. */
export interface TypeValue {
  type: string;
  value?: unknown;
  bitwidth?: number;
}
const typeValue: z.ZodType<TypeValue> = z
  .object({ type: z.string(), value: z.unknown(), bitwidth: width.optional() })
  .passthrough();

/** `expression` values: {op, left, right[, cond]}; operands are type-value objects or null. */
export interface ExpressionValue {
  op: string;
  left: TypeValue | null;
  right: TypeValue | number | null;
  cond?: TypeValue;
}

const fieldRef = z.tuple([z.string(), z.string()]);
const name = z.string().min(1);
const id = z.number().int().nonnegative();
const hexstr = z.string().regex(/^-?0x[0-9a-fA-F]+$/, 'a hexstring (0x...)');

const headerTypeSchema = z
  .object({
    name,
    id,
    // [name, bitwidth] or [name, bitwidth, signed]; '*' marks a variable-length field
    fields: z.array(z.tuple([z.string(), z.union([width, z.literal('*')])]).rest(z.unknown())),
    length_exp: z.unknown().optional(),
    max_length: z.number().int().nullable().optional(),
  })
  .passthrough();

const headerSchema = z.object({ name, id, header_type: name, metadata: z.boolean() }).passthrough();

const headerStackSchema = z.object({ name, id, header_type: name, header_ids: z.array(id) }).passthrough();

const parserOpSchema = z.object({ op: z.string(), parameters: z.array(z.unknown()) }).passthrough();

/** Old compilers write `{value: "default"}` with no type; new ones `{type: "default", value: null}`. */
const transitionSchema = z
  .object({
    type: z.enum(['default', 'hexstr', 'parse_vset']).optional(),
    value: z.string().nullable(),
    mask: z.string().nullable().optional(),
    next_state: z.string().nullable(),
  })
  .passthrough();

const parseStateSchema = z
  .object({
    name,
    id,
    parser_ops: z.array(parserOpSchema),
    transition_key: z.array(typeValue),
    transitions: z.array(transitionSchema),
  })
  .passthrough();

const parserSchema = z.object({ name, id, init_state: name, parse_states: z.array(parseStateSchema) }).passthrough();

const parseVsetSchema = z
  .object({ name, id, compressed_bitwidth: width, max_size: z.number().int().nonnegative().optional() })
  .passthrough();

const deparserSchema = z.object({ name, id, order: z.array(z.string()) }).passthrough();

const primitiveSchema = z.object({ op: z.string(), parameters: z.array(typeValue) }).passthrough();

const actionSchema = z
  .object({
    name,
    id,
    runtime_data: z.array(z.object({ name: z.string(), bitwidth: width }).passthrough()),
    primitives: z.array(primitiveSchema),
  })
  .passthrough();

export const matchKinds = ['exact', 'lpm', 'ternary', 'range', 'valid', 'optional'] as const;
export type MatchKind = (typeof matchKinds)[number];

const tableKeySchema = z
  .object({
    match_type: z.string(),
    target: z.union([fieldRef, z.string()]),
    mask: z.string().nullable().optional(),
    name: z.string().optional(),
  })
  .passthrough();

const defaultEntrySchema = z
  .object({
    action_id: id,
    action_const: z.boolean().optional(),
    action_data: z.array(hexstr),
    action_entry_const: z.boolean().optional(),
  })
  .passthrough();

const constEntrySchema = z
  .object({
    match_key: z.array(
      z
        .object({
          match_type: z.string(),
          key: z.union([z.string(), z.boolean()]).optional(),
          mask: z.string().optional(),
          prefix_length: z.number().int().nonnegative().optional(),
          start: z.string().optional(),
          end: z.string().optional(),
        })
        .passthrough(),
    ),
    action_entry: z.object({ action_id: id, action_data: z.array(hexstr) }).passthrough(),
    priority: z.number().int().optional(),
  })
  .passthrough();

/**
 * next_tables, keyed by action names (or __HIT__/__MISS__), as a Map: a
 * name such as `__proto__` stays a key (a plain object would drop it or
 * take it for its prototype), and no lookup reaches Object.prototype.
 */
const nextTablesSchema = z.unknown().transform((raw, ctx): Map<string, string | null> => {
  const out = new Map<string, string | null>();
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'an object of action name -> next node' });
    return out;
  }
  for (const [k, v] of Object.entries(raw)) {
    if (v !== null && typeof v !== 'string')
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a node name or null', path: [k] });
    else out.set(k, v);
  }
  return out;
});

const tableSchema = z
  .object({
    name,
    id,
    match_type: z.string(),
    type: z.string(),
    action_profile: z.string().optional(),
    max_size: z.number().int().nonnegative(),
    with_counters: z.boolean().optional(),
    direct_meters: z.string().nullable().optional(),
    support_timeout: z.boolean().optional(),
    key: z.array(tableKeySchema),
    actions: z.array(z.string()),
    next_tables: nextTablesSchema,
    base_default_next: z.string().nullable().optional(),
    default_entry: defaultEntrySchema.optional(),
    entries: z.array(constEntrySchema).optional(),
  })
  .passthrough();

export const actionProfileSchema = z
  .object({
    name,
    id,
    max_size: z.number().int().nonnegative(),
    selector: z
      .object({ algo: z.string(), input: z.array(typeValue) })
      .passthrough()
      .optional(),
  })
  .passthrough();

const conditionalSchema = z
  .object({
    name,
    id,
    expression: typeValue,
    true_next: z.string().nullable(),
    false_next: z.string().nullable(),
  })
  .passthrough();

const actionCallSchema = z.object({ name, id, action_id: id, next_node: z.string().nullable() }).passthrough();

const pipelineSchema = z
  .object({
    name,
    id,
    init_table: z.string().nullable(),
    tables: z.array(tableSchema),
    action_profiles: z.array(actionProfileSchema).optional(),
    conditionals: z.array(conditionalSchema),
    action_calls: z.array(actionCallSchema).optional(),
  })
  .passthrough();

const counterArraySchema = z
  .object({
    name,
    id,
    size: z.number().int().nonnegative(),
    is_direct: z.boolean(),
    binding: z.string().optional(),
  })
  .passthrough();

const meterArraySchema = z
  .object({
    name,
    id,
    type: z.enum(['bytes', 'packets']),
    rate_count: z.number().int().positive(),
    size: z.number().int().nonnegative(),
    is_direct: z.boolean(),
    binding: z.string().optional(),
    result_target: fieldRef.optional(),
  })
  .passthrough();

const registerArraySchema = z.object({ name, id, size: z.number().int().nonnegative(), bitwidth: width }).passthrough();

const calculationSchema = z.object({ name, id, algo: z.string(), input: z.array(typeValue) }).passthrough();

const checksumSchema = z
  .object({
    name,
    id,
    target: fieldRef,
    type: z.string(),
    calculation: name,
    update: z.boolean().optional(),
    verify: z.boolean().optional(),
    if_cond: typeValue.nullable().optional(),
  })
  .passthrough();

const fieldListSchema = z.object({ name, id, elements: z.array(typeValue) }).passthrough();

export const programSchema = z
  .object({
    __meta__: z
      .object({ version: z.array(z.number().int()) })
      .passthrough()
      .optional(),
    header_types: z.array(headerTypeSchema),
    headers: z.array(headerSchema),
    header_stacks: z.array(headerStackSchema).default([]),
    parsers: z.array(parserSchema),
    parse_vsets: z.array(parseVsetSchema).default([]),
    deparsers: z.array(deparserSchema),
    meter_arrays: z.array(meterArraySchema).default([]),
    counter_arrays: z.array(counterArraySchema).default([]),
    register_arrays: z.array(registerArraySchema).default([]),
    actions: z.array(actionSchema),
    pipelines: z.array(pipelineSchema),
    calculations: z.array(calculationSchema).default([]),
    checksums: z.array(checksumSchema).default([]),
    learn_lists: z.array(fieldListSchema).default([]),
    field_lists: z.array(fieldListSchema).default([]),
    force_arith: z.array(z.unknown()).optional(),
    extern_instances: z.array(z.unknown()).optional(),
  })
  .passthrough();

export type Program = z.infer<typeof programSchema>;
export type HeaderType = z.infer<typeof headerTypeSchema>;
export type Table = z.infer<typeof tableSchema>;
export type Pipeline = z.infer<typeof pipelineSchema>;
export type Action = z.infer<typeof actionSchema>;
