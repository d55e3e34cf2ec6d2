// I/O commands: Read, Write, Flush, Write Zeroes, Dataset Management
// (deallocate). Each checks namespace, range and descriptor before any data
// moves; a Write's data is fetched from the host first and the completion
// waits for the namespace to have stored it.

import { getField, U64_UNSAFE } from '../../../protocol/field';
import {
  checkSgl,
  CmdResult,
  dataFromHost,
  dataToHost,
  fail,
  NvmeCommand,
  sqeField,
  SUCCESS,
  TargetDma,
} from './command';
import {
  DSM_ATTR_DEALLOCATE,
  IoOpcode,
  NSID_ALL,
  nvme_dsm,
  nvme_dsm_range,
  nvme_rw,
  nvme_sqe,
  NvmeStatus,
  RW_CONTROL_FUA,
} from './layouts';
import { MAX_TRANSFER_BYTES } from './limits';
import { BlockRange, NvmeofNamespace } from './namespace';
import { NvmeofSubsystem } from './subsystem';

/** Blocks a Read/Write/Write Zeroes names: the 0's based length field plus one. */
function blockCount(cmd: NvmeCommand): number {
  return sqeField(cmd, nvme_rw.length) + 1;
}

function findNamespace(sub: NvmeofSubsystem, cmd: NvmeCommand): NvmeofNamespace | CmdResult {
  return sub.namespaces.get(cmd.nsid) ?? fail(NvmeStatus.INVALID_NS, nvme_sqe.nsid);
}

function isResult(x: NvmeofNamespace | CmdResult): x is CmdResult {
  return (x as CmdResult).status !== undefined;
}

/** The first block, checked with `nlb` against the namespace's end. */
function checkRange(ns: NvmeofNamespace, slba: number, nlb: number): CmdResult | null {
  if (slba === U64_UNSAFE || slba + nlb > ns.blocks) return fail(NvmeStatus.LBA_RANGE, nvme_rw.slba);
  return null;
}

function fromStatus(status: number): CmdResult {
  return status === NvmeStatus.SUCCESS ? SUCCESS : { status, dw0: 0, dw1: 0, loc: -1 };
}

async function readWrite(sub: NvmeofSubsystem, cmd: NvmeCommand, dma: TargetDma, write: boolean): Promise<CmdResult> {
  const ns = findNamespace(sub, cmd);
  if (isResult(ns)) return ns;
  const slba = sqeField(cmd, nvme_rw.slba);
  const nlb = blockCount(cmd);
  const bad = checkRange(ns, slba, nlb);
  if (bad) return bad;
  const len = nlb * ns.blockSize;
  if (len > MAX_TRANSFER_BYTES) return fail(NvmeStatus.INVALID_FIELD, nvme_rw.length);
  const badSgl = checkSgl(cmd, len, write);
  if (badSgl) return badSgl;
  const buf = Buffer.allocUnsafe(len);
  if (write) {
    const moved = await dataFromHost(cmd, dma, buf);
    if (moved) return moved;
    const st = await ns.write(slba, buf, (sqeField(cmd, nvme_rw.control) & RW_CONTROL_FUA) !== 0);
    if (st === NvmeStatus.SUCCESS) {
      sub.stats.bytesWritten += len;
      sub.stats.writeCommands++;
    }
    return fromStatus(st);
  }
  const st = await ns.read(slba, buf);
  if (st !== NvmeStatus.SUCCESS) return fromStatus(st);
  const moved = await dataToHost(cmd, dma, buf);
  if (moved) return moved;
  sub.stats.bytesRead += len;
  sub.stats.readCommands++;
  return SUCCESS;
}

async function writeZeroes(sub: NvmeofSubsystem, cmd: NvmeCommand): Promise<CmdResult> {
  const ns = findNamespace(sub, cmd);
  if (isResult(ns)) return ns;
  const slba = sqeField(cmd, nvme_rw.slba);
  const nlb = blockCount(cmd);
  const bad = checkRange(ns, slba, nlb) ?? checkSgl(cmd, 0, true);
  if (bad) return bad;
  return fromStatus(await ns.writeZeroes(slba, nlb));
}

async function datasetManagement(sub: NvmeofSubsystem, cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
  const ns = findNamespace(sub, cmd);
  if (isResult(ns)) return ns;
  const count = sqeField(cmd, nvme_dsm.nr) + 1;
  const len = count * nvme_dsm_range.SIZE;
  // The range list may come in a longer buffer: Linux hosts always send room for 256 ranges (4 KiB), and
  // nvmet takes any transfer at least as long as the ranges (nvmet_check_data_len_lte).
  const badSgl = checkSgl(cmd, len, true, true);
  if (badSgl) return badSgl;
  const ranges = Buffer.allocUnsafe(len);
  const moved = await dataFromHost(cmd, dma, ranges);
  if (moved) return moved;
  if ((sqeField(cmd, nvme_dsm.attributes) & DSM_ATTR_DEALLOCATE) === 0) return SUCCESS; // hints only
  const list: BlockRange[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * nvme_dsm_range.SIZE;
    const slba = getField(ranges, at, nvme_dsm_range.slba);
    const nlb = getField(ranges, at, nvme_dsm_range.nlb);
    if (slba === U64_UNSAFE || slba + nlb > ns.blocks) return fail(NvmeStatus.LBA_RANGE, nvme_dsm.nr);
    if (nlb > 0) list.push({ slba, nlb });
  }
  // 256 ranges may each name the whole namespace: their union is zeroed once.
  return fromStatus(await ns.deallocate(mergeRanges(list)));
}

/** Sorted, with overlapping and adjacent ranges joined. */
export function mergeRanges(list: readonly BlockRange[]): BlockRange[] {
  const sorted = [...list].sort((a, b) => a.slba - b.slba);
  const out: BlockRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.slba <= last.slba + last.nlb) {
      const end = Math.max(last.slba + last.nlb, r.slba + r.nlb);
      out[out.length - 1] = { slba: last.slba, nlb: end - last.slba };
    } else out.push(r);
  }
  return out;
}

async function flush(sub: NvmeofSubsystem, cmd: NvmeCommand): Promise<CmdResult> {
  const bad = checkSgl(cmd, 0, true);
  if (bad) return bad;
  if (cmd.nsid === NSID_ALL) {
    for (const ns of sub.namespaces.values()) {
      const st = await ns.flush();
      if (st !== NvmeStatus.SUCCESS) return fromStatus(st);
    }
    return SUCCESS;
  }
  const ns = findNamespace(sub, cmd);
  if (isResult(ns)) return ns;
  return fromStatus(await ns.flush());
}

/** Run one I/O command of `sub`, moving data through `dma`. */
export function executeIo(sub: NvmeofSubsystem, cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
  switch (cmd.opcode) {
    case IoOpcode.READ:
      return readWrite(sub, cmd, dma, false);
    case IoOpcode.WRITE:
      return readWrite(sub, cmd, dma, true);
    case IoOpcode.FLUSH:
      return flush(sub, cmd);
    case IoOpcode.WRITE_ZEROES:
      return writeZeroes(sub, cmd);
    case IoOpcode.DSM:
      return datasetManagement(sub, cmd, dma);
    default:
      return Promise.resolve(fail(NvmeStatus.INVALID_OPCODE, nvme_sqe.opcode));
  }
}
