#!/usr/bin/env node
// ernic-vfu: tools for vfio-user sessions. record (a recording proxy), replay
// (play a capture's client side against a server and compare the replies),
// show (a readable listing). The capture format is fixtures/vfio-user/FORMAT.md.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createLogger } from '../lib/log';
import { formatCaptureLine } from '../lib/vfio-user/capture-text';
import { CaptureFormatError, CapturedMessage, readCapture } from '../lib/vfio-user/pcapng';
import { Recorder } from '../lib/vfio-user/recorder';
import { compareCaptures } from '../lib/vfio-user/compare';
import { REPLAY_RULES, replay } from '../lib/vfio-user/replay';

function die(message: string, status = 2): never {
  console.error(`ernic-vfu: ${message}`);
  process.exit(status);
}

function load(file: string): CapturedMessage[] {
  try {
    return readCapture(file);
  } catch (e) {
    if (e instanceof CaptureFormatError) die(`${file}: ${e.message}`);
    die(`${file}: ${(e as Error).message}`);
  }
}

async function waitForSocket(p: string, child: ChildProcess, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (child.exitCode !== null) die(`the spawned server exited with status ${child.exitCode} before listening`, 1);
    try { if (fs.statSync(p).isSocket()) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  die(`the spawned server did not create ${p} within ${ms} ms`, 1);
}

async function cmdRecord(a: { listen: string; connect: string; out: string; once: boolean }): Promise<void> {
  const rec = new Recorder({ listenPath: a.listen, connectPath: a.connect, outPath: a.out, once: a.once, log: createLogger({ level: 'info' }) });
  try {
    await rec.listen();
  } catch (e) {
    die(`cannot listen on ${a.listen}: ${(e as Error).message}`);
  }
  console.error(`recording: clients connect to ${a.listen}, forwarded to ${a.connect}, capture in ${a.out}${a.once ? ' (one connection)' : ' (Ctrl-C to stop)'}`);
  const stop = (): void => { rec.close(); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  await rec.finished();
  console.error(`recorded ${rec.messages} messages to ${a.out}`);
  process.exit(0);
}

async function cmdReplay(a: { capture: string; connect?: string; spawn?: string; only?: string; conn: number; timeout: number }): Promise<void> {
  if (!a.connect && !a.spawn) die('replay needs --connect SOCKET or --spawn COMMAND');
  const messages = load(a.capture);
  let socket = a.connect;
  let child: ChildProcess | null = null;
  if (a.spawn) {
    socket = socket ?? path.join(os.tmpdir(), `ernic-vfu-replay-${process.pid}.sock`);
    const cmd = a.spawn.includes('{socket}') ? a.spawn.replaceAll('{socket}', socket) : `${a.spawn} ${socket}`;
    child = spawn('/bin/sh', ['-c', `exec ${cmd}`], { stdio: 'ignore' });
    await waitForSocket(socket, child, 10000);
  }
  const only = a.only ? a.only.split(',').map((s) => s.trim()).filter(Boolean) : undefined;
  let r;
  try {
    r = await replay(messages, socket!, { conn: a.conn, timeoutMs: a.timeout, ...(only ? { only } : {}) });
  } catch (e) {
    child?.kill();
    die(`replay against ${socket}: ${(e as Error).message}`, 1);
  }
  child?.kill();
  printOutcome(r.differences, r.allowed);
  console.log(`replayed ${r.sent} commands${r.skipped ? ` (${r.skipped} filtered out)` : ''}: ${r.compared} replies compared, ${r.identical} identical, ${r.allowed.length} allowed by rules, ${r.differences.length} different`);
  process.exit(r.differences.length ? 1 : 0);
}

function printOutcome(differences: readonly { frame: number; command: string; what: string }[], allowed: readonly { frame: number; rule: string }[]): void {
  for (const d of differences) console.log(`DIFF frame ${d.frame} ${d.command}: ${d.what}`);
  const byRule = new Map<string, number[]>();
  for (const x of allowed) byRule.set(x.rule, [...(byRule.get(x.rule) ?? []), x.frame]);
  for (const [rule, frames] of byRule) console.log(`allowed by rule ${rule}: ${frames.length} (frames ${frames.slice(0, 8).join(', ')}${frames.length > 8 ? ', ...' : ''})`);
}

function cmdCompare(a: { reference: string; ours: string; conn: number }): void {
  const r = compareCaptures(load(a.reference), load(a.ours), a.conn);
  printOutcome(r.differences, r.allowed);
  console.log(`compared ${r.compared} messages: ${r.identical} identical, ${r.allowed.length} allowed by rules, ${r.differences.length} different`);
  process.exit(r.differences.length ? 1 : 0);
}

function cmdShow(a: { capture: string; conn?: number; command?: string }): void {
  const messages = load(a.capture);
  const t0 = messages[0]?.timestampUs ?? 0;
  const names = a.command?.toUpperCase().split(',');
  for (const m of messages) {
    if (a.conn !== undefined && m.comment.conn !== a.conn) continue;
    if (names && !names.includes(m.comment.name)) continue;
    console.log(formatCaptureLine(m.frame, (m.timestampUs - t0) / 1e6, m.comment, m.bytes));
  }
}

async function main(): Promise<void> {
  const rules = REPLAY_RULES.map((r) => `  ${r.name}: ${r.description}`).join('\n');
  await yargs(hideBin(process.argv))
    .scriptName('ernic-vfu')
    .usage('$0 <command>\n\nRecord, replay and read vfio-user sessions (captures: pcapng, fixtures/vfio-user/FORMAT.md).')
    .command('record', 'proxy between a client and a server, recording every message', (y) => y
      .option('listen', { type: 'string', demandOption: true, describe: 'socket the client (QEMU) connects to' })
      .option('connect', { type: 'string', demandOption: true, describe: 'socket of the real server' })
      .option('out', { type: 'string', demandOption: true, describe: 'capture file (.pcapng); a .txt listing is written beside it' })
      .option('once', { type: 'boolean', default: false, describe: 'stop when the first connection ends' })
      .example('$0 record --listen /tmp/a.sock --connect /tmp/server.sock --out boot.pcapng --once', 'then point QEMU at /tmp/a.sock'),
    (a) => cmdRecord(a))
    .command('replay <capture>', 'play the client side of a capture against a server and compare replies', (y) => y
      .positional('capture', { type: 'string', demandOption: true })
      .option('connect', { type: 'string', describe: 'socket of a running server' })
      .option('spawn', { type: 'string', describe: 'start this server first; {socket} in it is replaced by a socket path (else appended)' })
      .option('only', { type: 'string', describe: 'comma-separated commands to replay (VERSION,DMA_MAP,...), plus "errors" for commands whose recorded reply is an error' })
      .option('conn', { type: 'number', default: 0, describe: 'which connection of the capture' })
      .option('timeout', { type: 'number', default: 5000, describe: 'ms to wait for each reply' })
      .example('$0 replay fixtures/vfio-user/qemu-boot-lvu-gpio.pcapng --spawn "npm run -s example:idio16 -- --socket {socket}"', 'replay QEMU\'s boot against the example device')
      .epilog(`A reply matches when its bytes are identical, or when a documented rule allows the difference:\n${rules}\nExit status: 0 no difference, 1 differences, 2 bad usage.`),
    (a) => cmdReplay(a as { capture: string; connect?: string; spawn?: string; only?: string; conn: number; timeout: number }))
    .command('compare <reference> <ours>', 'compare two captures of the same guest steps, message by message', (y) => y
      .positional('reference', { type: 'string', demandOption: true })
      .positional('ours', { type: 'string', demandOption: true })
      .option('conn', { type: 'number', default: 0, describe: 'which connection of each capture' }),
    (a) => cmdCompare(a as { reference: string; ours: string; conn: number }))
    .command('show <capture>', 'print one line per message with a short decode', (y) => y
      .positional('capture', { type: 'string', demandOption: true })
      .option('conn', { type: 'number', describe: 'only this connection' })
      .option('command', { type: 'string', describe: 'only these commands (comma-separated names)' }),
    (a) => cmdShow(a as { capture: string; conn?: number; command?: string }))
    .demandCommand(1, 'name a command: record, replay, compare or show')
    .strict()
    .help()
    .parseAsync();
}

main().catch((e: unknown) => die((e as Error).message, 1));
