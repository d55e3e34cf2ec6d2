#!/bin/bash
# Runs inside the guest: find the demo device, show it, and use its BAR0.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
dev=$(for d in /sys/bus/pci/devices/*; do
  [ "$(cat $d/vendor)" = 0x1dd8 ] && [ "$(cat $d/device)" = 0xee01 ] && echo $d; done | head -1)
[ -n "$dev" ] || { echo "FAIL - demo device 1dd8:ee01 not found"; lspci -nn; exit 1; }
echo "device at $dev"
lspci -nn -vv -d 1dd8:ee01 | tee /tmp/lspci.txt
check "MSI-X capability with 8 vectors" "grep -q 'MSI-X: Enable- Count=8' /tmp/lspci.txt"
check "PCIe endpoint capability" "grep -q 'Express (v2) Endpoint' /tmp/lspci.txt"
check "link speed and width reported" "grep -q 'LnkSta:.*Speed 16GT/s, Width x16' /tmp/lspci.txt"
check "power management capability" "grep -q 'Power Management version 3' /tmp/lspci.txt"
echo 1 > $dev/enable
# BAR0 through the guest's MMIO mapping: QEMU turns these into REGION_READ/WRITE
# (writes posted, NO_REPLY), so a read-back also proves ordering.
python3 - "$dev/resource0" <<'PY'
import ctypes, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_SYNC)
m = mmap.mmap(fd, 16384, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
# ctypes does one 32-bit load or store per access (memcpy may store twice).
reg = lambda off: ctypes.c_uint32.from_buffer(m, off)
rd = lambda off: reg(off).value
def wr(off, v): reg(off).value = v
print('ID      0x%08x' % rd(0))
for i in range(64):
    wr(0x100 + 4 * i, 0x1000 + i)
vals = [rd(0x100 + 4 * i) for i in range(64)]
print('scratch', 'ok' if vals == [0x1000 + i for i in range(64)] else 'BAD %r' % vals[:4])
c0 = rd(4)
for v in range(3):
    wr(8, v)
print('doorbells counted', rd(4) - c0)
sys.exit(0 if rd(0) == 0x45524e43 and vals == [0x1000 + i for i in range(64)] and rd(4) - c0 == 3 else 1)
PY
check "BAR0 magic, 64 posted writes read back, doorbell counter" "[ $? = 0 ]"
exit $fail
