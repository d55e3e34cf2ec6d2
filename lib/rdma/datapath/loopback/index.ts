// The loopback data path: WQEs run between QPs of this device
// (data-path.ts says what each module does).

export { DataPathEngine, installLoopbackDataPath, LoopbackDataPath } from './data-path';
export { BUDGET, TURN_BUDGET } from './scheduler';
export { rnrDelayMs } from './rnr';
