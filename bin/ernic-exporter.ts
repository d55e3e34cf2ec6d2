#!/usr/bin/env node
// ernic-exporter: Prometheus metrics for the rocm-ernic instances of a host,
// read from their run directory (instances.json and <id>.stats) each time
// Prometheus scrapes. lib/ops/exporter.ts does the work; this is the command
// line. Bad options stop it with one line and status 2; a run directory that
// does not exist yet is not one (after a reboot /run is empty until the
// first instance starts).

import * as fs from 'fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { conventions, portCoerce, usageFailure } from '../lib/cli/options';
import { createLogger, LOG_LEVELS, LogLevel } from '../lib/log';
import { DEFAULT_RUN_DIR, ErnicExporter, EXPORTER_PORT, MANIFEST } from '../lib/ops/exporter';
import { MetricsHttpServer } from '../lib/ops/metrics-http';
import { QP_METRICS_MAX } from '../lib/ops/metrics';

const EPILOG = `What it reads (RUN_DIR, at each scrape, nothing in between):
  ${MANIFEST}  the instances (ernicctl writes it): {"instances": [...]} or a bare array of
    {"id": 0, "role": "manager", "pid": 4242, "mac": "72:6f:63:6d:2d:6e", "stats": "0.stats",
     "vm": {"vm_name": "vm0", "attached": true, "vm_pid": 4300}}
    Optional: without it each <id>.stats file is an instance of role "unknown".
  <id>.stats  instance <id>'s stats file (rocm-ernic -S RUN_DIR/<id>.stats), or the entry's "stats"

What it serves (labels ernic_id and role on every per-instance series):
  ernic_instances, ernic_instance_up{mac} (its pid runs), ernic_instance_uptime_seconds
  ernic_vms, ernic_vm_attached{vm_name}, ernic_vm_uptime_seconds, ernic_vm_gpu_passthrough
  ernic_ip_bytes_{tx,rx}_total, ernic_ip_bytes_total
  ernic_rdma_{tx,rx,read,write}_bytes_total, ernic_rdma_bytes_total
  ernic_commands_total, ernic_interrupts_total, ernic_resets_total,
  ernic_mmio_{reads,writes}_total, ernic_stats_writes_total,
  ernic_connection_up{state} (state: connected, disconnected or stopped)
  ernic_rdma_qps, and per QP (the ${QP_METRICS_MAX} lowest ids of each instance), label qp:
  ernic_qp_{bytes_sent,bytes_received,bytes_rdma_read,bytes_rdma_write}_total,
  ernic_qp_{wqes_processed,cqes_posted,doorbell_send,doorbell_recv}_total

Prometheus (prometheus.yml):
  scrape_configs:
    - job_name: ernic
      scrape_interval: 5s
      static_configs: [{targets: ['HOST:${EXPORTER_PORT}']}]
  (HOST: run it with --metrics-host 0.0.0.0 when Prometheus is on another host)
Grafana: import docs/grafana-ernic.json. More in docs/operations.md.`;

const fail = usageFailure('ernic-exporter');

async function main(): Promise<void> {
  const envLevel = process.env.ERNIC_LOG_LEVEL;
  const argv = await conventions(yargs(hideBin(process.argv)), 'ernic-exporter')
    .scriptName('ernic-exporter')
    .usage('$0 [options]\n\nServe Prometheus metrics for the rocm-ernic instances whose stats files are in RUN_DIR.')
    .option('run-dir', {
      alias: 'd',
      type: 'string',
      default: process.env.ERNIC_RUN_DIR ?? DEFAULT_RUN_DIR,
      describe:
        'directory holding instances.json and the <id>.stats files (default $ERNIC_RUN_DIR, else /run/rocm-ernic); it may appear later',
    })
    // The server's names; --port and --host are what earlier versions had (kept for existing configs). No -p: that is the NIC profile elsewhere.
    .option('metrics-port', {
      alias: 'port',
      type: 'string',
      default: String(EXPORTER_PORT),
      coerce: portCoerce('metrics-port'),
      describe: 'TCP port of /metrics (0: any free port, logged)',
    })
    .option('metrics-host', {
      alias: 'host',
      type: 'string',
      default: '127.0.0.1',
      describe: 'address to listen on (0.0.0.0: every interface)',
    })
    .option('once', {
      type: 'boolean',
      default: false,
      describe: 'print the metrics once to stdout and exit (no server)',
    })
    .option('log-level', {
      alias: 'L',
      choices: LOG_LEVELS as LogLevel[],
      describe: 'what to log on stderr: none | error | warn | info | debug (default warn, or ERNIC_LOG_LEVEL)',
    })
    .example('$0', `serve ${DEFAULT_RUN_DIR} at http://127.0.0.1:${EXPORTER_PORT}/metrics`)
    .example(
      '$0 -d /tmp/ernic --metrics-port 9841 --metrics-host 0.0.0.0',
      'another run directory and port, every interface',
    )
    .example('$0 -d /tmp/ernic --once', 'one scrape to stdout, no server')
    .epilog(EPILOG)
    .parseAsync();

  if (envLevel !== undefined && envLevel !== '' && !(LOG_LEVELS as readonly string[]).includes(envLevel)) {
    fail(`ERNIC_LOG_LEVEL=${envLevel}: expected one of ${LOG_LEVELS.join(', ')}`);
  }
  const level: LogLevel = argv['log-level'] ?? (envLevel ? (envLevel as LogLevel) : 'warn');
  const port = argv['metrics-port'];
  const host = argv['metrics-host'];
  const runDir = argv['run-dir'];
  let present = fs.existsSync(runDir);
  if (present && !fs.statSync(runDir).isDirectory()) fail(`--run-dir ${runDir}: not a directory`);
  const log = createLogger({ level });
  // Not fatal (systemd would restart it forever): each scrape reads the directory again.
  if (!present) log.info(`ernic-exporter: ${runDir} does not exist yet: serving zero instances until it appears`);
  const exporter = new ErnicExporter(runDir);
  const onError = (m: string): void => log.warn(`ernic-exporter: ignoring ${m}`);
  const scrape = async (): Promise<string> => {
    const body = await exporter.scrape(onError);
    const now = exporter.runDirPresent;
    if (now !== present) log.info(`ernic-exporter: ${runDir} ${now ? 'appeared' : 'is gone: serving zero instances'}`);
    present = now;
    return body;
  };

  if (argv.once) {
    process.stdout.write(await scrape());
    return;
  }
  const http = new MetricsHttpServer({
    host,
    port,
    log,
    title: `ernic-exporter ${runDir}`,
    render: async () => ({ contentType: exporter.registry.contentType, body: await scrape() }),
  });
  try {
    const a = await http.listen();
    log.info(
      `ernic-exporter: ${runDir} at http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics`,
    );
  } catch (e) {
    fail(`--metrics-port ${port}: cannot listen on ${host}: ${(e as Error).message}`);
  }
  const stop = (sig: string): void => {
    log.info(`ernic-exporter: ${sig}, shutting down`);
    void http.close().finally(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

if (require.main === module) {
  main().catch((e: unknown) => {
    process.stderr.write(`ernic-exporter: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
