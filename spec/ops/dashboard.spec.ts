// docs/grafana-ernic.json: every query names only metrics the exporter or the
// server serve, every panel has an id and a place, and every PromQL
// expression parses (promtool check rules on the expressions as recording
// rules, the dashboard's variables replaced by what Grafana would put there).

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { spawnSync } from 'child_process';
import { IonicDevice } from '../../lib/ionic/device';
import { exporterFamilies } from '../../lib/ops/exporter';
import { serverFamilies } from '../../lib/ops/metrics';
import { DEVICE_MAC, testProfile } from '../support/ionic/rig';
import { needPromtool } from './helpers';

const DASHBOARD = path.join(__dirname, '..', '..', '..', 'docs', 'grafana-ernic.json');

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { expr: string }[];
  panels?: Panel[];
}

function allPanels(list: Panel[]): Panel[] {
  return list.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

describe('ops: the Grafana dashboard', () => {
  const dash = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as {
    panels: Panel[];
    templating: { list: { name: string }[] };
    refresh: string;
  };
  const panels = allPanels(dash.panels);
  const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

  it('has the rows of the C rocm-ernic, unique ids, a place for every panel, and its variables', () => {
    const rows = dash.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows.slice(0, 5)).to.deep.equal([
      'Cluster Overview',
      'Network Traffic',
      'RDMA Detail',
      'Device Health',
      'VM Lifecycle',
    ]);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).to.equal(ids.length);
    for (const p of panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).to.be.at.most(24);
      expect(p.type === 'row' || (p.targets ?? []).length > 0, p.title).to.equal(true);
    }
    expect(dash.templating.list.map((v) => v.name)).to.include.members(['datasource', 'instance']);
    expect(dash.refresh).to.equal('10s');
  });

  it('queries only metrics that exist (ernic_* from the exporter, rocm_ernic_* from the server)', () => {
    const d = new IonicDevice({ profile: testProfile(), mac: DEVICE_MAC });
    const known = new Set([
      ...exporterFamilies(() => ({ instances: [], manifestError: null })).map((f) => f.name),
      ...serverFamilies({
        device: d,
        socket: '',
        backend: 'loopback',
        mac: '',
        connection: { connected: false, state: '' },
      }).map((f) => f.name),
    ]);
    // Metric names: what is left once label matchers and by (...) groupings are taken out.
    const names = (e: string): string[] =>
      [
        ...e
          .replace(/\{[^}]*\}/g, '')
          .replace(/\bby \([^)]*\)/g, '')
          .matchAll(/\b((?:rocm_)?ernic_[a-z0-9_]+)\b/g),
      ].map((m) => m[1]!);
    const used = new Set(exprs.flatMap(names));
    expect(used.size).to.be.greaterThan(20);
    for (const name of used) expect(known.has(name), name).to.equal(true);
  });

  it('every expression parses (promtool check rules)', function () {
    needPromtool(this);
    const rules = {
      groups: [
        {
          name: 'grafana-ernic',
          rules: exprs.map((e, i) => ({
            record: `dashboard:expr_${i}`,
            expr: e.replace(/\$__rate_interval/g, '1m').replace(/\$instance|\$server_job/g, '.*'),
          })),
        },
      ],
    };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-dash-'));
    try {
      const file = path.join(dir, 'rules.yml');
      fs.writeFileSync(file, JSON.stringify(rules, null, 1)); // JSON is YAML
      const r = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
      expect(r.status, `${r.stdout}${r.stderr}`).to.equal(0);
      expect(r.stdout).to.include(`${exprs.length} rules found`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
