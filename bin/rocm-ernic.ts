#!/usr/bin/env node
// rocm-ernic: the server. Presents an AMD Pensando ionic NIC (1dd8:1002) to a
// QEMU guest over vfio-user. Bad options stop it before QEMU can connect,
// with one line naming the problem and exit status 2.

// First: V8 settings that only apply if made before the heap grows (docs/latency.md).
import '../lib/latency-flags';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import * as fs from 'fs';
import { conventions, intCoerce, portCoerce, usageFailure } from '../lib/cli/options';
import { notifyReady } from '../lib/cli/systemd';
import { createLogger, LOG_FORMATS, LOG_LEVELS, LogFormat, LogLevel, stderrIsJournal } from '../lib/log';
import { VfioUserServer } from '../lib/vfio-user/server';
import type { WarmUpPlan } from '../lib/vfio-user/warm-up';
import { DEFAULT_SESSION_LIMITS } from '../lib/vfio-user/session';
import { reportBug } from '../lib/guard';
import { IonicDevice } from '../lib/ionic/device';
import { FaultInjector, INJECT_HELP, InjectSpecError } from '../lib/ionic/fault-injection';
import { formatProfile, listProfiles, ProfileError, resolveProfile } from '../lib/ionic/profile';
import { TapLink } from '../lib/ionic/tap';
import { backendKind, backendsHelp, ServedMesh, unknownBackend } from '../lib/backends';
import { MeshBackend } from '../lib/backends/mesh';
import { RoceBackend } from '../lib/backends/roce';
import { isMeshBackend } from '../lib/mesh';
import { DeviceActivity } from '../lib/ops/activity';
import { MetricsHttpServer } from '../lib/ops/metrics-http';
import { serverRegistry } from '../lib/ops/metrics';
import { LoopWatch } from '../lib/ops/loop-watch';
import { StatsFileWriter } from '../lib/ops/stats-file';
import { collectStats } from '../lib/ops/stats-source';
import { attachP4, describeP4, p4FromCli } from '../lib/p4/device/attach';
import { P4_GUEST_SCOPES } from '../lib/p4/device/devcmd';

const DEFAULT_SOCKET = '/tmp/vfio-user-rocm-ernic.sock';
/** "rocm-n": locally administered, unicast. */
const DEFAULT_MAC = '72:6f:63:6d:2d:6e';

/**
 * What the warm-up (lib/vfio-user/warm-up.ts) may do to the NIC before QEMU
 * connects: read the BAR0 signature and the config-space IDs, and write to
 * dev_info, which is read-only (the write is dropped). No state changes.
 */
const IONIC_WARM_UP: WarmUpPlan = {
  reads: [
    { region: 0, offset: 0, count: 4 },
    { region: 7, offset: 0, count: 4 },
  ],
  writes: [{ region: 0, offset: 0, count: 4 }],
};

const fail: (message: string) => never = usageFailure('rocm-ernic');

const BACKENDS_HELP = backendsHelp();

/** Reads a --config file: a JSON object whose keys are the long option names. */
function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`--config ${file}: cannot read: ${(e as Error).message}`);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`--config ${file}: not JSON: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new Error(`--config ${file}: expected a JSON object of option names and values`);
  return v as Record<string, unknown>;
}

/** A host network interface as /sys shows it: missing, down or up (admin state). */
function hostInterfaceState(name: string): 'missing' | 'down' | 'up' {
  if (!/^[^/\0\s]{1,15}$/.test(name) || name === '.' || name === '..') return 'missing';
  try {
    const flags = parseInt(fs.readFileSync(`/sys/class/net/${name}/flags`, 'utf8').trim(), 16);
    return flags & 1 ? 'up' : 'down'; // IFF_UP
  } catch {
    return 'missing';
  }
}

function parseMac(text: string): Buffer | null {
  const m = /^([0-9a-f]{2})([:-])([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})$/i.exec(
    text,
  );
  if (!m) return null;
  const b = Buffer.from([m[1], m[3], m[4], m[5], m[6], m[7]].map((h) => parseInt(h!, 16)));
  // A station address must be unicast and not all zeros.
  if (b[0]! & 1 || b.every((x) => x === 0)) return null;
  return b;
}

async function main(): Promise<void> {
  const profiles = listProfiles()
    .map((p) => `  ${p.name.padEnd(12)} ${p.description}`)
    .join('\n');
  const y = yargs(hideBin(process.argv))
    .scriptName('rocm-ernic')
    .usage(
      "$0 [options]\n\nServe an emulated AMD Pensando ionic RDMA NIC (1dd8:1002) to a QEMU VM over vfio-user.\nThe guest's stock ionic driver binds to it.",
    )
    .option('socket', {
      alias: 's',
      type: 'string',
      default: DEFAULT_SOCKET,
      describe: 'vfio-user UNIX socket QEMU connects to',
    })
    .option('backend', {
      alias: 'b',
      type: 'string',
      default: 'loopback',
      describe: 'where RDMA work goes: loopback | none | tcp:... | nvmeof[:...] | s3[:...] (see Backends below)',
    })
    .option('tap', {
      alias: 'T',
      type: 'string',
      describe: 'attach the Ethernet port to this existing host TAP (ip tuntap add dev X mode tap)',
    })
    .option('tap-offloads', {
      type: 'boolean',
      default: true,
      describe:
        'open the TAP with IFF_VNET_HDR and checksum/TSO offloads (--no-tap-offloads: one finished frame per write)',
    })
    .option('tap-uso', {
      type: 'boolean',
      default: true,
      describe:
        'also UDP segmentation offload on the TAP (TUN_F_USO4/6, Linux 6.2+): --backend roce then writes up to 15 packets of a flow at once (--no-tap-uso: one write per packet; see docs/roce.md)',
    })
    .option('mac', { alias: 'm', type: 'string', default: DEFAULT_MAC, describe: 'station MAC of the LIF' })
    .option('nic-profile', {
      alias: 'p',
      type: 'string',
      default: 'compat',
      describe: 'NIC profile(s): built-in names and/or .ini files, comma-separated, layered over compat',
    })
    .option('print-profile', {
      type: 'boolean',
      default: false,
      describe: 'print the effective NIC profile (after layering) as an .ini and exit',
    })
    .option('inject', {
      type: 'string',
      array: true,
      describe: 'fault injection EVENT=PATTERN (repeatable); see below',
    })
    .option('mesh-psk', {
      type: 'string',
      describe:
        'mesh: pre-shared key file (32-256 bytes, mode 600; also ERNIC_MESH_PSK_FILE or the systemd credential mesh-psk): links are TLS 1.3, and the mesh may leave loopback',
    })
    .option('mesh-cert', {
      type: 'string',
      describe:
        "mesh: this server's certificate (PEM), signed by --mesh-ca; with --mesh-key and --mesh-ca instead of a key",
    })
    .option('mesh-key', { type: 'string', describe: 'mesh: the private key of --mesh-cert (PEM, mode 600)' })
    .option('mesh-ca', {
      type: 'string',
      describe: 'mesh: the CA whose certificates are members (PEM); peers are checked against it alone',
    })
    .option('mesh-advertise', {
      type: 'string',
      describe:
        'mesh worker: the address other workers dial this one at; its peer listener binds it (default: loopback without credentials, else every address)',
    })
    .option('log-level', {
      alias: 'L',
      choices: LOG_LEVELS as LogLevel[],
      describe: 'none | error | warn | info | debug (default info, or ERNIC_LOG_LEVEL)',
    })
    .option('log-format', {
      choices: LOG_FORMATS as LogFormat[],
      default: 'text' as LogFormat,
      describe: 'text, or json (one object a line); text has no timestamps when stderr is the journal',
    })
    .option('verbose', { alias: 'v', type: 'boolean', default: false, describe: 'same as --log-level debug' })
    .option('log-file', { alias: 'l', type: 'string', describe: 'also write the log to this file' })
    .option('socket-mode', { type: 'string', describe: 'socket file mode, octal (e.g. 660)' })
    .option('socket-group', { type: 'string', describe: 'group owning the socket file' })
    .option('stats-file', {
      alias: 'S',
      type: 'string',
      describe:
        'write the counters to this text file (docs/operations.md): rewritten whole, atomically, about once a second while they change, and at a device reset and at exit',
    })
    .option('metrics-port', {
      type: 'string',
      coerce: portCoerce('metrics-port'),
      describe: 'serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port; docs/operations.md)',
    })
    .option('metrics-host', {
      type: 'string',
      default: '127.0.0.1',
      describe: 'address the metrics endpoint listens on (0.0.0.0: every interface)',
    })
    .option('negotiation-timeout', {
      type: 'string',
      default: String(DEFAULT_SESSION_LIMITS.negotiationTimeoutMs),
      coerce: intCoerce('negotiation-timeout', 1, 3_600_000, 'milliseconds'),
      describe: 'ms a client has to send VERSION after connecting before it is closed (it holds the only client slot)',
    })
    .option('loop-watch', {
      type: 'boolean',
      default: false,
      describe:
        'debugging: measure event-loop turns (a libuv timer samples them); the longest is in the stats file, /metrics and the exit line, and a turn over 100 ms is logged',
    })
    .option('p4', {
      type: 'boolean',
      describe: 'run the P4 engine on the Ethernet segment (with no program: frames pass; docs/p4.md)',
    })
    .option('p4-program', {
      type: 'string',
      describe:
        'bmv2 JSON program for the P4 engine, loaded and validated at start (guest TX = port 1, host link = port 2)',
    })
    .option('p4-commands', {
      type: 'string',
      describe: 'simple_switch CLI commands (table_add, table_set_default, ...) run at start, one a line',
    })
    .option('p4-guest-scope', {
      type: 'string',
      describe: `what the guest may do to the P4 engine through device commands 70-72: ${P4_GUEST_SCOPES.join(' | ')} (default none: no guest access; docs/p4.md)`,
    })
    .config(
      'config',
      'read options from this JSON file, e.g. {"socket": "/tmp/nic0.sock", "inject": ["rx-lost=every:100"]}; keys are the long option names, and the command line wins',
      readConfigFile,
    )
    .completion('completion', 'print a bash/zsh completion script (rocm-ernic completion >> ~/.bashrc)')
    .example('$0', `serve on ${DEFAULT_SOCKET} with the compat profile, no Ethernet wire`)
    .example('$0 -s /tmp/nic0.sock --tap ernic0', 'Ethernet frames go to the host TAP ernic0')
    .example('$0 --nic-profile dsc-25,./lab.ini', 'a built-in card with local overrides')
    .example('$0 --nic-profile dsc-25 --print-profile', 'what the guest will see, as an .ini')
    .example(
      '$0 --inject rx-lost=every:100 --inject tx-drop=run:5-9',
      'lose every 100th received frame and transmitted frames 5-9',
    )
    .example(
      '$0 -S /run/rocm-ernic/0.stats --metrics-port 9841',
      'a stats file for ernic-exporter, and /metrics for Prometheus',
    )
    .example('$0 --config /etc/rocm-ernic/nic0.json', 'options from a file')
    .epilog(
      `${BACKENDS_HELP}\n\nQEMU (guest RAM must be shared):\n  -object memory-backend-memfd,id=m,size=4G,share=on -machine q35,memory-backend=m\n  -device '{"driver":"vfio-user-pci","socket":{"path":"${DEFAULT_SOCKET}","type":"unix"}}'\n\nNIC profiles:\n${profiles}\n\n${INJECT_HELP}\n\nUnder systemd (Type=notify, NotifyAccess=all) the server reports ready once its socket listens.`,
    );
  const argv = await conventions(y, 'rocm-ernic', ['inject']).parseAsync();

  // Validate everything before anything is created.
  const meshBackend = isMeshBackend(argv.backend);
  for (const o of ['mesh-psk', 'mesh-cert', 'mesh-key', 'mesh-ca', 'mesh-advertise'] as const) {
    if (!meshBackend && argv[o] !== undefined) fail(`--${o}: only with a mesh backend (--backend tcp:...)`);
  }
  const kind = backendKind(argv.backend);
  if (!kind) fail(unknownBackend(argv.backend));
  const prepared = kind.prepare(argv.backend, process.env);
  if (!prepared.ok) fail(prepared.error);
  const mac = parseMac(argv.mac);
  if (!mac) fail(`--mac ${argv.mac}: expected a unicast address like 72:6f:63:6d:2d:6e`);
  let profile;
  try {
    profile = resolveProfile(argv['nic-profile']);
  } catch (e) {
    if (e instanceof ProfileError) fail(e.message);
    throw e;
  }
  if (argv['print-profile']) {
    process.stdout.write(formatProfile(profile));
    return;
  }
  let faults = FaultInjector.none();
  try {
    if (argv.inject?.length) faults = FaultInjector.parse(argv.inject.map(String));
  } catch (e) {
    if (e instanceof InjectSpecError) fail(e.message);
    throw e;
  }
  const envLevel = process.env.ERNIC_LOG_LEVEL;
  if (envLevel !== undefined && !(LOG_LEVELS as readonly string[]).includes(envLevel))
    fail(`ERNIC_LOG_LEVEL=${envLevel}: expected one of ${LOG_LEVELS.join(', ')}`);
  const level: LogLevel = argv.verbose ? 'debug' : (argv['log-level'] ?? (envLevel as LogLevel | undefined) ?? 'info');
  if (argv['socket-mode'] !== undefined && !/^[0-7]{3,4}$/.test(argv['socket-mode']))
    fail(`--socket-mode ${argv['socket-mode']}: expected an octal mode such as 660`);
  const negotiationTimeoutMs = argv['negotiation-timeout'];
  const metricsPort = argv['metrics-port'];
  const p4 = p4FromCli({
    p4: argv.p4,
    program: argv['p4-program'],
    commands: argv['p4-commands'],
    guestScope: argv['p4-guest-scope'],
  });
  if (!p4.ok) fail(p4.error);
  const log = createLogger({
    level,
    format: argv['log-format'],
    timestamps: !stderrIsJournal(),
    ...(argv['log-file'] ? { file: argv['log-file'] } : {}),
  });

  let link = null;
  if (argv.tap !== undefined) {
    // TUNSETIFF on a name that does not exist creates a new TAP that nobody
    // configured and that stays down: refuse instead of serving a dead wire.
    const tapState = hostInterfaceState(argv.tap);
    if (tapState === 'missing')
      fail(
        `--tap ${argv.tap}: no such interface (create it first: ip tuntap add dev ${argv.tap} mode tap; ip link set ${argv.tap} up)`,
      );
    try {
      link = new TapLink(argv.tap, { offloads: argv['tap-offloads'], uso: argv['tap-uso'] });
    } catch (e) {
      const code = (e as { code?: string }).code;
      const hint =
        code === 'EBUSY'
          ? 'another process has it open'
          : code === 'EPERM'
            ? 'no permission (root, or a TAP created with user=you)'
            : `create it first: ip tuntap add dev ${argv.tap} mode tap`;
      fail(`--tap ${argv.tap}: cannot attach: ${(e as Error).message} (${hint})`);
    }
  }
  // The backend opened before QEMU can connect: a mesh listening (and, for a worker, registering in
  // the background), a namespace or a store loaded; a bad option is one line and exit 2.
  const opened = await prepared.value.open({
    log,
    env: process.env,
    mesh: {
      psk: argv['mesh-psk'],
      cert: argv['mesh-cert'],
      key: argv['mesh-key'],
      ca: argv['mesh-ca'],
      advertise: argv['mesh-advertise'],
    },
  });
  if (!opened.ok) fail(opened.error);
  const backend = opened.value;
  const mesh = backend instanceof ServedMesh ? backend.node : null;
  const device = new IonicDevice({ profile, mac, link, faults, log, rdmaBackend: backend });
  const served = await backend.serve?.();
  if (served && !served.ok) fail(`--backend ${argv.backend}: ${served.error}`);
  if (served?.value) log.info(served.value);
  const p4Engine = p4.value ? attachP4(device, p4.value.engine, p4.value.guestScope, p4.value.programPath) : null;
  // The last resort: an exception nothing caught is a bug of ours; log it and keep serving
  // (lib/guard.ts contains bugs where work starts; this catches what slips past).
  process.on('uncaughtException', (e) => reportBug(log, 'the event loop (uncaught)', e));
  // The stats file and /metrics (lib/ops): the device as the server serves it, observed.
  const activity = new DeviceActivity();
  // The server's phase is in the stats file, the channel ernicctl reads (never our log lines).
  activity.setPhase('starting');
  const watched = argv['stats-file'] !== undefined || metricsPort !== undefined;
  const loopWatch = argv['loop-watch'] ? new LoopWatch() : null;
  if (loopWatch) {
    // A debugging mode: a once-a-second look at the histogram is acceptable here.
    let reported = 100;
    setInterval(() => {
      const m = loopWatch.maxMs;
      if (m > reported) {
        reported = m;
        log.warn(
          `rocm-ernic: an event-loop turn took ${m.toFixed(1)} ms (a guest MMIO access may have waited as long)`,
        );
      }
    }, 1000).unref();
  }
  const meshDataPath = backend instanceof MeshBackend ? backend.dataPath : null;
  const sources = {
    device,
    socket: argv.socket,
    backend: argv.backend,
    mac: argv.mac,
    connection: activity,
    mesh,
    meshDataPath,
    roce: backend instanceof RoceBackend ? backend : null,
    p4: p4Engine,
    loopWatch,
  };
  let statsFile: StatsFileWriter | null = null;
  if (argv['stats-file'] !== undefined) {
    const writer = new StatsFileWriter({ path: argv['stats-file'], snapshot: (n) => collectStats(sources, n), log });
    try {
      writer.writeNow(true);
    } catch (e) {
      fail(`--stats-file ${argv['stats-file']}: cannot write: ${(e as Error).message}`);
    }
    writer.follow(activity);
    for (const ev of ['peer-up', 'peer-down', 'registered'] as const) mesh?.on(ev, () => writer.markDirty());
    statsFile = writer;
  }
  let metrics: MetricsHttpServer | null = null;
  if (metricsPort !== undefined) {
    const reg = serverRegistry(sources);
    metrics = new MetricsHttpServer({
      host: argv['metrics-host'],
      port: metricsPort,
      log,
      title: `rocm-ernic ${argv.socket}`,
      render: async () => ({ contentType: reg.contentType, body: await reg.metrics() }),
    });
    try {
      const a = await metrics.listen();
      log.info(`rocm-ernic: metrics at http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics`);
    } catch (e) {
      fail(`--metrics-port ${metricsPort}: cannot listen on ${argv['metrics-host']}: ${(e as Error).message}`);
    }
  }
  const server = new VfioUserServer({
    socketPath: argv.socket,
    device: watched ? activity.wrap(device.pci) : device.pci,
    log,
    limits: { negotiationTimeoutMs },
    warmUp: IONIC_WARM_UP,
    ...(argv['socket-mode'] !== undefined ? { mode: parseInt(argv['socket-mode'], 8) } : {}),
    ...(argv['socket-group'] !== undefined ? { group: argv['socket-group'] } : {}),
  });
  // Signals are ours before the socket file appears (listen() binds, then warms up): a SIGTERM
  // right after the file shows up must still shut down cleanly, not kill the process by default.
  const stop = (sig: string): void => {
    log.info(
      `rocm-ernic: ${sig}, shutting down${loopWatch ? ` (longest event-loop turn ${loopWatch.maxMs.toFixed(1)} ms)` : ''}`,
    );
    server.close();
    device.close();
    if (statsFile) {
      activity.setState(`disconnected (server stopped: ${sig})`, false);
      activity.setPhase('stopped'); // written at once
      statsFile.close();
    }
    void metrics?.close();
    if (backend.close)
      void backend
        .close()
        .catch(() => undefined)
        .finally(() => process.exit(0));
    else process.exit(0);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  try {
    await server.listen();
  } catch (e) {
    fail(`cannot listen on ${argv.socket}: ${(e as Error).message}`);
  }
  // The warm-up's in-process client came and went: no client has been here
  // yet, and its BAR0 accesses are not the guest's.
  activity.setState('disconnected (no client yet)', false);
  device.counters.bar0Reads = 0;
  device.counters.bar0Writes = 0;
  statsFile?.markDirty();
  activity.setPhase('listening'); // written at once
  const serving = `serving ${argv.socket} (profile ${profile.name}, MAC ${argv.mac}, ${link ? `TAP ${link.name}` : 'no TAP'}, backend ${argv.backend}${p4.value ? `, ${describeP4(p4.value)}` : ''}${faults.active ? `, inject ${faults.describe()}` : ''})`;
  log.info(`rocm-ernic: ${serving}`);
  if (link && hostInterfaceState(link.name) === 'down')
    log.warn(`rocm-ernic: TAP ${link.name} is down: no frames move until ip link set ${link.name} up`);
  // On by default: a kernel without it is no fault, but RoCE then writes one packet per system call.
  if (link && argv['tap-uso'] && !link.uso)
    log.info(
      `rocm-ernic: TAP ${link.name} takes no UDP segmentation offload (needs Linux 6.2+ and --tap-offloads): RoCE writes one packet at a time`,
    );
  void notifyReady(serving, log);
}

if (require.main === module) {
  main().catch((e: unknown) => {
    process.stderr.write(`rocm-ernic: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
