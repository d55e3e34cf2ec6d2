// What every command line of the project does the same way: -h for help, one
// line and status 2 for a bad option, an option that takes one value refused
// when given twice (yargs would turn it into an array the code does not
// expect), numbers checked with the text the user typed in the message, and
// help that is never wrapped in the middle of a value.

import type { Argv } from 'yargs';

/**
 * The width help is laid out at: the terminal's, capped, and never below 110
 * columns. yargs breaks words longer than the space it has, so a narrower
 * layout would split command lines and key=value lists that users copy; a
 * narrow terminal soft-wraps instead, which copies whole.
 */
function helpWidth(): number {
  return Math.max(110, Math.min(140, process.stdout.columns || 110));
}

/** One line on stderr, `NAME: message`, and exit status 2 (bad usage). */
export function usageFailure(name: string): (message: string) => never {
  return (message: string): never => {
    // One line, always: yargs' messages can span several.
    process.stderr.write(
      `${name}: ${message
        .trim()
        .replace(/:\s*\n\s*/g, ': ')
        .replace(/\s*\n\s*/g, '; ')}\n`,
    );
    process.exit(2);
  };
}

/**
 * Options given more than once that take one value. yargs collects a repeated
 * option into an array whatever its declared type; only options declared with
 * `array: true` may legitimately hold one.
 */
export function repeatedSingles(argv: Record<string, unknown>, arrays: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const key of Object.keys(argv)) {
    // yargs adds camelCase copies of kebab-case names: report the name the user typed.
    if (key === '_' || key === '$0' || /[A-Z]/.test(key) || arrays.has(key)) continue;
    if (Array.isArray(argv[key])) out.push(key);
  }
  // An alias repeats its option: name the long form first.
  return out.sort((a, b) => b.length - a.length);
}

/**
 * The shared conventions applied to a yargs instance: -h and --help, strict
 * options, a one-line failure, options given twice refused, and a help width
 * that keeps values whole. `arrays` names the options that may repeat.
 */
export function conventions<T>(
  y: Argv<T>,
  name: string,
  arrays: readonly string[] = [],
  fail: (message: string) => void = usageFailure(name),
): Argv<T> {
  const repeatable = new Set<string>(arrays);
  return y
    .strict()
    .check((argv) => {
      const twice = repeatedSingles(argv as Record<string, unknown>, repeatable);
      if (twice.length) throw new Error(`${flag(twice[0]!)} given more than once (it takes one value)`);
      return true;
    })
    .fail((msg, err) => fail(err ? err.message : msg))
    .help()
    .alias('help', 'h')
    .wrap(helpWidth());
}

function flag(key: string): string {
  return key.length === 1 ? `-${key}` : `--${key}`;
}

/** Parses an integer option the user typed as text; throws a message naming the option and the text. */
export function parseIntOption(name: string, text: unknown, min: number, max: number, what = 'an integer'): number {
  if (Array.isArray(text)) throw new Error(`--${name} given more than once (it takes one value)`);
  const s = String(text);
  const n = /^-?\d+$/.test(s.trim()) ? Number(s.trim()) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new Error(`--${name} ${s}: expected ${what} from ${min} to ${max}`);
  return n;
}

/** A yargs coerce function for a TCP port (0..65535, 0: any free port). */
export function portCoerce(name: string): (text: unknown) => number {
  return (text) => parseIntOption(name, text, 0, 65535, 'a TCP port');
}

/** A yargs coerce function for an integer in [min, max]. */
export function intCoerce(name: string, min: number, max: number, what?: string): (text: unknown) => number {
  return (text) => parseIntOption(name, text, min, max, what);
}
