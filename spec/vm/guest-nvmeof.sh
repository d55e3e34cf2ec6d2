#!/bin/bash
# Runs inside the guest (4 vCPUs): nvme-rdma against rocm-ernic's in-process
# NVMe-oF target at 192.168.200.1:4420 (nqn nvmet-test). The guest only has
# an address on the ionic netdev: the target answers ARP and ping itself.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
T=192.168.200.1 NQN=nvmet-test
modprobe -a ionic ionic_rdma nvme-rdma || { echo "FAIL - modules"; exit 1; }
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add 192.168.200.2/24 dev $nic; ip link set $nic up; sleep 2
check "port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"
check "ping $T (the target answers ICMP echo)" "ping -c 2 -W 3 $T > /tmp/ping 2>&1"
echo "ip neigh: $(ip neigh show $T)"
check "ARP resolved the target (no static neighbour)" "ip neigh show $T | grep -q lladdr"
timeout 120 nvme discover -t rdma -a $T -s 4420 > /tmp/disc 2>&1; echo "nvme discover: exit $?"
sed 's/^/  /' /tmp/disc
check "nvme discover lists $NQN at $T:4420" "grep -q 'subnqn: *$NQN' /tmp/disc && grep -q 'traddr: *$T' /tmp/disc"
timeout 120 nvme connect -t rdma -n $NQN -a $T -s 4420 > /tmp/conn 2>&1; rc=$?
echo "nvme connect: exit $rc: $(cat /tmp/conn)"
[ $rc = 0 ] || { echo "FAIL - nvme connect"; dmesg | grep -iE 'nvme|ionic|rdma' | tail -15 | sed 's/^/dmesg: /'; exit 1; }
dev_of() { for b in /sys/block/nvme*; do [ -e "$b" ] || continue; case $(basename $b) in *c*) continue;; esac
  [ "$(cat $b/device/subsysnqn 2>/dev/null || cat $b/device/*/subsysnqn 2>/dev/null | head -1)" = "$1" ] && basename $b; done; }
blk=""; for _ in $(seq 50); do blk=$(dev_of $NQN); [ -n "$blk" ] && [ -b /dev/$blk ] && break; sleep 0.2; done
nvme list | sed 's/^/  /'
check "a block device for $NQN (/dev/$blk, $(cat /sys/block/$blk/size 2>/dev/null) sectors)" "[ -n '$blk' ] && [ \$(cat /sys/block/$blk/size) = 524288 ]"
check "model and serial from Identify" "nvme list | grep -q 'ERNIC0000000000001.*rocm-ernic NVMe-oF target'"
echo "I/O queues: $(ls -d /sys/class/nvme/*/nvme*c*n* 2>/dev/null | wc -l) path(s); $(grep -h . /sys/class/nvme/nvme*/queue_count 2>/dev/null | head -1) queues"
head -c 16M /dev/urandom > /tmp/pattern
dd if=/tmp/pattern of=/dev/$blk bs=256k seek=400 oflag=direct status=none
dd if=/dev/$blk of=/tmp/back bs=256k skip=400 count=64 iflag=direct status=none
check "16 MiB written and read back O_DIRECT, identical" "cmp -s /tmp/pattern /tmp/back"
mkfs.ext4 -q -F /dev/$blk && mkdir -p /mnt/ns && mount /dev/$blk /mnt/ns
head -c 8M /dev/urandom > /tmp/file
sum=$(sha256sum < /tmp/file | cut -c1-64)
cp /tmp/file /mnt/ns/file && sync && umount /mnt/ns
echo 3 > /proc/sys/vm/drop_caches
mount /dev/$blk /mnt/ns
check "ext4 on the namespace: an 8 MiB file remounted reads back with the same sha256 ($sum)" "[ \"\$(sha256sum < /mnt/ns/file | cut -c1-64)\" = $sum ]"
umount /mnt/ns
if command -v fio > /dev/null; then
  fio --name=v --filename=/dev/$blk --rw=randwrite --bs=4k --size=16M --direct=1 --ioengine=libaio --iodepth=16 --numjobs=1 \
    --verify=crc32c --do_verify=1 --output-format=terse --terse-version=3 > /tmp/fio 2>&1 \
    && echo "ok   - fio randwrite 4k qd16 with crc32c verify: $(awk -F';' '{print $49}' /tmp/fio) write IOPS" \
    || { echo "FAIL - fio verify: $(tail -3 /tmp/fio)"; fail=1; }
fi
# Read figures: fio 4k randread at QD32 x 4 jobs, and QD1 for latency. Figures never fail the test.
# terse v3: $8 read IOPS, $16 clat mean (us), $18.. clat percentiles ("99.000000%=N").
perf() { # label dev out
  local o="--filename=/dev/$2 --direct=1 --rw=randread --bs=4k --ioengine=libaio --runtime=20 --time_based --output-format=terse --terse-version=3"
  fio --name=rr $o --iodepth=32 --numjobs=4 --group_reporting > /tmp/rr.$3 2>&1 \
    && echo "$1 randread qd32x4: $(awk -F';' '{printf "%d", $8}' /tmp/rr.$3) IOPS" | tee -a /tmp/figures \
    || echo "note - $1 fio randread qd32x4 failed: $(tail -2 /tmp/rr.$3)"
  fio --name=lat $o --iodepth=1 --numjobs=1 > /tmp/lat.$3 2>&1 \
    && echo "$1 qd1 clat avg/p99: $(awk -F';' '{ for (i = 18; i <= 37; i++) if ($i ~ /^99\.000000%=/) { split($i, a, "="); p = a[2] }
         printf "%.0f / %d us (%d IOPS)", $16, p, $8 }' /tmp/lat.$3)" | tee -a /tmp/figures \
    || echo "note - $1 fio qd1 failed: $(tail -2 /tmp/lat.$3)"
}
: > /tmp/figures
if command -v fio > /dev/null; then perf "ours" $blk ours; fi
# Reconnect: a file on ext4, nvme disconnect, connect again, the file reads back the same.
mkfs.ext4 -q -F /dev/$blk && mount /dev/$blk /mnt/ns
head -c 8M /dev/urandom > /tmp/file2
sum2=$(sha256sum < /tmp/file2 | cut -c1-64)
cp /tmp/file2 /mnt/ns/file2 && sync && umount /mnt/ns
nvme disconnect -n $NQN > /tmp/disc-out 2>&1; echo "nvme disconnect: $(cat /tmp/disc-out)"
check "nvme disconnect" "[ -z \"\$(dev_of $NQN)\" ]"
timeout 120 nvme connect -t rdma -n $NQN -a $T -s 4420 > /tmp/conn 2>&1; rc=$?
echo "nvme connect (again): exit $rc: $(cat /tmp/conn)"
blk=""; for _ in $(seq 50); do blk=$(dev_of $NQN); [ -n "$blk" ] && [ -b /dev/$blk ] && break; sleep 0.2; done
check "reconnected: a block device for $NQN (/dev/$blk)" "[ $rc = 0 ] && [ -n '$blk' ] && [ -b /dev/$blk ]"
if [ -n "$blk" ] && mount /dev/$blk /mnt/ns; then
  check "after the reconnect the ext4 file reads back with the same sha256 ($sum2)" "[ \"\$(sha256sum < /mnt/ns/file2 | cut -c1-64)\" = $sum2 ]"
  umount /mnt/ns
else echo "FAIL - mount after the reconnect"; fail=1; fi
# The ext4 stays in the namespace, so the host finds it in the namespace file.
nvme disconnect -n $NQN > /tmp/disc-out 2>&1; echo "nvme disconnect: $(cat /tmp/disc-out)"
check "nvme disconnect" "[ -z \"\$(dev_of $NQN)\" ]"
hw=/sys/class/infiniband/ionic_0/hw_counters; [ -d $hw ] || hw=/sys/class/infiniband/ionic_0/ports/1/hw_counters
echo "ionic_0 hw_counters: $(cd $hw 2>/dev/null && grep -H . reg_mr_wqes remote_invalidates rdma_write_bytes rdma_read_bytes send_msgs 2>/dev/null | tr '\n' ' ')"
# Baseline: the kernel's nvmet-rdma over rdma_rxe on the rig's virtio NIC, in this guest, with a RAM-backed
# (tmpfs file) namespace of the same size, and the same fio runs. Problems here are notes, not failures.
vnic=$(netdev_of virtio_net)
if [ -n "$vnic" ] && command -v fio > /dev/null && modprobe -a nvmet nvmet-rdma rdma_rxe; then
  ip link set $vnic up; ip -4 addr show dev $vnic | grep -q 10.0.2.15 || ip addr add 10.0.2.15/24 dev $vnic
  CFG=/sys/kernel/config/nvmet R=nvmet-rxe
  truncate -s 256M /tmp/$R.img
  if rdma link add rxe0 type rxe netdev $vnic && mkdir $CFG/subsystems/$R && echo 1 > $CFG/subsystems/$R/attr_allow_any_host \
     && mkdir $CFG/subsystems/$R/namespaces/1 && echo -n /tmp/$R.img > $CFG/subsystems/$R/namespaces/1/device_path \
     && { echo 1 > $CFG/subsystems/$R/namespaces/1/enable 2>/dev/null \
          || { echo 1 > $CFG/subsystems/$R/namespaces/1/buffered_io && echo 1 > $CFG/subsystems/$R/namespaces/1/enable; }; } \
     && mkdir $CFG/ports/1 && echo rdma > $CFG/ports/1/addr_trtype && echo ipv4 > $CFG/ports/1/addr_adrfam \
     && echo 10.0.2.15 > $CFG/ports/1/addr_traddr && echo 4420 > $CFG/ports/1/addr_trsvcid \
     && ln -s $CFG/subsystems/$R $CFG/ports/1/subsystems/$R \
     && timeout 120 nvme connect -t rdma -n $R -a 10.0.2.15 -s 4420 > /tmp/conn.rxe 2>&1; then
    rblk=""; for _ in $(seq 50); do rblk=$(dev_of $R); [ -n "$rblk" ] && [ -b /dev/$rblk ] && break; sleep 0.2; done
    echo "nvmet-rdma/rxe: nvme connect -t rdma -a 10.0.2.15 -> /dev/$rblk ($(cat /sys/block/$rblk/size 2>/dev/null) sectors, tmpfs file)"
    perf "nvmet-rdma/rxe" $rblk rxe
    nvme disconnect -n $R > /dev/null 2>&1
  else echo "note - nvmet-rdma/rxe baseline not set up: $(tail -2 /tmp/conn.rxe 2>/dev/null)"; fi
else echo "note - no virtio NIC, fio or nvmet/rxe modules: no nvmet-rdma/rxe baseline"; fi
echo "=== figures (TCG; 4k randread, fio libaio O_DIRECT, 20 s each)"
sed 's/^/  /' /tmp/figures
dmesg | grep -iE "ionic|nvme" | grep -iE "error|fail|timeout|reject" | tail -5 | sed 's/^/dmesg: /'
exit $fail
