// BAR0 of the ionic device: the register file the driver maps (ionic_regs.h),
// then the MSI-X table and PBA that the PCI function serves itself.
//
//   0x0000 dev_info   RO  signature, versions, fw status, strings (ionic_dev_info_regs)
//   0x0800 dev_cmd    RW  doorbell, done, command, completion, data window (ionic_dev_cmd_regs);
//                         writing 1 to the doorbell runs the command (onDevCmdDoorbell)
//   0x1000 intr_status RO reads 0 (we deliver at once: nothing is ever pending here)
//   0x2000 intr_ctrl  RW  one struct ionic_intr per vector (InterruptController)
//   0x8000 MSI-X table, 0xa000 PBA: the PCI function's (msix below)
//
// Anything else in the window is reserved: it reads 0 and writes are dropped.
// Device commands run synchronously inside the doorbell write.

import type { BarHandler } from '../pci/bars';
import type { MsixSpec } from '../pci/msix';
import { executeCommand, CommandContext } from './commands';
import { IONIC_DEV_INFO_SIGNATURE, IONIC_FW_STS_RUNNING } from './constants';
import type { InterruptController } from './interrupts';
import { bar0, ionic_dev_cmd_regs, ionic_dev_info_regs, ionic_intr } from './layouts';
import { getField, setField } from '../../protocol/field';
import type { NicProfile } from './profile';

/** BAR index of the register window. */
export const BAR0_INDEX = 0;

/** dev_info version we report. */
const IONIC_DEV_INFO_VERSION = 1;
/** The value the driver writes to dev_cmd.doorbell to run the command. */
const IONIC_DEV_CMD_DOORBELL_RING = 1;
/** dev_cmd.done once the completion and the data are final (ionic_regs.h IONIC_DEV_CMD_DONE). */
const IONIC_DEV_CMD_DONE = 0x1;
/** Every register of struct ionic_intr is a u32. */
const INTR_REG_SIZE = 4;

/** Where the MSI-X structures sit for `vectors` vectors (served by the PCI function, not by this handler). */
export function bar0Msix(vectors: number): MsixSpec {
  return { vectors, tableBar: BAR0_INDEX, tableOffset: bar0.MSIX_TABLE, pbaBar: BAR0_INDEX, pbaOffset: bar0.MSIX_PBA };
}

/** The BAR0 counters the device keeps. */
export interface Bar0Counters {
  bar0Reads: number;
  bar0Writes: number;
  devCmds: number;
}

interface Bar0Options {
  readonly profile: NicProfile;
  readonly interrupts: InterruptController;
  readonly counters: Bar0Counters;
  /** What a device command runs against. */
  readonly commands: CommandContext;
}

/** The register window of BAR0 as a BAR handler. */
export class Bar0Registers implements BarHandler {
  readonly #devInfo = Buffer.alloc(ionic_dev_info_regs.SIZE);
  readonly #devCmd = Buffer.alloc(ionic_dev_cmd_regs.SIZE);
  readonly #interrupts: InterruptController;
  readonly #counters: Bar0Counters;
  readonly #commands: CommandContext;

  constructor(opts: Bar0Options) {
    this.#interrupts = opts.interrupts;
    this.#counters = opts.counters;
    this.#commands = opts.commands;
    writeDevInfo(this.#devInfo, opts.profile);
  }

  /** Power-on state of the device-command registers (dev_info never changes). */
  resetDevCmd(): void {
    this.#devCmd.fill(0);
  }

  /** First byte after the interrupt-control block (it has one struct per vector). */
  get #intrEnd(): number {
    return bar0.INTR_CTRL + this.#interrupts.vectors * ionic_intr.SIZE;
  }

  read(offset: number, dst: Buffer): number {
    this.#counters.bar0Reads++;
    const intrEnd = this.#intrEnd;
    for (let i = 0; i < dst.length; i++) {
      const at = offset + i;
      if (at < bar0.DEV_CMD) dst[i] = this.#devInfo[at - bar0.DEV_INFO]!;
      else if (at < bar0.DEV_CMD + ionic_dev_cmd_regs.SIZE) dst[i] = this.#devCmd[at - bar0.DEV_CMD]!;
      else if (at >= bar0.INTR_CTRL && at < intrEnd) dst[i] = this.#intrByte(at - bar0.INTR_CTRL);
      else dst[i] = 0;
    }
    return 0;
  }

  write(offset: number, src: Buffer): number {
    this.#counters.bar0Writes++;
    const end = offset + src.length;
    if (offset < bar0.DEV_CMD + ionic_dev_cmd_regs.SIZE && end > bar0.DEV_CMD) {
      this.#devCmdWrite(offset, src);
      return 0;
    }
    if (offset >= bar0.INTR_CTRL && end <= this.#intrEnd) {
      this.#intrCtrlWrite(offset, src);
      return 0;
    }
    // dev_info and intr_status are read-only; everything else in the window is reserved.
    return 0;
  }

  /** One byte of the interrupt-control block (`rel` from its start). */
  #intrByte(rel: number): number {
    const word = this.#interrupts.read32(rel - (rel % INTR_REG_SIZE));
    return (word >>> ((rel % INTR_REG_SIZE) * 8)) & 0xff;
  }

  /** Device-command registers: store, then run the command if the doorbell now says so. */
  #devCmdWrite(offset: number, src: Buffer): void {
    const from = Math.max(offset, bar0.DEV_CMD);
    const to = Math.min(offset + src.length, bar0.DEV_CMD + ionic_dev_cmd_regs.SIZE);
    src.copy(this.#devCmd, from - bar0.DEV_CMD, from - offset, to - offset);
    const db = bar0.DEV_CMD + ionic_dev_cmd_regs.doorbell.off;
    if (from <= db && to > db && getField(this.#devCmd, 0, ionic_dev_cmd_regs.doorbell) === IONIC_DEV_CMD_DOORBELL_RING)
      this.#onDevCmdDoorbell();
  }

  /** Interrupt control: registers are u32; a narrower or unaligned write updates the bytes it covers. */
  #intrCtrlWrite(offset: number, src: Buffer): void {
    const end = offset + src.length;
    for (let at = offset - ((offset - bar0.INTR_CTRL) % INTR_REG_SIZE); at < end; at += INTR_REG_SIZE) {
      const rel = at - bar0.INTR_CTRL;
      let word = this.#interrupts.read32(rel);
      for (let b = 0; b < INTR_REG_SIZE; b++) {
        const k = at + b - offset;
        if (k >= 0 && k < src.length) word = (word & ~(0xff << (b * 8))) | (src[k]! << (b * 8));
      }
      this.#interrupts.write32(rel, word >>> 0);
    }
  }

  #onDevCmdDoorbell(): void {
    this.#counters.devCmds++;
    const d = this.#devCmd;
    setField(d, 0, ionic_dev_cmd_regs.done, 0);
    const cmd = d.subarray(ionic_dev_cmd_regs.CMD, ionic_dev_cmd_regs.CMD + ionic_dev_cmd_regs.CMD_SIZE);
    const comp = d.subarray(ionic_dev_cmd_regs.COMP, ionic_dev_cmd_regs.COMP + ionic_dev_cmd_regs.COMP_SIZE);
    comp.fill(0);
    executeCommand(
      this.#commands,
      Buffer.from(cmd),
      comp,
      d.subarray(ionic_dev_cmd_regs.DATA, ionic_dev_cmd_regs.DATA + ionic_dev_cmd_regs.DATA_SIZE),
    );
    // done only after the completion and the data are final.
    setField(d, 0, ionic_dev_cmd_regs.done, IONIC_DEV_CMD_DONE);
  }
}

/** dev_info as the profile describes the device. */
function writeDevInfo(d: Buffer, p: NicProfile): void {
  setField(d, 0, ionic_dev_info_regs.signature, IONIC_DEV_INFO_SIGNATURE);
  setField(d, 0, ionic_dev_info_regs.version, IONIC_DEV_INFO_VERSION);
  setField(d, 0, ionic_dev_info_regs.asic_type, p.asicType);
  setField(d, 0, ionic_dev_info_regs.asic_rev, p.asicRev);
  // RUNNING with a generation that never changes (a change means "firmware restarted").
  setField(d, 0, ionic_dev_info_regs.fw_status, IONIC_FW_STS_RUNNING);
  // A heartbeat of 0 is accepted forever; a frozen non-zero one is not.
  setField(d, 0, ionic_dev_info_regs.fw_heartbeat, 0);
  d.write(p.firmwareVersion.slice(0, ionic_dev_info_regs.STRING_SIZE - 1), ionic_dev_info_regs.FW_VERSION, 'latin1');
  d.write(p.serialNumber.slice(0, ionic_dev_info_regs.STRING_SIZE - 1), ionic_dev_info_regs.SERIAL_NUM, 'latin1');
}
