// instances.json: what `ernicctl start` left running on this host, in the
// layout of the C rocm-ernic's launcher manifest (docs/instances.md): one record
// per instance with its id, role, pid, MAC, socket, TAP and stats file, plus
// what ernicctl itself needs to undo its work (which TAPs and which bridge it
// created). Read through a zod schema: a hand-edited or truncated file is a
// one-line error, never a crash halfway through `stop`.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';

const MANIFEST_NAME = 'instances.json';
export const MANIFEST_FORMAT = 'rocm-ernic-instances/1';

const VmSchema = z.object({
  qmp_socket: z.string().optional(),
  device_id: z.string().optional(),
  root_port: z.string().optional(),
  ssh_port: z.number().int().optional(),
  ssh_user: z.string().optional(),
  attached: z.boolean().optional(),
  vm_pid: z.number().int().optional(),
  vm_name: z.string().optional(),
});

const InstanceRecordSchema = z.object({
  id: z.number().int().min(0),
  role: z.enum(['manager', 'worker', 'single']),
  pid: z.number().int().positive(),
  mac: z.string(),
  /** The guest GID this instance advertises to the mesh (IPv6 link-local from the MAC). */
  gid: z.string(),
  socket: z.string(),
  tap: z.string().nullable(),
  /** True when ernicctl created the TAP (and so removes it on stop). */
  tap_created: z.boolean(),
  backend: z.string(),
  profile: z.string(),
  pid_file: z.string(),
  stats: z.string(),
  log: z.string(),
  /** The mesh node id this server registered as (null: not seen yet, or no mesh). */
  mesh_node: z.number().int().nullable(),
  started: z.string(),
  vm: VmSchema.nullable(),
});
export type InstanceRecord = z.infer<typeof InstanceRecordSchema>;

const ManifestSchema = z.object({
  format: z.literal(MANIFEST_FORMAT),
  created: z.string(),
  host: z.string(),
  run_dir: z.string(),
  log_dir: z.string(),
  tcp_port: z.number().int().nullable(),
  manager_ip: z.string().nullable(),
  bridge: z.object({ name: z.string(), created: z.boolean() }).nullable(),
  socket_mode: z.string().nullable(),
  socket_group: z.string().nullable(),
  instances: z.array(InstanceRecordSchema),
});
export type Manifest = z.infer<typeof ManifestSchema>;

export function manifestPath(runDir: string): string {
  return path.join(runDir, MANIFEST_NAME);
}

type ManifestRead = { ok: true; manifest: Manifest | null } | { ok: false; error: string };

/** The manifest in runDir: null when there is none, an error when it cannot be used. */
export function readManifest(runDir: string): ManifestRead {
  const file = manifestPath(runDir);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, manifest: null };
    return { ok: false, error: `${file}: ${(e as Error).message}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { ok: false, error: `${file}: not JSON (${(e as Error).message})` };
  }
  const parsed = ManifestSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    return { ok: false, error: `${file}: ${first.path.join('.') || '(top)'}: ${first.message}` };
  }
  return { ok: true, manifest: parsed.data };
}

/** Write the manifest whole: a temporary file renamed over the old one, so readers never see half of it. */
export function writeManifest(runDir: string, manifest: Manifest): void {
  const file = manifestPath(runDir);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(manifest, null, 2) + '\n', { mode: 0o644 });
  fs.renameSync(tmp, file);
}

export function removeManifest(runDir: string): void {
  fs.rmSync(manifestPath(runDir), { force: true });
}
