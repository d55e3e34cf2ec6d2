// Benchmark knobs from the environment, checked: a value that is not a
// number in range (or not one of the choices) stops the benchmark with a
// message naming the variable, instead of becoming NaN and a run that never
// ends (a NaN time limit is never reached; Atomics.wait takes a NaN timeout
// as forever).

/** `name` as a number in [min, max] (an integer when `integer`), `def` when unset or empty. */
export function envNumber(name: string, def: number, min: number, max: number, integer = true): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new Error(
      `${name}=${JSON.stringify(raw)}: want ${integer ? 'an integer' : 'a number'} from ${min} to ${max} (default ${def})`,
    );
  }
  return v;
}

/** `name` as one of `choices`, the first when unset or empty. */
export function envChoice<T extends string>(name: string, choices: readonly [T, ...T[]]): T {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return choices[0];
  const v = choices.find((c) => c === raw);
  if (v === undefined)
    throw new Error(`${name}=${JSON.stringify(raw)}: want one of ${choices.join(', ')} (default ${choices[0]})`);
  return v;
}
