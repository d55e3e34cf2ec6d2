#!/usr/bin/env node
// ernicctl: run N rocm-ernic instances on this host without systemd (one
// mesh manager and workers, a TAP each in a host bridge, instances.json in the
// run directory), and look at them. lib/ops/ does the work; docs/instances.md
// describes the layout. Bad options: one line and exit status 2.

import * as path from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import {
  defaultServerCommand,
  hostLogs,
  serverHasOption,
  hostStats,
  hostStatus,
  HostStatus,
  InstanceStats,
  startInstances,
  stopInstances,
} from '../lib/ops/instances';
import { followFiles } from '../lib/ops/follow';
import { ensureBridge, ensureTap, removeLink } from '../lib/ops/netdev';
import { conventions, intCoerce, parseIntOption, portCoerce } from '../lib/cli/options';
import { MAX_INSTANCES, OPS_DEFAULTS, planInstances } from '../lib/ops/plan';

const env = process.env;

function fail(message: string, status = 1): never {
  process.stderr.write(
    `ernicctl: ${message
      .trim()
      .replace(/:\s*\n\s*/g, ': ')
      .replace(/\s*\n\s*/g, '; ')}\n`,
  );
  process.exit(status);
}

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** ERNIC_MAC_<n> and ERNIC_GUEST_GIDS_<n> from the environment, by instance id. */
function perInstanceEnv(prefix: string): Map<number, string> {
  const m = new Map<number, string>();
  for (const [k, v] of Object.entries(env)) {
    const r = new RegExp(`^${prefix}_(\\d+)$`).exec(k);
    if (r && v) m.set(Number(r[1]), v);
  }
  return m;
}

/**
 * An integer from the environment, checked like an option: the message names
 * the variable and the text it holds. Unset or empty: the fallback.
 */
function envInt(name: string, fallback: number, min: number, max: number, what: string): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  const t = v.trim();
  const n = /^\d+$/.test(t) ? Number(t) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) fail(`${name}=${v}: expected ${what} from ${min} to ${max}`, 2);
  return n;
}

/** The instance count typed after `start`: an integer (its range is checked with the plan, which names it). */
function countCoerce(text: unknown): number {
  if (Array.isArray(text)) throw new Error('instance count given more than once');
  const t = String(text).trim();
  if (!/^\d+$/.test(t) || !Number.isSafeInteger(Number(t)))
    throw new Error(`instance count ${String(text)}: expected an integer from 1 to ${MAX_INSTANCES}`);
  return Number(t);
}

/** A positional instance id (like --id): 0 .. MAX_INSTANCES - 1. */
const idCoerce = (text: unknown): number => parseIntOption('id', text, 0, MAX_INSTANCES - 1, 'an instance id');

function formatStatus(s: HostStatus): string {
  const rows = [['ID', 'ROLE', 'PID', 'STATE', 'MESH', 'SOCKET', 'MODE', 'VMS', 'TAP', 'MAC', 'UPTIME']];
  for (const i of s.instances) {
    rows.push([
      String(i.id),
      i.role,
      String(i.pid),
      i.running ? 'running' : 'gone',
      i.mesh_node === null ? '-' : `node ${i.mesh_node}`,
      i.socket,
      i.socket_file ? `${i.socket_file.mode} ${i.socket_file.uid}:${i.socket_file.gid}` : 'missing',
      String(i.clients),
      i.tap === null ? '-' : `${i.tap}${i.tap_up === null ? ' (missing)' : i.tap_up ? '' : ' (down)'}`,
      i.mac,
      i.uptime_s === null ? '-' : `${i.uptime_s}s`,
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const lines = rows.map((r) =>
    r
      .map((x, c) => x.padEnd(widths[c]!))
      .join('  ')
      .trimEnd(),
  );
  const up = s.instances.filter((i) => i.running).length;
  return [
    `${s.manifest}: ${up} of ${s.instances.length} running${s.bridge ? `, bridge ${s.bridge}` : ''}`,
    ...lines,
  ].join('\n');
}

function formatStats(list: InstanceStats[]): string {
  const parts: string[] = [];
  for (const s of list) {
    const lines = [`== instance ${s.id}: ${s.running ? 'running' : 'not running'}`];
    if (s.rss_bytes !== null) lines.push(`  rss          : ${(s.rss_bytes / 1048576).toFixed(1)} MiB`);
    if (s.cpu_seconds !== null) lines.push(`  cpu          : ${s.cpu_seconds.toFixed(2)} s`);
    if (s.tap) {
      for (const k of ['rx_packets', 'rx_bytes', 'rx_dropped', 'tx_packets', 'tx_bytes', 'tx_dropped']) {
        if (s.tap[k] !== undefined) lines.push(`  tap ${k.padEnd(10)} : ${s.tap[k]}`);
      }
    }
    if (s.stats_text !== null)
      lines.push(
        `  stats file ${s.stats_file}:`,
        ...s.stats_text
          .trimEnd()
          .split('\n')
          .map((l) => `    ${l}`),
      );
    else lines.push(`  stats file   : ${s.stats_file} (not written by this server)`);
    parts.push(lines.join('\n'));
  }
  return parts.join('\n');
}

/** Whether `logs` was given both a bare ID and --id. */
function twoIds(args: readonly string[]): boolean {
  const rest = args.slice(args.indexOf('logs') + 1);
  const takesValue = new Set(['--id', '--run-dir', '--lines', '-n']);
  const flagged = rest.some((x) => x === '--id' || x.startsWith('--id='));
  const bare = rest.filter((x, i) => !x.startsWith('-') && !(i > 0 && takesValue.has(rest[i - 1]!)));
  return flagged && bare.length > 0;
}

async function main(): Promise<void> {
  const runDirOpt = {
    type: 'string',
    default: env.ERNIC_RUN_DIR || OPS_DEFAULTS.runDir,
    describe: 'where sockets, pid files and instances.json live (ERNIC_RUN_DIR)',
  } as const;
  await conventions(yargs(hideBin(process.argv)), 'ernicctl')
    .scriptName('ernicctl')
    .usage(
      '$0 <command> [options]\n\nRun several rocm-ernic servers on this host without systemd and look after them.\n' +
        'Instance 0 is the mesh manager (--backend tcp:manager:listen:PORT), the others are workers\n' +
        '(tcp:worker:MANAGER_IP:PORT): RDMA between their VMs goes over that TCP mesh, Ethernet over\n' +
        'TAPs joined in one host bridge. Everything started is recorded in RUN_DIR/instances.json,\n' +
        'which stop, status, stats and logs read. Needs root for the TAPs and the bridge (or --no-tap).',
    )
    .option('run-dir', runDirOpt)
    .command(
      'start [count]',
      'start COUNT instances (1 manager + COUNT-1 workers); waits until each listens and each worker has registered (as their stats files say)',
      (y) =>
        y
          .positional('count', {
            type: 'string',
            coerce: countCoerce,
            describe: `how many instances (1..${MAX_INSTANCES}; default $ERNIC_INSTANCES, else ${OPS_DEFAULTS.instances})`,
          })
          .option('log-dir', {
            type: 'string',
            default: env.ERNIC_LOG_DIR || OPS_DEFAULTS.logDir,
            describe: 'one log file per instance, ID.log (ERNIC_LOG_DIR)',
          })
          .option('tcp-port', {
            type: 'string',
            coerce: portCoerce('tcp-port'),
            describe: `mesh port the manager listens on (default $ERNIC_TCP_PORT, else ${OPS_DEFAULTS.tcpPort})`,
          })
          .option('manager-ip', {
            type: 'string',
            default: env.ERNIC_MANAGER_IP || OPS_DEFAULTS.managerIp,
            describe: 'address the workers dial (ERNIC_MANAGER_IP)',
          })
          .option('backend', {
            type: 'string',
            describe: 'one backend for every instance instead of the mesh, e.g. loopback (ERNIC_BACKEND)',
            default: env.ERNIC_BACKEND || undefined,
          })
          .option('tap-prefix', {
            type: 'string',
            default: env.ERNIC_TAP_PREFIX || OPS_DEFAULTS.tapPrefix,
            describe: 'instance N gets the TAP PREFIXN, created if missing (ERNIC_TAP_PREFIX)',
          })
          .option('tap-user', { type: 'string', describe: 'owner of the TAPs created (ip tuntap ... user U)' })
          .option('tap', {
            type: 'boolean',
            default: true,
            describe: 'a TAP per instance; --no-tap: no TAPs and no bridge, so no Ethernet wire (needs no root)',
          })
          .option('bridge', {
            type: 'string',
            default: env.ERNIC_TAP_BRIDGE || OPS_DEFAULTS.bridge,
            describe:
              'host bridge the TAPs join, created if missing (ERNIC_TAP_BRIDGE); --no-bridge: leave the TAPs unbridged',
          })
          .option('nic-profile', {
            alias: 'p',
            type: 'string',
            default: OPS_DEFAULTS.profile,
            describe: 'NIC profile of every instance (rocm-ernic --nic-profile)',
          })
          .option('socket-mode', {
            type: 'string',
            default: OPS_DEFAULTS.socketMode,
            describe: 'mode of each socket file, octal',
          })
          .option('socket-group', {
            type: 'string',
            describe: 'group owning each socket file (e.g. kvm, so a QEMU in that group may connect)',
          })
          .option('log-level', {
            alias: 'L',
            choices: ['error', 'warn', 'info', 'debug'],
            default: env.ERNIC_LOG_LEVEL || OPS_DEFAULTS.logLevel,
            describe: "the servers' log level (ernicctl reads their state from their stats files, not their logs)",
          })
          .option('server', {
            type: 'string',
            describe: 'rocm-ernic program to run (ERNIC_BIN; default: the one installed with ernicctl)',
            default: env.ERNIC_BIN || undefined,
          })
          .option('start-timeout', {
            type: 'string',
            default: '15000',
            coerce: intCoerce('start-timeout', 1, 600_000, 'milliseconds'),
            describe: 'ms each server has to start listening',
          })
          .option('mesh-timeout', {
            type: 'string',
            default: '15000',
            coerce: intCoerce('mesh-timeout', 0, 600_000, 'milliseconds'),
            describe: 'ms each worker has to register with the manager (0: do not wait)',
          })
          .example(
            '$0 start 3',
            'instances 0-2 in /run/rocm-ernic, TAPs ernic-tap0..2 in bridge ernicbr0, mesh on port 6320',
          )
          .example('ERNIC_INSTANCES=2 $0 start --no-tap', 'the count from the environment')
          .example(
            '$0 start 2 --no-tap --run-dir /tmp/ernic --log-dir /tmp/ernic',
            'two instances without root, files under /tmp/ernic',
          )
          .example(
            '$0 start 4 --backend loopback --no-bridge',
            'four independent servers, no mesh, TAPs left unbridged',
          ),
      async (a) => {
        // --no-bridge arrives as bridge: false (yargs' negation of a string option).
        const bridge = typeof a.bridge === 'string' && a.bridge !== '' ? a.bridge : null;
        const server = a.server ? a.server.split(' ').filter(Boolean) : defaultServerCommand(__dirname);
        // Read here, not as yargs defaults: a bad value in the environment is named as such.
        const count =
          a.count ?? envInt('ERNIC_INSTANCES', OPS_DEFAULTS.instances, 1, MAX_INSTANCES, 'an instance count');
        const tcpPort = a['tcp-port'] ?? envInt('ERNIC_TCP_PORT', OPS_DEFAULTS.tcpPort, 1, 65535, 'a TCP port');
        const opts = {
          count,
          runDir: a['run-dir'],
          logDir: a['log-dir'],
          tcpPort: a.backend ? null : tcpPort,
          managerIp: a['manager-ip'],
          backend: a.backend ?? 'loopback',
          tapPrefix: a.tap ? a['tap-prefix'] : null,
          bridge: a.tap ? bridge : null,
          tapUser: a['tap-user'] ?? null,
          profile: a['nic-profile'],
          socketMode: a['socket-mode'],
          socketGroup: a['socket-group'] ?? null,
          logLevel: a['log-level'],
          macs: perInstanceEnv('ERNIC_MAC'),
          gids: perInstanceEnv('ERNIC_GUEST_GIDS'),
          server,
          statsFile: serverHasOption(server, '--stats-file'),
          startTimeoutMs: a['start-timeout'],
          meshTimeoutMs: a['mesh-timeout'],
          progress: out,
        };
        const plan = planInstances(opts);
        if (!plan.ok) fail(plan.error, 2);
        const started = await startInstances(opts);
        if (!started.ok) fail(started.error);
        out(`${started.value.instances.length} instance(s) running; ${path.join(a['run-dir'], 'instances.json')}`);
      },
    )
    .command(
      'stop',
      'stop every instance (SIGTERM, then SIGKILL after --timeout), remove their TAPs, the bridge if ernicctl made it, sockets, pid files and instances.json',
      (y) =>
        y.option('timeout', {
          type: 'string',
          default: '10000',
          coerce: intCoerce('timeout', 0, 600_000, 'milliseconds'),
          describe: 'ms to wait after SIGTERM before SIGKILL',
        }),
      async (a) => {
        const r = await stopInstances(a['run-dir'], { timeoutMs: a.timeout, progress: out });
        if (!r.ok) fail(r.error);
        if (r.value === null) {
          out(`nothing to stop (no ${path.join(a['run-dir'], 'instances.json')})`);
          return;
        }
        for (const p of r.value.problems) out(`warning: ${p}`);
        out('stopped');
      },
    )
    .command(
      'status',
      'one line per instance: process, mesh node, socket file and mode, VMs connected, TAP',
      (y) => y.option('json', { type: 'boolean', default: false, describe: 'print JSON instead of a table' }),
      (a) => {
        const r = hostStatus(a['run-dir']);
        if (!r.ok) fail(r.error);
        if (r.value === null) {
          if (a.json) out(JSON.stringify({ run_dir: a['run-dir'], instances: [] }, null, 2));
          else out(`no instances (no ${path.join(a['run-dir'], 'instances.json')})`);
          return;
        }
        out(a.json ? JSON.stringify(r.value, null, 2) : formatStatus(r.value));
        // Exit 3 (as systemctl status does) when something listed is not running.
        if (r.value.instances.some((i) => !i.running)) process.exitCode = 3;
      },
    )
    .command(
      'stats [id]',
      "per instance: memory and CPU of the server, its TAP's counters, and its stats file when the server writes one",
      (y) =>
        y
          .positional('id', { type: 'string', coerce: idCoerce, describe: 'just this instance' })
          .option('json', { type: 'boolean', default: false, describe: 'print JSON' }),
      (a) => {
        const r = hostStats(a['run-dir'], a.id);
        if (!r.ok) fail(r.error);
        if (r.value === null) {
          out(`no instances (no ${path.join(a['run-dir'], 'instances.json')})`);
          return;
        }
        out(a.json ? JSON.stringify(r.value, null, 2) : formatStats(r.value));
      },
    )
    .command(
      'logs [id]',
      "the last lines of each instance's log (or of one); -f: then what is appended, until Ctrl-C",
      (y) =>
        y
          .positional('id', { type: 'string', coerce: idCoerce, describe: 'just this instance (as --id)' })
          .option('id', { type: 'string', coerce: idCoerce, describe: 'just this instance' })
          .option('lines', {
            alias: 'n',
            type: 'string',
            default: '40',
            coerce: intCoerce('lines', 0, 100_000, 'a line count'),
            describe: 'lines per instance',
          })
          .option('follow', {
            alias: 'f',
            type: 'boolean',
            default: false,
            describe: 'keep printing what the servers append, like tail -f (ends on SIGINT)',
          })
          .example('$0 logs -f', "follow every instance's log")
          .example('$0 logs -f --id 1 -n 0', 'follow instance 1 only, from now'),
      async (a) => {
        // yargs lets the positional silently win over --id: two ids are refused instead.
        if (twoIds(hideBin(process.argv))) fail('logs: name the instance once (ID or --id ID)', 2);
        const id = a.id;
        const r = hostLogs(a['run-dir'], id, a.lines);
        if (!r.ok) fail(r.error);
        if (r.value === null) {
          out(`no instances (no ${path.join(a['run-dir'], 'instances.json')})`);
          return;
        }
        for (const l of r.value) {
          if (r.value.length > 1) out(`==> instance ${l.id} (${l.role}) ${l.file} <==`);
          if (l.text) out(l.text);
        }
        if (!a.follow) return;
        const follower = followFiles(
          r.value.map((l) => ({ label: `instance ${l.id} (${l.role})`, file: l.file })),
          out,
        );
        await new Promise<void>((resolve) => {
          const end = (): void => {
            follower.close();
            resolve();
          };
          process.once('SIGINT', end);
          process.once('SIGTERM', end);
        });
      },
    )
    .command(
      'tap <action> <name>',
      'make a TAP ready for one server (up: create if missing, join --bridge, set up; down: delete); what the systemd unit runs before and after rocm-ernic',
      (y) =>
        y
          .positional('action', { choices: ['up', 'down'] as const, describe: 'up or down' })
          .positional('name', { type: 'string', describe: 'TAP interface name' })
          .option('bridge', {
            type: 'string',
            default: '',
            describe: 'bridge to join, created if missing (empty: none)',
          })
          .option('user', { type: 'string', default: '', describe: 'owner of a TAP created here (empty: root)' }),
      (a) => {
        const name = a.name as string;
        if (a.action === 'down') {
          const r = removeLink(name);
          if (!r.ok) fail(r.error);
          return;
        }
        const bridge = a.bridge || null;
        if (bridge) {
          // ensureTap joins an existing bridge; make it first.
          const b = ensureBridge(bridge);
          if (!b.ok) fail(b.error);
        }
        const r = ensureTap(name, { bridge, ...(a.user ? { user: a.user } : {}) });
        if (!r.ok) fail(r.error);
      },
    )
    .demandCommand(1, 'name a command: start, stop, status, stats, logs or tap (--help lists them)')
    .epilog(
      'Files (RUN_DIR default /run/rocm-ernic, LOG_DIR /var/log/rocm-ernic):\n' +
        '  RUN_DIR/instances.json   id, role, pid, mac, gid, socket, tap, backend, stats, log, mesh_node per instance\n' +
        "  RUN_DIR/ID.sock          the vfio-user socket a VM's QEMU connects to\n" +
        '  RUN_DIR/ID.pid, ID.stats pid file; stats file path (written by servers that support one)\n' +
        "  LOG_DIR/ID.log           the server's output\n" +
        'QEMU for instance ID: -device \'{"driver":"vfio-user-pci","socket":{"path":"RUN_DIR/ID.sock","type":"unix"}}\'\n' +
        'with guest RAM from -object memory-backend-memfd,share=on. Under systemd use rocm-ernic@ID.service\n' +
        'instead (docs/instances.md).',
    )
    .parseAsync();
}

if (require.main === module) {
  main().catch((e: unknown) => fail((e as Error).stack ?? String(e)));
}
