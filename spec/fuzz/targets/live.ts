// The live path: vfio-user messages, BAR0, doorbells, admin commands and WQEs
// against an in-process server (../live-fuzzer.ts).
import { runLiveFuzz, LiveFuzzStats } from '../live-fuzzer';
import { registerTarget } from './index';

function liveSummary(s: LiveFuzzStats): string {
  const acts = Object.entries(s.actions)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const total = Object.values(s.actions).reduce((a, b) => a + b, 0);
  return `${s.epochs} epochs, ${total} actions (${acts}); guests closed by the server ${s.closedByServer}, models lost ${s.modelLost}; QPs revived ${s.revived}`;
}

registerTarget({
  name: 'live',
  describe: 'vfio-user messages, BAR0, doorbells, Ethernet and RDMA admin commands, WQEs (an in-process server)',
  async run(o) {
    let shown = 0;
    const stats = await runLiveFuzz({
      seed: o.seed,
      ms: o.ms,
      actionsPerEpoch: 300,
      log: o.log,
      onEpoch: (s) => {
        if (s.elapsedMs - shown < 1000) return;
        shown = s.elapsedMs;
        o.progress(liveSummary(s));
      },
    });
    return liveSummary(stats);
  },
});
