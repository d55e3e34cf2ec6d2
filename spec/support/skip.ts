// Skipping with the reason in the report. Mocha's this.skip() takes no
// message, so a skipped test shows as a bare title; skipBecause() writes the
// reason into the title of every test it skips, where the spec reporter (and
// anyone reading CI output) sees it.

/** Skips the running test, or every test of the suite when called from a before() hook, saying why. */
export function skipBecause(ctx: Mocha.Context, reason: string): never {
  const note = ` [skipped: ${reason}]`;
  const runnable = ctx.test;
  if (runnable && (runnable as Mocha.Runnable & { type?: string }).type === 'hook') {
    markSuite(runnable.parent, note);
  } else if (runnable) {
    if (!runnable.title.endsWith(note)) runnable.title += note;
  }
  ctx.skip();
}

function markSuite(suite: Mocha.Suite | undefined, note: string): void {
  if (!suite) return;
  for (const t of suite.tests) if (!t.title.endsWith(note)) t.title += note;
  for (const s of suite.suites) markSuite(s, note);
}
