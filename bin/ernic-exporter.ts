#!/usr/bin/env node
// ernic-exporter: Prometheus metrics for the rocm-ernic instances of a host,
// read from their run directory (instances.json and <id>.stats) each time
// Prometheus scrapes. lib/ops/exporter.ts does the work; this is the command
// line. Bad options stop it with one line and status 2.

import * as fs from 'fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createLogger } from '../lib/log';
import { DEFAULT_RUN_DIR, ErnicExporter, EXPORTER_PORT, MANIFEST } from '../lib/ops/exporter';
import { MetricsHttpServer } from '../lib/ops/metrics-http';
import { QP_METRICS_MAX } from '../lib/ops/metrics';

function fail(message: string): never {
  process.stderr.write(`ernic-exporter: ${message.trim().replace(/\s*\n\s*/g, '; ')}\n`);
  process.exit(2);
}

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
  ernic_rdma_bytes_{sent,received,read,write}_total, ernic_rdma_bytes_total
  ernic_commands_total, ernic_interrupts_total, ernic_flr_reset_total,
  ernic_mmio_{reads,writes}_total, ernic_stats_writes_total, ernic_connection_up{state}
  ernic_qp_count, and per QP (the ${QP_METRICS_MAX} lowest ids of each instance), label qp:
  ernic_qp_{bytes_sent,bytes_received,bytes_rdma_read,bytes_rdma_write}_total,
  ernic_qp_{wqes_processed,cqes_posted,doorbell_send,doorbell_recv}_total

Prometheus (prometheus.yml):
  scrape_configs:
    - job_name: ernic
      scrape_interval: 5s
      static_configs: [{targets: ['HOST:${EXPORTER_PORT}']}]
Grafana: import docs/grafana-ernic.json. More in docs/operations.md.`;

async function main(): Promise<void> {
  const argv = await yargs(hideBin(process.argv))
    .scriptName('ernic-exporter')
    .usage('$0 [options]\n\nServe Prometheus metrics for the rocm-ernic instances whose stats files are in RUN_DIR.')
    .option('run-dir', { alias: 'd', type: 'string', default: process.env.ERNIC_RUN_DIR ?? DEFAULT_RUN_DIR, describe: 'directory holding instances.json and the <id>.stats files (default $ERNIC_RUN_DIR, else /run/rocm-ernic)' })
    .option('port', { alias: 'p', type: 'number', default: EXPORTER_PORT, describe: 'TCP port of /metrics' })
    .option('host', { type: 'string', default: '0.0.0.0', describe: 'address to listen on (127.0.0.1: this host only)' })
    .option('once', { type: 'boolean', default: false, describe: 'print the metrics once to stdout and exit (no server)' })
    .option('log-level', { alias: 'L', choices: ['none', 'error', 'warn', 'info', 'debug'] as const, default: 'warn' as const, describe: 'what to log on stderr' })
    .example('$0', `serve ${DEFAULT_RUN_DIR} on port ${EXPORTER_PORT}`)
    .example('$0 -d /tmp/ernic --port 9841', 'another run directory and port')
    .example('$0 -d /tmp/ernic --once', 'one scrape to stdout, no server')
    .epilog(EPILOG)
    .strict()
    .fail((msg, err) => fail(err ? err.message : msg))
    .help()
    .wrap(Math.min(110, process.stdout.columns || 100))
    .parseAsync();

  const port = argv.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port ${String(port)}: expected a TCP port from 0 to 65535`);
  const runDir = argv['run-dir'];
  if (!fs.existsSync(runDir)) fail(`--run-dir ${runDir}: no such directory`);
  if (!fs.statSync(runDir).isDirectory()) fail(`--run-dir ${runDir}: not a directory`);
  const log = createLogger({ level: argv['log-level'] });
  const exporter = new ErnicExporter(runDir);
  const onError = (m: string): void => log.warn(`ernic-exporter: ignoring ${m}`);

  if (argv.once) {
    process.stdout.write(await exporter.scrape(onError));
    return;
  }
  const http = new MetricsHttpServer({
    host: argv.host, port, log, title: `ernic-exporter ${runDir}`,
    render: async () => ({ contentType: exporter.registry.contentType, body: await exporter.scrape(onError) }),
  });
  try {
    const a = await http.listen();
    log.warn(`ernic-exporter: ${runDir} at http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics`);
  } catch (e) {
    fail(`cannot listen on ${argv.host}:${port}: ${(e as Error).message}`);
  }
  const stop = (): void => { void http.close().finally(() => process.exit(0)); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((e: unknown) => {
    process.stderr.write(`ernic-exporter: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
