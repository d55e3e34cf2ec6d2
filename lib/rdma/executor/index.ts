// The WQE executor: WQEs run between QPs of this device, and through a
// RemotePath to QPs elsewhere (executor.ts says what each module does).

export { DataPathEngine, installWqeExecutor } from './executor';
