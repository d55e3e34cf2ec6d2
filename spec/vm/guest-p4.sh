#!/bin/bash
# Runs inside the guest (spec/vm/p4.sh; 4 vCPUs): three of our devices, told
# apart by their MACs once the driver is up:
#   A 02:00:00:77:00:02  l2_switch            host TAP 10.77.0.1/24, we take 10.77.0.2
#   B 00:04:00:00:00:00  simple_router        host TAP 10.0.1.10 (MAC 00:04:00:00:00:01), we are 10.0.0.10
#   C 02:00:00:81:00:02  rdma_fp8.json, --p4-guest-scope read
# 1. Before any driver binds: P4 device commands from userspace through BAR0
#    (sysfs resource0, the dev_cmd registers at 0x800): A and B refuse them as
#    unknown opcodes (scope none); C answers P4_IDENTIFY and counter_read and
#    refuses table_add and P4_LOAD (EPERM: scope read). No driver is using
#    dev_cmd then, so nothing of the driver's is disturbed.
# 2. ionic up; ping the host through l2_switch (TTL untouched) and through
#    simple_router (TTL 63: routed, commands.txt entries); an unrouted address
#    gets nothing back.
# 3. pyverbs on C: an RDMA WRITE turned into an E4M3 add (guest-p4-fp8.py).
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }

echo "=== 1. P4 device commands from userspace, before the driver"
python3 - <<'EOF' || fail=1
import glob, mmap, os, struct, sys, time
fail = 0
def check(what, ok, detail=''):
    global fail
    print(('ok   - ' if ok else 'FAIL - ') + what + ('' if ok else f' ({detail})'), flush=True)
    fail |= not ok
DEV_CMD, DOORBELL, DONE, CMD, COMP, DATA = 0x800, 0x800, 0x804, 0x808, 0x848, 0x888
# One 32-bit load or store per register access, as readl/writel: a 4-byte mmap.write() goes through
# glibc memcpy, which stores 4 bytes as two overlapping 4-byte stores, and would ring the doorbell twice.
def w32(m, off, v):
    m[off // 4] = v
def r32(m, off):
    return m[off // 4]
def devcmd(m, cmd, data=b''):
    """One device command as ionic.ko issues it: data window, command, done = 0, doorbell = 1, poll done."""
    cmd = cmd.ljust(64, b'\0')
    for i in range(0, len(data), 4):
        w32(m, DATA + i, struct.unpack('<I', data[i:i + 4].ljust(4, b'\0'))[0])
    for i in range(0, 64, 4):
        w32(m, CMD + i, struct.unpack('<I', cmd[i:i + 4])[0])
    w32(m, DONE, 0)
    w32(m, DOORBELL, 1)
    for _ in range(5000):
        if r32(m, DONE) & 1:
            break
        time.sleep(0.001)
    comp = b''.join(struct.pack('<I', r32(m, COMP + i)) for i in range(0, 16, 4))
    win = b''.join(struct.pack('<I', r32(m, DATA + i)) for i in range(0, 256, 4))
    w32(m, DOORBELL, 0)
    return comp, win.split(b'\0')[0].decode('latin1')
def text_cmd(m, line):
    t = line.encode()
    return devcmd(m, struct.pack('<BBHHH', 71, 0, 0, len(t), 0), t)
devs = sorted(d for d in glob.glob('/sys/bus/pci/devices/*')
              if open(d + '/vendor').read().strip() == '0x1dd8' and open(d + '/device').read().strip() == '0x1002')
check(f'three ionic functions ({len(devs)})', len(devs) == 3)
answers = {}
for d in devs:
    check(f'{os.path.basename(d)}: no driver bound yet', not os.path.exists(d + '/driver'))
    open(d + '/enable', 'w').write('1')
    fd = os.open(d + '/resource0', os.O_RDWR | os.O_SYNC)
    mm = mmap.mmap(fd, 0x1000, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m = memoryview(mm).cast('I')
    comp, win = devcmd(m, struct.pack('<BBH', 70, 0, 0))
    answers[d] = comp[0]
    print(f'{os.path.basename(d)}: P4_IDENTIFY status {comp[0]}' + (f', scope {comp[4]} flags {comp[5]}: {win!r}' if comp[0] == 0 else ''), flush=True)
    if comp[0] == 0:
        check('P4_IDENTIFY under scope read: scope 1, a WQE program loaded (flags 3)', comp[4] == 1 and comp[5] == 3, comp.hex())
        check('...its tables and counters listed (wqe_ops with the 2 entries of the commands file)',
              'table wqe_ops 2' in win and 'counter wqe_verbs 16' in win, win)
        comp, out = text_cmd(m, 'counter_read wqe_actions 2')
        check('counter_read is allowed under scope read', comp[0] == 0 and 'wqe_actions[2]' in out, f'status {comp[0]}: {out!r}')
        print(f'  counter_read wqe_actions 2: {out!r}')
        comp, out = text_cmd(m, 'table_add wqe_ops drop_wqe 0&&&0 0&&&0 0&&&0 0&&&0 => 1')
        check('table_add is refused under scope read: EPERM (4)', comp[0] == 4, f'status {comp[0]}')
        comp, _ = devcmd(m, struct.pack('<BBHIQ', 72, 0, 0, 16, 0x1000))
        check('P4_LOAD is refused under scope read: EPERM (4)', comp[0] == 4, f'status {comp[0]}')
    else:
        check('P4_IDENTIFY under scope none: refused as an unknown opcode, EOPCODE (2)', comp[0] == 2, f'status {comp[0]}')
        comp, _ = text_cmd(m, 'counter_read wqe_actions 2')
        check('P4_COMMAND under scope none: EOPCODE (2)', comp[0] == 2, f'status {comp[0]}')
    m.release()
    mm.close()
    os.close(fd)
    open(d + '/enable', 'w').write('0')
check('one device answers (scope read), two refuse (scope none)', sorted(answers.values()) == [0, 2, 2], answers)
sys.exit(fail)
EOF

echo "=== 2. frames through l2_switch and simple_router"
modprobe -a ionic ionic_rdma ib_uverbs
dev_by_mac() { for d in /sys/class/net/*; do [ "$(cat $d/address 2>/dev/null)" = "$1" ] && basename $d; done; }
for _ in $(seq 100); do A=$(dev_by_mac 02:00:00:77:00:02); B=$(dev_by_mac 00:04:00:00:00:00); C=$(dev_by_mac 02:00:00:81:00:02)
  [ -n "$A" ] && [ -n "$B" ] && [ -n "$C" ] && break; sleep 0.2; done
echo "netdevs: A=$A B=$B C=$C"
ip addr add 10.77.0.2/24 dev $A; ip link set $A up
ip addr add 10.0.0.10/24 dev $B; ip link set $B up
ip route add 10.0.1.0/24 dev $B
# simple_router answers no ARP: the next hop's MAC is static (the router rewrites it anyway).
ip neigh replace 10.0.1.10 lladdr 00:aa:bb:00:00:00 dev $B nud permanent
ip neigh replace 10.0.1.99 lladdr 00:aa:bb:00:00:00 dev $B nud permanent
ip addr add 10.81.0.2/24 dev $C; ip link set $C up
for n in $A $B $C; do for _ in $(seq 50); do [ "$(cat /sys/class/net/$n/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done; done
ping -c 3 -W 3 10.77.0.1 > /tmp/ping-l2 2>&1; rc=$?
tail -2 /tmp/ping-l2 | sed 's/^/ping A: /'
check "the host answers through l2_switch" "[ $rc = 0 ]"
check "...with its TTL untouched (64)" "grep -q 'ttl=64' /tmp/ping-l2"
ping -c 3 -W 3 10.0.1.10 > /tmp/ping-router 2>&1; rc=$?
tail -2 /tmp/ping-router | sed 's/^/ping B: /'; grep -m1 ttl= /tmp/ping-router | sed 's/^/ping B: /'
check "the host answers through simple_router (commands.txt entries)" "[ $rc = 0 ]"
check "...routed: TTL 63 (the router decremented the host's 64)" "grep -q 'ttl=63' /tmp/ping-router"
ping -c 2 -W 2 10.0.1.99 > /tmp/ping-unrouted 2>&1
check "an address simple_router has no route for gets nothing back" "grep -q ' 0 received' /tmp/ping-unrouted"

echo "=== 3. an RDMA WRITE turned into an fp8 add"
ibdev=
for _ in $(seq 50); do
  for d in /sys/class/infiniband/*; do [ "$(cat $d/ports/1/gid_attrs/ndevs/0 2>/dev/null)" = "$C" ] && ibdev=$(basename $d); done
  [ -n "$ibdev" ] && break; sleep 0.2
done
echo "device C: $C / $ibdev"
check "device C has an RDMA device" "[ -n '$ibdev' ]"
[ -n "$ibdev" ] && { timeout 300 python3 /job/guest-p4-fp8.py $ibdev || fail=1; }
exit $fail
