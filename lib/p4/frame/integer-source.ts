// Functions compiled once at load from source made of integers only (counts,
// indices, flags): no name or value from a program reaches the text.

/** Refuses anything but a safe integer before it is written into source. */
export function checkInt(n: number, what: string): void {
  if (!Number.isSafeInteger(n)) throw new Error(`dispatch: ${what} ${n} is not an integer`);
}

/** Compiles `body` with the closures as parameters f0, f1, ... and returns what it returns. */
export function fromSource<T>(fns: readonly unknown[], body: string): T {
  const params = fns.map((_, i) => `f${i}`);
  return new Function(...params, body)(...fns) as T;
}
